#!/usr/bin/env python3
"""No path of a particular machine in the repository: no absolute path into a home
directory (/root, /home, /Users), a workplace (/work, /mnt) or a pyenv, in any
file of the source tree (build directories and .git left out). Files beside the
repository are reached as ../shared, through $MACHOFIX_SAMPLES or $HOME.

Usage: no_machine_paths.py SOURCE_DIR
"""
import os
import re
import sys

# An absolute path starting at one of these directories: at the start of a word
# (so "${CMAKE_BINARY_DIR}/work/x" and "build/work" are not one).
# (Written so that this file does not match itself.)
MACHINE_PATH = re.compile(r"(?<![\w.}/$-])/(?:work|root|home|Users|mnt)/[\w.-]+|\.pyenv" + "/")
SKIPPED = re.compile(r"^(\.git|build.*|__pycache__|\.cache)$")


def machine_paths(text):
    return [match.group(0) for match in MACHINE_PATH.finditer(text)]


def self_test():
    found = machine_paths('x = "/WORK/shared/samples"\nPATH=/ROOT/.PYENV/shims\ncd /HOME/dev/src\n'.lower())
    assert found == [p.lower() for p in ("/WORK/shared", "/ROOT/.PYENV", "/HOME/dev")], found
    assert not machine_paths("${CMAKE_BINARY_DIR}/work/e2e build/work/x $HOME/.cache ../shared/samples"
                             " /opt/llvm-openmp/lib/libomp.dylib /usr/local/share/ca-certificates")


def main(root):
    self_test()
    problems, scanned = [], 0
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(d for d in subdirectories if not SKIPPED.match(d))
        for name in sorted(f for f in files if not SKIPPED.match(f)):
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                data = handle.read()
            if b"\0" in data[:8192]:
                continue  # binary
            scanned += 1
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                for found in machine_paths(line):
                    problems.append("%s:%d: %s" % (os.path.relpath(path, root), number, found))
    for problem in problems:
        print("machine path: " + problem)
    print("%d text files scanned, %d machine paths" % (scanned, len(problems)))
    return 1 if problems or scanned < 50 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
