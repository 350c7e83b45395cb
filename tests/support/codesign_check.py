#!/usr/bin/env python3
"""An independent check of embedded code signatures, for tests.

Written from docs/codesign.md with hashlib only, sharing nothing with
machofix's C++ verifier. For every slice it applies what the kernel checks before it
trusts a signature (xnu's cs_validate_csblob / cs_validate_codedirectory) and what
dyld checks of its placement, then recomputes every code-page and special-slot hash:
 - placement: LC_CODE_SIGNATURE's dataoff 8-aligned, the blob inside the slice and
   inside __LINKEDIT, at the end of the signed range (codeLimit == dataoff);
 - SuperBlob: magic, length <= datasize, every index and blob inside it, a
   CodeDirectory in slot 0, CodeDirectories only in slots 0 and 0x1000-0x1004, no
   two with one hash type;
 - CodeDirectory: magic, length inside its blob, a known hash type with its size,
   page size 2^12 to 2^14, identifier NUL-terminated inside it, room for its special
   slots before hashOffset, its code slots inside it, nCodeSlots == ceil(codeLimit /
   page);
 - hashes: every code page; every special slot against the blob it names (zero when
   no blob, except slots 1 and 3, which seal an Info.plist and a bundle's resources
   outside the Mach-O file: not checkable here, so not a problem); an entitlements
   blob the CodeDirectory has no slot for.
Usage: codesign_check.py FILE prints one line per slice (and its problems) and exits
1 if any signed slice is invalid. Its own tests: tests/support/test_codesign_check.py.
"""
import hashlib
import struct
import sys

HASHES = {1: ("sha1", 20), 2: ("sha256", 32), 3: ("sha256", 20), 4: ("sha384", 48)}
CD_MAGIC, SUPERBLOB_MAGIC = 0xFADE0C02, 0xFADE0CC0
CD_SLOTS = {0} | set(range(0x1000, 0x1005))
ENTITLEMENT_SLOTS = (5, 7)  # xnu refuses an entitlements blob no special slot covers
PAGE_SHIFTS = (12, 13, 14)  # xnu takes 4 KiB up to its own page size (16 KiB on arm64)
EXTERNAL_SLOTS = (1, 3)     # Info.plist, resources: files of a bundle, not in the Mach-O
LC_SEGMENT_64, LC_CODE_SIGNATURE = 0x19, 0x1D


class Invalid(Exception):
    """A structural problem after which nothing further of the signature can be read."""


def u32be(data, offset, what):
    if offset < 0 or offset + 4 > len(data):
        raise Invalid(f"{what} at {offset:#x} is outside the SuperBlob ({len(data):#x} bytes)")
    return struct.unpack_from(">I", data, offset)[0]


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


def load_commands(image):
    ncmds = struct.unpack_from("<I", image, 16)[0]
    offset = 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", image, offset)
        yield cmd, offset
        offset += size


def signature_location(image):
    """(dataoff, datasize) of LC_CODE_SIGNATURE, or None; and __LINKEDIT's (fileoff, filesize)."""
    location, linkedit = None, None
    for cmd, offset in load_commands(image):
        if cmd == LC_CODE_SIGNATURE:
            location = struct.unpack_from("<II", image, offset + 8)
        elif cmd == LC_SEGMENT_64 and image[offset + 8:offset + 24].rstrip(b"\0") == b"__LINKEDIT":
            fileoff, filesize = struct.unpack_from("<QQ", image, offset + 40)
            linkedit = (fileoff, filesize)
    return location, linkedit


def placement_problems(image, dataoff, datasize, linkedit):
    problems = []
    if dataoff % 8:
        problems.append(f"signature offset {dataoff:#x} is not 8-aligned")
    if dataoff + datasize > len(image):
        problems.append(f"signature [{dataoff:#x}, {dataoff + datasize:#x}) ends past the slice ({len(image):#x} bytes)")
    if linkedit is None:
        problems.append("no __LINKEDIT segment holds the signature")
    elif dataoff < linkedit[0] or dataoff + datasize > linkedit[0] + linkedit[1]:
        problems.append(f"signature [{dataoff:#x}, {dataoff + datasize:#x}) is not inside __LINKEDIT "
                        f"[{linkedit[0]:#x}, {linkedit[0] + linkedit[1]:#x})")
    return problems


def blob_indexes(superblob, datasize):
    """{slot: offset} of a SuperBlob whose header, indexes and blobs all lie inside it."""
    magic = u32be(superblob, 0, "SuperBlob magic")
    if magic != SUPERBLOB_MAGIC:
        raise Invalid(f"SuperBlob magic {magic:#x}")
    length, count = u32be(superblob, 4, "SuperBlob length"), u32be(superblob, 8, "SuperBlob count")
    if length > datasize:
        raise Invalid(f"SuperBlob length {length:#x} exceeds the signature's datasize {datasize:#x}")
    if 12 + 8 * count > length:
        raise Invalid(f"{count} blob indexes do not fit in the SuperBlob's {length:#x} bytes")
    blobs = {}
    for i in range(count):
        slot, offset = u32be(superblob, 12 + 8 * i, "blob index"), u32be(superblob, 16 + 8 * i, "blob index")
        if offset + 8 > length or offset + u32be(superblob, offset + 4, f"slot {slot:#x} length") > length:
            raise Invalid(f"blob of slot {slot:#x} at {offset:#x} runs past the SuperBlob's {length:#x} bytes")
        if slot in blobs:
            raise Invalid(f"slot {slot:#x} appears twice")
        blobs[slot] = offset
    return blobs


class CodeDirectory:
    """The fields the checks need, read from the CodeDirectory at `offset` of the SuperBlob."""

    def __init__(self, superblob, offset):
        if u32be(superblob, offset, "CodeDirectory magic") != CD_MAGIC:
            raise Invalid(f"the blob at {offset:#x} in a CodeDirectory slot is not a CodeDirectory")
        if offset + 44 > len(superblob):
            raise Invalid(f"CodeDirectory at {offset:#x} is cut short")
        (_, self.length, self.version, self.flags, self.hash_offset, self.ident_offset, self.n_special, self.n_code,
         self.code_limit, self.hash_size, self.hash_type, _, self.page_shift) = \
            struct.unpack_from(">IIIIIIIIIBBBB", superblob, offset)
        if self.version >= 0x20300 and offset + 64 <= len(superblob):
            self.code_limit = struct.unpack_from(">Q", superblob, offset + 56)[0] or self.code_limit
        self.offset = offset
        self.bytes = superblob[offset:offset + self.length]

    @property
    def label(self):
        name = HASHES.get(self.hash_type, (f"hash type {self.hash_type}", 0))[0]
        return f"CodeDirectory {name}" + ("/20" if self.hash_type == 3 else "")

    def header_problems(self, code_limit_expected):
        problems = []
        if self.hash_type not in HASHES:
            return [f"{self.label}: unknown hash type"]
        if HASHES[self.hash_type][1] != self.hash_size:
            problems.append(f"{self.label}: hash size {self.hash_size}")
        if self.page_shift not in PAGE_SHIFTS:
            problems.append(f"{self.label}: page size 2^{self.page_shift}")
        if b"\0" not in self.bytes[self.ident_offset:]:
            problems.append(f"{self.label}: identifier at {self.ident_offset:#x} is not NUL-terminated inside it")
        if self.hash_offset < self.n_special * self.hash_size:
            problems.append(f"{self.label}: {self.n_special} special slots do not fit before hashOffset {self.hash_offset:#x}")
        if self.hash_offset + self.n_code * self.hash_size > self.length:
            problems.append(f"{self.label}: {self.n_code} code slots run past its length {self.length:#x}")
        if self.code_limit != code_limit_expected:
            problems.append(f"{self.label}: codeLimit {self.code_limit:#x} != signature offset {code_limit_expected:#x}")
        page = 1 << self.page_shift
        if self.n_code != -(-self.code_limit // page):
            problems.append(f"{self.label}: {self.n_code} code slots for codeLimit {self.code_limit:#x} "
                            f"(needs {-(-self.code_limit // page)})")
        return problems

    def slot(self, index):
        """The stored hash of code slot `index` (negative: special slot -index)."""
        start = self.hash_offset + index * self.hash_size
        return self.bytes[start:start + self.hash_size]

    def digest(self, data):
        return hashlib.new(HASHES[self.hash_type][0], data).digest()[:self.hash_size]


def hash_problems(image, superblob, blobs, cd):
    problems = []
    page = 1 << cd.page_shift
    for index in range(cd.n_code):
        start = index * page
        if cd.digest(image[start:min(start + page, cd.code_limit)]) != cd.slot(index):
            problems.append(f"{cd.label}: page {index} hash mismatch")
            break  # the first wrong page names the problem; the rest would repeat it
    for slot in range(1, cd.n_special + 1):
        stored = cd.slot(-slot)
        if slot in blobs:
            offset = blobs[slot]
            blob = superblob[offset:offset + struct.unpack_from(">I", superblob, offset + 4)[0]]
            if cd.digest(blob) != stored:
                problems.append(f"{cd.label}: special slot {slot} hash mismatch")
        elif any(stored) and slot not in EXTERNAL_SLOTS:
            problems.append(f"{cd.label}: special slot {slot} is set but no blob")
    for slot in ENTITLEMENT_SLOTS:
        if slot in blobs and slot > cd.n_special:
            problems.append(f"{cd.label}: an entitlements blob in slot {slot} but only {cd.n_special} special slots")
    return problems


def code_directories(superblob, blobs):
    if 0 not in blobs:
        raise Invalid("no CodeDirectory in slot 0")
    directories, hash_types = [], set()
    for slot, offset in sorted(blobs.items()):
        is_cd = offset + 4 <= len(superblob) and struct.unpack_from(">I", superblob, offset)[0] == CD_MAGIC
        if is_cd and slot not in CD_SLOTS:
            raise Invalid(f"a CodeDirectory in slot {slot:#x}, which may not hold one")
        if slot in CD_SLOTS:
            cd = CodeDirectory(superblob, offset)
            if cd.hash_type in hash_types:
                raise Invalid(f"two CodeDirectories with hash type {cd.hash_type}")
            hash_types.add(cd.hash_type)
            directories.append(cd)
    return directories


def check_slice(image):
    location, linkedit = signature_location(image)
    if location is None:
        return "unsigned", []
    dataoff, datasize = location
    problems = placement_problems(image, dataoff, datasize, linkedit)
    superblob = image[dataoff:dataoff + datasize]
    try:
        blobs = blob_indexes(superblob, datasize)
        for cd in code_directories(superblob, blobs):
            header = cd.header_problems(dataoff)
            problems += header or hash_problems(image, superblob, blobs, cd)
    except Invalid as problem:
        problems.append(str(problem))
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
