#!/usr/bin/env python3
"""The release build's fetch of a pinned Debian source package once Debian's archive no
longer serves it (scripts/release/libraries.sh, fetch_debian_source).

Debian's archive and its snapshot archive cannot be reached from here, so both are
stood in for on loopback, each laid out like the real one: the archive (MACHOFIX_DEBIAN_MIRROR,
MACHOFIX_DEBIAN_SECURITY_MIRROR) serves no index, as a mirror that has dropped a
suite, and the snapshot archive (MACHOFIX_DEBIAN_SNAPSHOT) answers
/mr/package/NAME/VERSION/srcfiles?fileinfo=1 and /file/SHA1 as snapshot.debian.org
does. The package is a made-up source package (a .dsc and the two files it lists);
the fetch checks only that the .dsc has the pinned sha256, and dpkg-source checks the
rest against the .dsc when the build extracts it.

    test_fetch_sources.py

Cases: the package comes from the snapshot archive into the cache; a second fetch
asks no server; a .dsc other than the pinned one, a file whose bytes are not those of
the sha1 it is served under, and a version the snapshot archive does not have each
fail, naming what is wrong, and leave no .dsc behind that a later run would take.
"""

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from loopback_server import LoopbackServer  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NAME, VERSION = "machofix-probe", "1.0-1"

DRIVER = r"""
set -euo pipefail
repo=$1 cache=$2 work=$3
source "$repo/scripts/release/common.sh"
source "$repo/scripts/release/pins.sh"
source "$repo/scripts/release/libraries.sh"
fetch_debian_source "$4" "$5" "$6"
"""


def make_package(directory):
    """The files of a made-up source package, and the sha256 of its .dsc."""
    files = {
        f"{NAME}_1.0.orig.tar.gz": b"an upstream tarball's bytes\n",
        f"{NAME}_{VERSION}.debian.tar.xz": b"Debian's changes\n",
    }
    sums = "".join(f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}\n" for name, data in files.items())
    dsc = (f"Format: 3.0 (quilt)\nSource: {NAME}\nVersion: {VERSION}\nChecksums-Sha256:\n{sums}").encode()
    files[f"{NAME}_{VERSION}.dsc"] = dsc
    return files, hashlib.sha256(dsc).hexdigest()


class Servers(LoopbackServer):
    """Debian's archive (nothing) and its snapshot archive (`files`), on loopback."""

    def __init__(self, files):
        self.files = dict(files)
        self.corrupt = None  # a file name served with other bytes than its sha1's
        super().__init__(self.answer)

    def answer(self, path):
        # The .dsc first: a fetch that wrote each file as it came would leave a .dsc
        # without the files it lists when a later one fails.
        ordered = sorted(self.files.items(), key=lambda item: not item[0].endswith(".dsc"))
        by_sha1 = {hashlib.sha1(data).hexdigest(): name for name, data in ordered}
        if path == f"/snapshot/mr/package/{NAME}/{VERSION}/srcfiles?fileinfo=1":
            return json.dumps({
                "_comment": "foo", "package": NAME, "version": VERSION,
                "result": [{"hash": sha1} for sha1 in by_sha1],
                "fileinfo": {sha1: [{"name": name, "archive_name": "debian", "path": "/pool/main/m/" + NAME,
                                     "first_seen": "20250101T000000Z", "size": len(self.files[name])}]
                             for sha1, name in by_sha1.items()},
            }).encode()
        if path.startswith("/snapshot/file/") and path[len("/snapshot/file/"):] in by_sha1:
            name = by_sha1[path[len("/snapshot/file/"):]]
            return b"not " + self.files[name] if name == self.corrupt else self.files[name]
        return None  # the archive has no index and no pool

    def stop(self):
        self.httpd.shutdown()


def fetch(servers, cache, work, dsc_sha256, version=VERSION):
    env = dict(os.environ, MACHOFIX_DEBIAN_MIRROR=f"{servers.base}/debian",
               MACHOFIX_DEBIAN_SECURITY_MIRROR=f"{servers.base}/debian-security",
               MACHOFIX_DEBIAN_SNAPSHOT=f"{servers.base}/snapshot")
    work.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["bash", "-c", DRIVER, "driver", str(REPO), str(cache), str(work), NAME, version, dsc_sha256],
                          env=env, capture_output=True, text=True, timeout=300)


def main():
    failures = []

    def expect(what, condition, detail=""):
        print(f"{'ok' if condition else 'FAILED'}: {what}")
        if not condition:
            failures.append(what)
            if detail:
                print("  | " + detail.strip().replace("\n", "\n  | "))

    files, dsc_sha256 = make_package(None)
    with tempfile.TemporaryDirectory(prefix="machofix-fetch-sources-") as scratch:
        scratch = Path(scratch)
        servers = Servers(files)
        try:
            cache, dsc = scratch / "cache", scratch / "cache" / "src" / NAME / f"{NAME}_{VERSION}.dsc"
            run = fetch(servers, cache, scratch / "work1", dsc_sha256)
            expect("a version the archive does not serve comes from the snapshot archive",
                   run.returncode == 0 and "from the snapshot archive" in run.stderr, run.stderr)
            expect("every file of the package is in the cache, byte for byte",
                   all((dsc.parent / name).read_bytes() == data for name, data in files.items()
                       if (dsc.parent / name).exists()) and len(list(dsc.parent.iterdir())) == len(files))
            expect("the archive was asked first", any(p.startswith("/debian/") for p in servers.requests))

            servers.requests.clear()
            run = fetch(servers, cache, scratch / "work2", dsc_sha256)
            expect("a second fetch takes the cache and asks no server",
                   run.returncode == 0 and not servers.requests, run.stderr + str(servers.requests))

            other_cache = scratch / "cache-other"
            run = fetch(servers, other_cache, scratch / "work3", "0" * 64)
            expect("a .dsc other than the pinned one fails, naming both sums",
                   run.returncode != 0 and f"sha256 {dsc_sha256}, expected {'0' * 64}" in run.stderr, run.stderr)

            servers.corrupt = f"{NAME}_1.0.orig.tar.gz"
            run = fetch(servers, scratch / "cache-corrupt", scratch / "work4", dsc_sha256)
            log = "".join(p.read_text() for p in (scratch / "work4").glob("snapshot-*.log"))
            expect("a file that is not what its sha1 says fails, naming the file",
                   run.returncode != 0 and f"{NAME}_1.0.orig.tar.gz: sha1" in run.stderr + log, run.stderr + log)
            servers.corrupt = None

            run = fetch(servers, scratch / "cache-missing", scratch / "work5", dsc_sha256, version="9.9-9")
            expect("a version the snapshot archive does not have fails, naming it",
                   run.returncode != 0 and "9.9-9" in run.stderr, run.stderr)
            expect("a failed fetch leaves no .dsc for a later run",
                   not list((scratch / "cache-missing").rglob("*.dsc")) and not list((scratch / "cache-corrupt").rglob("*.dsc")))
        finally:
            servers.stop()
    print(f"{6 + 2 - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
