#!/usr/bin/env python3
"""Levels of check's findings (docs/commands/check.md, "Levels"):

    test_levels.py MACHOFIX TBD_DIR WORK

Dylibs linked by ld64.lld-16: one with an unused system library
(/usr/lib/libiconv.2.dylib, as many shipped binaries have), one that also has the
unused /opt/llvm-openmp/lib/libomp.dylib of an AOTI model.
- the system library alone: a warning, printed with its repair; exit 0; JSON and SARIF
  carry "warning"; the summary counts it; under GitHub Actions a ::warning line;
- --warnings-as-errors (and the contract's warnings_as_errors): exit 1;
- the libomp dylib still fails (two errors, one warning);
- --level RULE=LEVEL raises, lowers and turns off a rule; the contract's [levels] and
  [[exempt]] do the same; the command line's level wins over the contract's;
- an unknown rule or level, on the command line or in the contract: exit 2, named.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ICONV_TBD = """--- !tapi-tbd
tbd-version:     4
targets:         [ arm64-macos ]
install-name:    '/usr/lib/libiconv.2.dylib'
exports:
  - targets:         [ arm64-macos ]
    symbols:         [ _iconv ]
...
"""
failures = []


def expect(what, condition, detail=""):
    print(f"{'ok' if condition else 'FAILED'}: {what}{'' if condition or not detail else ': ' + str(detail)[:500]}")
    if not condition:
        failures.append(what)


def run(*arguments, env=None, cwd=None):
    return subprocess.run([str(a) for a in arguments], capture_output=True, text=True, env=env, cwd=cwd)


def link(work, tbd, name, libraries):
    source, obj, out = work / "kernel.c", work / "kernel.o", work / f"{name}.dylib"
    if not obj.exists():
        source.write_text('int printf(const char *, ...);\nint run(void) { return printf("x"); }\n')
        subprocess.run(["clang-16", "-target", "arm64-apple-macos13", "-c", source, "-o", obj], check=True)
    subprocess.run(["ld64.lld-16", "-arch", "arm64", "-platform_version", "macos", "13.0", "14.0", "-dylib",
                    "-install_name", f"{name}.dylib", obj, *libraries, "-o", out], check=True)
    return out


def levels(machofix, path, *options, cwd=None):
    """(exit status, [(rule, level)]) of check --json."""
    done = run(machofix, "check", "--json=-", *options, path, cwd=cwd)
    findings = json.loads(done.stdout)["findings"] if done.stdout.strip() else []
    return done.returncode, sorted((f["rule"], f["level"]) for f in findings)


def main(argv):
    machofix, tbd, work = os.path.abspath(argv[1]), Path(argv[2]).resolve(), Path(argv[3]).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "libiconv.tbd").write_text(ICONV_TBD)
    iconv = link(work, tbd, "iconv", [tbd / "libSystem.tbd", work / "libiconv.tbd"])
    omp = link(work, tbd, "omp", [tbd / "libSystem.tbd", work / "libiconv.tbd", tbd / "libomp.tbd"])
    plain = ["--no-contract"]

    done = run(machofix, "check", *plain, iconv)
    expect("an unused system library is a warning, with its repair; the gate passes",
           done.returncode == 0 and ": warning: depends on /usr/lib/libiconv.2.dylib" in done.stdout
           and "repair: machofix prune" in done.stdout and "1 finding (1 warning)" in done.stdout, done.stdout)
    status, found = levels(machofix, iconv, *plain)
    expect("the JSON says warning", status == 0 and found == [("unused-dependency", "warning")], found)
    sarif = run(machofix, "check", *plain, "--sarif", "-", iconv)
    results = json.loads(sarif.stdout)["runs"][0]["results"]
    expect("the SARIF result's level is warning", [r["level"] for r in results] == ["warning"], results)
    actions = run(machofix, "check", *plain, iconv, env=dict(os.environ, GITHUB_ACTIONS="true"))
    expect("under GitHub Actions, a ::warning annotation", "\n::warning file=" in actions.stdout, actions.stdout)
    status, found = levels(machofix, iconv, *plain, "--warnings-as-errors")
    expect("--warnings-as-errors fails it", status == 1 and found == [("unused-dependency", "error")], found)

    status, found = levels(machofix, omp, *plain)
    expect("the libomp dylib still fails: two errors, one warning",
           status == 1 and found == [("absolute-install-name", "error"), ("unused-dependency", "error"),
                                     ("unused-dependency", "warning")], found)
    status, found = levels(machofix, omp, *plain, "--level", "unused-dependency=note", "--level", "absolute-install-name=off")
    expect("--level lowers a rule and turns one off", status == 0 and found == [("unused-dependency", "note")] * 2, found)
    status, found = levels(machofix, iconv, *plain, "--level", "unused-dependency=error")
    expect("--level raises a rule", status == 1 and found == [("unused-dependency", "error")], found)

    (work / "machofix.toml").write_text('[levels]\nunused-dependency = "error"\n\n[[exempt]]\n'
                                        'rule = "absolute-install-name"\ndylib = "libomp*"\n')
    status, found = levels(machofix, omp, cwd=work)
    expect("the contract's [levels] and [[exempt]]",
           status == 1 and found == [("unused-dependency", "error")] * 2, found)
    status, found = levels(machofix, omp, "--level", "unused-dependency=warning", cwd=work)
    expect("the command line's level wins over the contract's",
           status == 0 and found == [("unused-dependency", "warning")] * 2, found)
    (work / "machofix.toml").write_text("warnings_as_errors = true\n")
    status, found = levels(machofix, iconv, cwd=work)
    expect("the contract's warnings_as_errors", status == 1 and found == [("unused-dependency", "error")], found)

    for label, options, said in (
            ("an unknown rule", ["--level", "no-such-rule=error"], "not a rule of check: no-such-rule"),
            ("an unknown level", ["--level", "unused-dependency=loud"], "not a level"),
            ("a level without a rule", ["--level", "error"], "not RULE=LEVEL")):
        done = run(machofix, "check", *plain, *options, iconv)
        expect(f"{label} on the command line: exit 2, named", done.returncode == 2 and said in done.stderr, done.stderr)
    for label, text, said in (
            ("an unknown rule", '[levels]\nno-such-rule = "error"\n', "'no-such-rule' is not a rule of check"),
            ("an unknown level", '[levels]\nunused-dependency = "loud"\n', "line 2"),
            ("an exemption without its dylib", '[[exempt]]\nrule = "unused-dependency"\n', "needs both rule and dylib")):
        contract = work / "bad.toml"
        contract.write_text(text)
        done = run(machofix, "check", "--contract", contract, iconv)
        expect(f"{label} in the contract: exit 2, named", done.returncode == 2 and said in done.stderr
               and "bad.toml" in done.stderr, done.stderr)

    # With --sysroot: an unused library the sysroot holds is on every Mac it stands for
    # (a warning) even outside /usr/lib; a system library found there is not the
    # application's, so the unused one is the same warning with and without it.
    sysroot, app = work / "sysroot", work / "app"
    (sysroot / "opt" / "vendor" / "lib").mkdir(parents=True)
    (sysroot / "usr" / "lib").mkdir(parents=True)
    app.mkdir()
    (work / "libvendor.tbd").write_text(
        ICONV_TBD.replace("/usr/lib/libiconv.2.dylib", "/opt/vendor/lib/libvendor.dylib").replace("_iconv", "_vendor"))
    (sysroot / "usr" / "lib" / "libiconv.2.tbd").write_text(ICONV_TBD)
    shutil.copy(tbd / "libSystem.tbd", sysroot / "usr" / "lib" / "libSystem.B.tbd")
    vendor = link(work, tbd, "vendor", [tbd / "libSystem.tbd", work / "libvendor.tbd"])
    # Outside the system paths dyld reads no stub: the sysroot holds the library itself.
    subprocess.run(["ld64.lld-16", "-arch", "arm64", "-platform_version", "macos", "13.0", "14.0", "-dylib",
                    "-install_name", "/opt/vendor/lib/libvendor.dylib", work / "kernel.o", tbd / "libSystem.tbd",
                    "-o", sysroot / "opt" / "vendor" / "lib" / "libvendor.dylib"], check=True)
    status, found = levels(machofix, vendor, *plain)
    expect("an unused library outside the system, no sysroot: an error", status == 1 and
           ("unused-dependency", "error") in found, found)
    status, found = levels(machofix, vendor, *plain, "--app", app, "--sysroot", sysroot)
    expect("the same, held by the sysroot: a warning", status == 0 and found == [("unused-dependency", "warning")], found)
    status, found = levels(machofix, iconv, *plain, "--app", app, "--sysroot", sysroot)
    expect("an unused system library the sysroot holds: the same warning as without it",
           status == 0 and found == [("unused-dependency", "warning")], found)

    # A selection that selects nothing says so, with the glob that would.
    for command in (["check", "--no-contract"], ["prune", "--dry-run"], ["inspect"]):
        done = run(machofix, *command, "--only", "libomp", omp)
        expect(f"{command[0]} --only libomp: a warning that it matches nothing, and what would",
               "--only 'libomp' matches no dependency" in done.stderr and "'*libomp*' would match" in done.stderr, done.stderr)
        done = run(machofix, *command, "--only", "*libomp*", "--keep", "libiconv.2.dylib", omp)
        expect(f"{command[0]} with globs that match: no such warning", "matches no dependency" not in done.stderr, done.stderr)
    done = run(machofix, "check", "--no-contract", "--forbid", "*gomp*", omp)
    expect("--forbid that matches nothing: said", "--forbid '*gomp*' matches no dependency" in done.stderr, done.stderr)

    print(f"test_levels: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
