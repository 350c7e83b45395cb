#!/usr/bin/env python3
"""scripts/build_lief.sh's way to LIEF's source when no copy lies beside the repository:
GitHub's archive of the tag, stood in for on loopback ($MACHOFIX_GITHUB), as GitHub
cannot be reached from this project's CI.

    test_lief_fetch.py REPOSITORY WORK

The archive served is LIEF 0.9.0's own (../shared/third_party, or the one an earlier
build downloaded into the cache); without either there is nothing true to serve, and
the test says so and is skipped (77). With `--fetch-only`:
- the archive is downloaded from $MACHOFIX_GITHUB/lief-project/LIEF/archive/refs/tags/
  0.9.0.tar.gz, its files checked against the pinned content hash, and kept in the cache;
- a second run downloads nothing;
- an archive with one byte of one file changed (re-archived) is refused, naming the
  content hash, and is not kept;
- nothing served: exit 3, naming the URL and how to get the archive.
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

VERSION = "0.9.0"
failures = []


def expect(what, condition, detail=""):
    print(f"{'ok' if condition else 'FAILED'}: {what}{'' if condition or not detail else ': ' + str(detail)[:600]}")
    if not condition:
        failures.append(what)


def original_archive(repo):
    cache = Path(os.environ.get("MACHOFIX_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or
                                                              Path.home() / ".cache") / "machofix")
    for candidate in (os.environ.get("MACHOFIX_LIEF_TARBALL"),
                      repo.parent / "shared" / "third_party" / f"LIEF-{VERSION}.tar.gz",
                      cache / "lief" / f"LIEF-{VERSION}-upstream.tar.gz"):
        if candidate and Path(candidate).is_file():
            return Path(candidate).read_bytes()
    return None


def tampered(archive):
    """The same tree with one byte of one source file changed, archived anew."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(archive)) as source, tarfile.open(fileobj=out, mode="w:gz") as target:
        changed = False
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None
            if data and not changed and member.name.endswith(".cpp"):
                data = bytes([data[0] ^ 1]) + data[1:]
                changed = True
            target.addfile(member, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def main(argv):
    repo, work = Path(argv[1]).resolve(), Path(argv[2]).resolve()
    archive = original_archive(repo)
    if archive is None:
        print(f"skipped: no LIEF-{VERSION}.tar.gz beside the repository or in the cache to serve")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    files = {}
    server = LoopbackServer(files.get)
    path = f"/lief-project/LIEF/archive/refs/tags/{VERSION}.tar.gz"
    env = dict(os.environ, MACHOFIX_GITHUB=server.base, MACHOFIX_CACHE_DIR=str(work / "cache"),
               MACHOFIX_LIEF_TARBALL=str(work / "absent.tar.gz"), TMPDIR=str(work))
    script = repo / "scripts" / "build_lief.sh"

    def fetch():
        return subprocess.run(["bash", str(script), "--fetch-only"], capture_output=True, text=True, env=env,
                              timeout=300)

    cached = work / "cache" / "lief" / f"LIEF-{VERSION}-upstream.tar.gz"
    files[path] = archive
    done = fetch()
    expect("served on loopback: downloaded, its files hold the pinned content hash, kept in the cache",
           done.returncode == 0 and server.requests == [path] and cached.is_file()
           and hashlib.sha256(cached.read_bytes()).digest() == hashlib.sha256(archive).digest()
           and done.stdout.strip() == str(cached), done.stdout + done.stderr)
    done = fetch()
    expect("a second run downloads nothing", done.returncode == 0 and server.requests == [path], server.requests)

    cached.unlink()
    files[path] = tampered(archive)
    done = fetch()
    expect("one byte of one file changed: refused, naming the content hash, and not kept",
           done.returncode == 1 and "content hash" in done.stderr and not cached.exists(), done.stderr)

    del files[path]
    done = fetch()
    expect("nothing served: exit 3, naming the URL and how to get the archive",
           done.returncode == 3 and server.base + path in done.stderr and "MACHOFIX_LIEF_TARBALL" in done.stderr
           and not list((work / "cache" / "lief").glob("*.part")), done.stderr)
    leftovers = [p.name for p in work.iterdir() if p.name.startswith("machofix-lief.")]
    expect("no extracted tree left behind", not leftovers, leftovers)

    print(f"test_lief_fetch: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
