#!/usr/bin/env python3
"""Writes that fail, and a writer killed half-way: the input survives, nothing is left.

    test_faults.py MACHOFIX MAKE_BIG_MACHO WORK_DIR [PTE_WRITER]

For `machofix prune FILE -o OUT` and `machofix prune FILE --in-place`, FILE a dylib
and (with PTE_WRITER) a .pte, whose output starts as a copy of the input made on a
thread of its own while the file is rewritten (core/io/copy_ahead.h, CopyAhead):
  1. no space left on the device (a small tmpfs; needs mount permission, i.e. root:
     skipped with a visible message otherwise);
  2. RLIMIT_FSIZE below the output size, SIGXFSZ ignored, so the write fails with
     EFBIG half-way through the early copy (the output grows as it is copied);
  3. SIGKILL while the output is being written (a large dylib, and a large .pte
     whose copy threads are running, killed as soon as the temporary file appears
     and again once half of it is allocated): the input is
     byte-identical; a temporary file may stay behind, and the next run that writes
     that target in that directory removes it (core/io/file_io.cc names temporaries
     ".<name>.machofix-<pid>-XXXXXX" and removes those of dead pids).
Every failing run must exit 2 with an error naming the file and the cause, leave no
OUT, and leave nothing but the input in the directory.
MACHOFIX_FAULT_MB sets the size of the large input (default 256 MiB).
"""
import hashlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

failures = []
skipped = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL: " + what)
    return condition


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def temporaries(directory):
    return sorted(n for n in os.listdir(directory) if ".machofix-" in n)


def fresh(directory):
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    return directory


def expect_refused(name, result, path, cause, directory, keep, before, out=None):
    """The run failed cleanly: exit 2, the error names the file it could not write
    (OUT with -o, else the input) and the cause, the input is unchanged, no OUT,
    nothing but `keep` in the directory."""
    print("%s: exit %d: %s" % (name, result.returncode, result.stderr.strip().splitlines()[-1:] or ""))
    check(result.returncode == 2, "%s: exit status %d, expected 2" % (name, result.returncode))
    named = out or path
    check(named in result.stderr, "%s: stderr does not name %s: %r" % (name, named, result.stderr))
    check(cause in result.stderr, "%s: stderr does not say %r: %r" % (name, cause, result.stderr))
    check(os.path.exists(path) and sha256(path) == before, "%s: the input changed" % name)
    if out:
        check(not os.path.exists(out), "%s: OUT was written" % name)
    left = sorted(set(os.listdir(directory)) - set(keep))
    check(not left, "%s: left in %s: %s" % (name, directory, left))


# ------------------------------------------------------------------ no space left

def mount_tmpfs(directory, size):
    os.makedirs(directory, exist_ok=True)
    try:
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % size, "tmpfs", directory],
                                capture_output=True, text=True)
    except OSError as error:
        return str(error)
    return None if result.returncode == 0 else (result.stderr.strip() or "mount failed")


def no_space(machofix, small, work):
    ext = os.path.splitext(small)[1]
    mount_point = os.path.join(work, "tmpfs" + ext)
    size = os.path.getsize(small)
    # Room for the input and a little more, not for a second copy.
    why = mount_tmpfs(mount_point, (size + (1 << 20)) // 4096 * 4096)
    if why:
        skipped.append("no space left: cannot mount a tmpfs (%s); needs root" % why)
        print("SKIPPED: no space left on device: cannot mount a tmpfs (%s); needs root" % why)
        return
    try:
        victim = os.path.join(mount_point, "victim" + ext)
        shutil.copyfile(small, victim)
        before = sha256(victim)
        result = subprocess.run([machofix, "prune", victim, "--in-place"], capture_output=True, text=True)
        expect_refused("ENOSPC --in-place " + ext, result, victim, "No space left on device", mount_point,
                       ["victim" + ext], before)

        outside = os.path.join(fresh(os.path.join(work, "enospc-in" + ext)), "input" + ext)
        shutil.copyfile(small, outside)
        before = sha256(outside)
        out = os.path.join(mount_point, "out" + ext)
        result = subprocess.run([machofix, "prune", outside, "-o", out], capture_output=True, text=True)
        expect_refused("ENOSPC -o " + ext, result, outside, "No space left on device", mount_point, ["victim" + ext],
                       before, out)
    finally:
        subprocess.run(["umount", mount_point])


# -------------------------------------------------------------------- RLIMIT_FSIZE

def file_size_limit(machofix, small, work):
    ext = os.path.splitext(small)[1]
    limit = os.path.getsize(small) // 2

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    directory = fresh(os.path.join(work, "fsize" + ext))
    victim = os.path.join(directory, "victim" + ext)
    shutil.copyfile(small, victim)
    before = sha256(victim)
    out = os.path.join(directory, "out" + ext)
    result = subprocess.run([machofix, "prune", victim, "-o", out], capture_output=True, text=True, preexec_fn=limited)
    expect_refused("EFBIG -o " + ext, result, victim, "File too large", directory, ["victim" + ext], before, out)
    result = subprocess.run([machofix, "prune", victim, "--in-place"], capture_output=True, text=True,
                            preexec_fn=limited)
    expect_refused("EFBIG --in-place " + ext, result, victim, "File too large", directory, ["victim" + ext], before)


# ------------------------------------------------------------------------ SIGKILL

def kill_while_writing(machofix, command, directory, prefix, written_fraction, expected_size):
    """Starts `command`, kills it once its temporary file (name starting with
    `prefix`) holds written_fraction of expected_size bytes. Returns the temporary
    file's name, or None if the run ended before it could be killed."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    seen = None
    try:
        while process.poll() is None and time.monotonic() < deadline:
            names = [n for n in os.listdir(directory) if n.startswith(prefix)]
            if names:
                seen = names[0]
                try:
                    # Bytes allocated, not the length: a clone, or an output cut or
                    # extended to its final length, may have a length before its bytes.
                    size = os.stat(os.path.join(directory, seen)).st_blocks * 512
                except FileNotFoundError:
                    size = 0
                if size >= written_fraction * expected_size:
                    process.send_signal(signal.SIGKILL)
                    break
            time.sleep(0.0005)
    finally:
        if process.poll() is None and time.monotonic() >= deadline:
            process.kill()
        process.wait()
    if process.returncode != -signal.SIGKILL:
        return None
    return seen


def killed(machofix, big, work):
    """SIGKILL at 0% and 50% written, in place and with -o, on `big` (a dylib or a
    .pte, each copied by a thread of its own while the file is rewritten)."""
    ext = os.path.splitext(big)[1]
    size = os.path.getsize(big)
    directory = fresh(os.path.join(work, "kill" + ext))
    victim = os.path.join(directory, "victim" + ext)
    shutil.copyfile(big, victim)
    before = sha256(victim)

    for fraction in (0.0, 0.5):
        name = "SIGKILL --in-place at %d%% written (%s)" % (fraction * 100, ext)
        temp = kill_while_writing(machofix, [machofix, "prune", victim, "--in-place"], directory,
                                  ".victim%s.machofix-" % ext, fraction, size)
        if not check(temp is not None, "%s: machofix finished before it could be killed" % name):
            return
        print("%s: killed; left behind: %s" % (name, temporaries(directory)))
        check(sha256(victim) == before, "%s: the input changed" % name)
        check(set(os.listdir(directory)) <= {"victim" + ext, temp}, "%s: unexpected files: %s" % (name, os.listdir(directory)))

    out = os.path.join(directory, "out" + ext)
    name = "SIGKILL -o at 50%% written (%s)" % ext
    temp = kill_while_writing(machofix, [machofix, "prune", victim, "-o", out], directory, ".out%s.machofix-" % ext, 0.5, size)
    if check(temp is not None, "%s: machofix finished before it could be killed" % name):
        print("%s: killed; left behind: %s" % (name, temporaries(directory)))
        check(not os.path.exists(out), "%s: OUT exists" % name)
        check(sha256(victim) == before, "%s: the input changed" % name)

    # The next runs that write these targets remove what the killed ones left.
    result = subprocess.run([machofix, "prune", victim, "-o", out], capture_output=True, text=True)
    check(result.returncode == 0, "rerun -o: exit %d: %s" % (result.returncode, result.stderr))
    check(not [t for t in temporaries(directory) if t.startswith(".out.dylib.")],
          "rerun -o: the killed run's temporary file is still there: %s" % temporaries(directory))
    result = subprocess.run([machofix, "prune", victim, "--in-place"], capture_output=True, text=True)
    check(result.returncode == 0, "rerun --in-place: exit %d: %s" % (result.returncode, result.stderr))
    check(temporaries(directory) == [], "rerun --in-place: temporary files are still there: %s" % temporaries(directory))
    check(sorted(os.listdir(directory)) == ["out" + ext, "victim" + ext], "after the reruns: %s" % os.listdir(directory))
    check(sha256(victim) == sha256(out) != before, "after the reruns: the in-place result differs from the -o one")
    print("reruns: the temporary files of the killed runs were removed; the results are complete")


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    machofix, make_big, work = (os.path.abspath(a) for a in argv[:3])
    fresh(work)
    small = os.path.join(work, "small.dylib")
    big = os.path.join(work, "big.dylib")
    subprocess.run([make_big, small, "8"], check=True)
    subprocess.run([make_big, big, os.environ.get("MACHOFIX_FAULT_MB", "256")], check=True)

    smalls, bigs = [small], [big]
    if len(argv) == 4:
        blobs = os.path.join(work, "blobs")
        subprocess.run([os.path.join(ROOT, "tests", "pte", "make_blobs.sh"), blobs], check=True, capture_output=True)
        small_pte = os.path.join(work, "small.pte")
        subprocess.run([os.path.abspath(argv[3]), "big", blobs, small_pte, str(8 << 20), "4096"], check=True)
        smalls.append(small_pte)
        big_pte = os.path.join(work, "big.pte")
        weights = int(os.environ.get("MACHOFIX_FAULT_MB", "256")) << 20
        subprocess.run([os.path.abspath(argv[3]), "big", blobs, big_pte, str(weights), "4096"], check=True)
        bigs.append(big_pte)
    for each in smalls:
        no_space(machofix, each, work)
        file_size_limit(machofix, each, work)
    for each in bigs:
        killed(machofix, each, work)

    for what in skipped:
        print("SKIPPED: " + what)
    print("write faults: %d failures, %d skipped" % (len(failures), len(skipped)))
    if not failures:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
