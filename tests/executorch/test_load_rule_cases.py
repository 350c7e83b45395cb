#!/usr/bin/env python3
"""ExecuTorch's load rules, one case at a time, with its runtime as the judge.

The differential test (differential.py) mutates bytes of the files it has; some rules
hold for shapes its mutations never make. Each case here is a model written by
tests/pte/pte_writer (`load-case`: one method "forward" as ExecuTorch 1.1-1.3 writes
it, an empty AOTI payload and method-name keys, around a Mach-O fixture) changed in
one place, and is judged twice:
 - by ExecuTorch's runtime (tests/executorch/runtime_loader): loads, or is refused at
   the stage this list says;
 - by machofix as a user meets it: `check` fails the file ExecuTorch refuses (exit 2,
   the reason in its message, nothing on standard output but the summary), and passes
   the file it loads (exit 0); for AOTI keys, `inspect --json` reads the keys the
   runtime looks up, and `prune -o` writes a file the runtime still loads.

The cases:
 - constant-segment-inside: Program.constant_segment names the weights' segment with
   constants at offsets 0 and 16: loads (the control of the next);
 - constant-segment-outside: the same segment runs past the end of the file:
   Program::load refuses it;
 - named-data-without-segments: NamedData entries and no segments table:
   Program::load refuses it (PteDataMap::create);
 - default-keys: an empty payload and no compile spec "method_name": the AOTI backend
   looks up "so_blob" and "weights_blob", and the model loads.

Usage: test_load_rule_cases.py MACHOFIX RUNTIME_LOADER PTE_WRITER FIXTURE_DIR WORK_DIR
Exit 77 (skipped) when RUNTIME_LOADER is empty: ExecuTorch's sources were not found.
"""
import json
import os
import shutil
import subprocess
import sys

SO = "contract_clean_arm64_chained.in"  # arm64, signed, nothing for check to find


def run(*command):
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=120)


def runtime(loader, path):
    result = run(loader, path)
    return result.returncode, json.loads(result.stdout)


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    machofix, loader, writer, fixtures, work = sys.argv[1:]
    if not loader:
        print("skipped: ExecuTorch's runtime sources were not found, so runtime_loader was not built")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    so = os.path.join(fixtures, SO)
    problems = []

    def write(case):
        path = os.path.join(work, case + ".pte")
        result = run(writer, "load-case", case, so, path)
        if result.returncode != 0:
            sys.exit(f"pte_writer load-case {case}: exit {result.returncode}: {result.stderr}")
        return path

    def loads(case, path):
        """The runtime loads `path`, check passes it; its report, or None."""
        status, report = runtime(loader, path)
        if status != 0 or not report.get("loads"):
            problems.append(f"{case}: the runtime refuses it: {report.get('refused')}")
            return None
        result = run(machofix, "check", path)
        if result.returncode != 0:
            problems.append(f"{case}: the runtime loads it, but check exits {result.returncode}: "
                            f"{(result.stdout + result.stderr).strip()[:600]}")
        return report

    def refused(case, path, stage, words):
        """The runtime refuses `path` at `stage`; check fails it, saying `words`."""
        status, report = runtime(loader, path)
        if status != 1 or report.get("refused", {}).get("stage") != stage:
            problems.append(f"{case}: the runtime should refuse it at {stage}: exit {status}, {report.get('refused')}")
        result = run(machofix, "check", path)
        said = result.stdout + result.stderr
        if result.returncode != 2 or words not in said or path not in result.stderr:
            problems.append(f"{case}: check should fail it (exit 2, naming the file and saying '{words}'): "
                            f"exit {result.returncode}: {said.strip()[:600]}")
        summary = [line for line in result.stdout.splitlines() if line.strip()]
        if any(not line.startswith("machofix check:") for line in summary):
            problems.append(f"{case}: check wrote more than its summary on standard output: {summary}")

    loads("constant-segment-inside", write("constant-segment-inside"))
    refused("constant-segment-outside", write("constant-segment-outside"), "Program::load",
            "the constant segment (segment 2) runs past the end of the file")
    refused("named-data-without-segments", write("named-data-without-segments"), "Program::load",
            "the Program has named_data but no segments table")

    # The default keys: what the runtime looks up is what machofix reads, and finds.
    path = write("default-keys")
    report = loads("default-keys", path)
    if report:
        aoti = report["methods"][0]["delegates"][0].get("aoti", {})
        if (aoti.get("so", {}).get("key"), aoti.get("weights", {}).get("key")) != ("so_blob", "weights_blob") or \
                not aoti["so"].get("found") or not aoti["weights"].get("found"):
            problems.append(f"default-keys: the runtime's lookups are not the case's: {aoti}")
    inspected = run(machofix, "inspect", path, "--json")
    try:
        delegates = json.loads(inspected.stdout)["files"][0]["pte"]["delegates"]
    except (ValueError, KeyError, IndexError, TypeError):
        problems.append(f"default-keys: inspect --json reads no delegates: exit {inspected.returncode}: "
                        f"{inspected.stderr.strip()[:400]}")
        delegates = []
    keys = [(d["aoti"] or {}).get("so_key") for d in delegates], [(d["aoti"] or {}).get("weights_key") for d in delegates]
    found = [(d["aoti"] or {}).get("weights_found") for d in delegates]
    if keys != (["so_blob"], ["weights_blob"]) or found != [True]:
        problems.append(f"default-keys: inspect --json reads so keys {keys[0]}, weights keys {keys[1]}, found {found}")
    output = os.path.join(work, "default-keys.pruned.pte")
    result = run(machofix, "prune", path, "-o", output)
    if result.returncode != 0:
        problems.append(f"default-keys: prune -o exits {result.returncode}: {result.stderr.strip()[:400]}")
    else:
        status, after = runtime(loader, output)
        so_after = status == 0 and after["methods"][0]["delegates"][0]["aoti"]["so"]
        if not so_after or so_after["key"] != "so_blob" or not so_after["found"]:
            problems.append(f"default-keys: prune's output does not load, or its .so moved: {after}")

    for problem in problems:
        print("FAIL " + problem)
    print(f"{len(problems)} problem(s) in 4 load-rule cases")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
