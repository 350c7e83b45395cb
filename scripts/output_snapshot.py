#!/usr/bin/env python3
"""Every output machofix makes, recorded, for a restructuring that must not change one
byte of them: the reports (text and JSON, stdout and stderr), the exit
statuses and the files written, of every command, on the fixture matrix, the .pte
matrix, ExecuTorch's samples and the npm corpus.

  scripts/output_snapshot.py record  BUILD SNAPSHOT   # before
  scripts/output_snapshot.py compare BUILD SNAPSHOT   # after: exit 1 on any difference

BUILD is a build directory with machofix, tests/pte_writer and fixtures/ (ctest -R
fixtures_generate makes them); the npm corpus comes from its cache (tests/corpus), the
samples from ../shared/samples, each left out (and said so) when absent. SNAPSHOT is a
JSON file of sha256 sums, kept outside the repository.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS_MANIFEST = os.path.join(os.path.expanduser("~"), ".cache", "machofix", "corpus", "manifest.json")
SAMPLES = os.path.join(os.path.dirname(ROOT), "shared", "samples")

# Each command as a user runs it; "OUT" becomes the output path. Edits that match
# nothing are kept: their errors are outputs too.
COMMANDS = {
    "inspect": ["inspect"],
    "inspect-json": ["inspect", "--json"],
    "check": ["check"],
    "check-json": ["check", "--json", "--forbid", "*omp*", "--provided", "@rpath/*"],
    "verify-json": ["verify", "--json"],
    "prune-dry": ["prune", "--dry-run"],
    "prune": ["prune", "-o", "OUT", "--json"],
    "sign": ["sign", "-o", "OUT", "--json"],
    "edit-rpath": ["edit", "-o", "OUT", "--add-rpath", "@loader_path/../lib", "--json"],
    "edit-change": ["edit", "-o", "OUT", "--change", "*omp*", "@rpath/libomp.dylib", "--json"],
    "edit-weak": ["edit", "-o", "OUT", "--weak-link", "*Metal*", "--json"],
}


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def without_timings(report):
    """A report's bytes but the time each file took, the one thing that varies."""
    return re.sub(rb'"seconds":[0-9.e+-]+', b'"seconds":0', report)


def inputs(build, scratch):
    """(name, path) of every input: fixtures, the .pte matrix, samples, corpus."""
    found = []
    fixtures = os.path.join(build, "fixtures")
    for name in sorted(os.listdir(fixtures)):
        path = os.path.join(fixtures, name)
        if os.path.isfile(path) and not name.endswith((".json", ".c", ".txt")):
            found.append(("fixtures/" + name, path))
    blobs, matrix = os.path.join(scratch, "blobs"), os.path.join(scratch, "matrix")
    subprocess.run([os.path.join(ROOT, "tests", "pte", "make_blobs.sh"), blobs], check=True, capture_output=True)
    os.makedirs(matrix)
    subprocess.run([os.path.join(build, "tests", "pte_writer"), "matrix", blobs, matrix], check=True, capture_output=True)
    found += [("pte/" + name, os.path.join(matrix, name)) for name in sorted(os.listdir(matrix))]
    if os.path.isdir(SAMPLES):
        found += [("samples/" + n, os.path.join(SAMPLES, n)) for n in sorted(os.listdir(SAMPLES)) if n.endswith((".pte", ".ptd"))]
    else:
        print(f"note: no samples at {SAMPLES}")
    if os.path.exists(CORPUS_MANIFEST):
        with open(CORPUS_MANIFEST) as manifest:
            found += [(f"corpus/{e['package']}/{e['path']}", e["cached_path"]) for e in json.load(manifest)["files"]]
    else:
        print(f"note: no npm corpus at {CORPUS_MANIFEST}")
    return found


def outputs_of(machofix, source, scratch):
    """{command: {status, stdout, stderr, output}} as sha256 sums; the input is copied
    under a fixed name so that reports name the same path every time."""
    work = os.path.join(scratch, "run")
    results = {}
    for command, arguments in COMMANDS.items():
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        name = "model" + os.path.splitext(source)[1]
        shutil.copyfile(source, os.path.join(work, name))
        argv = [machofix] + [("out" + os.path.splitext(source)[1]) if a == "OUT" else a for a in arguments]
        argv.insert(2, name)
        done = subprocess.run(argv, cwd=work, capture_output=True, env=dict(os.environ, MACHOFIX_PROGRESS="never"))
        output = os.path.join(work, "out" + os.path.splitext(source)[1])
        results[command] = {
            "status": done.returncode,
            "stdout": sha256(without_timings(done.stdout)),
            "stderr": sha256(done.stderr),
            "output": sha256(open(output, "rb").read()) if os.path.exists(output) else None,
        }
    return results


def snapshot(build):
    machofix = os.path.join(build, "machofix")
    with tempfile.TemporaryDirectory(prefix="machofix-snapshot-") as scratch:
        return {name: outputs_of(machofix, path, scratch) for name, path in inputs(build, scratch)}


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("record", "compare"):
        sys.exit(__doc__)
    mode, build, path = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
    taken = snapshot(build)
    runs = sum(len(commands) for commands in taken.values())
    if mode == "record":
        with open(path, "w") as out:
            json.dump(taken, out, indent=1, sort_keys=True)
        print(f"recorded {len(taken)} inputs, {runs} runs in {path}")
        return 0
    with open(path) as recorded_file:
        recorded = json.load(recorded_file)
    differences = []
    for name in sorted(set(recorded) | set(taken)):
        if name not in taken or name not in recorded:
            differences.append(f"{name}: only in the {'snapshot' if name in recorded else 'new run'}")
            continue
        for command, before in recorded[name].items():
            after = taken[name].get(command)
            for key in ("status", "stdout", "stderr", "output"):
                if after is None or before[key] != after[key]:
                    differences.append(f"{name}: {command}: {key} differs")
    for line in differences:
        print(line)
    print(f"{len(taken)} inputs, {runs} runs: {len(differences)} differences")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
