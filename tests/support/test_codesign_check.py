#!/usr/bin/env python3
"""Tests of the suite's independent signature oracle (codesign_check.py).

An oracle that accepts a broken signature lets every test that relies on it pass
when the product is wrong. Each case takes a linker-signed fixture, breaks one thing
the kernel or dyld checks, and requires the oracle to call the slice invalid with
the right problem, and machofix verify to refuse it too (two independent readers
that agree). The untouched fixture must be valid for both.
Usage: test_codesign_check.py MACHOFIX FIXTURE_DIR WORK_DIR
"""
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import codesign_check  # noqa: E402

SIGNED_FIXTURE = "aoti_metal_arm64_chained.in"  # signed by ld64.lld-16 (CodeDirectory only)


class Signature:
    """Where the signature's fields lie in the image."""

    def __init__(self, image):
        (dataoff, datasize), _ = codesign_check.signature_location(image)
        self.command = next(offset for cmd, offset in codesign_check.load_commands(image)
                            if cmd == codesign_check.LC_CODE_SIGNATURE)
        self.start, self.size = dataoff, datasize
        count = struct.unpack_from(">I", image, dataoff + 8)[0]
        slots = {struct.unpack_from(">I", image, dataoff + 12 + 8 * i)[0]: i for i in range(count)}
        self.index0 = dataoff + 12 + 8 * slots[0]  # BlobIndex of slot 0
        self.cd = dataoff + struct.unpack_from(">I", image, self.index0 + 4)[0]

    def field(self, image, offset, fmt=">I"):
        return struct.unpack_from(fmt, image, self.cd + offset)[0]


def put(image, offset, value, fmt=">I"):
    struct.pack_into(fmt, image, offset, value)


def one_code_slot_too_few(image, sig):
    put(image, sig.cd + 28, sig.field(image, 28) - 1)


def no_code_directory(image, sig):
    put(image, sig.index0, 2)  # the CodeDirectory's index now says Requirements


def page_size_2_15(image, sig):  # past the largest page xnu takes (16 KiB, arm64)
    put(image, sig.cd + 39, 15, ">B")


def wrong_hash_size(image, sig):
    put(image, sig.cd + 36, 20, ">B")


def unknown_hash_type(image, sig):
    put(image, sig.cd + 37, 9, ">B")


def identifier_not_terminated(image, sig):
    put(image, sig.cd + 20, sig.field(image, 4))  # identOffset == length: nothing after it


def special_slots_overlap_header(image, sig):
    put(image, sig.cd + 24, sig.field(image, 16) // sig.field(image, 36, ">B") + 1)


def superblob_longer_than_datasize(image, sig):
    put(image, sig.start + 4, sig.size + 8)


def blob_outside_superblob(image, sig):
    put(image, sig.index0 + 4, struct.unpack_from(">I", image, sig.start + 4)[0])


def code_limit_short(image, sig):
    put(image, sig.cd + 32, sig.field(image, 32) - 16)
    if sig.field(image, 8) >= 0x20300:
        put(image, sig.cd + 56, 0, ">Q")


def code_changed(image, sig):
    image[sig.start - 64] ^= 0xFF  # the last page before the signature (padding and LINKEDIT data)


def superblob_magic(image, sig):
    put(image, sig.start, 0xFADE0C01)


def datasize_past_the_file(image, sig):
    struct.pack_into("<I", image, sig.command + 12, sig.size + 4096)


CASES = [
    (one_code_slot_too_few, "code slots for codeLimit"),
    (no_code_directory, "no CodeDirectory in slot 0"),
    (page_size_2_15, "page size 2^15"),
    (wrong_hash_size, "hash size 20"),
    (unknown_hash_type, "unknown hash type"),
    (identifier_not_terminated, "not NUL-terminated"),
    (special_slots_overlap_header, "special slots do not fit"),
    (superblob_longer_than_datasize, "exceeds the signature's datasize"),
    (blob_outside_superblob, "runs past the SuperBlob"),
    (code_limit_short, "codeLimit"),
    (code_changed, "hash mismatch"),
    (superblob_magic, "SuperBlob magic"),
    (datasize_past_the_file, "ends past the slice"),
]


def main():
    machofix, fixtures, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(fixtures, SIGNED_FIXTURE), "rb") as handle:
        original = handle.read()
    failures = []
    status, problems = codesign_check.check_slice(original)
    if status != "valid":
        failures.append(f"the untouched fixture is {status}: {problems}")
    for breaks, expected in CASES:
        image = bytearray(original)
        breaks(image, Signature(original))
        status, problems = codesign_check.check_slice(bytes(image))
        if status != "invalid" or not any(expected in problem for problem in problems):
            failures.append(f"{breaks.__name__}: the oracle says {status} {problems}, expected a problem '{expected}'")
        path = os.path.join(work, breaks.__name__)
        with open(path, "wb") as handle:
            handle.write(image)
        verify = subprocess.run([machofix, "verify", path], capture_output=True, text=True)
        if verify.returncode == 0:
            failures.append(f"{breaks.__name__}: machofix verify accepts it (the two readers disagree)")
        print(f"{breaks.__name__}: oracle {status} {problems[:1]}; machofix verify exit {verify.returncode}")
    for failure in failures:
        print("FAIL:", failure)
    print(f"{len(CASES) - len(failures)}/{len(CASES)} broken signatures refused by the oracle and by machofix")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
