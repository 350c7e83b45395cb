#!/usr/bin/env python3
"""An independent check of embedded code signatures, for tests.

Written from shared/spec/codesign.md with hashlib only, sharing nothing with
machofix's C++ verifier: for every slice, every CodeDirectory's code-page hashes
and special-slot hashes are recomputed and compared. Usage: codesign_check.py FILE
prints one line per slice and exits 1 if any signed slice is invalid.
"""
import hashlib
import struct
import sys

HASHES = {1: ("sha1", 20), 2: ("sha256", 32), 3: ("sha256", 20), 4: ("sha384", 48)}
CD_MAGIC, SUPERBLOB_MAGIC = 0xFADE0C02, 0xFADE0CC0
CD_SLOTS = {0} | set(range(0x1000, 0x1005))


def slices(data):
    magic = struct.unpack_from(">I", data)[0]
    if magic in (0xCAFEBABE, 0xCAFEBABF):
        fat64 = magic == 0xCAFEBABF
        count = struct.unpack_from(">I", data, 4)[0]
        for i in range(count):
            if fat64:
                _, _, offset, size, _, _ = struct.unpack_from(">IIQQII", data, 8 + 32 * i)
            else:
                _, _, offset, size, _ = struct.unpack_from(">IIIII", data, 8 + 20 * i)
            yield data[offset:offset + size]
    else:
        yield data


def signature_location(image):
    _, cputype, _, _, ncmds, _, _, _ = struct.unpack_from("<IIIIIIII", image)
    offset = 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", image, offset)
        if cmd == 0x1D:
            return cputype, struct.unpack_from("<II", image, offset + 8)
        offset += size
    return cputype, None


def check_code_directory(image, superblob, blobs, cd_offset, code_limit_expected):
    problems = []
    (magic, length, version, flags, hash_offset, ident_offset, n_special, n_code, code_limit, hash_size,
     hash_type, platform, page_log2) = struct.unpack_from(">IIIIIIIIIBBBB", superblob, cd_offset)
    if version >= 0x20300:
        code_limit64 = struct.unpack_from(">Q", superblob, cd_offset + 56)[0]
        code_limit = code_limit64 or code_limit
    name, size = HASHES[hash_type]
    label = f"CodeDirectory {name}{'/' + str(size) if size != hashlib.new(name).digest_size else ''}"
    if size != hash_size:
        problems.append(f"{label}: hash size {hash_size}")
    if code_limit != code_limit_expected:
        problems.append(f"{label}: codeLimit {code_limit:#x} != signature offset {code_limit_expected:#x}")
    page = 1 << page_log2 if page_log2 else code_limit
    cd = cd_offset
    for index in range(n_code):
        start = index * page
        digest = hashlib.new(name, image[start:min(start + page, code_limit)]).digest()[:size]
        stored = superblob[cd + hash_offset + index * size:cd + hash_offset + (index + 1) * size]
        if digest != stored:
            problems.append(f"{label}: page {index} hash mismatch")
    for slot in range(1, n_special + 1):
        stored = superblob[cd + hash_offset - slot * size:cd + hash_offset - (slot - 1) * size]
        if slot in blobs:
            blob_offset = blobs[slot]
            blob_length = struct.unpack_from(">I", superblob, blob_offset + 4)[0]
            digest = hashlib.new(name, superblob[blob_offset:blob_offset + blob_length]).digest()[:size]
            if digest != stored:
                problems.append(f"{label}: special slot {slot} hash mismatch")
        elif slot not in (1, 3) and any(stored):
            problems.append(f"{label}: special slot {slot} is set but no blob")
    return problems


def check_slice(image):
    cputype, location = signature_location(image)
    if location is None:
        return "unsigned", []
    dataoff, datasize = location
    superblob = image[dataoff:dataoff + datasize]
    magic, length, count = struct.unpack_from(">III", superblob)
    if magic != SUPERBLOB_MAGIC:
        return "invalid", [f"SuperBlob magic {magic:#x}"]
    blobs = {}
    for i in range(count):
        slot, offset = struct.unpack_from(">II", superblob, 12 + 8 * i)
        blobs[slot] = offset
    problems = []
    for slot, offset in blobs.items():
        if slot in CD_SLOTS:
            problems += check_code_directory(image, superblob, blobs, offset, dataoff)
    return ("valid" if not problems else "invalid"), problems


def check_file(path):
    with open(path, "rb") as handle:
        data = handle.read()
    return [check_slice(image) for image in slices(data)]


def main():
    bad = False
    for status, problems in check_file(sys.argv[1]):
        print(status, *problems, sep="\n  ")
        bad |= status == "invalid"
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
