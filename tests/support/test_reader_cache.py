#!/usr/bin/env python3
"""Tests of the readers' cache (reader_cache.cc): a replay must print what the reader
would print, and the reader must run again whenever what it reads may differ.

Usage: test_reader_cache.py READER_CACHE FIXTURE_DIR

A stand-in reader (a script named llvm-objdump-16 in a directory behind the cache's
on PATH) counts its runs and prints its arguments, each file's bytes and its path, so
that each case can say whether it ran and what a replay printed. Then the real
llvm-objdump-16 and llvm-nm-16, through the cache, against themselves run directly,
on a fixture under two paths.
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FAILURES = []

STAND_IN = r"""#!/bin/sh
echo run >> "$RUNS"
for arg in "$@"; do
  if [ -f "$arg" ]; then echo "$arg:"; cat "$arg"; echo; else echo "option $arg"; fi
done
echo "to stderr $*" >&2
exit ${STATUS:-0}
"""


def expect(what, ok, detail=""):
    print(("ok    " if ok else "FAIL  ") + what + ("" if ok else f"\n      {detail}"))
    if not ok:
        FAILURES.append(what)


class Setup:
    def __init__(self, cache_binary, work):
        self.work = work
        self.bin = work / "cache-bin"
        self.real = work / "real-bin"
        self.bin.mkdir()
        self.real.mkdir()
        for name in ("llvm-objdump-16", "no-such-reader"):
            (self.bin / name).symlink_to(cache_binary)
        stand_in = self.real / "llvm-objdump-16"
        stand_in.write_text(STAND_IN)
        stand_in.chmod(0o755)
        self.runs = work / "runs"
        self.cache = work / "cache"
        self.identity = work / "library"
        self.identity.write_text("one\n")

    def env(self, **extra):
        path = [str(self.bin), str(self.real), os.environ["PATH"]]
        env = dict(os.environ, PATH=os.pathsep.join(path), RUNS=str(self.runs), MACHOFIX_READER_CACHE=str(self.cache),
                   MACHOFIX_READER_CACHE_IDENTITY=str(self.identity))
        env.update(extra)
        return env

    def run(self, *args, cwd=None, **extra):
        """(stdout, stderr, status, ran): ran is whether the stand-in ran."""
        before = self.run_count()
        result = subprocess.run(["llvm-objdump-16", *map(str, args)], capture_output=True, env=self.env(**extra),
                                cwd=cwd or self.work, timeout=60)
        return result.stdout, result.stderr, result.returncode, self.run_count() > before

    def run_count(self):
        return len(self.runs.read_text().splitlines()) if self.runs.exists() else 0


def stand_in_cases(setup):
    work = setup.work
    a, b = work / "one" / "model.dylib", work / "two" / "model.dylib"
    for path in (a, b):
        path.parent.mkdir()
        path.write_bytes(b"\xcf\xfa\xed\xfe the same bytes")

    first = setup.run("--macho", a)
    expect("the first read runs the reader", first[3] and first[2] == 0)
    again = setup.run("--macho", a)
    expect("the same read again is replayed, byte for byte (status, stdout, stderr)",
           not again[3] and again[:3] == first[:3], (first, again))
    moved = setup.run("--macho", b)
    expect("the same bytes under another path: replayed, naming the new path where the reader named the old one",
           not moved[3] and moved[0] == first[0].replace(bytes(a), bytes(b)) and bytes(a) not in moved[0], moved)
    relative = setup.run("--macho", "model.dylib", cwd=work / "two")
    expect("a relative path: replayed with the path as given",
           not relative[3] and relative[0] == first[0].replace(bytes(a), b"model.dylib"), relative)

    expect("other options: the reader runs", setup.run("--macho", "--all-headers", a)[3])
    b.write_bytes(b"\xcf\xfa\xed\xfe other bytes")
    changed = setup.run("--macho", b)
    expect("other bytes at a path read before: the reader runs", changed[3] and b"other bytes" in changed[0], changed)

    failing = work / "fails.dylib"
    failing.write_bytes(b"fails")
    status = setup.run(failing, STATUS="3")
    replay = setup.run(failing, STATUS="0")
    expect("a read that failed is replayed with its status and stderr",
           status[3] and status[2] == 3 and not replay[3] and replay[:3] == status[:3], (status, replay))

    setup.identity.write_text("two\n")
    expect("another LLVM library (MACHOFIX_READER_CACHE_IDENTITY): the reader runs", setup.run("--macho", a)[3])
    os.utime(setup.real / "llvm-objdump-16", ns=(1, 1))
    expect("another reader (its modification time): the reader runs", setup.run("--macho", a)[3])

    itself = work / "names-itself.dylib"
    itself.write_bytes(b"install name " + bytes(itself))
    expect("bytes that hold their own path: never replayed",
           setup.run(itself)[3] and setup.run(itself)[3])
    named = work / "macho"
    named.write_bytes(b"no name")
    expect("a path whose file name is left in the output otherwise (\"option --macho\"): never replayed",
           setup.run(named, "--macho")[3] and setup.run(named, "--macho")[3])

    expect("standard input (\"-\"): always run", setup.run("-")[3] and setup.run("-")[3])
    merged = subprocess.run(["llvm-objdump-16", str(a)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=setup.env(), cwd=work, timeout=60)
    before = setup.run_count()
    subprocess.run(["llvm-objdump-16", str(a)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=setup.env(),
                   cwd=work, timeout=60)
    expect("stdout and stderr on one file: always run (their order is the reader's)",
           setup.run_count() > before and b"to stderr" in merged.stdout)
    off = setup.run("--macho", a, MACHOFIX_READER_CACHE="off")
    expect("MACHOFIX_READER_CACHE=off: always run", off[3])
    missing = subprocess.run(["no-such-reader", str(a)], capture_output=True, env=setup.env(), cwd=work, timeout=60)
    expect("no real reader of that name after the cache: a clear error, status 125",
           missing.returncode == 125 and b"no reader of that name" in missing.stderr, missing)


def real_reader_cases(cache_binary, fixtures, work):
    bin_dir = work / "real-cache-bin"
    bin_dir.mkdir()
    for name in ("llvm-objdump-16", "llvm-nm-16"):
        (bin_dir / name).symlink_to(cache_binary)
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ["PATH"]]),
               MACHOFIX_READER_CACHE=str(work / "real-cache"))
    fixture = fixtures / "aoti_metal_arm64_chained.in"
    copies = [work / "first" / fixture.name, work / "second" / fixture.name]
    for copy in copies:
        copy.parent.mkdir()
        shutil.copyfile(fixture, copy)
    for reader, options in (("llvm-objdump-16", ["--macho", "--all-headers", "--bind", "--chained-fixups"]),
                            ("llvm-nm-16", ["-m"])):
        for copy in copies:
            direct = subprocess.run([shutil.which(reader), *options, str(copy)], capture_output=True, timeout=120)
            for attempt in ("first run", "second run"):
                cached = subprocess.run([reader, *options, str(copy)], capture_output=True, env=env, timeout=120)
                expect(f"{reader} {' '.join(options)} {copy.parent.name}/{copy.name}, {attempt}: what the reader prints",
                       (cached.returncode, cached.stdout, cached.stderr) ==
                       (direct.returncode, direct.stdout, direct.stderr) and direct.returncode == 0,
                       (cached.stdout[:200], direct.stdout[:200], cached.stderr, direct.stderr))
    entries = [p for p in (work / "real-cache").rglob("*") if p.is_file() and len(p.name) == 64]
    expect("one entry per reader and options: the second path was a replay", len(entries) == 2, entries)


def main():
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    cache_binary, fixtures = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    with tempfile.TemporaryDirectory(prefix="reader-cache-") as tmp:
        work = Path(tmp)
        stand_in_cases(Setup(cache_binary, work))
        real_reader_cases(cache_binary, fixtures, work)
    print(f"{len(FAILURES)} failed" if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
