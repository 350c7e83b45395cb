#!/usr/bin/env python3
"""machofix prune on the linker-made fixture matrix, judged by independent readers.

For every case of tests/fixtures/make_fixtures.py: prune `<case>.in`, then
 - read the output with llvm-objdump-16 / llvm-nm-16 (tests/fixtures/imports.py):
   no tool error, the dylib list of the `-dead_strip_dylibs` relink (`.ref`), every
   import of the input bound to the same install name;
 - check its signature with an independent hashlib verifier (codesign_check.py):
   a signed input gives a valid signed output;
 - check the cases that must stay byte-identical, the warnings, and that the
   JSON report names the removed dylibs;
 - check that input and output pass every loader rule (docs/loader-rules.md), as
   `machofix verify --json` reports them.
Usage: test_fixtures.py MACHOFIX FIXTURE_DIR WORK_DIR
"""
import collections
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import codesign_check  # noqa: E402
import imports  # noqa: E402

# machofix keeps these even when unused (their symbols are part of the file's own
# interface, or the dependency is deliberately upward); -dead_strip_dylibs drops them.
KEPT_BY_POLICY = ("LC_REEXPORT_DYLIB", "LC_LOAD_UPWARD_DYLIB")


def policy_reference(original, ref):
    """The ref with re-exported and upward dylibs of the original put back in order."""
    expected = json.loads(json.dumps(ref))
    originals = {s["arch"]: s for s in original["slices"]}
    for ref_slice in expected["slices"]:
        source = originals[ref_slice["arch"]]
        commands = [c for c in source["dylib_commands"]
                    if c["name"] in ref_slice["dylibs"] or c["cmd"] in KEPT_BY_POLICY]
        ref_slice["dylib_commands"] = [dict(c, ordinal=i + 1) for i, c in enumerate(commands)]
        ref_slice["dylibs"] = [c["name"] for c in commands]
    return expected


def removed_in_report(report):
    """Every removed dylib command, per slice (a name can appear twice: lld-16 writes
    both LC_LOAD_DYLIB and LC_REEXPORT_DYLIB for -reexport_library)."""
    return sorted((s["arch"], d["install_name"]) for f in report["files"] for s in f["macho"]["slices"]
                  for d in s["dylibs"] if d["removed"])


def removed_between(original, expected):
    removed = []
    for before, after in zip(original["slices"], expected["slices"]):
        remaining = collections.Counter(after["dylibs"])
        for name in before["dylibs"]:
            if remaining[name]:
                remaining[name] -= 1
            else:
                removed.append((before["arch"], name))
    return sorted(removed)


def warnings_in_report(report):
    return [w for f in report["files"] for s in f["macho"]["slices"] for w in s["warnings"]]


def broken_loader_rules(machofix, path):
    """Every loader rule `verify` says the file breaks, as 'arch: rule at offset'."""
    result = subprocess.run([machofix, "verify", path, "--json"], capture_output=True, text=True)
    if result.returncode == 2:
        return [f"verify failed: {result.stderr.strip()}"]
    macho = json.loads(result.stdout)["files"][0]["macho"]
    broken = [f"{v['rule']} at {v['offset']:#x}" for v in macho["loader_rules"]]
    broken += [f"{s['arch']}: {v['rule']} at {v['offset']:#x}" for s in macho["slices"] for v in s["loader_rules"]]
    return broken


def check_case(machofix, fixtures, work, case):
    source = os.path.join(fixtures, case["in"])
    output = os.path.join(work, case["name"] + ".out")
    run = subprocess.run([machofix, "prune", source, "-o", output, "--json"], capture_output=True, text=True)
    if run.returncode != 0:
        return [f"exit status {run.returncode}: {run.stderr.strip()}"]
    report = json.loads(run.stdout)
    problems = []
    with open(source, "rb") as a, open(output, "rb") as b:
        identical = a.read() == b.read()
    original = imports.inspect(source)
    if case["expect"] in ("unchanged", "keep-last-dependency"):
        if not identical:
            problems.append("output differs from the input, which must stay as it is")
    else:
        ref = imports.inspect(os.path.join(fixtures, case["ref"]))
        expected = policy_reference(original, ref)
        problems += imports.compare(output, expected, original)
        expected_removed = removed_between(original, expected)
        if removed_in_report(report) != expected_removed:
            problems.append(f"report says removed {removed_in_report(report)}, expected {expected_removed}")
        if not expected_removed and not identical:
            problems.append("nothing to remove, yet the output differs from the input")
    if case.get("expect_warning") and not warnings_in_report(report):
        problems.append("expected a warning about run-time lookups, got none")
    for name, path in (("input", source), ("output", output)):
        for broken in broken_loader_rules(machofix, path):
            problems.append(f"the {name} breaks the loader rule {broken}")
    for index, (before, after) in enumerate(zip(codesign_check.check_file(source), codesign_check.check_file(output))):
        if before[0] == "valid" and after[0] != "valid":
            problems.append(f"slice {index}: signature {after[0]} after pruning: {after[1][:3]}")
    return problems


def main():
    machofix, fixtures, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(fixtures, "manifest.json")) as handle:
        cases = json.load(handle)
    failures = 0
    for case in cases:
        problems = check_case(machofix, fixtures, work, case)
        print(f"{'FAIL' if problems else 'ok  '} {case['name']}")
        for problem in problems:
            print(f"     {problem}")
        failures += bool(problems)
    print(f"{len(cases) - failures}/{len(cases)} fixture cases pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
