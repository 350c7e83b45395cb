#!/usr/bin/env python3
"""The documentation holds together: every relative link in README.md, CONTRIBUTING.md
and docs/ (and tests/README.md) names a file of the repository, and every heading
anchor it names exists; the README stays a front page (at most 250 lines, the two
set-up commands in it); every docs/ page is reachable from the README.

  docs.py SOURCE_DIR
"""
import re
import sys
from pathlib import Path

README_LIMIT = 250
SETUP_COMMANDS = ("scripts/demo.sh", "scripts/test.sh")


def without_code(text):
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(path):
    """GitHub's anchors for a Markdown file's headings (code spans keep their text)."""
    headings = re.findall(r"(?m)^#{1,6} (.+)$", re.sub(r"```.*?```", "", path.read_text(), flags=re.S))
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def links(path):
    return re.findall(r"\]\(([^)\s]+)\)", without_code(path.read_text()))


def main(root):
    root = Path(root)
    pages = [root / "README.md", root / "CONTRIBUTING.md", root / "tests" / "README.md", *sorted((root / "docs").rglob("*.md"))]
    problems = []
    reached = set()
    for page in pages:
        for link in links(page):
            if re.match(r"[a-z]+:", link):
                continue
            target, _, anchor = link.partition("#")
            resolved = (page.parent / target).resolve() if target else page.resolve()
            if not resolved.exists():
                problems.append(f"{page.relative_to(root)}: link to {link}: no such file")
                continue
            reached.add(resolved)
            if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                problems.append(f"{page.relative_to(root)}: link to {link}: no heading with that anchor")
    readme = (root / "README.md").read_text()
    lines = readme.count("\n")
    if lines > README_LIMIT:
        problems.append(f"README.md: {lines} lines, more than the {README_LIMIT} of a front page: move the detail to docs/")
    for command in SETUP_COMMANDS:
        if command not in readme:
            problems.append(f"README.md: the set-up command {command} is missing")
    # Reachable from the README through links, directly or through another page.
    frontier, seen = [root / "README.md"], set()
    while frontier:
        page = frontier.pop().resolve()
        if page in seen or page.suffix != ".md" or not page.exists():
            continue
        seen.add(page)
        frontier += [(page.parent / link.partition("#")[0]) for link in links(page)
                     if not re.match(r"[a-z]+:", link) and link.partition("#")[0]]
    for page in sorted((root / "docs").rglob("*.md")):
        if page.resolve() not in seen:
            problems.append(f"{page.relative_to(root)}: no link from README.md leads here")
    for problem in problems:
        print("FAIL " + problem)
    print(f"{len(pages)} pages, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
