#!/usr/bin/env python3
"""The GitHub workflows (.github/workflows/*.yml) against a schema validator for them.

    test_workflows.py REPOSITORY

GitHub cannot be reached from this project's CI, so the workflows never run here;
what can be checked is that GitHub would accept them. action-validator (npm:
@action-validator/cli, with its core and chalk) holds each workflow to SchemaStore's
schema of GitHub workflows. Its three tarballs are pinned in pins.lock ("npm ...
test"), fetched once with `npm pack`, checked against their sha512, and installed
offline into ~/.cache/machofix/npm-tools.

One known gap, said when met: the validator's schema (0.6.0) predates the
`attestations` permission, which actions/attest-build-provenance needs; that one line
is left out of what the validator reads. A workflow broken on purpose (a job without
runs-on) must fail, so that a validator that accepts everything is caught.
Exit 77 (skipped) only when the npm registry cannot be reached and nothing is cached.
"""

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

KNOWN_GAP = re.compile(r"^\s+attestations: write\b.*\n", re.M)


def pins(repo):
    rows = [line.split() for line in (repo / "pins.lock").read_text().splitlines()]
    return [(r[1], r[2], r[3]) for r in rows if len(r) == 5 and r[0] == "npm" and r[4] == "test"]


def cache_dir(packages):
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key = hashlib.sha256(" ".join(f"{n}@{v}:{h}" for n, v, h in packages).encode()).hexdigest()[:16]
    return Path(base) / "machofix" / "npm-tools" / f"action-validator-{key}"


def install(packages, target):
    """The pinned tarballs, each checked, installed offline; raises OSError if npm cannot fetch."""
    with tempfile.TemporaryDirectory(prefix="machofix-action-validator-") as scratch:
        tarballs = []
        for name, version, integrity in packages:
            packed = subprocess.run(["npm", "pack", "--silent", "--pack-destination", scratch, f"{name}@{version}"],
                                    capture_output=True, text=True, timeout=300)
            if packed.returncode != 0:
                raise OSError(f"npm pack {name}@{version}: {packed.stderr.strip()[-300:]}")
            tarball = Path(scratch) / packed.stdout.strip().splitlines()[-1]
            got = "sha512-" + base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
            if got != integrity:
                raise ValueError(f"{name}@{version}: integrity {got}, pins.lock says {integrity}")
            tarballs.append(str(tarball))
        prefix = Path(scratch) / "tool"
        prefix.mkdir()
        subprocess.run(["npm", "install", "--offline", "--no-audit", "--no-fund", "--no-save", "--silent", *tarballs],
                       cwd=prefix, check=True, timeout=300)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(target, ignore_errors=True)
        shutil.move(str(prefix), target)


def validate(validator, text, scratch, name):
    path = Path(scratch) / name
    path.write_text(text)
    return subprocess.run([str(validator), str(path)], capture_output=True, text=True, timeout=120)


def main(argv):
    repo = Path(argv[1]).resolve()
    packages = pins(repo)
    tool = cache_dir(packages)
    validator = tool / "node_modules" / ".bin" / "action-validator"
    if not validator.exists():
        try:
            install(packages, tool)
        except OSError as error:
            print(f"SKIP: the npm registry cannot be reached to fetch action-validator: {error}")
            return 77
    failures = []

    def expect(what, condition, detail=""):
        print(f"{'ok' if condition else 'FAILED'}: {what}")
        if not condition:
            failures.append(what)
            print("  | " + detail.strip()[-3000:].replace("\n", "\n  | "))

    workflows = sorted((repo / ".github" / "workflows").glob("*.yml"))
    expect("there are workflows to validate", bool(workflows))
    with tempfile.TemporaryDirectory(prefix="machofix-workflows-") as scratch:
        for workflow in workflows:
            text = workflow.read_text()
            read = KNOWN_GAP.sub("", text)
            if read != text:
                print(f"note: {workflow.name}: 'attestations: write' left out (the validator's schema predates it)")
            result = validate(validator, read, scratch, workflow.name)
            expect(f"{workflow.name}: a valid GitHub workflow", result.returncode == 0, result.stdout + result.stderr)
        broken = re.sub(r"^(\s+)runs-on:.*\n", "", workflows[0].read_text(), count=1, flags=re.M)
        result = validate(validator, KNOWN_GAP.sub("", broken), scratch, "broken.yml")
        expect("a job without runs-on is refused", result.returncode != 0, result.stdout)
    print(f"{len(workflows) + 2 - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
