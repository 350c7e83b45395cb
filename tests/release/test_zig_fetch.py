#!/usr/bin/env python3
"""scripts/release/toolchain.sh's zig from ziglang.org (MACHOFIX_ZIG_SOURCE=ziglang, the
release workflow's source), stood in for on loopback ($MACHOFIX_ZIGLANG), as
ziglang.org cannot be reached from this project's CI.

    test_zig_fetch.py REPOSITORY WORK

The stand-in serves a small zig tree, signed with a minisign key made here; a lock
(MACHOFIX_PINS_LOCK) pins that key and that tree as pins.lock pins ziglang.org's:
- the tarball and its .minisig are downloaded, the signature checked, the files held
  to the pinned content hash, and the tree kept in the cache, marked verified;
- a second run downloads nothing;
- a tarball changed after it was signed: refused for its signature, nothing kept;
- a tarball signed by the key but whose files are not the pinned tree: refused for its
  content hash, nothing kept;
- nothing served: the build stops, naming the URL.
The npm package's tree is held to the real pin by every release build (fetch_zig).
"""
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from loopback_server import LoopbackServer  # noqa: E402

VERSION = "0.11.0"
NAME = f"zig-linux-x86_64-{VERSION}.tar.xz"
failures = []


def expect(what, condition, detail=""):
    print(f"{'ok' if condition else 'FAILED'}: {what}{'' if condition or not detail else ': ' + str(detail)[:800]}")
    if not condition:
        failures.append(what)


def stand_in_tree(extra=b""):
    """The files of a stand-in zig: a `zig` that says its version, and a library file."""
    return {"zig": (b"#!/bin/sh\n[ \"$1\" = version ] && echo " + VERSION.encode() + b"\n", 0o755),
            "lib/std/std.zig": (b"pub const stand_in = true;\n" + extra, 0o644),
            "LICENSE": (b"MIT\n", 0o644)}


def tarball(tree):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:xz") as archive:
        for path, (data, mode) in sorted(tree.items()):
            info = tarfile.TarInfo(f"zig-linux-x86_64-{VERSION}/{path}")
            info.size, info.mode = len(data), mode
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def tree_sha256(tree):
    """build_lief.sh's tree hash: sha256sum of every file, sorted by ./path, hashed."""
    lines = "".join(f"{hashlib.sha256(data).hexdigest()}  ./{path}\n" for path, (data, _) in
                    sorted(tree.items(), key=lambda item: f"./{item[0]}".encode()))
    return hashlib.sha256(lines.encode()).hexdigest()


def sign(work, key, data, name):
    path = work / name
    path.write_bytes(data)
    subprocess.run(["minisign", "-S", "-s", str(key), "-m", str(path), "-x", f"{path}.minisig"], check=True,
                   capture_output=True, input="")
    return Path(f"{path}.minisig").read_bytes()


def main(argv):
    repo, work = Path(argv[1]).resolve(), Path(argv[2]).resolve()
    if not shutil.which("minisign"):
        expect("minisign is installed (Debian: minisign; scripts/setup.sh installs it)", False)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    (work / "tmp").mkdir(parents=True)
    secret, public = work / "test.key", work / "test.pub"
    subprocess.run(["minisign", "-G", "-W", "-s", str(secret), "-p", str(public)], check=True, capture_output=True)
    key = public.read_text().splitlines()[1]
    tree = stand_in_tree()
    lock = work / "pins.lock"
    with open(lock, "w") as out:
        for line in (repo / "pins.lock").read_text().splitlines():
            fields = line.split()
            if fields[:2] == ["tree", "zig"]:
                line = f"tree zig {VERSION} {tree_sha256(tree)}"
            elif fields[:2] == ["minisign", "zig"]:
                line = f"minisign zig {VERSION} {key}"
            out.write(line + "\n")

    files = {}
    server = LoopbackServer(files.get)
    path = f"/download/{VERSION}/{NAME}"
    cache = work / "cache"
    env = dict(os.environ, MACHOFIX_PINS_LOCK=str(lock), MACHOFIX_ZIG_SOURCE="ziglang", MACHOFIX_ZIGLANG=server.base)
    snippet = ('set -euo pipefail; repo=$1; cache=$2; work=$3; source "$repo/scripts/release/common.sh"; '
               'source "$repo/scripts/release/pins.sh"; source "$repo/scripts/release/toolchain.sh"; '
               'fetch_zig; echo "$zig"')

    def fetch():
        return subprocess.run(["bash", "-c", snippet, "_", str(repo), str(cache), str(work / "tmp")],
                              capture_output=True, text=True, env=env, timeout=120)

    zig_dir = cache / f"zig-{VERSION}"
    good = tarball(tree)
    files[path], files[path + ".minisig"] = good, sign(work, secret, good, "good.tar.xz")
    done = fetch()
    expect("served on loopback: tarball and signature downloaded, checked, the tree kept and marked verified",
           done.returncode == 0 and server.requests == [path, path + ".minisig"]
           and done.stdout.strip() == str(zig_dir / "package" / "zig")
           and (zig_dir / "verified").read_text().strip() == tree_sha256(tree)
           and (zig_dir / "package" / "lib" / "std" / "std.zig").is_file()
           and not list(zig_dir.glob("*.tar.xz*")), done.stdout + done.stderr)
    done = fetch()
    expect("a second run downloads nothing", done.returncode == 0 and len(server.requests) == 2, server.requests)

    shutil.rmtree(cache)
    files[path] = good[:-1] + bytes([good[-1] ^ 1])
    done = fetch()
    expect("a tarball changed after it was signed: refused for its signature, nothing kept",
           done.returncode != 0 and "its signature is not ziglang.org's" in done.stderr and not zig_dir.exists(),
           done.stderr)

    other = tarball(stand_in_tree(extra=b"// not the pinned tree\n"))
    files[path], files[path + ".minisig"] = other, sign(work, secret, other, "other.tar.xz")
    done = fetch()
    expect("signed by the key, but not the pinned tree: refused for its content hash, nothing kept",
           done.returncode != 0 and "content hash" in done.stderr and not zig_dir.exists(), done.stderr)

    files.clear()
    done = fetch()
    expect("nothing served: the build stops, naming the URL",
           done.returncode != 0 and server.base + path in done.stderr and not zig_dir.exists(), done.stderr)

    print(f"test_zig_fetch: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
