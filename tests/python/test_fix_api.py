#!/usr/bin/env python3
"""The Python API's `fix` and `fix_bytes` do what `machofix fix` does.

On tests/app's fixtures (make_app_fixtures.py), with the package from this source tree
run on the build's executable (MACHOFIX_EXECUTABLE):
 - machofix.fix(m_optomp, output=, app=OMP.app): fixed, the rename listed with the rule
   it removes, the output byte for byte the command line's; dry_run writes nothing;
 - against Plain.app (no libomp): report.ok is false (exit 1), the file's fix is
   "not-written" with its refusal and the library-not-loaded finding left, no output;
 - provided= without an application: the rename to the provided name;
 - fix_bytes: the command line's bytes; bytes that need nothing back unchanged; a
   repaired form that would still fail: MachofixError, status 1, carrying the report
   and naming why; a str is a TypeError.

Usage: test_fix_api.py MACHOFIX PYTHON_SOURCE_DIR APP_FIXTURES WORK
"""
import os
import shutil
import subprocess
import sys

failures = []


def expect(what, condition, detail=""):
    print(f"{'ok' if condition else 'FAILED'}: {what}{'' if condition or not detail else ': ' + str(detail)[:600]}")
    if not condition:
        failures.append(what)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    executable, python_source, fixtures, work = sys.argv[1:]
    os.environ["MACHOFIX_EXECUTABLE"] = executable
    sys.path.insert(0, python_source)
    import machofix

    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model = os.path.join(fixtures, "models", "m_optomp.dylib")
    omp_app = os.path.join(fixtures, "apps", "OMP.app")
    plain_app = os.path.join(fixtures, "apps", "Plain.app")
    with open(model, "rb") as handle:
        original = handle.read()

    cli_output = os.path.join(work, "cli.dylib")
    done = subprocess.run([executable, "fix", "--no-contract", "--app", omp_app, model, "-o", cli_output],
                          capture_output=True, text=True)
    expect("the command line fixes m_optomp against OMP.app", done.returncode == 0, done.stderr)

    output = os.path.join(work, "api.dylib")
    report = machofix.fix(model, output=output, app=omp_app, no_contract=True)
    outcome = report.files[0].fix
    expect("fix(output=, app=): ok, fixed, the rename with the rule it removes",
           report.ok and outcome.status == "fixed"
           and [(e.edit, e.old, e.new, e.removes) for e in outcome.edits] ==
           [("change", "/opt/llvm-openmp/lib/libomp.dylib", "@rpath/libomp.dylib", "library-not-loaded")], outcome)
    expect("fix(output=): the command line's bytes",
           os.path.exists(output) and open(output, "rb").read() == open(cli_output, "rb").read())

    dry = os.path.join(work, "dry.dylib")
    report = machofix.fix(model, dry_run=True, app=omp_app, no_contract=True)
    expect("fix(dry_run=True): would-fix, nothing written",
           report.ok and report.files[0].fix.status == "would-fix" and not os.path.exists(dry))

    unfixed = os.path.join(work, "unfixed.dylib")
    report = machofix.fix(model, output=unfixed, app=plain_app, no_contract=True)
    outcome = report.files[0].fix
    expect("fix against an app without libomp: not ok (exit 1), not-written, nothing written",
           not report.ok and report.exit_status == 1 and outcome.status == "not-written" and not os.path.exists(unfixed),
           outcome)
    expect("the refusal says why, the finding is left",
           any("no file named libomp.dylib" in r.reason for r in outcome.refusals)
           and [f.rule for f in report.findings if not f.reported_with] == ["library-not-loaded"], outcome)

    provided = os.path.join(work, "provided.dylib")
    report = machofix.fix(model, output=provided, provided="@rpath/libomp.dylib", no_contract=True)
    expect("fix(provided=) without an application: renamed to the provided name",
           report.ok and [(e.old, e.new) for e in report.files[0].fix.edits] ==
           [("/opt/llvm-openmp/lib/libomp.dylib", "@rpath/libomp.dylib")], report.files[0].fix)

    fixed = machofix.fix_bytes(original, app=omp_app, no_contract=True)
    expect("fix_bytes: the command line's bytes", fixed == open(cli_output, "rb").read())
    expect("fix_bytes of bytes that pass: the same bytes", machofix.fix_bytes(fixed, app=omp_app, no_contract=True) == fixed)
    try:
        machofix.fix_bytes(original, app=plain_app, no_contract=True)
        expect("fix_bytes that cannot fix raises", False)
    except machofix.MachofixError as error:
        expect("fix_bytes that cannot fix: MachofixError, status 1, with the report, naming why",
               error.status == 1 and error.report is not None and "no file named libomp.dylib" in error.message
               and "library-not-loaded" in error.message, error)
    try:
        machofix.fix_bytes("not bytes")
        expect("fix_bytes of a str raises TypeError", False)
    except TypeError:
        expect("fix_bytes of a str raises TypeError", True)

    print(f"test_fix_api: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
