#!/usr/bin/env python3
"""The Python API's `check` hands each of its target options to the command.

`machofix.check(paths, app=, sysroot=, min_macos=, arch=, no_app=)` must ask the command line
what `machofix check --app/--sysroot/--min-macos/--arch` asks: an option the API
accepts and then drops would pass a gate that the command fails. For each option,
cases of tests/app's manifest that use it (make_app_fixtures.py) are run three ways:
 - the command line with the case's options: its findings;
 - the command line without this one option: different findings (else the case could
   not tell a dropped option, and the test says so);
 - the package's module-level `machofix.check` (from this source tree, run with the
   build's executable through MACHOFIX_EXECUTABLE) with the case's options: the
   command line's findings, rule by rule and field by field, and its exit status.
The wheel itself is tested by python_package; this holds the option plumbing, which
needs no wheel.

Usage: test_check_options.py MACHOFIX PYTHON_SOURCE_DIR APP_FIXTURES
"""
import json
import os
import subprocess
import sys

FIELDS = ("rule", "arch", "dylib", "symbol", "needed_by", "min_macos", "required", "level", "lazy")
# option: how the command line spells it, and how a manifest case gives it
OPTIONS = {
    "app": ("--app", lambda case, root: os.path.join(root, case["app"]) if case.get("app") else None),
    "sysroot": ("--sysroot", lambda case, root: os.path.join(root, case["sysroot"]) if case.get("sysroot") else None),
    "min_macos": ("--min-macos", lambda case, root: case.get("min_macos")),
    "arch": ("--arch", lambda case, root: case.get("arch") or None),
}
PER_OPTION = 3  # cases tried for each option, among those where it changes the findings


def words(option, value):
    flag = OPTIONS[option][0]
    return [word for item in (value if isinstance(value, list) else [value]) for word in (flag, item)]


def summary(findings):
    return sorted(tuple(str(finding.get(field) if isinstance(finding, dict) else getattr(finding, field)) for field in FIELDS)
                  for finding in findings)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    machofix, python_source, fixtures = sys.argv[1:]
    os.environ["MACHOFIX_EXECUTABLE"] = machofix
    sys.path.insert(0, python_source)
    import machofix as api  # noqa: E402  (the package of this tree)

    with open(os.path.join(fixtures, "manifest.json")) as handle:
        manifest = json.load(handle)
    cases = [case for case in manifest["cases"] if not case.get("pte")]
    problems = []

    def command_line(model, options):
        arguments = [machofix, "check", "--no-contract", "--json", "-", model]
        for option, value in options.items():
            arguments += words(option, value)
        result = subprocess.run(arguments, capture_output=True, text=True, timeout=120)
        if result.returncode not in (0, 1):  # an error: refused options (--sysroot without --app) or input
            return result.returncode, result.stderr.strip()
        return result.returncode, summary(json.loads(result.stdout)["findings"])

    for option in OPTIONS:
        tried = 0
        for case in cases:
            options = {name: given(case, fixtures) for name, (_, given) in OPTIONS.items()}
            options = {name: value for name, value in options.items() if value}
            if option not in options:
                continue
            model = os.path.join(fixtures, case["model"])
            status, expected = command_line(model, options)
            if status not in (0, 1):
                problems.append(f"{option}: case {case['name']}: the command line fails: {expected}")
                continue
            _, without = command_line(model, {name: value for name, value in options.items() if name != option})
            if without == expected:
                continue  # this case cannot tell whether the option was passed
            tried += 1
            try:
                report = api.check(model, no_contract=True, **options)
            except api.MachofixError as error:
                problems.append(f"{option}: case {case['name']}: machofix.check raises {error}")
                continue
            got = summary(report.findings)
            if got != expected or report.exit_status != status:
                problems.append(f"{option}: case {case['name']}: machofix.check({', '.join(f'{k}={v!r}' for k, v in options.items())}) "
                                f"gives exit {report.exit_status} and\n    {got}\n  the command line exit {status} and\n    {expected}"
                                + ("\n  (the findings without the option: the API dropped it)" if got == without else ""))
            if tried == PER_OPTION:
                break
        if tried == 0:
            problems.append(f"{option}: no case of the manifest where the option changes the findings")
        print(f"{option}: {tried} case(s)")

    # no_app: an .app given as a path is checked as that application unless no_app.
    bundle = os.path.join(fixtures, "apps", "Plain.app")
    for no_app in (False, True):
        arguments = [machofix, "check", "--no-contract", "--json", "-", bundle] + (["--no-app"] if no_app else [])
        result = subprocess.run(arguments, capture_output=True, text=True, timeout=120)
        expected = summary(json.loads(result.stdout)["findings"]) if result.returncode in (0, 1) else result.stderr
        report = api.check(bundle, no_contract=True, no_app=no_app)
        if summary(report.findings) != expected or report.exit_status != result.returncode or (not no_app and not expected):
            problems.append(f"no_app={no_app}: machofix.check gives exit {report.exit_status} and "
                            f"{summary(report.findings)}; the command line exit {result.returncode} and {expected}")
    print("no_app: 2 case(s)")

    for problem in problems:
        print("FAIL " + problem)
    print(f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
