#!/usr/bin/env python3
"""Options that cannot be honoured together are refused before anything is done.

 - two documents on standard output: `check --sarif - --json -` (in either order, and
   --json without a value, which means -) would interleave two JSON documents that
   no reader can take apart;
 - `--backup` (keep the replaced original) with `-o OUT` or `--dry-run`, where
   nothing is replaced: prune and edit would silently keep no backup.
Each is refused with exit 2, a message that names the options, nothing on standard
output, nothing written (no output file, no backup, the input byte-identical). Each
option alone, as the control, does its work: SARIF or JSON on standard output, a
backup with --in-place.

Usage: test_option_conflicts.py MACHOFIX FIXTURE_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

MODEL = "aoti_metal_arm64_chained.in"  # links libomp, which it does not use: prune has work to do
LIBOMP = "/opt/llvm-openmp/lib/libomp.dylib"
PROBLEMS = []


def run(*command):
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=120)


def expect(condition, message, result=None):
    if not condition:
        detail = f": exit {result.returncode}, stdout {result.stdout.strip()[:300]!r}, stderr {result.stderr.strip()[:300]!r}" \
            if result is not None else ""
        PROBLEMS.append(message + detail)


def listing(directory):
    return {name: open(os.path.join(directory, name), "rb").read() for name in sorted(os.listdir(directory))}


def refused(machofix, directory, arguments, words, what):
    """machofix ARGUMENTS exits 2 saying WORDS, writes nothing to stdout or to DIRECTORY."""
    before = listing(directory)
    result = run(machofix, *arguments)
    expect(result.returncode == 2 and words in result.stderr and result.stdout == "",
           f"{what}: refused (exit 2, '{words}' on stderr, nothing on stdout)", result)
    expect(listing(directory) == before, f"{what}: nothing written, the input unchanged "
           f"(files now: {sorted(listing(directory))}, before: {sorted(before)})")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    machofix, fixtures, work = sys.argv[1:]
    shutil.rmtree(work, ignore_errors=True)
    directory = os.path.join(work, "models")
    os.makedirs(directory)
    model = os.path.join(directory, "model.dylib")
    shutil.copyfile(os.path.join(fixtures, MODEL), model)

    # Two documents on standard output.
    both = "--sarif - and --json - both want standard output"
    for options in (["--sarif", "-", "--json", "-"], ["--json", "-", "--sarif", "-"], ["--sarif", "-", "--json"]):
        refused(machofix, directory, ["check", "--no-contract", *options, model], both, f"check {' '.join(options)}")
    # The controls: each alone writes its document, and the document alone, to stdout.
    sarif = run(machofix, "check", "--no-contract", "--sarif", "-", model)
    try:
        expect(sarif.returncode == 1 and json.loads(sarif.stdout)["version"] == "2.1.0",
               "check --sarif - alone: SARIF on standard output, exit 1 (libomp is unused)", sarif)
    except ValueError:
        expect(False, "check --sarif - alone: standard output is one SARIF document", sarif)
    report = run(machofix, "check", "--no-contract", "--json", "-", model)
    try:
        expect(report.returncode == 1 and any(f["rule"] == "unused-dependency" for f in json.loads(report.stdout)["findings"]),
               "check --json - alone: the JSON report on standard output, exit 1", report)
    except ValueError:
        expect(False, "check --json - alone: standard output is one JSON document", report)

    # --backup where nothing is replaced.
    backup = "--backup only makes sense with --in-place"
    out = os.path.join(directory, "out.dylib")
    refused(machofix, directory, ["prune", model, "-o", out, "--backup", ".orig"], backup, "prune -o OUT --backup")
    refused(machofix, directory, ["prune", model, "--dry-run", "--backup", ".orig"], backup, "prune --dry-run --backup")
    refused(machofix, directory, ["edit", model, "--change", LIBOMP, "@rpath/libomp.dylib", "-o", out, "--backup", ".orig"],
            backup, "edit -o OUT --backup")
    # The controls: -o alone writes OUT; --in-place --backup keeps the original.
    original = open(model, "rb").read()
    result = run(machofix, "prune", model, "-o", out)
    expect(result.returncode == 0 and os.path.exists(out), "prune -o OUT alone: OUT written", result)
    result = run(machofix, "prune", model, "--in-place", "--backup", ".orig")
    expect(result.returncode == 0 and os.path.exists(model + ".orig") and open(model + ".orig", "rb").read() == original
           and open(model, "rb").read() != original, "prune --in-place --backup: the original kept as .orig", result)

    for problem in PROBLEMS:
        print("FAIL " + problem)
    print(f"{len(PROBLEMS)} problem(s)")
    return 1 if PROBLEMS else 0


if __name__ == "__main__":
    sys.exit(main())
