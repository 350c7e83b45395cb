#!/usr/bin/env python3
"""Turns an lld-signed thin Mach-O into one that looks signed with an identity.

Tests need a "Developer ID" file (a signature with a non-empty CMS blob) to show
that machofix refuses to re-sign it without --adhoc. No certificate is involved:
the CMS blob holds placeholder bytes, which is all machofix looks at (the CMS
signature itself cannot be checked without Apple's trust store). The CodeDirectory
is rebuilt codesign-style: flags 0 (not ad hoc), two special slots, the
requirements hash in slot 2, the code-page hashes of the input kept. With
--resources, slot 3 seals a bundle's CodeResources (a file outside the Mach-O: the
hash of placeholder bytes), so that three slots are used; with --entitlements, an
entitlements blob is added too, sealed in slot 5.
Usage: identity_sign.py IN OUT [--resources] [--entitlements]
"""
import hashlib
import struct
import sys

LC_SEGMENT_64, LC_CODE_SIGNATURE = 0x19, 0x1D


def commands(image):
    ncmds = struct.unpack_from("<I", image, 16)[0]
    offset = 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", image, offset)
        yield cmd, offset
        offset += size


def code_directory(superblob):
    count = struct.unpack_from(">I", superblob, 8)[0]
    for i in range(count):
        slot, offset = struct.unpack_from(">II", superblob, 12 + 8 * i)
        if slot == 0:
            return offset
    raise SystemExit("no CodeDirectory")


RESOURCES_HASH = hashlib.sha256(b"placeholder CodeResources").digest()


def rebuild_cd(superblob, sealed, image):
    """`sealed`: {slot: bytes hashed into it} for the special slots, the highest first
    in the CodeDirectory (slot n sits n hashes before the code hashes)."""
    at = code_directory(superblob)
    (magic, length, version, flags, hash_offset, ident_offset, n_special, n_code, code_limit, hash_size, hash_type,
     platform, page_log2) = struct.unpack_from(">IIIIIIIIIBBBB", superblob, at)
    identifier = superblob[at + ident_offset:superblob.index(b"\0", at + ident_offset) + 1]
    page = 1 << page_log2
    code_hashes = b"".join(hashlib.sha256(image[p * page:min((p + 1) * page, code_limit)]).digest()[:hash_size]
                           for p in range(n_code))
    header_size = 88  # version 0x20400
    n_special = max(sealed)
    special = [sealed[slot][:hash_size] if slot in sealed else b"\0" * hash_size for slot in range(1, n_special + 1)]
    ident_at = header_size
    new_hash_offset = ident_at + len(identifier) + n_special * hash_size
    header = struct.pack(">IIIIIIIIIBBBBI", 0xFADE0C02, new_hash_offset + len(code_hashes), 0x20400, 0,
                         new_hash_offset, ident_at, n_special, n_code, code_limit, hash_size, hash_type, platform,
                         page_log2, 0)
    tail = superblob[at + 44:at + header_size]  # scatter, team, spare3, codeLimit64, execSeg fields as they were
    header += bytes(tail[:4]) + struct.pack(">I", 0) + bytes(tail[8:])  # no team id
    return header + identifier + b"".join(reversed(special)) + code_hashes


def main():
    source, target = sys.argv[1:3]
    options = sys.argv[3:]
    image = bytearray(open(source, "rb").read())
    signature = next(offset for cmd, offset in commands(image) if cmd == LC_CODE_SIGNATURE)
    dataoff, datasize = struct.unpack_from("<II", image, signature + 8)
    if dataoff + datasize != len(image):
        raise SystemExit("the signature must end the file (as ld64.lld places it)")
    requirements = struct.pack(">III", 0xFADE0C01, 12, 0)
    entitlements_xml = b'<?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><dict/></plist>\n'
    entitlements = struct.pack(">II", 0xFADE7171, 8 + len(entitlements_xml)) + entitlements_xml
    cms = struct.pack(">II", 0xFADE0B01, 8 + 512) + bytes([0x30]) * 512  # placeholder, not a real CMS
    old_superblob = bytes(image[dataoff:dataoff + datasize])

    def superblob_for(image):
        sealed = {2: hashlib.sha256(requirements).digest()}
        blobs = [(2, requirements)]
        if "--resources" in options:
            sealed[3] = RESOURCES_HASH
        if "--entitlements" in options:
            sealed[5] = hashlib.sha256(entitlements).digest()
            blobs.append((5, entitlements))
        cd = rebuild_cd(old_superblob, sealed, image)
        blobs = [(0, cd)] + blobs + [(0x10000, cms)]
        offset = 12 + 8 * len(blobs)
        index, body = b"", b""
        for slot, blob in blobs:
            index += struct.pack(">II", slot, offset + len(body))
            body += blob
        superblob = struct.pack(">III", 0xFADE0CC0, offset + len(body), len(blobs)) + index + body
        return superblob + b"\0" * (-len(superblob) % 16)

    # The size does not depend on the hashes: fix the header first, then hash it.
    size = len(superblob_for(image))
    growth = size - datasize
    struct.pack_into("<I", image, signature + 12, size)
    for cmd, at in commands(image):
        if cmd == LC_SEGMENT_64 and image[at + 8:at + 18] == b"__LINKEDIT":
            filesize = struct.unpack_from("<Q", image, at + 48)[0] + growth
            vmsize = max(struct.unpack_from("<Q", image, at + 32)[0], (filesize + 0x3FFF) & ~0x3FFF)
            struct.pack_into("<QQ", image, at + 32, vmsize, struct.unpack_from("<Q", image, at + 40)[0])
            struct.pack_into("<Q", image, at + 48, filesize)
    image[dataoff:] = superblob_for(image)
    open(target, "wb").write(image)


if __name__ == "__main__":
    main()
