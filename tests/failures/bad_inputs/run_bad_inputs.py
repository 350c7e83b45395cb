#!/usr/bin/env python3
"""machofix on the crafted bad-input corpus (tests/failures/bad_inputs/cases.txt).

    run_bad_inputs.py MACHOFIX MAKE_BAD_INPUTS CASES WORK_DIR

Generates every case with MAKE_BAD_INPUTS, then runs on each, in a directory of
its own holding only that file:
    machofix prune FILE -o OUT
    machofix prune FILE --in-place
    machofix inspect FILE
and requires:
  - the exit status of the table (2: refused; inspect 0 for signature problems,
    which inspect reports instead of refusing);
  - for a refusal, one error on stderr naming the file, "offset <expected>: " and
    the expected message; for a report, the message and offset in its stdout;
  - no OUT written, the input byte-identical (sha256 before and after), and
    nothing else in the directory (no temporary file left behind);
  - no crash (no death by a signal, no sanitizer report).
Every base is made by MAKE_BAD_INPUTS itself (the .pte bases too, by the test
writer, in the layout of ExecuTorch's files): nothing is skipped, and a case that
cannot be built is a failure.
"""
import hashlib
import os
import shutil
import subprocess
import sys


def parse_table(path):
    cases = {}
    with open(path) as table:
        for line in table:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            columns = [c.strip() for c in line.split("|")]
            name, recipe, prune, inspect, message, offset = columns
            cases[name] = {"recipe": recipe, "prune": int(prune), "inspect": int(inspect), "message": message}
    return cases


def parse_manifest(path):
    entries = {}
    with open(path) as manifest:
        for line in manifest:
            name, file, offset, requires = line.rstrip("\n").split("\t")
            entries[name] = {"file": file, "offset": offset, "requires": requires}
    return entries


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run_mode(machofix, case, entry, source, directory, mode):
    """Runs one command on a fresh copy of the case; returns a list of problems."""
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    path = os.path.join(directory, entry["file"])
    shutil.copyfile(source, path)
    before = sha256(path)
    out = os.path.join(directory, "out." + entry["file"].rsplit(".", 1)[-1])
    command = {"prune-o": [machofix, "prune", path, "-o", out],
               "prune-in-place": [machofix, "prune", path, "--in-place"],
               "inspect": [machofix, "inspect", path]}[mode]
    result = subprocess.run(command, capture_output=True, text=True)
    expected_status = case["inspect"] if mode == "inspect" else case["prune"]
    problems = []
    offset = entry["offset"]
    if result.returncode < 0:
        problems.append("killed by signal %d" % -result.returncode)
    elif result.returncode != expected_status:
        problems.append("exit status %d, expected %d" % (result.returncode, expected_status))
    if "Sanitizer" in result.stderr or "runtime error:" in result.stderr:
        problems.append("sanitizer report on stderr")
    if expected_status == 2:
        text = result.stderr
        if path not in text:
            problems.append("stderr does not name the file")
    else:
        text = result.stdout
    if case["message"] not in text:
        problems.append("message %r not found" % case["message"])
    if offset != "none" and ("offset %s: " % offset) not in text:
        problems.append("'offset %s: ' not found" % offset)
    if os.path.exists(out):
        problems.append("OUT was written")
    if not os.path.exists(path):
        problems.append("the input is gone")
    elif sha256(path) != before:
        problems.append("the input changed")
    left = sorted(set(os.listdir(directory)) - {entry["file"]})
    if left:
        problems.append("left in the directory: %s" % ", ".join(left))
    if problems:
        problems.append("command: %s\n      stderr: %s\n      stdout: %s" % (
            " ".join(command), result.stderr.strip()[:600], result.stdout.strip()[:600]))
    return problems


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    machofix, generator, cases_path, work = (os.path.abspath(a) for a in argv[:4])
    shutil.rmtree(work, ignore_errors=True)
    inputs = os.path.join(work, "inputs")
    os.makedirs(inputs)
    subprocess.run([generator, cases_path, inputs], check=True)
    cases = parse_table(cases_path)
    manifest = parse_manifest(os.path.join(inputs, "manifest.tsv"))

    failures, passed = [], 0
    for name, case in cases.items():
        entry = manifest[name]
        if entry["requires"].startswith("missing:"):
            failures.append("%s: cannot be built: %s" % (name, entry["requires"][8:]))
            continue
        source = os.path.join(inputs, entry["file"])
        case_problems = []
        for mode in ("prune-o", "prune-in-place", "inspect"):
            for problem in run_mode(machofix, case, entry, source, os.path.join(work, name, mode), mode):
                case_problems.append("%s: %s: %s" % (name, mode, problem))
        if case_problems:
            failures.extend(case_problems)
        else:
            passed += 1
            shutil.rmtree(os.path.join(work, name), ignore_errors=True)

    for failure in failures:
        print("FAIL: %s" % failure)
    failed = sorted({f.split(":")[0] for f in failures})
    print("bad inputs: %d cases passed, %d failed (of %d)" % (passed, len(failed), len(cases)))
    if failed:
        print("failed cases: " + ", ".join(failed))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
