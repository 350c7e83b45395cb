#!/usr/bin/env python3
"""One owner for structural load-command edits: only core/rewrite/load_commands.cc
(LoadCommandList) writes a header's ncmds or sizeofcmds. A write elsewhere, by field
name (offsetof(MachHeader64, ncmds)) or by its literal offset (16, 20), fails.

Usage: one_load_command_owner.py SOURCE_DIR
"""
import os
import re
import sys

OWNER = os.path.join("core", "rewrite", "load_commands.cc")
# A bounds-checked write (put_u32, put_be32, put, ...) and its offset, the second
# argument (one level of parentheses allowed: offsetof(T, field)).
WRITE = re.compile(r"\bput(?:_[a-z]+\d*)?\(\s*[^,()]+,\s*((?:[^,()]|\([^()]*\))+),")
# An offset that is the header's ncmds or sizeofcmds: by field or constant name, or literally.
HEADER_COUNT = re.compile(r"ncmds|sizeofcmds|^\s*(?:16|20)\s*$", re.IGNORECASE)


def writes(text):
    return [match.group(0) for match in WRITE.finditer(text) if HEADER_COUNT.search(match.group(1))]


def self_test():
    assert writes("put_u32(out, offsetof(macho::MachHeader64, ncmds), ncmds());")
    assert writes("put_u32(stripped, 20, image.sizeofcmds - removed.size);")
    assert writes("put_u32(out.bytes, 16, image.ncmds + 1);")
    assert writes("put_u32(out, macho::kHeaderSizeofcmdsOffset, static_cast<uint32_t>(needed));")
    assert not writes("put_u32(out, command.offset + offsetof(macho::DylibCommand, cmd), macho::LC_LOAD_WEAK_DYLIB);")
    assert not writes("put_bytes(out, sizeof(macho::MachHeader64), bytes.data(), bytes.size());")
    assert not writes("put_u64(segment, offsetof(macho::SegmentCommand64, filesize), size);")


def main(root):
    self_test()
    problems, scanned = [], 0
    for folder in ("core", "tool"):
        for directory, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(f for f in files if f.endswith((".cc", ".h"))):
                path = os.path.join(directory, name)
                relative = os.path.relpath(path, root)
                scanned += 1
                if relative == OWNER:
                    continue
                with open(path, encoding="utf-8") as handle:
                    for number, line in enumerate(handle, 1):
                        for found in writes(line):
                            problems.append("%s:%d: %s" % (relative, number, found))
    for problem in problems:
        print("ncmds/sizeofcmds written outside %s: %s" % (OWNER, problem))
    print("%d source files scanned, %d writes of ncmds/sizeofcmds outside %s" % (scanned, len(problems), OWNER))
    return 1 if problems or scanned < 20 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
