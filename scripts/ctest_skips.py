#!/usr/bin/env python3
"""Lists every test ctest skipped, with the reason the test printed, and the parts
that passing tests left out ("SKIPPED: ..." lines): ctest itself shows only
"***Skipped" (--output-on-failure prints nothing of a skipped test).

Usage: ctest_skips.py JUNIT_XML   (written by `ctest --output-junit FILE`)
"""
import sys
import xml.etree.ElementTree as ElementTree


def skip_lines(output):
    return [line.strip() for line in output.splitlines() if line.lstrip().startswith(("SKIP:", "SKIPPED:"))]


def main(path):
    try:
        cases = list(ElementTree.parse(path).getroot().iter("testcase"))
    except (OSError, ElementTree.ParseError) as error:
        print("ctest: no results to list skips from (%s)" % error)
        return 0
    skipped, partial = [], []
    for case in cases:
        output = "".join(node.text or "" for node in case.iter("system-out"))
        reasons = skip_lines(output)
        if case.find("skipped") is not None:
            last = [line for line in output.splitlines() if line.strip()][-1:]
            skipped.append((case.get("name"), (reasons or last or ["(the test printed no reason)"])[0]))
        elif reasons:
            partial.extend((case.get("name"), reason) for reason in reasons)
    if skipped:
        print("ctest: %d test%s skipped:" % (len(skipped), "" if len(skipped) == 1 else "s"))
        for name, reason in skipped:
            print("  %s: %s" % (name, reason))
    if partial:
        print("ctest: parts of passing tests skipped:")
        for name, reason in partial:
            print("  %s: %s" % (name, reason))
    if not skipped and not partial:
        print("ctest: no test skipped, nothing left out")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
