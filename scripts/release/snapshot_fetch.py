#!/usr/bin/env python3
"""Downloads a Debian source package from Debian's snapshot archive, by name and version.

    snapshot_fetch.py BASE_URL NAME VERSION DIR

The snapshot archive keeps every version Debian ever published, so a pin that has left
Debian's archive (a superseded security update) is still there. Its machine-readable
interface: BASE_URL/mr/package/NAME/VERSION/srcfiles?fileinfo=1 lists the package's
files by sha1 with their names, and BASE_URL/file/SHA1 serves each. Every file is
checked against the sha1 it is served under; the caller then checks the .dsc against
its pinned sha256, and dpkg-source every other file against the .dsc.
Exit status 1, with one line saying why, when the package or a file cannot be had.
"""

import hashlib
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

TIMEOUT_SECONDS = 60


class FetchError(Exception):
    pass


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response:
            return response.read()
    except (urllib.error.URLError, OSError) as error:
        raise FetchError(f"{url}: {getattr(error, 'reason', error)}") from error


def source_files(base, name, version):
    """(file name, sha1) of each file of NAME VERSION."""
    url = f"{base}/mr/package/{urllib.parse.quote(name)}/{urllib.parse.quote(version)}/srcfiles?fileinfo=1"
    try:
        listing = json.loads(get(url))
        files = []
        for entry in listing["result"]:
            sha1 = entry["hash"]
            names = {info["name"] for info in listing["fileinfo"][sha1]}
            files += [(file_name, sha1) for file_name in sorted(names)]
    except (ValueError, KeyError, TypeError) as error:
        raise FetchError(f"{url}: not a list of source files ({error})") from error
    if not any(file_name.endswith(".dsc") for file_name, _ in files):
        raise FetchError(f"{url}: no .dsc among the files")
    return files


def fetch(base, name, version, directory):
    """Every file checked before any is written, the .dsc last: a .dsc in DIRECTORY
    means the whole package is there (the release build takes the cache by it)."""
    downloads = []
    for file_name, sha1 in source_files(base, name, version):
        if os.path.basename(file_name) != file_name or file_name.startswith("."):
            raise FetchError(f"the snapshot archive names a file {file_name!r}")
        data = get(f"{base}/file/{sha1}")
        if hashlib.sha1(data).hexdigest() != sha1:
            raise FetchError(f"{file_name}: sha1 {hashlib.sha1(data).hexdigest()}, served as {sha1}")
        downloads.append((file_name, data))
    os.makedirs(directory, exist_ok=True)
    for file_name, data in sorted(downloads, key=lambda item: item[0].endswith(".dsc")):
        part = os.path.join(directory, file_name + ".part")
        with open(part, "wb") as handle:
            handle.write(data)
        os.replace(part, os.path.join(directory, file_name))
        print(f"snapshot_fetch: {file_name} ({len(data)} bytes)")


def main(argv):
    if len(argv) != 5:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    base, name, version, directory = argv[1].rstrip("/"), argv[2], argv[3], argv[4]
    try:
        fetch(base, name, version, directory)
    except FetchError as error:
        print(f"snapshot_fetch: {name} {version}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
