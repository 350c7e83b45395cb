#!/usr/bin/env python3
"""Shared extents: on XFS (reflink=1) a .pte's output shares every unchanged block with
its input, and that sharing, read from the file system's extent map, is the proof of
those bytes; elsewhere nothing changes.

On an XFS image mounted on a loop device (needs root and permission to mount: a skip
naming the cause otherwise; xfsprogs is installed by scripts/setup.sh):
 - prune -o and --in-place of a .pte with 64 MiB of weights: exit 0, every copied byte
   proven shared (JSON bytes_shared), the weights' blocks flagged shared with the
   input's (FIEMAP read here, independently), the output byte-identical to the one
   written on this build's own file system (where it is copied and compared);
 - input on XFS, output on another file system: copied and compared (bytes_shared 0),
   the same bytes;
 - a copied block changed behind the checker's back (machofix_spoiled copy@...) on
   XFS: the extent map no longer shows it shared, the bytes are compared, the file is
   refused (exit 2, nothing written, the input untouched).
Usage: test_shared_extents.py MACHOFIX MACHOFIX_SPOILED PTE_WRITER WORK_DIR
"""
import array
import fcntl
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 0x1
FIEMAP_EXTENT_LAST, FIEMAP_EXTENT_SHARED = 0x1, 0x2000
WEIGHTS = 64 << 20

failures = []


def expect(condition, what, result=None):
    if not condition and result is not None:
        what += f"\n    exit {result.returncode}; stdout: {result.stdout[-400:]}; stderr: {result.stderr[-400:]}"
    print(("ok   " if condition else "FAIL ") + what.splitlines()[0])
    if not condition:
        failures.append(what)


def run(*args, env=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, timeout=300)


def extents(path, start, length):
    """(logical, physical, length, flags) of every extent of [start, start + length)."""
    found = []
    with open(path, "rb") as handle:
        position, end = start, start + length
        while position < end:
            count = 64
            request = bytearray(struct.pack("=QQIIII", position, end - position, FIEMAP_FLAG_SYNC, 0, count, 0))
            request += bytes(56 * count)
            buffer = array.array("B", request)
            fcntl.ioctl(handle.fileno(), FS_IOC_FIEMAP, buffer, True)
            mapped = struct.unpack_from("=I", buffer, 20)[0]
            if mapped == 0:
                break
            for i in range(mapped):
                logical, physical, size, _, _, flags = struct.unpack_from("=QQQQQI", buffer, 32 + 56 * i)
                found.append((logical, physical, size, flags))
            last = found[-1]
            if last[3] & FIEMAP_EXTENT_LAST:
                break
            position = last[0] + last[2]
    return found


def physical_map(path, start, length):
    """Byte offset -> physical address, one entry per 64 KiB step of the range."""
    mapping = {}
    table = extents(path, start, length)
    for offset in range(start, start + length, 64 << 10):
        for logical, physical, size, flags in table:
            if logical <= offset < logical + size:
                mapping[offset] = (physical + offset - logical, bool(flags & FIEMAP_EXTENT_SHARED))
    return mapping


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def pruned(machofix, source, *mode):
    result = run(machofix, "prune", source, *mode, "--json", "-")
    shared = json.loads(result.stdout)["files"][0]["pte"]["bytes_shared"] if result.returncode == 0 else None
    return result, shared


def mount_xfs(work):
    """Mounts a fresh XFS image; returns (mount point, None) or (None, why it cannot)."""
    image, mount_point = os.path.join(work, "xfs.img"), os.path.join(work, "xfs")
    os.makedirs(mount_point)
    with open(image, "wb") as handle:
        handle.truncate(1 << 30)
    if not shutil.which("mkfs.xfs"):
        return None, "mkfs.xfs is missing (xfsprogs: scripts/setup.sh installs it)"
    subprocess.run(["mkfs.xfs", "-q", "-f", "-m", "reflink=1", image], check=True)
    result = subprocess.run(["mount", "-o", "loop", image, mount_point], capture_output=True, text=True)
    if result.returncode != 0:
        return None, "cannot mount a loop device: " + (result.stderr.strip() or "mount failed")
    return mount_point, None


def weights_range(machofix, pte):
    report = json.loads(run(machofix, "inspect", pte, "--json", "-").stdout)
    bulk = max(report["files"][0]["pte"]["named_data"], key=lambda named: named["size"])
    return bulk["offset"], bulk["size"]


def main():
    machofix, spoiled, pte_writer, work = [os.path.abspath(a) for a in sys.argv[1:5]]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    xfs, why = mount_xfs(work)
    if xfs is None:
        if "mkfs.xfs is missing" in why:
            print("FAIL: " + why)
            return 1
        print("SKIPPED: shared extents on XFS: " + why)
        return 77
    try:
        check(machofix, spoiled, pte_writer, work, xfs)
    finally:
        subprocess.run(["umount", xfs])
    for failure in failures:
        print("FAIL:", failure)
    print(f"shared extents: {len(failures)} failures")
    return 1 if failures else 0


def check(machofix, spoiled, pte_writer, work, xfs):
    blobs = os.path.join(work, "blobs")
    subprocess.run([os.path.join(ROOT, "tests", "pte", "make_blobs.sh"), blobs], check=True, capture_output=True)
    source = os.path.join(xfs, "model.pte")
    subprocess.run([pte_writer, "big", blobs, source, str(WEIGHTS), "4096"], check=True)
    before = sha256(source)
    size = os.path.getsize(source)
    weights_at, weights_size = weights_range(machofix, source)

    # The reference: written on this build's file system, copied and compared.
    reference = os.path.join(work, "reference.pte")
    result, shared = pruned(machofix, source, "-o", reference)
    expect(result.returncode == 0, "input on XFS, output elsewhere: pruned", result)
    kind = subprocess.run(["stat", "-f", "-c", "%T", work], capture_output=True, text=True).stdout.strip()
    if kind in ("ext2/ext3", "tmpfs", "overlayfs"):
        expect(shared == 0, f"across file systems ({kind}): nothing shared, every byte compared (bytes_shared {shared})")

    output = os.path.join(xfs, "out.pte")
    result, shared = pruned(machofix, source, "-o", output)
    expect(result.returncode == 0 and shared == size, f"-o on XFS: every copied byte proven shared ({shared} of {size})",
           result)
    expect(sha256(output) == sha256(reference), "-o on XFS: byte-identical to the output copied and compared elsewhere")
    expect(sha256(source) == before, "-o on XFS: the input untouched")
    inputs, outputs = physical_map(source, weights_at, weights_size), physical_map(output, weights_at, weights_size)
    expect(outputs and all(shared_flag for _, shared_flag in outputs.values()) and
           all(outputs.get(offset, (None,))[0] == physical for offset, (physical, _) in inputs.items()),
           "-o on XFS: the weights' blocks are the input's, flagged shared (FIEMAP read by this test)")
    os.unlink(output)

    victim = os.path.join(xfs, "victim.pte")
    shutil.copyfile(source, victim)
    inode = os.stat(victim).st_ino
    result, shared = pruned(machofix, victim, "--in-place")
    expect(result.returncode == 0 and shared == size and os.stat(victim).st_ino != inode,
           f"--in-place on XFS: a new inode, every copied byte proven shared ({shared})", result)
    expect(sha256(victim) == sha256(reference), "--in-place on XFS: byte-identical to the reference")

    # A copied block changed after the clone: no longer shared, so compared, so refused.
    directory = os.path.join(xfs, "spoiled")
    os.makedirs(directory)
    target = os.path.join(directory, "model.pte")
    shutil.copyfile(source, target)
    env = dict(os.environ, MACHOFIX_SPOIL=f"copy@{weights_at + weights_size // 2}")
    for mode in (["-o", os.path.join(directory, "out.pte")], ["--in-place"]):
        result = run(spoiled, "prune", target, *mode, env=env)
        expect(result.returncode == 2 and "spoiled copy at" in result.stderr and "which it copies" in result.stderr
               and os.listdir(directory) == ["model.pte"] and sha256(target) == before,
               f"a spoiled copied block on XFS ({' '.join(mode)}): compared, refused, nothing written", result)


if __name__ == "__main__":
    sys.exit(main())
