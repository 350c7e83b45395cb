#!/usr/bin/env python3
"""Puts a pinned subset of ExecuTorch's sources in place for the tests, from a local
copy or from its canonical location, checked by the content hash of its files.

    scripts/fetch_third_party.py NAME DEST [--local ARCHIVE | --no-local]

NAME: executorch-runtime (the part of the C++ runtime that loads programs) or
executorch-python (the exporter, serializer, AOTI and Metal backends). DEST receives
executorch/ with the subset's files, and prints nothing else but where it is.

Where the files come from, in order:
1. DEST itself, when it already holds the pinned content (a second configure);
2. a local archive: --local ARCHIVE, else in $MACHOFIX_THIRD_PARTY (default
   ../shared/third_party beside the repository) NAME-SHORT.tar.gz, which must have the
   sha256 pins.lock gives (`tarball NAME`), or GitHub's executorch-COMMIT.tar.gz;
3. GitHub's archive of the pinned commit ($MACHOFIX_GITHUB, default
   https://github.com, + /pytorch/executorch/archive/COMMIT.tar.gz), downloaded once
   into ~/.cache/machofix/third_party (both subsets come from the one download).
Whatever the source, the files extracted must have the content hash pins.lock gives
(`tree NAME`): GitHub serves the whole tree, in an archive whose bytes differ from any
other made of the same commit; the files do not.

Exit status: 0 in place; 1 a source with the wrong content (named, nothing left in
DEST); 3 no source at all (what is missing and how to get it).
"""
import argparse
import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The paths of each subset, as `git archive COMMIT PATHS...` takes them
# (../shared/third_party/README.md gives the same lists).
SUBSETS = {
    "executorch-runtime": ["runtime/core", "runtime/platform", "runtime/executor", "runtime/backend",
                           "runtime/kernel", "schema", "extension/data_loader", "extension/flat_tensor",
                           "backends/aoti/aoti_delegate_handle.h", "LICENSE"],
    "executorch-python": ["LICENSE", "exir", "schema", "backends/aoti/aoti_backend.py",
                          "backends/aoti/aoti_partitioner.py", "backends/aoti/passes", "backends/aoti/README.md",
                          "backends/apple/metal/metal_backend.py", "backends/apple/metal/metal_partitioner.py",
                          "backends/apple/metal/passes", "backends/apple/metal/README.md"],
}
TIMEOUT = 60


class FetchError(Exception):
    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def pin(kind, name):
    """(version, hash) of pins.lock's KIND NAME line."""
    for line in (REPO / "pins.lock").read_text().splitlines():
        fields = line.split()
        if fields[:2] == [kind, name]:
            return fields[2], fields[3]
    raise FetchError(f"pins.lock: no {kind} pin named {name}")


def tree_sha256(root):
    """scripts/build_lief.sh's tree_sha256: the sha256 of `sha256sum` of every file under
    ROOT, sorted by path (bytes, as LC_ALL=C sorts)."""
    files = sorted((str(p.relative_to(root)) for p in Path(root).rglob("*") if p.is_file() and not p.is_symlink()),
                   key=lambda name: ("./" + name).encode())
    listing = "".join(f"{hashlib.sha256((Path(root) / name).read_bytes()).hexdigest()}  ./{name}\n" for name in files)
    return hashlib.sha256(listing.encode()).hexdigest()


def in_subset(path, subset):
    return any(path == part or path.startswith(part + "/") for part in subset)


def extract(archive, into, subset):
    """The subset's regular files of ARCHIVE into INTO/executorch/, whatever the
    archive's top directory is called (executorch/ or GitHub's executorch-COMMIT/)."""
    with tarfile.open(archive) as tar:
        for member in tar:
            top, _, path = member.name.partition("/")
            if not member.isfile() or not path or ".." in path.split("/") or not in_subset(path, subset):
                continue
            target = into / "executorch" / path
            target.parent.mkdir(parents=True, exist_ok=True)
            with tar.extractfile(member) as source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def local_archive(name, commit, option):
    """(archive, its pinned sha256 or None) to use, or (the path looked at, None)."""
    if option is not None:
        return Path(option), None
    directory = Path(os.environ.get("MACHOFIX_THIRD_PARTY") or REPO.parent / "shared" / "third_party")
    subset = directory / f"{name}-{commit[:7]}.tar.gz"
    whole = directory / f"executorch-{commit}.tar.gz"  # GitHub's archive, copied from elsewhere
    return (whole, None) if whole.is_file() and not subset.is_file() else (subset, "pinned")


def download(commit):
    """GitHub's archive of COMMIT, in the cache (downloaded once)."""
    base = os.environ.get("MACHOFIX_GITHUB", "https://github.com").rstrip("/")
    url = f"{base}/pytorch/executorch/archive/{commit}.tar.gz"
    cache = Path(os.environ.get("MACHOFIX_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or
                                                              Path.home() / ".cache") / "machofix") / "third_party"
    archive = cache / f"executorch-{commit}.tar.gz"
    if archive.is_file():
        return archive, url
    cache.mkdir(parents=True, exist_ok=True)
    part = archive.with_suffix(".part")
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response, open(part, "wb") as out:
            shutil.copyfileobj(response, out)
    except urllib.error.HTTPError as error:
        part.unlink(missing_ok=True)
        raise FetchError(f"cannot download {url}: HTTP {error.code} {error.reason}", 3) from None
    except (urllib.error.URLError, OSError) as error:
        part.unlink(missing_ok=True)
        raise FetchError(f"cannot download {url}: {getattr(error, 'reason', error)}", 3) from None
    os.replace(part, archive)
    return archive, url


def fetch(name, dest, local_option, use_local):
    commit, tarball_sha256 = pin("tarball", name)
    tree_commit, tree_pin = pin("tree", name)
    if tree_commit != commit:
        raise FetchError(f"pins.lock: {name}'s tarball and tree pins name other commits")
    stamp = dest / ".tree-sha256"
    if stamp.is_file() and stamp.read_text().strip() == tree_pin and (dest / "executorch").is_dir():
        return "already in place"
    local, pinned = local_archive(name, commit, local_option) if use_local else (None, None)
    if local is not None and local.is_file():
        actual = sha256_file(local)
        # The subset archive is pinned by its bytes too; any other (GitHub's, an
        # option's) by its files alone, below.
        if pinned and actual != tarball_sha256:
            raise FetchError(f"{local}: sha256 {actual}, expected {tarball_sha256} (pins.lock)")
        archive, origin = local, str(local)
    else:
        try:
            archive, origin = download(commit)
        except FetchError as error:
            looked = f"no {local}, and " if local is not None else ""
            raise FetchError(
                f"{name} (pytorch/executorch at {commit}): {looked}{error}. Download that archive on a "
                f"machine that reaches GitHub, put it as executorch-{commit}.tar.gz in a directory and point "
                f"MACHOFIX_THIRD_PARTY at it; or run the tests without ExecuTorch's: "
                f"MACHOFIX_TESTS_WITHOUT_EXECUTORCH=1 (docs/testing.md)", 3) from None
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=dest.parent))
    try:
        extract(archive, work, SUBSETS[name])
        actual = tree_sha256(work / "executorch")
        if actual != tree_pin:
            raise FetchError(f"{origin}: its {name} files are not those of commit {commit} "
                             f"(content hash {actual}, expected {tree_pin})")
        (work / ".tree-sha256").write_text(tree_pin + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(work, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return f"from {origin}"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", choices=sorted(SUBSETS))
    parser.add_argument("dest", type=Path)
    parser.add_argument("--local", help="the local archive to use (default: see above)")
    parser.add_argument("--no-local", action="store_true", help="use no local archive, only the download")
    args = parser.parse_args(argv[1:])
    try:
        how = fetch(args.name, args.dest.resolve(), args.local, not args.no_local)
    except FetchError as error:
        print(f"fetch_third_party: {error}", file=sys.stderr)
        return error.status
    print(f"fetch_third_party: {args.name} in {args.dest} ({how})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
