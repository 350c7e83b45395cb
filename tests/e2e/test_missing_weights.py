#!/usr/bin/env python3
"""check's missing-weights rule (docs/commands/check.md, docs/pte-load-rules.md):

    test_missing_weights.py MACHOFIX PTE_WRITER RUNTIME_LOADER WORK

ExecuTorch's Metal backend loads a model whose AOTI delegate gets no weights, and then
computes with constants it never received; the gate must not pass it. Models written
by tests/pte/pte_writer (weights-case) around a clean .so (tests/pte/make_blobs.sh):
- weights in the .pte: no finding;
- an empty weights key, an entry whose segment is not there: an error (exit 1), in
  the text, JSON and SARIF, pointing at the file offset;
- weights the .pte lacks, no .ptd given: a warning naming the key (exit 0; 1 with
  --warnings-as-errors); with the .ptd that holds them (--ptd, the contract's ptd,
  the Python API's ptd=): no finding; with a .ptd that lacks them: an error;
- a --ptd that is not a .ptd, or is not there: exit 2, naming it;
- in a .zip, the member's finding; prune leaves the weights as they are, so its output
  fails the same way;
- ExecuTorch's runtime (RUNTIME_LOADER, when built) finds no weights in each broken
  model and still loads it: the backend's behaviour the rule exists for.
"""
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
failures = []


def expect(what, condition, detail=""):
    print(f"{'ok' if condition else 'FAILED'}: {what}{'' if condition or not detail else ': ' + str(detail)[:600]}")
    if not condition:
        failures.append(what)


def run(*arguments, cwd=None, env=None):
    return subprocess.run([str(a) for a in arguments], capture_output=True, text=True, cwd=cwd, env=env)


def weights_findings(machofix, path, *options):
    """(exit status, missing-weights findings) of check --json."""
    done = run(machofix, "check", "--no-contract", "--json=-", *options, path)
    findings = json.loads(done.stdout)["findings"] if done.stdout.strip() else []
    return done.returncode, [f for f in findings if f["rule"] == "missing-weights"], done


def main():
    machofix, writer, loader, work = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    subprocess.run([ROOT / "tests" / "pte" / "make_blobs.sh", work / "blobs"], check=True, capture_output=True)
    so = work / "blobs" / "clean.so"
    models = {}
    for case in ("in-file", "empty-key", "absent", "unreadable"):
        models[case] = work / f"{case}.pte"
        subprocess.run([writer, "weights-case", case, so, models[case]], check=True)
    ptd = work / "weights.ptd"
    subprocess.run([writer, "weights-case", "ptd", so, ptd], check=True)
    (work / "matrix").mkdir()
    subprocess.run([writer, "matrix", work / "blobs", work / "matrix"], check=True, capture_output=True)
    other_ptd = work / "matrix" / "ptd_method_key.ptd"

    code, found, _ = weights_findings(machofix, models["in-file"])
    expect("weights in the .pte: exit 0, no finding", code == 0 and not found, found)

    for case, needle in (("empty-key", "empty weights key"), ("unreadable", "segment 99")):
        code, found, done = weights_findings(machofix, models[case])
        expect(f"{case}: exit 1 with one error", code == 1 and [f["level"] for f in found] == ["error"], done.stdout)
        if found:
            expect(f"{case}: the message says why", needle in found[0]["message"], found[0]["message"])
            expect(f"{case}: method, backend and offset", found[0]["method"] == "forward" and
                   found[0]["backend"] == "MetalBackend" and isinstance(found[0]["offset"], int) and found[0]["offset"] > 0,
                   found[0])
        text = run(machofix, "check", "--no-contract", models[case])
        expect(f"{case}: the text names the rule at its level", "error:" in text.stdout and "[missing-weights]" in text.stdout,
               text.stdout)
        # A .ptd holds nothing for an empty key or an unreadable entry of the .pte... unless
        # it holds the key: the runtime looks there first.
        code, found, _ = weights_findings(machofix, models[case], "--ptd", other_ptd)
        expect(f"{case}: still an error with an unrelated .ptd", code == 1 and len(found) == 1, found)
    code, found, _ = weights_findings(machofix, models["unreadable"], "--ptd", ptd)
    expect("unreadable in the .pte, held by the .ptd given: the runtime reads the .ptd first", code == 0 and not found, found)

    code, found, done = weights_findings(machofix, models["absent"])
    key = found[0]["weights_key"] if found else ""
    expect("absent, no .ptd: exit 0 with a warning", code == 0 and [f["level"] for f in found] == ["warning"], done.stdout)
    expect("absent, no .ptd: the key named, ending _weights_blob", key.endswith("_weights_blob") and len(key) == 64 + 13, key)
    expect("absent, no .ptd: the repair says --ptd", found and "--ptd" in found[0]["repair"], found)
    text = run(machofix, "check", "--no-contract", models["absent"]).stdout
    expect("the text shortens the content-hash key as the docs do (the JSON keeps it whole)",
           key and f"'{key[:6]}..._weights_blob'" in text and key not in text, text)
    code, found, _ = weights_findings(machofix, models["absent"], "--warnings-as-errors")
    expect("absent, --warnings-as-errors: exit 1", code == 1 and [f["level"] for f in found] == ["error"], found)
    code, found, _ = weights_findings(machofix, models["absent"], "--ptd", ptd)
    expect("absent, --ptd with the weights: exit 0, no finding", code == 0 and not found, found)
    code, found, _ = weights_findings(machofix, models["absent"], "--ptd", other_ptd)
    expect("absent, --ptd without them: an error naming the .ptd",
           code == 1 and len(found) == 1 and found[0]["level"] == "error" and str(other_ptd) in found[0]["message"] and
           found[0]["looked_in"] == [str(other_ptd)], found)

    for bad, what in ((models["in-file"], "a .pte"), (work / "nosuch.ptd", "a missing file")):
        done = run(machofix, "check", "--no-contract", "--ptd", bad, models["absent"])
        expect(f"--ptd names {what}: exit 2 naming it", done.returncode == 2 and str(bad) in done.stderr and not done.stdout,
               (done.returncode, done.stderr, done.stdout))

    # The contract's ptd, relative to the contract's directory.
    contracted = work / "contracted"
    contracted.mkdir()
    shutil.copy(models["absent"], contracted / "model.pte")
    (contracted / "data").mkdir()
    shutil.copy(ptd, contracted / "data" / "model.ptd")
    (contracted / "machofix.toml").write_text('ptd = "data/model.ptd"\n')
    done = run(machofix, "check", "--json=-", contracted / "model.pte")
    found = [f for f in json.loads(done.stdout)["findings"] if f["rule"] == "missing-weights"] if done.stdout else []
    expect("the contract's ptd (relative to it): exit 0, no finding", done.returncode == 0 and not found, done.stdout)
    (contracted / "machofix.toml").write_text('ptd = ["data/nosuch.ptd"]\n')
    done = run(machofix, "check", contracted / "model.pte")
    expect("the contract's ptd not there: exit 2 naming it", done.returncode == 2 and "nosuch.ptd" in done.stderr, done.stderr)

    sarif = work / "out.sarif"
    run(machofix, "check", "--no-contract", "--sarif", sarif, models["absent"], models["empty-key"])
    results = json.loads(sarif.read_text())["runs"][0]["results"]
    levels = sorted((Path(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]).name, r["level"])
                    for r in results if r["ruleId"] == "missing-weights")
    expect("SARIF: the levels", levels == [("absent.pte", "warning"), ("empty-key.pte", "error")], levels)
    prints = [r["partialFingerprints"]["machofixFinding/v2"] for r in results if r["ruleId"] == "missing-weights"]
    expect("SARIF: fingerprints name the method, not the content-hash key",
           prints and all("forward" in p and "_weights_blob" not in p for p in prints), prints)
    logical = [r["locations"][0].get("logicalLocations", [{}])[0] for r in results if r["ruleId"] == "missing-weights"]
    expect("SARIF: the delegate's method as the logical location", all(l.get("name") == "forward" for l in logical), logical)

    archive = work / "models.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.write(models["empty-key"], "models/empty-key.pte")
    code, found, done = weights_findings(machofix, archive)
    expect("in a .zip: the member's error", code == 1 and found and found[0]["member"] == "models/empty-key.pte" and
           found[0]["offset"] is None and found[0]["member_offset"], done.stdout)

    pruned = work / "pruned.pte"
    run(machofix, "prune", models["empty-key"], "-o", pruned)
    code, found, _ = weights_findings(machofix, pruned if pruned.exists() else models["empty-key"])
    expect("prune's output keeps the empty key, and fails the same way", code == 1 and len(found) == 1, found)

    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), MACHOFIX_EXECUTABLE=machofix)
    script = ("import machofix, sys\n"
              "r = machofix.check(sys.argv[1], no_contract=True)\n"
              "w = [f for f in r.findings if f.rule == 'missing-weights']\n"
              "print(w[0].level, w[0].weights_key.endswith('_weights_blob'), r.ok)\n"
              "r = machofix.check(sys.argv[1], no_contract=True, ptd=sys.argv[2])\n"
              "print(len([f for f in r.findings if f.rule == 'missing-weights']), r.ok)\n"
              "r = machofix.check(sys.argv[1], no_contract=True, warnings_as_errors=True)\n"
              "print(r.ok)\n")
    done = run(sys.executable, "-c", script, models["absent"], ptd, env=env)
    expect("Python: the warning, then none with ptd=, then a failure with warnings_as_errors",
           done.stdout.split("\n")[:3] == ["warning True True", "0 True", "False"], (done.stdout, done.stderr))

    if loader:
        for case, found in (("in-file", True), ("empty-key", False), ("absent", False), ("unreadable", False)):
            done = run(loader, models[case])
            report = json.loads(done.stdout) if done.stdout.strip() else {}
            weights = [d["aoti"]["weights"]["found"] for m in report.get("methods", []) for d in m["delegates"] if "aoti" in d]
            expect(f"ExecuTorch's runtime loads {case} and finds its weights: {found}",
                   done.returncode == 0 and weights == [found], (done.returncode, weights))
    else:
        print("SKIP the runtime's verdicts: ExecuTorch's runtime sources were not found")

    print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
