#!/usr/bin/env python3
"""Compares pins.lock's Debian source packages with what Debian serves now, and moves them.

    scripts/release/pins.py lag              each Debian pin older than Debian's newest
                                             version of it in bookworm, bookworm-updates
                                             and bookworm-security; exit status 1 if any
    scripts/release/pins.py update NAME...   moves those pins (or all lagging ones: --all)
                                             to the newest version Debian's archive serves,
                                             with its .dsc's sha256

Reads Debian's signed source indexes through an apt configuration of its own (in a
temporary directory; the machine's sources and state are left alone), from
MACHOFIX_DEBIAN_MIRROR and MACHOFIX_DEBIAN_SECURITY_MIRROR as the release build does.
An update downloads each candidate version as the release build would (newest first)
and pins the first one that downloads whole: an index may list a version that its
archive, or a mirror of it, does not serve (a mirror without the security pool), and
a pin nobody can fetch breaks every cold build. The sha256 written is that of the
downloaded .dsc, which apt has checked against the signed index; the release build
checks it again, and dpkg-source every other file against the .dsc. Only the version and hash
fields of a line change; everything else in the lock stays as it is.
"""

import functools
import hashlib
import os
import pwd
import re
import subprocess
import sys
import tempfile
from pathlib import Path

LOCK = Path(__file__).resolve().parents[2] / "pins.lock"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


class PinError(Exception):
    pass


def debian_pins(text):
    """{name: (version, sha256)} of the lock's debian lines, in order."""
    pins = {}
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "debian":
            if len(fields) != 5:
                raise PinError(f"{LOCK}: not KIND NAME VERSION SHA256 WHERE: {line!r}")
            pins[fields[1]] = (fields[2], fields[3])
    return pins


class Archive:
    """Debian 12's source indexes, read once into a private apt state."""

    def __init__(self, directory):
        self.dir = Path(directory)
        for sub in ("lists/partial", "cache/archives/partial"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        mirror = os.environ.get("MACHOFIX_DEBIAN_MIRROR", "http://deb.debian.org/debian")
        security = os.environ.get("MACHOFIX_DEBIAN_SECURITY_MIRROR", "http://deb.debian.org/debian-security")
        (self.dir / "sources.list").write_text(
            f"deb-src [signed-by={KEYRING}] {mirror} bookworm main\n"
            f"deb-src [signed-by={KEYRING}] {mirror} bookworm-updates main\n"
            f"deb-src [signed-by={KEYRING}] {security} bookworm-security main\n")
        update = self.apt("update")
        if update.returncode != 0 or re.search(r"^[WE]: Failed to fetch", update.stdout, re.M):
            raise PinError(f"apt-get update could not read Debian's indexes:\n{update.stdout.strip()}")

    def apt_command(self, *args):
        return ["apt-get", "-q", f"-oDir::Etc::SourceList={self.dir}/sources.list",
                "-oDir::Etc::SourceParts=/nonexistent", f"-oDir::State::Lists={self.dir}/lists",
                f"-oDir::Cache={self.dir}/cache", "-oDebug::NoLocking=1",
                f"-oAPT::Sandbox::User={pwd.getpwuid(os.getuid()).pw_name}", *args]

    def apt(self, *args):
        return subprocess.run(self.apt_command(*args), capture_output=True, text=True)

    def newest(self, name):
        """(version, sha256 of the .dsc) of the newest NAME in the indexes."""
        listing = self.apt("source", "--print-uris", "--only-source", name)
        for line in listing.stdout.splitlines():
            # 'URL' FILE SIZE SHA256:HEX
            match = re.match(r"^'[^']*' (\S+)\.dsc \d+ SHA256:([0-9a-f]{64})$", line)
            if match:
                version = re.sub(r"^[^_]*_", "", match.group(1))
                return self.epoch_of(name, version), match.group(2)
        raise PinError(f"Debian's indexes have no source package {name}:\n{listing.stdout}{listing.stderr}")

    def served(self, name, version):
        """The sha256 of NAME=VERSION's .dsc if the archive serves all its files, else None."""
        with tempfile.TemporaryDirectory(prefix="machofix-pin-fetch-") as into:
            fetch = subprocess.run(
                self.apt_command("source", "--download-only", f"{name}={version}"), cwd=into,
                capture_output=True, text=True)
            dsc = list(Path(into).glob("*.dsc"))
            if fetch.returncode != 0 or len(dsc) != 1:
                return None
            return hashlib.sha256(dsc[0].read_bytes()).hexdigest()

    def versions(self, name):
        """Every version of NAME the indexes list, newest first."""
        shown = self.apt_cache("showsrc", "--only-source", name)
        listed = sorted(set(re.findall(r"^Version: (\S+)$", shown, re.M)), key=functools.cmp_to_key(compare))
        return listed[::-1]

    def epoch_of(self, name, version):
        """VERSION as the indexes spell it, with its epoch (file names leave it out)."""
        shown = self.apt_cache("showsrc", "--only-source", name)
        for candidate in re.findall(r"^Version: (\S+)$", shown, re.M):
            if re.sub(r"^\d+:", "", candidate) == version:
                return candidate
        return version

    def apt_cache(self, *args):
        return subprocess.run(
            ["apt-cache", f"-oDir::Etc::SourceList={self.dir}/sources.list", "-oDir::Etc::SourceParts=/nonexistent",
             f"-oDir::State::Lists={self.dir}/lists", f"-oDir::Cache={self.dir}/cache", *args],
            capture_output=True, text=True).stdout


def older(a, b):
    return subprocess.run(["dpkg", "--compare-versions", a, "lt", b]).returncode == 0


def compare(a, b):
    return -1 if older(a, b) else (1 if older(b, a) else 0)


def newest_served(name, pinned, archive):
    """(version, sha256) of the newest version newer than PINNED that the archive serves,
    and the newer versions it lists but does not serve."""
    unserved = []
    for version in archive.versions(name):
        if not older(pinned, version):
            break
        sha256 = archive.served(name, version)
        if sha256:
            return (version, sha256), unserved
        unserved.append(version)
    return None, unserved


def lagging(pins, archive):
    """{name: (pinned version, newest version, newest sha256)} of the pins Debian has moved past."""
    result = {}
    for name, (version, _) in pins.items():
        newest, sha256 = archive.newest(name)
        if older(version, newest):
            result[name] = (version, newest, sha256)
    return result


def rewrite(text, updates):
    """The lock with each updated line's version and hash replaced, its spacing kept."""
    lines = []
    for line in text.splitlines(keepends=True):
        match = re.match(r"^(debian\s+(\S+)\s+)(\S+)(\s+)(\S+)(.*)$", line, re.S)
        if match and match.group(2) in updates:
            _, new_version, new_sha256 = updates[match.group(2)]
            width = len(match.group(3)) + len(match.group(4))  # the hash column stays where it was
            line = f"{match.group(1)}{new_version}{' ' * max(1, width - len(new_version))}{new_sha256}{match.group(6)}"
        lines.append(line)
    return "".join(lines)


def main(argv):
    if len(argv) < 2 or argv[1] not in ("lag", "update") or (argv[1] == "update" and len(argv) < 3):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    text = LOCK.read_text()
    try:
        pins = debian_pins(text)
        names = argv[2:]
        unknown = [n for n in names if n != "--all" and n not in pins]
        if unknown:
            raise PinError(f"not a Debian pin of {LOCK.name}: {', '.join(unknown)} (pinned: {', '.join(pins)})")
        with tempfile.TemporaryDirectory(prefix="machofix-pins-") as directory:
            archive = Archive(directory)
            behind = lagging(pins, archive)
            if argv[1] == "lag":
                for name, (version, newest, _) in behind.items():
                    print(f"{name} {version} lags Debian's {newest}")
                print(f"pins.py: {len(behind)} of {len(pins)} Debian pins lag")
                return 1 if behind else 0
            chosen = {}
            for name, (version, _, _) in behind.items():
                if "--all" not in names and name not in names:
                    continue
                found, unserved = newest_served(name, version, archive)
                for listed in unserved:
                    print(f"{name} {listed}: listed in Debian's indexes, but its files are not served: skipped")
                if found:
                    chosen[name] = (version, *found)
                else:
                    print(f"{name}: kept at {version}, no newer version is served")
    except PinError as error:
        print(f"pins.py: {error}", file=sys.stderr)
        return 2
    if chosen:
        part = LOCK.with_name(LOCK.name + ".part")
        part.write_text(rewrite(text, chosen))
        os.replace(part, LOCK)
    for name, (version, newest, sha256) in chosen.items():
        print(f"{name}: {version} -> {newest} (.dsc sha256 {sha256})")
    print(f"pins.py: {len(chosen)} pins moved in {LOCK.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
