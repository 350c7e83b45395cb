#!/usr/bin/env python3
"""Runs a fixture generator once for each content of its inputs, and copies its output.

    cached_fixtures.py OUTDIR --inputs PATH... --tools TOOL... -- GENERATOR ARG...

GENERATOR ARG... OUTDIR would write the fixtures; this runs it only when the cache
has no output for the same key, and otherwise copies the cached output to OUTDIR.
The key is a hash of every file under the inputs (relative path and bytes), of the
command (OUTDIR left out; file names without their directories), of Python's version
and of what each tool says of its version (`TOOL --version`): the generators are deterministic and write no paths, so the same key
gives the same files. A build tree and its sanitizer twin, or the next CI run on the
same machine, then link the fixtures once instead of once each (1 to 2 minutes of
clang-16 and ld64.lld-16 per matrix on 2 cores).

The cache: $MACHOFIX_FIXTURE_CACHE, else ~/.cache/machofix/fixtures (XDG_CACHE_HOME
is honoured); MACHOFIX_FIXTURE_CACHE=off runs the generator into OUTDIR every time.
An output enters the cache only when the generator succeeded, by a rename, so a
killed run leaves nothing half-made behind; the newest three keys of each generator
are kept.
"""

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

KEEP_PER_GENERATOR = 3


def usage():
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


def parse(argv):
    if "--" not in argv or len(argv) < 4:
        return None
    split = argv.index("--")
    head, command = argv[1:split], argv[split + 1:]
    if not command or not head or head[0].startswith("-"):
        return None
    outdir, inputs, tools, current = Path(head[0]), [], [], None
    for arg in head[1:]:
        if arg in ("--inputs", "--tools"):
            current = inputs if arg == "--inputs" else tools
        elif current is None:
            return None
        else:
            current.append(arg)
    return outdir, [Path(p) for p in inputs], tools, command


def cache_root():
    setting = os.environ.get("MACHOFIX_FIXTURE_CACHE")
    if setting == "off":
        return None
    if setting:
        return Path(setting)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "machofix" / "fixtures"


def files_under(path):
    if path.is_file():
        yield path, path.name
        return
    for directory, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            full = Path(directory) / name
            yield full, full.relative_to(path).as_posix()


def key_of(inputs, tools, command):
    digest = hashlib.sha256(sys.version.encode())
    for word in command:
        digest.update(b"arg\0" + os.path.basename(word).encode() + b"\0")
    for root in inputs:
        digest.update(b"input\0" + root.name.encode() + b"\0")
        for full, relative in files_under(root):
            digest.update(relative.encode() + b"\0" + full.read_bytes() + b"\0")
    for tool in tools:
        version = subprocess.run([tool, "--version"], capture_output=True, check=True).stdout
        digest.update(b"tool\0" + tool.encode() + b"\0" + version)
    return digest.hexdigest()[:24]


def replace_with_copy(source, outdir):
    if outdir.exists():
        shutil.rmtree(outdir)
    shutil.copytree(source, outdir, symlinks=True)


def prune_old(cache, generator):
    entries = sorted(cache.glob(f"{generator}-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[KEEP_PER_GENERATOR:]:
        shutil.rmtree(old, ignore_errors=True)


def main(argv):
    parsed = parse(argv)
    if parsed is None:
        return usage()
    outdir, inputs, tools, command = parsed
    cache = cache_root()
    if cache is None:
        return subprocess.run(command + [str(outdir)]).returncode
    generator = Path(command[-1]).stem if len(command) > 1 else Path(command[0]).stem
    key = key_of(inputs, tools, command)
    entry = cache / f"{generator}-{key}"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".{generator}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one generator of a kind at a time; the others then copy
        if entry.is_dir():
            replace_with_copy(entry, outdir)
            os.utime(entry)
            print(f"cached_fixtures: {generator}'s output for these inputs from {entry}")
            return 0
        scratch = Path(tempfile.mkdtemp(prefix=f".{generator}-", dir=cache))
        try:
            status = subprocess.run(command + [str(scratch / "out")]).returncode
            if status != 0:
                return status
            os.rename(scratch / "out", entry)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        prune_old(cache, generator)
    replace_with_copy(entry, outdir)
    print(f"cached_fixtures: {generator}'s output cached in {entry}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
