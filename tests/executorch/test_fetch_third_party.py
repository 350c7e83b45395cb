#!/usr/bin/env python3
"""scripts/fetch_third_party.py's ways to ExecuTorch's sources, GitHub stood in for on
loopback (GitHub cannot be reached from this project's CI):

    test_fetch_third_party.py REPOSITORY PYTHON_DIR RUNTIME_DIR WORK

PYTHON_DIR, RUNTIME_DIR: the subsets configure put in place. From their files the test
makes what GitHub serves at /pytorch/executorch/archive/COMMIT.tar.gz: the whole tree
under executorch-COMMIT/ (here both subsets and files outside them). Then:
- both subsets come from one download, with nothing outside them, and are accepted;
- a second run reads nothing;
- an archive with one byte of one file changed is refused, naming the content hash,
  and leaves nothing behind;
- no archive served: exit 3, saying how to get it;
- GitHub's archive copied into $MACHOFIX_THIRD_PARTY is used offline; a subset archive
  there whose sha256 is not the pinned one is refused.
"""
import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from loopback_server import LoopbackServer  # noqa: E402

failures = []


def expect(what, condition, detail=""):
    print(f"{'ok' if condition else 'FAILED'}: {what}{'' if condition or not detail else ': ' + str(detail)}")
    if not condition:
        failures.append(what)


def github_archive(commit, subset_dirs, tamper=False):
    """GitHub's archive of the tree: every subset file, and two files outside them."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        def add(name, data):
            info = tarfile.TarInfo(f"executorch-{commit}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        seen = set()
        for directory in subset_dirs:
            for path in sorted((directory / "executorch").rglob("*")):
                name = str(path.relative_to(directory / "executorch"))
                if path.is_file() and name not in seen:
                    seen.add(name)
                    data = path.read_bytes()
                    if tamper and name == "LICENSE":
                        data = data[:-1] + bytes([data[-1] ^ 1])
                    add(name, data)
        add("README.md", b"not in any subset\n")
        add("backends/cuda/cuda_backend.py", b"not in any subset either\n")
    return buffer.getvalue()


class GitHub(LoopbackServer):
    """Serves archives at their paths."""

    def __init__(self):
        self.archives = {}
        super().__init__(self.archives.get)
        self.url = self.base


def main(argv):
    repo, python_dir, runtime_dir, work = Path(argv[1]), argv[2], argv[3], Path(argv[4])
    if not python_dir or not runtime_dir:
        print("skipped: ExecuTorch's sources are not in place (test executorch_sources says why)")
        return 77
    python_dir, runtime_dir = Path(python_dir), Path(runtime_dir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    commit = next(line.split()[2] for line in (repo / "pins.lock").read_text().splitlines()
                  if line.split()[:2] == ["tarball", "executorch-runtime"])
    path = f"/pytorch/executorch/archive/{commit}.tar.gz"
    github = GitHub()

    def fetch(name, dest, cache, *options, third_party=None):
        env = dict(os.environ, MACHOFIX_GITHUB=github.url, MACHOFIX_CACHE_DIR=str(work / cache))
        env.pop("MACHOFIX_THIRD_PARTY", None)
        if third_party:
            env["MACHOFIX_THIRD_PARTY"] = str(third_party)
        done = subprocess.run([sys.executable, repo / "scripts/fetch_third_party.py", name, work / dest, *options],
                              capture_output=True, text=True, env=env, timeout=120)
        return done.returncode, done.stderr

    github.archives[path] = github_archive(commit, [python_dir, runtime_dir])
    results = [fetch(name, name, "cache", "--no-local") for name in ("executorch-runtime", "executorch-python")]
    expect("both subsets come from GitHub's archive, downloaded once",
           all(code == 0 for code, _ in results) and len(github.requests) == 1, (results, github.requests))
    expect("with nothing outside them",
           not (work / "executorch-runtime/executorch/README.md").exists()
           and not (work / "executorch-python/executorch/backends/cuda").exists()
           and (work / "executorch-python/executorch/exir").is_dir())
    code, said = fetch("executorch-python", "executorch-python", "cache", "--no-local")
    expect("a second run reads nothing", code == 0 and "already in place" in said and len(github.requests) == 1, said)

    github.archives[path] = github_archive(commit, [python_dir, runtime_dir], tamper=True)
    code, said = fetch("executorch-python", "tampered", "cache-tampered", "--no-local")
    expect("an archive with one file changed is refused, naming the content hash",
           code == 1 and "content hash" in said and not (work / "tampered").exists()
           and not [p for p in work.iterdir() if p.name.startswith(".executorch-python.")], said)

    github.archives.clear()
    code, said = fetch("executorch-runtime", "unserved", "cache-none", "--no-local")
    expect("no archive served: exit 3, saying how to get it",
           code == 3 and "404" in said and "MACHOFIX_THIRD_PARTY" in said and not (work / "unserved").exists(), said)

    offline = work / "third_party"
    offline.mkdir()
    (offline / f"executorch-{commit}.tar.gz").write_bytes(github_archive(commit, [python_dir, runtime_dir]))
    code, said = fetch("executorch-runtime", "offline", "cache-none", third_party=offline)
    expect("GitHub's archive in $MACHOFIX_THIRD_PARTY is used, offline",
           code == 0 and "executorch-" in said and len(github.requests) == 3, (said, github.requests))
    (offline / f"executorch-runtime-{commit[:7]}.tar.gz").write_bytes(b"not the pinned archive")
    code, said = fetch("executorch-runtime", "wrong", "cache-none", third_party=offline)
    expect("a subset archive there with another sha256 is refused",
           code == 1 and "sha256" in said and "expected" in said and not (work / "wrong").exists(), said)

    print(f"test_fetch_third_party: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
