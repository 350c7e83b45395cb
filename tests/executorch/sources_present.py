#!/usr/bin/env python3
"""Fails when configure could not put ExecuTorch's sources in place, so that a clone
without them never passes with fewer tests (docs/testing.md), unless asked to:

    sources_present.py MISSING_FILE

MISSING_FILE: what tests/executorch/CMakeLists.txt wrote, empty when nothing is
missing. MACHOFIX_TESTS_WITHOUT_EXECUTORCH=1 turns the failure into a skip.
"""
import os
import sys
from pathlib import Path

missing = Path(sys.argv[1]).read_text().strip()
if not missing:
    print("ExecuTorch's runtime and Python sources are in place")
    sys.exit(0)
print(f"{missing}\nThe tests that run ExecuTorch's own code skip without them.")
if os.environ.get("MACHOFIX_TESTS_WITHOUT_EXECUTORCH") == "1":
    print("skipped: MACHOFIX_TESTS_WITHOUT_EXECUTORCH=1 asks for a run without them")
    sys.exit(77)
sys.exit(1)
