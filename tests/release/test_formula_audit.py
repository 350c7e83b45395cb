#!/usr/bin/env python3
"""docs/release.md's checklist of homebrew-core's audit rules names, for each rule, the
line of Formula/machofix.rb that meets it: each such line must be in the formula, so
that the checklist cannot outlive the formula it describes. Neither `brew audit` nor
Ruby runs here.

Usage: test_formula_audit.py SOURCE_DIR
"""
import os
import re
import sys

HEADING = "### homebrew-core's audit, rule by rule"


def checklist(document):
    """The (rule, formula line) rows of the table under HEADING."""
    section = document.partition(HEADING)[2].split("\n## ", 1)[0].split("\n### ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = re.match(r"^\| (.+?) \| `(.+)` \|$", line)
        if cells:
            rows.append((cells.group(1), cells.group(2).replace("\\\\", "\\")))
    return rows


def main():
    source = sys.argv[1]
    with open(os.path.join(source, "docs", "release.md")) as handle:
        rows = checklist(handle.read())
    with open(os.path.join(source, "Formula", "machofix.rb")) as handle:
        formula = [line.strip() for line in handle]
    failures = []
    if len(rows) < 10:
        failures.append(f"docs/release.md: the checklist under {HEADING!r} has {len(rows)} rows")
    for rule, line in rows:
        found = any(line in formula_line for formula_line in formula)
        print(f"{'ok  ' if found else 'FAIL'} {rule}: {line}")
        if not found:
            failures.append(f"no line of Formula/machofix.rb holds {line!r} (rule: {rule})")
    for failure in failures:
        print(f"FAIL {failure}")
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
