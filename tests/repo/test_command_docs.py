#!/usr/bin/env python3
"""The command docs say what the binary does (issue: the gate in a team's CI):

    test_command_docs.py MACHOFIX SOURCE_DIR

For each command, docs/commands/COMMAND.md against `machofix help COMMAND`:
- every option the binary takes is documented in that page;
- every option the page's usage line (its title) names is one the binary takes;
- check.md's rule table lists exactly the binary's rules (its SARIF driver's), and each rule's default level in the "Levels" table is the one the binary
  gives (`defaultConfiguration`).
"""
import json
import os
import re
import subprocess
import sys

COMMANDS = ["inspect", "prune", "edit", "sign", "verify", "check"]
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
failures = []


def expect(what, condition, detail=""):
    print(f"{'ok' if condition else 'FAILED'}: {what}{'' if condition or not detail else ': ' + str(detail)[:600]}")
    if not condition:
        failures.append(what)


def binary_options(machofix, command):
    """{long option: its short alias or None} of `machofix help COMMAND`."""
    text = subprocess.run([machofix, "help", command], capture_output=True, text=True).stdout
    options = text.split("Options:", 1)[1].split("\n\n", 1)[0] if "Options:" in text else ""
    found = {}
    for line in options.splitlines():
        match = re.match(r"^\s+(?:(-[a-zA-Z]), )?(--[a-z][a-z0-9-]*)", line)
        if match and match.group(2) != "--help":
            found[match.group(2)] = match.group(1)
    return found


def documented(page, option, short):
    """The page names the option, or its short form as a word of code (`-j N`)."""
    return option in set(OPTION.findall(page)) or bool(short and re.search(r"(?<![\w-])" + short + r"(?![\w-])", page))


def main(argv):
    machofix, source = argv[1], argv[2]
    for command in COMMANDS:
        page = open(os.path.join(source, "docs", "commands", f"{command}.md")).read()
        takes = binary_options(machofix, command)
        missing = sorted(option for option, short in takes.items() if not documented(page, option, short))
        usage = set(OPTION.findall(page.splitlines()[0]))
        expect(f"{command}: the binary's options are all in docs/commands/{command}.md", takes and not missing, missing)
        expect(f"{command}: the usage line names only options the binary takes", usage <= set(takes) | {"--help"},
               sorted(usage - set(takes)))

    sarif = subprocess.run([machofix, "check", "--no-contract", "--sarif", "-", os.path.join(source, "no such model")],
                           capture_output=True, text=True).stdout
    rules = json.loads(sarif)["runs"][0]["tool"]["driver"]["rules"]
    ids = [rule["id"] for rule in rules]
    page = open(os.path.join(source, "docs", "commands", "check.md")).read()
    table = re.findall(r"^\| `([a-z-]+)` \| ", page.split("## Levels", 1)[0], re.MULTILINE)
    expect("check.md's rule table lists the binary's rules, each once", sorted(table) == sorted(ids) and
           len(set(table)) == len(table), (sorted(set(table) ^ set(ids)), table))
    levels_section = page.split("## Levels", 1)[1].split("\n## ", 1)[0]
    for rule in rules:
        default = rule["defaultConfiguration"]["level"]
        rows = [row for row in levels_section.splitlines() if row.startswith(f"| `{rule['id']}`")]
        if default == "error":
            named = [row for row in levels_section.splitlines() if row.startswith("| every other rule")]
            expect(f"check.md Levels: {rule['id']} is an error, among every other rule or in its own row",
                   rows or (named and f"`{rule['id']}`" in named[0]), rows)
        else:
            expect(f"check.md Levels: {rule['id']} defaults to {default}", any(f"| {default} |" in row for row in rows), rows)

    print(f"test_command_docs: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
