"""Microsoft's SARIF multitool (npm: @microsoft/sarif-multitool, with its Linux
package), the validator GitHub points SARIF producers to: the SARIF 2.1.0 schema and
its rules, plus GitHub code scanning's ingestion rules (rule kind "Ghas").

Installed with `npm install` into a cache outside the repository
($MACHOFIX_CACHE/../npm/sarif-multitool, else ~/.cache/machofix/npm/sarif-multitool).
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus"))
from fetch_corpus import classify_npm_failure  # noqa: E402

PACKAGE = "@microsoft/sarif-multitool@5.7.0"
LINE = re.compile(r"^(?P<file>.+?)\((?P<line>\d+),(?P<column>\d+)\): (?P<level>error|warning|note) (?P<rule>\w+): (?P<text>.*)$")


def _cache():
    corpus = os.environ.get("MACHOFIX_CACHE")
    base = os.path.dirname(os.path.abspath(corpus)) if corpus else os.path.join(os.path.expanduser("~"), ".cache",
                                                                                "machofix")
    return os.path.join(base, "npm", "sarif-multitool")


def executable():
    """The multitool's command, installed on first use; None when npm's registry cannot
    be reached and nothing is cached (the reason is printed)."""
    cache = _cache()
    tool = os.path.join(cache, "node_modules", ".bin", "sarif-multitool")
    if os.path.exists(tool):
        return tool
    os.makedirs(cache, exist_ok=True)
    done = subprocess.run(["npm", "install", "--no-save", "--no-audit", "--no-fund", "--loglevel=error",
                           "--fetch-retries=1", "--prefix", cache, PACKAGE], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        kind, reason = classify_npm_failure(done.stdout + done.stderr)
        if kind == "unreachable":
            print(f"SKIP the SARIF multitool: npm registry unreachable: {reason}")
            return None
        raise SystemExit(f"npm install {PACKAGE} failed: {reason}")
    return tool


def validate(paths, output_dir):
    """[(level, rule, file, text)] the multitool reports for the SARIF files, with
    GitHub's ingestion rules; None when it is not available."""
    tool = executable()
    if tool is None:
        return None
    found = []
    for index, path in enumerate(paths):
        # The npm wrapper hands its arguments to a shell: the lists are quoted for it.
        done = subprocess.run([tool, "validate", path, "--output", os.path.join(output_dir, f"validation-{index}.sarif"),
                               "--log", "ForceOverwrite", "--rule-kind", '"Sarif;Ghas"', "--level", '"Error;Warning;Note"'],
                              capture_output=True, text=True, timeout=300)
        for line in done.stdout.splitlines():
            match = LINE.match(line.strip())
            if match:
                found.append((match["level"], match["rule"], path, match["text"]))
        if done.returncode != 0 and not any(level == "error" for level, _, p, _ in found if p == path):
            found.append(("error", "multitool", path, f"exit {done.returncode}: {done.stdout[-300:]} {done.stderr[-300:]}"))
    return found
