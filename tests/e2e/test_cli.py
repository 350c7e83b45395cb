#!/usr/bin/env python3
"""The command line as a person meets it: mistakes, help, paths, progress.

Every check runs the built machofix on inputs made here (the fixture matrix of
tests/fixtures/make_fixtures.py, .pte files from the test-only pte_writer, an
object file from clang-16) and looks at the exit status, stdout and stderr.
Usage: test_cli.py MACHOFIX PTE_WRITER FIXTURE_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAILURES = []
COMMANDS = ["inspect", "prune", "sign", "verify", "check"]


def expect(condition, message):
    print(f"{'ok  ' if condition else 'FAIL'} {message}")
    if not condition:
        FAILURES.append(message)
    return condition


def run(*args, **kwargs):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)


def describe(result):
    return f"exit {result.returncode}, stdout {result.stdout[-300:]!r}, stderr {result.stderr[-600:]!r}"


# --- mistakes and help ------------------------------------------------------------

def check_suggestions(machofix):
    result = run(machofix, "inspct", "x.dylib")
    expect(result.returncode == 2 and "unknown command 'inspct'" in result.stderr
           and "did you mean 'inspect'?" in result.stderr, f"a misspelt command gets the nearest one: {describe(result)}")
    result = run(machofix, "frobnicate")
    expect(result.returncode == 2 and "unknown command 'frobnicate'" in result.stderr
           and all(c in result.stderr for c in COMMANDS), f"a command far from any lists the commands: {describe(result)}")
    # --jsn before the missing PATH: the misspelling is the mistake to report.
    result = run(machofix, "inspect", "--jsn")
    expect(result.returncode == 2 and "unknown option '--jsn'" in result.stderr
           and "did you mean '--json'?" in result.stderr, f"a misspelt option gets the nearest one: {describe(result)}")
    result = run(machofix, "prune", "--inplace", "x.dylib")
    expect(result.returncode == 2 and "did you mean '--in-place'?" in result.stderr, f"--inplace: {describe(result)}")
    result = run(machofix, "verify", "--keep", "libomp", "x.dylib")
    expect(result.returncode == 2 and "unknown option '--keep' for verify" in result.stderr
           and "inspect, prune and check take '--keep'" in result.stderr,
           f"an option of other commands says which take it: {describe(result)}")
    result = run(machofix, "inspect", "--dryrun", "x.dylib")
    expect(result.returncode == 2 and "prune takes '--dry-run'" in result.stderr,
           f"a misspelt option of another command names it: {describe(result)}")
    for words in (["inspct"], ["inspect", "--jsn"]):
        result = run(machofix, *words)
        expect(result.stdout == "" and result.stderr.count("\n") == 1,
               f"{' '.join(words)}: one line of error, nothing on stdout: {describe(result)}")


def check_double_dash(machofix, fixtures, work):
    """After --, every word is a path, even one that starts with a dash."""
    scratch = os.path.join(work, "dashes")
    os.makedirs(scratch)
    shutil.copy(os.path.join(fixtures, "aoti_metal_arm64_dyldinfo.in"), os.path.join(scratch, "-model.dylib"))
    result = run(machofix, "inspect", "--json=-", "--", "-model.dylib", cwd=scratch)
    expect(result.returncode == 0 and json.loads(result.stdout or "{}").get("files", [{}])[0].get("path") == "-model.dylib",
           f"inspect -- -model.dylib: a path: {describe(result)}")


def check_help(machofix):
    top = run(machofix, "help")
    expect(top.returncode == 0 and all(f"\n  {c} " in top.stdout for c in COMMANDS + ["help"]),
           f"machofix help lists the commands: {describe(top)}")
    expect(run(machofix, "--help").stdout == top.stdout, "machofix --help is machofix help")
    for command in COMMANDS:
        own = run(machofix, "help", command)
        flag = run(machofix, command, "--help")
        expect(own.returncode == 0 and own.stdout == flag.stdout and f"Usage: machofix {command} PATH..." in own.stdout,
               f"machofix help {command} is machofix {command} --help: {describe(own)}")
        expect("--verbose" not in own.stdout and "--version" not in own.stdout and "--quiet" not in own.stdout,
               f"{command} --help shows only its own options")
        noise = [word for word in ("TEXT", "UINT", "INT", "[1 - 1024]", "PATH(existing)", "REQUIRED", "VALUE", "=-")
                 if word in own.stdout]
        expect(not noise, f"{command} --help has no type noise {noise}")
    prune = run(machofix, "help", "prune").stdout
    expect("Usage: machofix prune PATH... (-o OUT | --in-place | --dry-run) [OPTIONS]" in prune,
           "prune's usage line says it needs one of -o, --in-place, --dry-run")
    expect("-j, --jobs N " in prune and "--keep GLOB " in prune and "--json [FILE] " in prune,
           "option values have names: N, GLOB, [FILE]")
    verify = run(machofix, "help", "verify").stdout
    expect("--keep" not in verify and "--in-place" not in verify, "verify --help shows no option of other commands")
    result = run(machofix, "help", "nosuch")
    expect(result.returncode == 2 and "unknown command 'nosuch'" in result.stderr and "inspect" in result.stderr,
           f"machofix help nosuch is an error listing the commands: {describe(result)}")
    result = run(machofix, "help", "pruen")
    expect(result.returncode == 2 and "did you mean 'prune'?" in result.stderr, f"help pruen: {describe(result)}")
    result = run(machofix)
    expect(result.returncode == 2 and "no command given" in result.stderr and "Commands:" in result.stderr,
           f"no command: the help on stderr, exit 2: {describe(result)}")


def main():
    machofix, pte_writer, fixtures, work = [os.path.abspath(a) for a in sys.argv[1:5]]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.chdir(work)
    check_suggestions(machofix)
    check_double_dash(machofix, fixtures, work)
    check_help(machofix)
    print(f"{len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
