#!/usr/bin/env python3
"""Runs the unit tests that use the .pte files ExecuTorch's own serializer wrote.

Those files are provided beside the repository (../shared/samples), not in it.
Looks in $MACHOFIX_SAMPLES, then ../shared/samples next to the checkout; exits 77
(ctest: skipped, with this message) if neither has them.
Usage: run_samples.py UNIT_TESTS_EXECUTABLE
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CANDIDATES = [os.environ.get("MACHOFIX_SAMPLES"), os.path.join(ROOT, "..", "shared", "samples")]
NEEDED = ("metal_hashkeys.pte", "metal_methodkeys.pte")


def main():
    for directory in filter(None, CANDIDATES):
        if all(os.path.isfile(os.path.join(directory, name)) for name in NEEDED):
            environment = dict(os.environ, MACHOFIX_SAMPLES=os.path.abspath(directory))
            print(f"ExecuTorch samples: {os.path.abspath(directory)}", flush=True)
            return subprocess.call([sys.argv[1], "--test-suite=executorch-samples"], env=environment)
    print("SKIP: the ExecuTorch sample .pte files were not found in %s (set MACHOFIX_SAMPLES)"
          % " or ".join(os.path.abspath(d) for d in filter(None, CANDIDATES)))
    return 77


if __name__ == "__main__":
    sys.exit(main())
