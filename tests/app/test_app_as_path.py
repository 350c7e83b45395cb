#!/usr/bin/env python3
"""An application handed to check is checked as that application (issue: the gate in a
team's CI, part 1; docs/commands/check.md):

    test_app_as_path.py MACHOFIX APP_FIXTURES WORK

Plain.app (tests/app/make_app_fixtures.py) ships libmid and libompuser, which depend on
@rpath/libgone.dylib and @rpath/libomp.dylib; the bundle has neither.
- `check Plain.app`: its images are loaded in it as dyld would: two
  library-not-loaded findings, exit 1, a line saying the bundle was taken as the
  application and how to turn that off; the JSON carries the loads (app_checks);
- the same with a trailing slash, and for a bundle copied beside unrelated paths;
- `--no-app`: file by file, exit 0, and the summary says that 2 @rpath dependencies
  were not followed and how to follow them; a declaration (--provided) follows them;
- an --app given wins over the bundle; --app with --no-app: exit 2, named;
- a plain model with @rpath dependencies and nothing to follow them: the note counts them.
"""
import json
import os
import shutil
import subprocess
import sys

failures = []


def expect(what, condition, detail=""):
    print(f"{'ok' if condition else 'FAILED'}: {what}{'' if condition or not detail else ': ' + str(detail)[:600]}")
    if not condition:
        failures.append(what)


def run(*arguments, cwd=None):
    return subprocess.run([str(a) for a in arguments], capture_output=True, text=True, timeout=300, cwd=cwd)


def not_loaded(stdout):
    return sorted(line.split("depends on ")[1].split(",")[0] for line in stdout.splitlines()
                  if line.endswith("[library-not-loaded]"))


def main(argv):
    machofix, fixtures, work = [os.path.abspath(a) for a in argv[1:4]]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    app = os.path.join(work, "Plain.app")
    shutil.copytree(os.path.join(fixtures, "apps", "Plain.app"), app, symlinks=True)
    missing = ["@rpath/libgone.dylib", "@rpath/libomp.dylib"]

    done = run(machofix, "check", "Plain.app", cwd=work)
    expect("check Plain.app: its libraries' missing @rpath dependencies are library-not-loaded, exit 1",
           done.returncode == 1 and not_loaded(done.stdout) == missing, done.stdout + done.stderr)
    expect("it says the bundle was loaded as the application, and how to check it file by file",
           "Plain.app is an application: its images were loaded in it as dyld would (--no-app" in done.stdout,
           done.stdout)
    done = run(machofix, "check", "Plain.app/", cwd=work)
    expect("check Plain.app/ (a trailing slash): the same", done.returncode == 1 and not_loaded(done.stdout) == missing,
           done.stdout + done.stderr)
    done = run(machofix, "check", "Plain.app", "--json=-", cwd=work)
    report = json.loads(done.stdout) if done.stdout.strip() else {}
    expect("the JSON carries each image's load in the application (app_checks) and the two findings",
           done.returncode == 1 and len(report.get("app_checks", [])) == 4
           and sorted(f["dylib"] for f in report["findings"] if f["rule"] == "library-not-loaded") == missing,
           done.stdout[:600])

    done = run(machofix, "check", "Plain.app", "--no-app", cwd=work)
    expect("--no-app: file by file, no finding, exit 0", done.returncode == 0 and "0 findings" in done.stdout,
           done.stdout + done.stderr)
    expect("--no-app: the summary says 2 @rpath dependencies were not followed, and how to follow them",
           "2 dependencies named through @rpath/, @loader_path/ or @executable_path/ not followed" in done.stdout
           and "--app APP" in done.stdout, done.stdout)
    done = run(machofix, "check", "Plain.app", "--no-app", "--provided", "@rpath/*", cwd=work)
    expect("--no-app with a declaration: the dependencies are held to it, no note", done.returncode == 0
           and "not followed" not in done.stdout, done.stdout)

    done = run(machofix, "check", "Plain.app", "--app", os.path.join(fixtures, "apps", "OMP.app"), cwd=work)
    expect("an --app given wins over the bundle: OMP.app ships libomp, only libgone is missing",
           done.returncode == 1 and not_loaded(done.stdout) == ["@rpath/libgone.dylib"]
           and "is an application" not in done.stdout, done.stdout + done.stderr)
    done = run(machofix, "check", "Plain.app", "--app", "Plain.app", "--no-app", cwd=work)
    expect("--app with --no-app: exit 2, both named", done.returncode == 2 and "--app and --no-app" in done.stderr,
           done.stderr)

    model = os.path.join(fixtures, "models", "m_omp.dylib")  # depends on @rpath/libomp.dylib
    done = run(machofix, "check", model)
    expect("a model with an @rpath dependency and no application: the note counts it",
           "1 dependency named through @rpath/" in done.stdout, done.stdout)

    print(f"test_app_as_path: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
