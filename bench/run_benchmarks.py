#!/usr/bin/env python3
"""machofix's speed and memory, measured against the tools it must keep up with.

  bench/run_benchmarks.py [--build build] [--quick] [--only PART] [--write BENCHMARKS.md]
  bench/run_benchmarks.py --check BENCHMARKS.md

Writes the whole of BENCHMARKS.md: the text of bench/BENCHMARKS.md.in with the
measurements in its places (--check: the committed file is exactly that). Parts:

 - .pte files of 1 MB .. 4 GB: `machofix prune -o` against `cp` of the same file,
   and machofix's peak RSS (target: cp + 5 ms below 100 MB, 1.2x cp from 100 MB up,
   under 256 MiB at every size);
 - floor: a 105 MB .pte copied with a whole proof and nothing else, three ways
   (bench/copy_floor.cc), and by `machofix prune -o`, against `cp`;
 - Mach-O dylibs of 100 KB .. 200 MB, signed by ld64.lld-16: `machofix prune -o`
   (prune + re-sign + verify + write) against `llvm-install-name-tool-16 -add_rpath`
   (which also rewrites and re-signs; target 1.0x or better), and `machofix verify`
   (every page hashed) against `sha256sum` (target 1.2x or better);
 - a batch of many models with --jobs 1 and --jobs 2;
 - refusals: `machofix prune` of a dylib whose __text was changed after signing, and
   of an identity-signed one (no --adhoc), both refused, and `prune --in-place` of a
   pruned one (nothing to do), against `machofix verify` of the same file (target:
   about 1x: every refusal is decided before any rewriting);
 - cost: prune -o / --in-place / --dry-run, sign -o and edit -o of thin,
   universal and .pte-embedded dylibs of 1 MB .. 500 MB: peak RSS against 64 MiB +
   2x __LINKEDIT, time against llvm-install-name-tool-16 -add_rpath and cp + sha256sum;
 - many: 1,000 small models (the AOTI sample .pte and a 100 KB dylib each), --jobs 1
   and 2, files per second;
 - startup: `machofix --version`, `verify` and `prune -o` of a 100 KB dylib, against
   /bin/true;
 - shared: .pte files of 1 and 4 GiB on XFS (a loop device: needs root) with -o and
   --in-place, against cp, which clones (target: cp + 20 ms);
 - dask: a store of models on a Dask cluster on loopback (`dask scheduler`, two
   `dask worker` processes of one thread: python3-distributed) against the local
   `--jobs 2` run: files and GB per second, the overhead of a task.
--update FILE measures the --only parts and keeps every other value of FILE (the
header's too); each part measured so says when, where and how, below its table.
Measured so on another CPU, the .pte part's table it replaces moves beside it, with its
provenance (the fixed costs differ from one CPU to the next).
Each time is the median of several runs with the input in the page cache. Needs the
LLVM 16 tools and a built tree (scripts/setup.sh). Files go to $BENCH_DIR or /tmp.
"""
import argparse
import collections
import difflib
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
import tamper  # noqa: E402
from dask_cluster import Cluster  # noqa: E402


# The timer (bench/run_timed.cc, built in the build tree's tests/); main() sets it.
TIMER = os.path.join(ROOT, "build", "tests", "run_timed")


def run_once(command, prepare=None, cleanup=None, status=0):
    """Wall time of one run of `command`, which must exit with `status`, and its peak RSS
    (KiB), as the timer measures them: from its fork of the command to wait4, so the
    timer's own start is not in the time (/usr/bin/time, timed from here, added about
    1 ms to every run: a fixed cost that made a fast tool's ratio to a slow one look
    worse than it is), and the peak is wait4's ru_maxrss, GNU time's %M."""
    if prepare:
        prepare()
    # Dirty pages of earlier runs would otherwise be written back during this one.
    os.sync()
    with tempfile.TemporaryFile() as errors, tempfile.NamedTemporaryFile("r") as report:
        result = subprocess.run([TIMER, report.name, *command], stdout=subprocess.DEVNULL, stderr=errors)
        fields = report.read().split()
        errors.seek(0)
        if result.returncode != 0 or len(fields) != 3:
            raise SystemExit(f"{TIMER}: exit {result.returncode}: {errors.read().decode(errors='replace')}")
        nanoseconds, peak, returncode = map(int, fields)
        if returncode != status:
            raise SystemExit(f"{' '.join(command)}: exit {returncode}, not {status}: {errors.read().decode(errors='replace')}")
    if cleanup:
        cleanup()
    return nanoseconds / 1e9, peak


Timing = collections.namedtuple("Timing", "median best peak")


def timed(*jobs, runs):
    """For each (command, prepare, cleanup) job: the median and the best wall time over `runs`
    runs and the largest peak RSS (KiB). The jobs take turns, run by run, so that the
    machine's slow and fast spells (a shared VM) fall on all of them alike; the best
    run shows the cost without them. With an even number of runs, each job comes at an
    odd place in the sequence of runs as often as at an even one: on this VM a run that
    fills gigabytes of page cache is fast and the next one slow, in turn, whatever
    makes the copy (a 4 GB .pte copied 7 times, one after the other, by a bare
    copy_file_range loop: 4.03, 1.26, 3.06, 1.24, 3.33, 1.18, 1.16 s; by machofix:
    1.16, 3.07, 1.23, 3.16, 1.20 s), so with `cp` always first, machofix's runs had
    all fallen on one side (4 GB: 1.86x `cp`, its best runs 1.94x)."""
    samples = [[] for _ in jobs]
    for run in range(runs):
        # With an even number of jobs, every other round goes backwards; with an odd
        # number, each round already starts at the other parity.
        order = list(zip(jobs, samples))
        if len(jobs) % 2 == 0 and run % 2 == 1:
            order.reverse()
        for job, sample in order:
            sample.append(run_once(*job))
    return [Timing(statistics.median(s for s, _ in sample), min(s for s, _ in sample), max(p for _, p in sample))
            for sample in samples]


def removing(path):
    return lambda: os.path.exists(path) and os.unlink(path)


def warm(path):
    with open(path, "rb") as handle:
        while handle.read(1 << 24):
            pass


def machine():
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    memory = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal")) >> 20
    return f"{model}, {os.cpu_count()} cores, {memory} GiB RAM, Linux {platform.release()}"


def filesystem(path):
    return subprocess.run(["df", "--output=fstype", path], capture_output=True, text=True).stdout.split()[-1]


def big_pte(pte_writer, work, size_mb):
    """A .pte of about size_mb MiB (tests/pte's blobs, weights after them), in the page
    cache: the file the .pte parts time."""
    blobs = os.path.join(work, "blobs")
    if not os.path.isdir(blobs):
        subprocess.run([os.path.join(ROOT, "tests", "pte", "make_blobs.sh"), blobs], check=True, capture_output=True)
    model = os.path.join(work, f"model-{size_mb}.pte")
    subprocess.run([pte_writer, "big", blobs, model, str(size_mb << 20), "4096"], check=True)
    warm(model)
    return model


def bench_pte(machofix, pte_writer, work, sizes_mb, runs):
    rows = []
    for size in sizes_mb:
        model = big_pte(pte_writer, work, size)
        copy = os.path.join(work, "copy.pte")
        out = os.path.join(work, "out.pte")
        # Each output goes as soon as it is timed. Kept until the next run, the two
        # outputs of 1 GiB and more made either tool's copy several times slower
        # at random (1 GiB: 0.4 s or 2-4 s, cp and machofix alike): on this VM, page
        # cache pages freed a while ago are slow to use again.
        cp_time, ours = timed((["cp", model, copy], None, removing(copy)),
                              ([machofix, "prune", "-q", model, "-o", out], None, removing(out)), runs=runs)
        rows.append((f"{os.path.getsize(model) / 1e6:,.0f} MB", cp_time.median, ours.median,
                     1000 * (ours.median - cp_time.median), ours.median / cp_time.median, ours.best / cp_time.best,
                     ours.peak / 1024))
        for path in (model, copy, out):
            if os.path.exists(path):
                os.unlink(path)
    return rows


def bench_floor(machofix, pte_writer, work, size_mb, runs):
    """A copy with a whole proof and nothing else (bench/copy_floor.cc), three ways, and
    `machofix prune -o`, against `cp`, on one .pte: what the proof itself costs."""
    floor = os.path.join(os.path.dirname(TIMER), "copy_floor")
    model = big_pte(pte_writer, work, size_mb)
    ways = [("`cp`", ["cp"]),
            ("one thread: `pread`, `pwrite`, `pread` back, `memcmp`", [floor, "read-once-1"]),
            ("two threads doing the same, 1 MiB parts each", [floor, "read-once-2"]),
            ("`copy_file_range` on one thread, two threads comparing behind it", [floor, "kernel-copy"]),
            ("`machofix prune -o`", None)]
    jobs = []
    for index, (_, command) in enumerate(ways):
        out = os.path.join(work, f"floor-{index}.pte")
        argv = command + [model, out] if command else [machofix, "prune", "-q", model, "-o", out]
        jobs.append((argv, None, removing(out)))
    times = timed(*jobs, runs=runs)
    size = f"{os.path.getsize(model) / 1e6:,.0f} MB"
    rows = [(name, size, t.median, t.median / times[0].median, t.best / times[0].best) for (name, _), t in zip(ways, times)]
    os.unlink(model)
    return rows


def bench_macho(machofix, work, sizes_mb, runs):
    rows = []
    for size in sizes_mb:
        dylib = os.path.join(work, f"big-{size}k.dylib")
        subprocess.run([os.path.join(ROOT, "bench", "make_big_dylib.sh"), dylib, str(size)], check=True)
        warm(dylib)
        out = os.path.join(work, "out.dylib")
        victim = os.path.join(work, "victim.dylib")
        # As for .pte: outputs are removed as soon as they are timed.
        ours, theirs = timed(([machofix, "prune", "-q", dylib, "-o", out], None, removing(out)),
                             (["llvm-install-name-tool-16", "-add_rpath", "@loader_path/x", victim],
                              lambda: shutil.copyfile(dylib, victim), removing(victim)), runs=runs)
        verify, sha = timed(([machofix, "verify", "-q", dylib],), (["sha256sum", dylib],), runs=runs)
        rows.append((f"{os.path.getsize(dylib) / 1e6:,.1f} MB", ours.median, theirs.median, ours.median / theirs.median,
                     ours.best / theirs.best, verify.median, sha.median, verify.median / sha.median,
                     verify.best / sha.best))
        for path in (dylib, out, victim):
            if os.path.exists(path):
                os.unlink(path)
    return rows


def bench_refusals(machofix, work, sizes_kib, runs):
    rows = []
    for size in sizes_kib:
        dylib = os.path.join(work, f"big-{size}k.dylib")
        subprocess.run([os.path.join(ROOT, "bench", "make_big_dylib.sh"), dylib, str(size)], check=True)
        pruned = os.path.join(work, "pruned.dylib")  # prune has nothing left to do in it
        subprocess.run([machofix, "prune", "-q", dylib, "-o", pruned], check=True)
        with open(dylib, "rb") as handle:
            data = bytearray(handle.read())
        tamper.tamper_text(data, "arm64")
        tampered = os.path.join(work, "tampered.dylib")
        with open(tampered, "wb") as handle:
            handle.write(data)
        identity = os.path.join(work, "identity.dylib")
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "support", "identity_sign.py"), dylib, identity],
                       check=True)
        os.unlink(dylib)
        for path in (tampered, identity, pruned):
            warm(path)
        out = os.path.join(work, "out.dylib")
        verify_tampered, refuse_tampered, verify_identity, refuse_identity, verify_pruned, nothing = timed(
            ([machofix, "verify", "-q", tampered], None, None, 1),
            ([machofix, "prune", "-q", tampered, "-o", out], None, None, 2),
            ([machofix, "verify", "-q", identity], None, None, 0),
            ([machofix, "prune", "-q", identity, "-o", out], None, None, 2),
            ([machofix, "verify", "-q", pruned], None, None, 0),
            ([machofix, "prune", "-q", pruned, "--in-place"], None, None, 0), runs=runs)
        rows.append((f"{os.path.getsize(tampered) / 1e6:,.1f} MB", verify_tampered.median, refuse_tampered.median,
                     refuse_tampered.median / verify_tampered.median, refuse_tampered.best / verify_tampered.best,
                     verify_identity.median, refuse_identity.median, refuse_identity.median / verify_identity.median,
                     refuse_identity.best / verify_identity.best, verify_pruned.median, nothing.median,
                     nothing.median / verify_pruned.median, nothing.best / verify_pruned.best))
        for path in (tampered, identity, pruned, out):
            if os.path.exists(path):
                os.unlink(path)
    return rows


def model_tree(pte_writer, work, name, count, dylib_kib):
    """A tree of `count` model directories, each the AOTI sample .pte and a dylib of
    about `dylib_kib` KiB: the input of the batch parts."""
    tree, sample = os.path.join(work, name), os.path.join(work, name + "-sample")
    subprocess.run([os.path.join(ROOT, "samples", "aoti_metal", "build.sh"), sample, pte_writer], check=True,
                   capture_output=True)
    dylib = os.path.join(work, name + ".dylib")
    subprocess.run([os.path.join(ROOT, "bench", "make_big_dylib.sh"), dylib, str(dylib_kib)], check=True)
    for index in range(count):
        directory = os.path.join(tree, f"model{index:04d}")
        os.makedirs(directory)
        shutil.copy(os.path.join(sample, "metal_model.pte"), directory)
        shutil.copy(dylib, os.path.join(directory, "kernels.dylib"))
    return tree


def bench_batch(machofix, pte_writer, work, count, runs):
    tree = model_tree(pte_writer, work, "batch", count, 8 << 10)
    rows = []
    out = os.path.join(work, "batch-out")
    for jobs in (1, 2):
        [batch_run] = timed(([machofix, "prune", "-q", tree, "-o", out, "--jobs", str(jobs)],
                                   lambda: shutil.rmtree(out, ignore_errors=True)), runs=runs)
        rows.append((jobs, 2 * count, batch_run.median, batch_run.best, batch_run.peak / 1024))
    return rows


def bench_startup(machofix, work, runs):
    """What a run costs before its file: the process alone, verify and prune of a small dylib."""
    dylib = os.path.join(work, "small.dylib")
    subprocess.run([os.path.join(ROOT, "bench", "make_big_dylib.sh"), dylib, "100"], check=True)
    warm(dylib)
    out = os.path.join(work, "small-out.dylib")
    floor, version, verify, prune = timed((["/bin/true"],), ([machofix, "--version"],),
                                          ([machofix, "verify", "-q", dylib],),
                                          ([machofix, "prune", "-q", dylib, "-o", out], None, removing(out)),
                                          runs=max(runs, 21))
    return [(what, timing.median * 1000, timing.best * 1000, timing.peak / 1024)
            for what, timing in (("`/bin/true`", floor), ("`machofix --version`", version),
                                 ("`machofix verify` (100 KB dylib)", verify),
                                 ("`machofix prune -o` (100 KB dylib)", prune))]


def mount_xfs(work, size_gib):
    """An XFS file system (reflink=1) on a loop device: its mount point, or None when
    this machine cannot (mkfs.xfs missing, no permission to mount)."""
    image, mount_point = os.path.join(work, "xfs.img"), os.path.join(work, "xfs")
    os.makedirs(mount_point)
    with open(image, "wb") as handle:
        handle.truncate(size_gib << 30)
    if not shutil.which("mkfs.xfs") or subprocess.run(["mkfs.xfs", "-q", "-f", "-m", "reflink=1", image]).returncode:
        return None
    if subprocess.run(["mount", "-o", "loop", image, mount_point], capture_output=True).returncode:
        return None
    return mount_point


def bench_shared(machofix, pte_writer, work, sizes_mb, runs):
    """.pte files on XFS: prune -o and --in-place against cp, which clones (reflink)."""
    xfs = mount_xfs(work, 2 * max(sizes_mb) // 1024 + 2)
    if xfs is None:
        return None
    rows = []
    try:
        blobs = os.path.join(work, "blobs-xfs")
        subprocess.run([os.path.join(ROOT, "tests", "pte", "make_blobs.sh"), blobs], check=True, capture_output=True)
        for size in sizes_mb:
            model = os.path.join(xfs, f"model-{size}.pte")
            subprocess.run([pte_writer, "big", blobs, model, str(size << 20), "4096"], check=True)
            copy, out, victim = (os.path.join(xfs, name) for name in ("copy.pte", "out.pte", "victim.pte"))
            cp_time, to_output, in_place = timed(
                (["cp", model, copy], None, removing(copy)),
                ([machofix, "prune", "-q", model, "-o", out], None, removing(out)),
                ([machofix, "prune", "-q", victim, "--in-place"],
                 lambda: subprocess.run(["cp", "--reflink=always", model, victim], check=True), removing(victim)),
                runs=runs)
            rows.append((f"{os.path.getsize(model) / 1e6:,.0f} MB", cp_time.median, to_output.median,
                         (to_output.median - cp_time.median) * 1000, in_place.median,
                         (in_place.median - cp_time.median) * 1000, max(to_output.peak, in_place.peak) / 1024))
            os.unlink(model)
    finally:
        subprocess.run(["umount", xfs])
    return rows


def linkedit_bytes(path):
    """The largest __LINKEDIT (file size) among the file's slices, as llvm-otool-16 reads it."""
    listing = subprocess.run(["llvm-otool-16", "-l", path], capture_output=True, text=True, check=True).stdout
    sizes = [int(m) for m in re.findall(r"segname __LINKEDIT\n(?:.*\n)*?\s+filesize (\d+)", listing)]
    return max(sizes)


def cost_inputs(pte_writer, work, size_kib):
    """(what, path, linkedit bytes) of a thin dylib, a universal one (x86_64 + arm64,
    half the size each) and a .pte holding the thin one as its AOTI blob."""
    thin = os.path.join(work, f"cost-{size_kib}k.dylib")
    subprocess.run([os.path.join(ROOT, "bench", "make_big_dylib.sh"), thin, str(size_kib)], check=True)
    halves = [os.path.join(work, f"cost-half-{arch}.dylib") for arch in ("x86_64", "arm64")]
    for half, arch in zip(halves, ("x86_64", "arm64")):
        subprocess.run([os.path.join(ROOT, "bench", "make_big_dylib.sh"), half, str(size_kib // 2), arch], check=True)
    universal = os.path.join(work, f"cost-{size_kib}k-universal.dylib")
    subprocess.run(["llvm-lipo-16", "-create", *halves, "-output", universal], check=True)
    for half in halves:
        os.unlink(half)
    pte = os.path.join(work, f"cost-{size_kib}k.pte")
    subprocess.run([pte_writer, "wrap", thin, pte], check=True, capture_output=True)
    return [("thin", thin, linkedit_bytes(thin)), ("universal", universal, linkedit_bytes(universal)),
            (".pte", pte, linkedit_bytes(thin))]


# The rewrites the cost targets bound (peak RSS, time), in every mode; OUT and VICTIM are replaced by paths.
COST_COMMANDS = [
    ("prune -o", ["prune", "-q", "IN", "-o", "OUT"]),
    ("prune --in-place", ["prune", "-q", "VICTIM", "--in-place"]),
    ("prune --dry-run", ["prune", "-q", "IN", "--dry-run"]),
    ("sign -o", ["sign", "-q", "IN", "-o", "OUT"]),
    ("edit --add-rpath -o", ["edit", "-q", "IN", "-o", "OUT", "--add-rpath", "@loader_path/x"]),
]


def bench_cost(machofix, pte_writer, work, sizes_kib, runs):
    """Peak memory and time of each rewrite against 64 MiB + 2x __LINKEDIT, against
    llvm-install-name-tool-16 -add_rpath (the comparable rewrite) and cp + sha256sum."""
    rows = []
    for size in sizes_kib:
        for container, source, linkedit in cost_inputs(pte_writer, work, size):
            warm(source)
            out, victim = os.path.join(work, "cost-out"), os.path.join(work, "cost-victim")
            copy_in = lambda: shutil.copyfile(source, victim)  # noqa: E731
            jobs = [([machofix] + [{"IN": source, "OUT": out, "VICTIM": victim}.get(a, a) for a in arguments],
                     copy_in if "VICTIM" in arguments else None, removing(victim if "VICTIM" in arguments else out))
                    for _, arguments in COST_COMMANDS]
            # llvm-install-name-tool cannot read a .pte: its row is the thin file's.
            if container != ".pte":
                jobs.append((["llvm-install-name-tool-16", "-add_rpath", "@loader_path/x", victim], copy_in, removing(victim)))
            jobs += [(["cp", source, out], None, removing(out)), (["sha256sum", source],)]
            *ours, cp_time, sha = timed(*jobs, runs=runs)
            if container != ".pte":
                *ours, tool = ours
            target = 64 + 2 * linkedit / (1 << 20)
            reference = cp_time.median + sha.median
            label = f"{os.path.getsize(source) / 1e6:,.0f} MB {container}"
            for (what, _), timing in zip(COST_COMMANDS, ours):
                versus_tool = timing.median / tool.median if container != ".pte" else None
                rows.append((label, what, timing.median, timing.peak / 1024, target, versus_tool,
                             timing.median / reference))
            if container != ".pte":
                rows.append((label, "llvm-install-name-tool-16 -add_rpath", tool.median, tool.peak / 1024, None, 1.0,
                             tool.median / reference))
            rows.append((label, "cp + sha256sum", reference, max(cp_time.peak, sha.peak) / 1024, None, None, 1.0))
            os.unlink(source)
    return rows


def bench_dask(machofix, pte_writer, work, count, runs):
    """A store of `count` model directories (the AOTI sample .pte and an 8 MiB dylib
    each) on two Dask workers against the local --jobs 2 run."""
    if not shutil.which("dask"):
        return None
    tree = model_tree(pte_writer, work, "dask", count, 8 << 10)
    files = 2 * count
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(tree) for n in names)
    cluster = Cluster(work, machofix)
    out = os.path.join(work, "dask-out")
    clear = lambda: shutil.rmtree(out, ignore_errors=True)  # noqa: E731
    try:
        cluster.add_worker()
        cluster.add_worker()
        cluster.wait_for_workers(2)
        local, on_dask = timed(
            ([machofix, "prune", "-q", tree, "-o", out, "--jobs", "2"], clear),
            (["env", f"PYTHONPATH={cluster.env['PYTHONPATH']}", f"MACHOFIX_EXECUTABLE={machofix}", "/usr/bin/python3",
              "-m", "machofix.dask", "--scheduler-file", cluster.file, "--no-progress", "prune", "-o", out, tree],
             clear), runs=runs)
    finally:
        cluster.stop()
    clear()
    shutil.rmtree(tree)
    # A task's overhead: what each of the two lanes spent beyond the local run, per file.
    overhead_ms = (on_dask.median - local.median) * 2 / files * 1000
    return [("local `--jobs 2`", files, size / 1e9, local.median, files / local.median, size / 1e9 / local.median, None),
            ("Dask: 2 workers, 1 thread each", files, size / 1e9, on_dask.median, files / on_dask.median,
             size / 1e9 / on_dask.median, overhead_ms)]


def bench_many(machofix, pte_writer, work, count, runs):
    """Many small models: the AOTI sample .pte and a 100 KB dylib each, files per second."""
    tree = model_tree(pte_writer, work, "many", count, 100)
    rows, out, single = [], os.path.join(work, "many-out"), None
    kept = os.path.join(work, "many-kept")
    os.makedirs(kept)
    # Each run's output tree is moved aside, not deleted, until the part is done: on
    # ext4 without a journal (this VM's disk) a new inode is not taken from those freed
    # in the last minutes, and creating files right after deleting thousands scanned
    # past every one of them (0.7 ms a file), more each run; the --jobs 2 runs, which
    # came after the --jobs 1 runs, measured that instead of machofix.
    set_aside = lambda: os.path.exists(out) and os.rename(out, os.path.join(kept, str(len(os.listdir(kept)))))  # noqa: E731
    for jobs in (1, 2):
        [run] = timed(([machofix, "prune", "-q", tree, "-o", out, "--jobs", str(jobs)], set_aside), runs=runs)
        files_per_second = 2 * count / run.median
        single = single or files_per_second
        rows.append((jobs, 2 * count, run.median, files_per_second, files_per_second / single, run.peak / 1024))
    set_aside()
    shutil.rmtree(kept)
    shutil.rmtree(tree)
    return rows


# What each part's table looks like: its header and the format of each column.
TABLES = {
    "pte": (["file", "cp s", "machofix s", "over cp ms", "ratio", "ratio of best runs", "peak RSS MiB"],
            ["{}", "{:.3f}", "{:.3f}", "{:+.1f}", "{:.2f}x", "{:.2f}x", "{:.0f}"]),
    "floor": (["copy and whole proof", "file", "s", "over cp", "best runs over cp"],
              ["{}", "{}", "{:.4f}", "{:.2f}x", "{:.2f}x"]),
    "macho": (["dylib", "prune s", "install-name-tool s", "ratio", "best", "verify s", "sha256sum s", "ratio", "best"],
              ["{}", "{:.3f}", "{:.3f}", "{:.2f}x", "{:.2f}x", "{:.3f}", "{:.3f}", "{:.2f}x", "{:.2f}x"]),
    "startup": (["run", "median ms", "best ms", "peak RSS MiB"], ["{}", "{:.1f}", "{:.1f}", "{:.0f}"]),
    "shared": (["file", "cp (reflink) s", "prune -o s", "over cp ms", "prune --in-place s", "over cp ms", "peak RSS MiB"],
               ["{}", "{:.3f}", "{:.3f}", "{:+.0f}", "{:.3f}", "{:+.0f}", "{:.0f}"]),
    "batch": (["--jobs", "files", "seconds", "best", "peak RSS MiB"], ["{}", "{}", "{:.2f}", "{:.2f}", "{:.0f}"]),
    "refusals": (["dylib", "verify (changed __text) s", "prune refused s", "ratio", "best", "verify (identity) s",
                  "prune refused s", "ratio", "best", "verify (pruned) s", "prune, nothing to do s", "ratio", "best"],
                 ["{}", "{:.3f}", "{:.3f}", "{:.2f}x", "{:.2f}x", "{:.3f}", "{:.3f}", "{:.2f}x", "{:.2f}x", "{:.3f}",
                  "{:.3f}", "{:.2f}x", "{:.2f}x"]),
    "cost": (["input", "command", "s", "peak RSS MiB", "RSS target MiB", "vs install-name-tool", "vs cp + sha256sum"],
             ["{}", "`{}`", "{:.3f}", "{:.0f}", "{:.0f}", "{:.2f}x", "{:.2f}x"]),
    "many": (["--jobs", "files", "seconds", "files/s", "scaling", "peak RSS MiB"],
             ["{}", "{}", "{:.2f}", "{:.0f}", "{:.2f}x", "{:.0f}"]),
    "dask": (["run", "files", "GB", "seconds", "files/s", "GB/s", "overhead ms/task"],
             ["{}", "{}", "{:.2f}", "{:.2f}", "{:.0f}", "{:.2f}", "{:+.1f}"]),
}
NOT_MEASURED = "(not measured in the last run)"
# Parts whose table a run on another CPU keeps beside its own (their fixed costs
# differ from one CPU to the next), in the template's {{PART_other_cpu}}.
KEPT_PER_CPU = ["pte"]
OTHER_CPU = "(measured on one CPU only)"
TEMPLATE = os.path.join(ROOT, "bench", "BENCHMARKS.md.in")


def header_line(part):
    return "| " + " | ".join(TABLES[part][0]) + " |"


def table(part, rows):
    header, formats = TABLES[part]
    lines = [header_line(part), "|" + "---|" * len(header)]
    for row in rows:
        lines.append("| " + " | ".join("-" if v is None else f.format(v) for f, v in zip(formats, row)) + " |")
    return "\n".join(lines)


def render(values):
    with open(TEMPLATE) as handle:
        text = handle.read()
    for key, value in values.items():
        text = text.replace("{{%s}}" % key, value)
    return text


def document_values(path):
    """The values the script filled into the template to make `path`, or None."""
    with open(TEMPLATE) as handle:
        template = handle.read()
    with open(path) as handle:
        document = handle.read()
    pattern = "".join(re.escape(piece) if i % 2 == 0 else "(?P<%s>.*?)" % piece
                      for i, piece in enumerate(re.split(r"\{\{(\w+)\}\}", template)))
    match = re.fullmatch(pattern, document, re.DOTALL)
    return match.groupdict() if match else None


def cpu_of(machine):
    """The CPU model of a machine() line: what comes before ", N cores"."""
    match = re.match(r"(.*?), \d+ cores", machine.strip())
    return match.group(1) if match else machine.strip()


def kept_other_cpu(part, kept, machine):
    """What the document keeps in PART_other_cpu once PART is measured on `machine`: the
    table it held, with where it was measured, when that was another CPU; else what
    it kept there before."""
    table_text = kept[part]
    stated = re.search(r"\n\nThis part: .*?, on (.*?); files on (.*)\Z", table_text, re.DOTALL)
    measured_on = stated.group(1) if stated else kept["machine"]
    if table_text == NOT_MEASURED or cpu_of(measured_on) == cpu_of(machine):
        return kept[f"{part}_other_cpu"]
    return table_text if stated else table_text + provenance(kept)


def provenance(values):
    """The line an --update run writes below each part it measured."""
    return (f"\n\nThis part: {values['command']}, {values['date']}, on {values['machine']}; files on "
            f"{values['filesystem']}; load average {values['load']}.")


def check_document(path):
    """BENCHMARKS.md is the template with measurements in its places: nothing edited by
    hand, every table with the header the script writes."""
    with open(TEMPLATE) as handle:
        template = handle.read()
    with open(path) as handle:
        document = handle.read()
    keys = re.findall(r"\{\{(\w+)\}\}", template)
    pattern = "".join(re.escape(piece) if i % 2 == 0 else "(?P<%s>.*?)" % piece
                      for i, piece in enumerate(re.split(r"\{\{(\w+)\}\}", template)))
    match = re.fullmatch(pattern, document, re.DOTALL)
    if not match:
        template_lines, document_lines = template.splitlines(), document.splitlines()
        print(f"{path} does not match {TEMPLATE} (edited by hand?): rewrite it with bench/run_benchmarks.py --write")
        for line in difflib.unified_diff(template_lines, document_lines, "template", path, lineterm="", n=1):
            print("  " + line)
        return 1
    problems = []
    for key in keys:
        value = match.group(key)
        if key in TABLES and value != NOT_MEASURED and value.splitlines()[:1] != [header_line(key)]:
            problems.append(f"the {key} table's header is not the one the script writes: {value.splitlines()[:1]}")
    for problem in problems:
        print(f"{path}: {problem}")
    print(f"{path}: {'matches' if not problems else 'does not match'} its template ({len(keys)} measured parts)")
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--quick", action="store_true", help="small sizes, 3 runs: a smoke test of the script")
    parser.add_argument("--write", help="write the whole document (bench/BENCHMARKS.md.in filled in) to this file")
    parser.add_argument("--check", help="check that this file is the template filled in by the script, then exit")
    parser.add_argument("--update", help="measure the --only parts into this document, keeping its other values")
    parser.add_argument("--only", choices=list(TABLES), action="append",
                        help="run only these parts (repeatable); all by default")
    parser.add_argument("--runs", type=int, help="runs per figure (median); 6 by default (even: see timed()), 3 with --quick")
    arguments = parser.parse_args()
    if arguments.check:
        return check_document(arguments.check)
    parts = set(arguments.only or list(TABLES))
    machofix = os.path.join(arguments.build, "machofix")
    global TIMER
    TIMER = os.path.join(arguments.build, "tests", "run_timed")
    if not os.access(TIMER, os.X_OK):
        raise SystemExit(f"no timer at {TIMER}: build it (cmake --build {arguments.build} --target run_timed)")
    pte_writer = os.path.join(arguments.build, "tests", "pte_writer")
    runs = arguments.runs or (3 if arguments.quick else 6)  # even: see timed()
    pte_sizes = [10, 100] if arguments.quick else [1, 10, 50, 100, 1024, 4096]
    macho_sizes = [100, 1024, 10240] if arguments.quick else [100, 1024, 10240, 51200, 204800]  # KiB
    refusal_sizes = [10240] if arguments.quick else [10240, 204800]  # KiB
    work = tempfile.mkdtemp(prefix="machofix-bench-", dir=os.environ.get("BENCH_DIR"))
    load_before = os.getloadavg()[0]
    measure = {
        "pte": lambda: bench_pte(machofix, pte_writer, work, pte_sizes, runs),
        "floor": lambda: bench_floor(machofix, pte_writer, work, 100, runs),
        "macho": lambda: bench_macho(machofix, work, macho_sizes, runs),
        "startup": lambda: bench_startup(machofix, work, runs),
        "shared": lambda: bench_shared(machofix, pte_writer, work, [100] if arguments.quick else [1024, 4096], runs),
        "batch": lambda: bench_batch(machofix, pte_writer, work, 20 if arguments.quick else 100, runs),
        "refusals": lambda: bench_refusals(machofix, work, refusal_sizes, runs),
        "cost": lambda: bench_cost(machofix, pte_writer, work, [1024, 10240] if arguments.quick else
                                   [1024, 10240, 51200, 204800, 512000], runs),
        "many": lambda: bench_many(machofix, pte_writer, work, 50 if arguments.quick else 1000, runs),
        "dask": lambda: bench_dask(machofix, pte_writer, work, 20 if arguments.quick else 100, runs),
    }
    kept = document_values(arguments.update) if arguments.update else None
    if arguments.update and kept is None:
        raise SystemExit(f"{arguments.update} is not the template filled in: rewrite it with --write")
    values = {}
    try:
        for part in TABLES:
            rows = measure[part]() if part in parts else None
            values[part] = table(part, rows) if rows is not None else NOT_MEASURED
            print(f"## {part}\n{values[part]}\n", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    values.update({
        "command": "`bench/run_benchmarks.py " + " ".join(sys.argv[1:]) + "`" + (f" at commit {commit}" if commit else ""),
        "date": time.strftime("%Y-%m-%d"),
        "load": f"{load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end",
        "machine": machine(),
        "filesystem": filesystem(os.environ.get("BENCH_DIR") or tempfile.gettempdir()),
    })
    if kept is not None:
        updated = {key: (values[key] + provenance(values) if key in parts else kept[key]) for key in kept}
        for part in KEPT_PER_CPU:
            updated[f"{part}_other_cpu"] = kept_other_cpu(part, kept, values["machine"]) if part in parts else \
                kept[f"{part}_other_cpu"]
        values = updated
    else:
        values.update({f"{part}_other_cpu": OTHER_CPU for part in KEPT_PER_CPU})
    target = arguments.write or arguments.update
    if target:
        with open(target, "w") as handle:
            handle.write(render(values))
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
