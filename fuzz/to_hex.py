#!/usr/bin/env python3
"""Binary <-> the .hex text form of fuzz reproducers (fuzz/regressions/<target>/*.hex).

    to_hex.py encode INPUT OUTPUT.hex [COMMENT...]   binary -> hex text
    to_hex.py decode INPUT.hex OUTPUT                hex text -> binary

Hex text (what fuzz/replay.cc reads): pairs of hex digits, "XX*N" for the byte XX
repeated N (decimal) times, whitespace ignored, '#' starts a comment to the end of
the line. encode writes runs of 16 or more equal bytes as "XX*N".
"""
import re
import sys

RUN = 16


def decode(text):
    out = bytearray()
    body = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    for token in re.findall(r"[0-9a-fA-F]{2}(?:\*\d+)?|\S", body):
        match = re.fullmatch(r"([0-9a-fA-F]{2})(?:\*(\d+))?", token)
        if not match:
            raise ValueError("not hex: %r" % token)
        out += bytes([int(match.group(1), 16)]) * int(match.group(2) or 1)
    return bytes(out)


def encode(data, comments):
    tokens, i = [], 0
    while i < len(data):
        j = i
        while j < len(data) and data[j] == data[i]:
            j += 1
        if j - i >= RUN:
            tokens.append("%02x*%d" % (data[i], j - i))
            i = j
        else:
            tokens.append("%02x" % data[i])
            i += 1
    lines, line = [], ""
    for token in tokens:
        separator = "" if len(token) == 2 and line and len(line.split(" ")[-1]) % 2 == 0 and "*" not in line.split(" ")[-1] else " "
        candidate = (line + separator + token) if line else token
        if len(candidate) > 96:
            lines.append(line)
            candidate = token
        line = candidate
    if line:
        lines.append(line)
    return "\n".join(["# " + c for c in comments] + lines) + "\n"


def main(argv):
    if len(argv) >= 3 and argv[0] == "encode":
        with open(argv[1], "rb") as f:
            data = f.read()
        with open(argv[2], "w") as f:
            f.write(encode(data, argv[3:]))
        return 0
    if len(argv) == 3 and argv[0] == "decode":
        with open(argv[1]) as f:
            data = decode(f.read())
        with open(argv[2], "wb") as f:
            f.write(data)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
