#!/usr/bin/env python3
"""check --app and the images of the process that the kernel or dyld refuses:

    test_app_refusals.py MACHOFIX APP_FIXTURES WORK

From the suite's application fixtures (tests/app/make_app_fixtures.py: AOTIRunner.app,
whose executable loads @rpath/libomp.dylib from its Frameworks at launch; a directory
of libraries), each copied and broken in one place, checked with two models that
load in the application as built (m_newer, m_omp; both load libomp):
- the untouched application: no finding;
- its libomp with one byte of code flipped, or with __TEXT made writable: dyld tries
  the file and passes over it, giving the kernel's or its own reason. The application
  cannot launch (library-not-loaded at launch, naming the executable), and the model
  that loads libomp has its own library-not-loaded with the same reason in `tried`;
- its executable with a byte of code flipped: invalid-signature, naming the
  executable, the application cannot launch, and the repair re-signs the executable;
  with __TEXT writable: loader-rule (seg-protection), naming it;
- a directory of libraries with one library broken: the finding names that library.
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from tamper import tamper_text, writable_text  # noqa: E402

failures = []


def expect(what, condition, detail=""):
    print(f"{'ok' if condition else 'FAILED'}: {what}{'' if condition or not detail else ': ' + str(detail)[:800]}")
    if not condition:
        failures.append(what)


def findings(machofix, app, sysroot, model):
    done = subprocess.run([machofix, "check", "--no-contract", "--json=-", "--app", app, "--sysroot", sysroot, model],
                          capture_output=True, text=True)
    return done.returncode, json.loads(done.stdout)["findings"] if done.stdout.strip() else [], done


def broken_copy(source, work, name, relative, breaking):
    copy = os.path.join(work, name, os.path.basename(source))
    shutil.copytree(source, copy, symlinks=True)
    path = os.path.join(copy, relative)
    data = bytearray(open(path, "rb").read())
    breaking(data, "arm64")
    open(path, "wb").write(data)
    return copy, os.path.realpath(path)


def main(argv):
    machofix, fixtures, work = argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    sysroot = os.path.join(fixtures, "sysroot")
    app = os.path.join(fixtures, "apps", "AOTIRunner.app")
    executable = os.path.join("Contents", "MacOS", "AOTIRunner")
    m_newer, m_omp = (os.path.join(fixtures, "models", f"{name}.dylib") for name in ("m_newer", "m_omp"))

    for model in (m_newer, m_omp):
        code, found, done = findings(machofix, app, sysroot, model)
        expect(f"the application as built: {os.path.basename(model)} passes", code == 0 and not found, done.stdout)

    for label, breaking, reason in (("code flipped", tamper_text, "code signature invalid"),
                                    ("__TEXT writable", writable_text, "dyld refuses it (seg-protection)")):
        copy, libomp = broken_copy(app, work, "libomp-" + label.replace(" ", "-"), "Contents/Frameworks/libomp.dylib", breaking)
        code, found, done = findings(machofix, copy, sysroot, m_newer)
        launch = [f for f in found if f["at_launch"]]
        expect(f"libomp {label}: the application cannot launch, library-not-loaded naming its executable",
               code == 1 and [f["rule"] for f in launch] == ["library-not-loaded"] and
               launch[0]["needed_by"].endswith(executable) and launch[0]["dylib"] == "@rpath/libomp.dylib", done.stdout)
        tried = [t for f in launch for t in f["tried"] if t["path"] == libomp]
        expect(f"libomp {label}: dyld's reason for passing over it", tried and tried[0]["reason"].startswith(reason), launch)
        expect(f"libomp {label}: the message says the application cannot launch",
               launch and launch[0]["message"].startswith("the application cannot launch"), launch)
        code, found, done = findings(machofix, copy, sysroot, m_omp)
        own = [f for f in found if f["rule"] == "library-not-loaded" and not f["at_launch"] and not f["needed_by"]]
        expect(f"libomp {label}: the model that loads it gets library-not-loaded with the same reason",
               code == 1 and own and any(t["path"] == libomp and t["reason"].startswith(reason) for t in own[0]["tried"]),
               done.stdout)

    for label, breaking, rule in (("code flipped", tamper_text, "invalid-signature"),
                                  ("__TEXT writable", writable_text, "loader-rule")):
        copy, path = broken_copy(app, work, "executable-" + label.replace(" ", "-"), executable, breaking)
        code, found, done = findings(machofix, copy, sysroot, m_newer)
        launch = [f for f in found if f["at_launch"]]
        expect(f"executable {label}: {rule} naming the executable, at launch",
               code == 1 and [f["rule"] for f in launch] == [rule] and launch[0]["needed_by"] == path, done.stdout)
        if rule == "loader-rule" and launch:
            expect("executable __TEXT writable: the rule is seg-protection", launch[0]["loader_rule"] == "seg-protection", launch)
        if rule == "invalid-signature" and launch:
            expect("executable code flipped: the repair re-signs the executable",
                   launch[0]["repair"].startswith("machofix sign " + path), launch[0]["repair"])
        text = subprocess.run([machofix, "check", "--no-contract", "--app", copy, "--sysroot", sysroot, m_newer],
                              capture_output=True, text=True)
        expect(f"executable {label}: the text says it cannot launch", "the application cannot launch" in text.stdout,
               text.stdout)

    libdir = os.path.join(fixtures, "apps", "libdir")
    victim = sorted(n for n in os.listdir(libdir) if n.endswith(".dylib"))[0]
    copy, path = broken_copy(libdir, work, "libdir", victim, writable_text)
    code, found, done = findings(machofix, copy, sysroot, m_newer)
    launch = [f for f in found if f["at_launch"]]
    expect(f"a directory of libraries with {victim} broken: a loader-rule finding naming it",
           code == 1 and any(f["rule"] == "loader-rule" and f["needed_by"] == path for f in launch), done.stdout)

    print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
