#!/usr/bin/env python3
"""core/'s layers (CMakeLists.txt, docs/design.md "Layers"): a file includes headers of its own
layer and the layers below it only. The libraries already refuse a call upwards at
link time; this also refuses a type or an inline function used upwards, and a file
placed outside every layer.

  tests/repo/layers.py SOURCE_DIR
"""
import os
import re
import sys

LAYERS = ["base", "format", "rewrite", "io", "lief", "app", "jobs"]
INCLUDE = re.compile(r'^#include "core/([a-z]+)/[a-z_]+\.h"', re.MULTILINE)


def problems_in(root):
    problems, scanned = [], 0
    core = os.path.join(root, "core")
    for directory, _, files in os.walk(core):
        for name in sorted(f for f in files if f.endswith((".cc", ".h"))):
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, root)
            layer = os.path.relpath(directory, core).split(os.sep)[0]
            scanned += 1
            if layer not in LAYERS:
                problems.append(f"{relative}: not in a layer ({', '.join(LAYERS)})")
                continue
            with open(path, encoding="utf-8") as handle:
                for included in INCLUDE.findall(handle.read()):
                    if included not in LAYERS:
                        problems.append(f"{relative}: includes a header of core/{included}/, no layer")
                    elif LAYERS.index(included) > LAYERS.index(layer):
                        problems.append(f"{relative} ({layer}) includes a header of the higher layer {included}")
    return problems, scanned


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        for layer, text in (("base", '#include "core/format/macho.h"\n'), ("format", '#include "core/base/bytes.h"\n')):
            os.makedirs(os.path.join(root, "core", layer))
            with open(os.path.join(root, "core", layer, "x.cc"), "w") as handle:
                handle.write(text)
        problems, _ = problems_in(root)
        assert problems == ["core/base/x.cc (base) includes a header of the higher layer format"], problems


def main(root):
    self_test()
    problems, scanned = problems_in(root)
    for problem in problems:
        print(problem)
    print(f"{scanned} files in {len(LAYERS)} layers: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
