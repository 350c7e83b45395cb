#!/usr/bin/env python3
"""machofix on a real Dask cluster (python/machofix/dask/): a `dask scheduler` and two
`dask worker` processes, each started as its own process on loopback (127.0.0.1 only),
the workers running the machofix under test (MACHOFIX_EXECUTABLE) from the package in
the source tree (PYTHONPATH).

Over a generated store (models: .pte files written by pte_writer, linker-made Mach-O
files; a text file; nested directories; a hard link; a symlink; a .tar.gz of models):
- `python3 -m machofix.dask prune -o OUT STORE`: OUT equals a local `machofix prune
  STORE -o REF`, byte for byte (files, links), and the merged JSON report equals the
  local one (the schema's fields, files in the same order, the summary);
- --in-place on a copy equals a local --in-place on another copy; a second run
  writes nothing (every file's inode and mtime kept) and reports them unchanged;
- `check` through the Python API (machofix.dask.Machofix(client)): the local check's
  report and exit status 1 (findings);
- `--from-tree` refuses a file outside its tree, and a directory;
- a worker killed by SIGKILL while its machofix rewrites a 1 GiB .pte: that machofix
  process dies with it (no orphan), the task is retried on the other worker, and the
  outcome is the local run's: the same bytes, no temporary file left, each file
  reported once.

Usage: test_dask.py MACHOFIX PTE_WRITER FIXTURE_DIR WORK_DIR
"""
import filecmp
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from dask_cluster import Cluster, python_with_distributed  # noqa: E402
PYTHON = sys.executable  # one with distributed: main() makes sure
FAILURES = []


def expect(condition, message, detail=""):
    print(f"{'ok  ' if condition else 'FAIL'} {message}{'' if condition or not detail else ': ' + str(detail)[:1500]}",
          flush=True)
    if not condition:
        FAILURES.append(message)


def make_store(store, pte_writer, fixtures, work):
    blobs = os.path.join(work, "blobs")
    subprocess.run([os.path.join(ROOT, "tests", "pte", "make_blobs.sh"), blobs], check=True, capture_output=True)
    os.makedirs(os.path.join(store, "models", "deep", "er"))
    os.makedirs(os.path.join(store, "libs"))
    for index, weights in enumerate((4096, 1 << 20, 3 << 20)):
        subprocess.run([pte_writer, "big", blobs, os.path.join(store, "models", f"model{index}.pte"), str(weights)],
                       check=True, capture_output=True)
    shutil.copy(os.path.join(store, "models", "model1.pte"), os.path.join(store, "models", "deep", "er", "copy.pte"))
    for name in ("aoti_metal_arm64_chained", "aoti_metal_arm64_dyldinfo", "all_used_arm64_chained",
                 "aoti_metal_x86_64_dyldinfo"):
        source = os.path.join(fixtures, name + ".in")
        if os.path.exists(source):
            shutil.copy(source, os.path.join(store, "libs", name + ".dylib"))
    os.link(os.path.join(store, "libs", "aoti_metal_arm64_chained.dylib"), os.path.join(store, "libs", "hard.dylib"))
    os.symlink("models/model0.pte", os.path.join(store, "link.pte"))
    with open(os.path.join(store, "README.txt"), "w") as handle:
        handle.write("not a model\n")
    with tarfile.open(os.path.join(store, "bundle.tar.gz"), "w:gz") as archive:
        archive.add(os.path.join(store, "models", "model0.pte"), "bundle/model0.pte")
        archive.add(os.path.join(store, "libs", "aoti_metal_arm64_dyldinfo.dylib"), "bundle/lib.dylib")


def dask_run(cluster, *arguments, background=False):
    command = [PYTHON, "-m", "machofix.dask", "--scheduler-file", cluster.file, "--no-progress", *arguments]
    if background:
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cluster.env)
    return subprocess.run(command, capture_output=True, text=True, env=cluster.env, timeout=600)


def comparable(report, root=None, replacement="STORE"):
    """A report without what differs between two runs of the same work: timings, and the
    store's path when the two runs worked on copies at different paths."""
    text = json.dumps(report, sort_keys=True)
    if root:
        text = text.replace(root, replacement)
    value = json.loads(text)

    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if not any(w in k for w in ("seconds", "elapsed", "time"))}
        if isinstance(node, list):
            return [strip(item) for item in node]
        return node
    return strip(value)


def same_tree(left, right):
    """Two trees with the same names, the same bytes, the same links; the differences."""
    differences = []
    for directory, subdirectories, files in os.walk(left):
        for name in files + subdirectories:
            a = os.path.join(directory, name)
            b = os.path.join(right, os.path.relpath(a, left))
            if os.path.islink(a) or os.path.islink(b):
                if not (os.path.islink(b) and os.readlink(a) == os.readlink(b)):
                    differences.append(os.path.relpath(a, left))
            elif os.path.isfile(a) and not (os.path.isfile(b) and filecmp.cmp(a, b, shallow=False)):
                differences.append(os.path.relpath(a, left))
    for directory, subdirectories, files in os.walk(right):
        for name in files + subdirectories:
            if not os.path.lexists(os.path.join(left, os.path.relpath(os.path.join(directory, name), right))):
                differences.append("only in the second: " + os.path.relpath(os.path.join(directory, name), right))
    return differences


def local_run(machofix, *arguments):
    result = subprocess.run([machofix, *arguments], capture_output=True, text=True, timeout=600)
    return result


def check_mirror(cluster, machofix, store, work):
    reference, out = os.path.join(work, "reference"), os.path.join(work, "out")
    local = local_run(machofix, "prune", store, "-o", reference, "--json", os.path.join(work, "local.json"))
    expect(local.returncode == 0, "the local prune -o of the store", local.stderr)
    run = dask_run(cluster, "prune", "-o", out, "--json", os.path.join(work, "dask.json"), store)
    expect(run.returncode == 0, "python3 -m machofix.dask prune -o OUT STORE: exit status 0", run.stderr)
    expect(not same_tree(reference, out), "its output tree is the local run's, byte for byte (files and links)",
           same_tree(reference, out))
    with open(os.path.join(work, "local.json")) as a, open(os.path.join(work, "dask.json")) as b:
        local_report, dask_report = json.load(a), json.load(b)
    expect(comparable(local_report) == comparable(dask_report),
           "the merged JSON report is the local one (files in the same order, the same summary)",
           (local_report["summary"], dask_report["summary"]))
    expect(local_report["summary"]["changed"] >= 5 and local_report["summary"]["skipped"] >= 2,
           f"the store has models to change and files to skip ({local_report['summary']})")
    expect(run.stdout.strip().startswith(f"{local_report['summary']['files']} files:"), "the summary line", run.stdout)
    return local_report


def check_in_place(cluster, machofix, store, work):
    local_copy, dask_copy = os.path.join(work, "in-place-local"), os.path.join(work, "in-place-dask")
    for copy in (local_copy, dask_copy):
        subprocess.run(["cp", "-a", store, copy], check=True)
    local = local_run(machofix, "prune", "--in-place", local_copy, "--json", os.path.join(work, "inplace-local.json"))
    run = dask_run(cluster, "prune", "--in-place", "--json", os.path.join(work, "inplace-dask.json"), dask_copy)
    expect(local.returncode == 0 and run.returncode == 0, "--in-place, locally and on Dask", run.stderr)
    expect(not same_tree(local_copy, dask_copy), "the store repaired in place is the local run's", same_tree(local_copy, dask_copy))
    hard = os.path.join(dask_copy, "libs", "hard.dylib")
    expect(os.stat(hard).st_ino == os.stat(os.path.join(dask_copy, "libs", "aoti_metal_arm64_chained.dylib")).st_ino,
           "the hard link still names the repaired file (both names in one task)")
    with open(os.path.join(work, "inplace-local.json")) as a, open(os.path.join(work, "inplace-dask.json")) as b:
        expect(comparable(json.load(a), local_copy) == comparable(json.load(b), dask_copy),
               "the merged in-place report is the local one")
    before = {path: (os.lstat(path).st_ino, os.lstat(path).st_mtime_ns) for path in walk_files(dask_copy)}
    again = dask_run(cluster, "prune", "--in-place", "--json=-", dask_copy)
    report = json.loads(again.stdout) if again.stdout.strip() else {}
    after = {path: (os.lstat(path).st_ino, os.lstat(path).st_mtime_ns) for path in walk_files(dask_copy)}
    expect(again.returncode == 0 and before == after, "a second run writes nothing (every inode and mtime kept)",
           again.stderr)
    statuses = {file["status"] for file in report.get("files", [])}
    expect(report.get("summary", {}).get("changed") == 0 and statuses <= {"unchanged", "skipped"},
           f"and reports the repaired files unchanged ({statuses})")


def walk_files(root):
    return sorted(os.path.join(d, n) for d, _, files in os.walk(root) for n in files)


def check_check(cluster, machofix, store, work):
    local = local_run(machofix, "check", store, "--json=-")
    sys.path.insert(0, os.path.join(ROOT, "python"))
    os.environ["MACHOFIX_EXECUTABLE"] = machofix
    import machofix.dask as on_dask
    from distributed import Client
    with Client(scheduler_file=cluster.file, timeout=60) as client:
        report = on_dask.Machofix(client).check(store)
    expect(local.returncode == 1 and report.exit_status == 1 and not report.ok,
           "check through machofix.dask.Machofix(client): findings, exit status 1, as locally")
    local_report = json.loads(local.stdout)
    expect([(f["file"], f["rule"], f["message"]) for f in local_report["findings"]] ==
           [(f.file, f.rule, f.message) for f in report.findings] and len(report.findings) >= 5,
           f"the findings of the local check, in its order ({len(report.findings)})")
    run = dask_run(cluster, "check", "--json=-", store)
    expect(run.returncode == 1 and comparable(json.loads(run.stdout)) == comparable(local_report),
           "python3 -m machofix.dask check: the local check's whole report and exit status", run.stderr)


def machofix_processes(path):
    """(pid, parent pid) of every process whose command line names `path`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                words = handle.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and path.encode() in words and words[0].endswith(b"machofix"):
            found.append((int(pid), int(fields[1])))
    return found


def check_killed_worker(cluster, machofix, store, pte_writer, work):
    killed_store = os.path.join(work, "killed-store")
    subprocess.run(["cp", "-a", store, killed_store], check=True)
    big = os.path.join(killed_store, "models", "big.pte")
    subprocess.run([pte_writer, "big", os.path.join(work, "blobs"), big, str(1 << 30), "4096"], check=True)
    reference, out = os.path.join(work, "killed-reference"), os.path.join(work, "killed-out")
    local = local_run(machofix, "prune", killed_store, "-o", reference, "--json", os.path.join(work, "killed-local.json"))
    expect(local.returncode == 0, "the local run of the store with a 1 GiB model", local.stderr)
    run = dask_run(cluster, "prune", "-o", out, "--json", os.path.join(work, "killed-dask.json"), killed_store,
                   background=True)
    victim = None
    deadline = time.time() + 120
    worker_pids = {worker.pid for worker in cluster.workers}
    while victim is None and time.time() < deadline and run.poll() is None:
        victim = next(((pid, parent) for pid, parent in machofix_processes(big) if parent in worker_pids), None)
        time.sleep(0.02)
    expect(victim is not None, "a worker's machofix is rewriting the 1 GiB model")
    if victim is None:
        run.kill()
        return
    pid, worker = victim
    os.kill(worker, signal.SIGKILL)
    gone_by = time.time() + 5
    while time.time() < gone_by and any(p == pid for p, _ in machofix_processes(big)):
        time.sleep(0.01)
    expect(not any(p == pid for p, _ in machofix_processes(big)),
           "its machofix died with the worker killed by SIGKILL (no orphan left writing)")
    stdout, stderr = run.communicate(timeout=600)
    expect(run.returncode == 0, "the run ends well: the task retried on the other worker", stderr)
    expect(not same_tree(reference, out), "the outcome is the local run's, byte for byte", same_tree(reference, out))
    leftovers = [path for path in walk_files(out) if ".machofix" in os.path.basename(path)]
    expect(not leftovers, "no temporary file left in the output", leftovers)
    with open(os.path.join(work, "killed-local.json")) as a, open(os.path.join(work, "killed-dask.json")) as b:
        local_report, dask_report = json.load(a), json.load(b)
    paths = [file["path"] for file in dask_report["files"]]
    expect(len(paths) == len(set(paths)) and comparable(local_report) == comparable(dask_report),
           "each file reported once, the report the local run's")


def check_from_tree_refusals(machofix, store, work):
    """--from-tree takes the files of its tree: another file, or a directory, is refused."""
    outside = local_run(machofix, "prune", f"--from-tree={store}", "-o", os.path.join(work, "x"),
                        os.path.join(work, "blobs", os.listdir(os.path.join(work, "blobs"))[0]))
    expect(outside.returncode == 2 and f"is not inside --from-tree {store}" in outside.stderr,
           "--from-tree: a file outside the tree is refused, naming the tree", outside.stderr)
    directory = local_run(machofix, "prune", f"--from-tree={store}", "--dry-run", os.path.join(store, "models"))
    expect(directory.returncode == 2 and "--from-tree takes the files of the tree" in directory.stderr,
           "--from-tree: a directory of the tree is refused", directory.stderr)


def main():
    python = python_with_distributed()
    if python is None:
        expect(False, "a python3 with distributed (Debian: python3-distributed)")
        return 1
    if os.path.realpath(python) != os.path.realpath(sys.executable):
        os.execv(python, [python, *sys.argv])
    machofix, pte_writer, fixtures, work = [os.path.abspath(a) for a in sys.argv[1:5]]
    if not shutil.which("dask"):
        expect(False, "dask's command line (Debian: python3-distributed)")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    store = os.path.join(work, "store")
    make_store(store, pte_writer, fixtures, work)
    cluster = Cluster(work, machofix)
    try:
        cluster.add_worker()
        cluster.add_worker()
        workers = cluster.wait_for_workers(2)
        with open(cluster.file) as handle:
            address = json.load(handle)["address"]
        expect(address.startswith("tcp://127.0.0.1:") and all(w.startswith("tcp://127.0.0.1:") for w in workers),
               f"a scheduler and two workers, all on 127.0.0.1 ({address}, {workers})")
        check_from_tree_refusals(machofix, store, work)
        check_mirror(cluster, machofix, store, work)
        check_in_place(cluster, machofix, store, work)
        check_check(cluster, machofix, store, work)
        check_killed_worker(cluster, machofix, store, pte_writer, work)
    finally:
        cluster.stop()
    print(f"{len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
