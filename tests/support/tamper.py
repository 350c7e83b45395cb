#!/usr/bin/env python3
"""Breaking signed Mach-O files on purpose, and judging what machofix does with them.

Tests of the refusal of invalid input signatures (tests/e2e/test_invalid_signatures.py,
tests/e2e/test_corpus.py) and of files breaking a loader rule (test_loader_rules.py)
share these: where a slice's __text is, flipping one byte
of it, the blobs of a signature, and the checks every refusal and every
--resign-invalid run must pass; and the scratch directory and runner of their cases
(CaseDirectory, run_cases). Written with struct and hashlib only.
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess

LC_SEGMENT_64, LC_CODE_SIGNATURE = 0x19, 0x1D
PAGE = 4096  # every signature these tests break hashes 4 KiB pages


def slice_offsets(data):
    """{arch name: offset} of the 64-bit slices of a thin or universal file."""
    names = {0x0100000C: "arm64", 0x01000007: "x86_64"}
    magic = struct.unpack_from(">I", data)[0]
    if magic not in (0xCAFEBABE, 0xCAFEBABF):
        return {names[struct.unpack_from("<I", data, 4)[0]]: 0}
    count = struct.unpack_from(">I", data, 4)[0]
    offsets = {}
    for i in range(count):
        if magic == 0xCAFEBABF:
            cputype, _, offset = struct.unpack_from(">IIQ", data, 8 + 32 * i)
        else:
            cputype, _, offset = struct.unpack_from(">III", data, 8 + 20 * i)
        if cputype in names:
            offsets[names[cputype]] = offset
    return offsets


def _commands(data, base):
    ncmds = struct.unpack_from("<I", data, base + 16)[0]
    offset = base + 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, offset)
        yield cmd, offset
        offset += size


def section_offset(data, base, segment, section):
    """Absolute file offset of the section's data in the slice at `base`."""
    for cmd, at in _commands(data, base):
        if cmd != LC_SEGMENT_64:
            continue
        for i in range(struct.unpack_from("<I", data, at + 64)[0]):
            header = at + 72 + 80 * i
            if data[header:header + 16].rstrip(b"\0") == section.encode() and \
                    data[header + 16:header + 32].rstrip(b"\0") == segment.encode():
                return base + struct.unpack_from("<I", data, header + 48)[0]
    raise ValueError(f"no {segment},{section}")


def signature_location(data, base):
    """(dataoff, datasize) of the slice's LC_CODE_SIGNATURE, dataoff relative to the slice."""
    for cmd, at in _commands(data, base):
        if cmd == LC_CODE_SIGNATURE:
            return struct.unpack_from("<II", data, at + 8)
    raise ValueError("not signed")


def blob_offset(data, base, slot):
    """Absolute file offset of the signature blob in `slot`."""
    dataoff, _ = signature_location(data, base)
    superblob = base + dataoff
    for i in range(struct.unpack_from(">I", data, superblob + 8)[0]):
        blob_slot, offset = struct.unpack_from(">II", data, superblob + 12 + 8 * i)
        if blob_slot == slot:
            return superblob + offset
    raise ValueError(f"no blob in slot {slot:#x}")


def flip(data, offset):
    data[offset] ^= 0xFF


def tamper_text(data, arch, delta=100):
    """Flips one byte of the slice's __text; returns (absolute offset, page message) of
    the page that no longer matches, as machofix names it."""
    base = slice_offsets(data)[arch]
    offset = section_offset(data, base, "__TEXT", "__text") + delta
    flip(data, offset)
    return page_problem(data, base, offset - base)


def writable_text(data, arch):
    """Maps the slice's __TEXT read-write-execute (initprot 7), which breaks the loader
    rule seg-protection (docs/loader-rules.md); returns the absolute offset of initprot."""
    base = slice_offsets(data)[arch]
    for cmd, at in _commands(data, base):
        if cmd == LC_SEGMENT_64 and data[at + 8:at + 24].rstrip(b"\0") == b"__TEXT":
            struct.pack_into("<I", data, at + 60, 7)
            return at + 60
    raise ValueError("no __TEXT")


def page_problem(data, base, slice_offset):
    """(absolute offset of the page, "page N (slice bytes A-B)") for a byte of the slice."""
    dataoff, _ = signature_location(data, base)
    page = slice_offset // PAGE
    end = min((page + 1) * PAGE, dataoff)
    return base + page * PAGE, f"page {page} (slice bytes {page * PAGE:#x}-{end:#x}) hash mismatch"


def sha256_of(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def files_under(directory):
    return sorted(os.path.relpath(os.path.join(root, name), directory)
                  for root, _, names in os.walk(directory) for name in names)


def run(*arguments, env=None):
    return subprocess.run([str(a) for a in arguments], capture_output=True, text=True, env=env)


def check_refused(arguments, source, output, work, expected_parts, env=None):
    """Runs a machofix command that must refuse `source`: exit 2, every expected part
    in the error message, no output, the input byte-identical, no file left behind in
    `work` (temporary files included). Returns the problems found."""
    before_hash, before_files = sha256_of(source), files_under(work)
    result = run(*arguments, env=env)
    problems = []
    if result.returncode != 2:
        problems.append(f"exit {result.returncode}, not 2: {result.stderr.strip()[:300]}")
    for part in expected_parts:
        if part not in result.stderr:
            problems.append(f"the error does not name {part!r}: {result.stderr.strip()[:400]}")
    if output and os.path.exists(output):
        problems.append(f"an output was written: {output}")
    if sha256_of(source) != before_hash:
        problems.append("the input changed")
    if files_under(work) != before_files:
        problems.append(f"files left behind: {sorted(set(files_under(work)) - set(before_files))}")
    return problems


def slices_of(report_file):
    """The slice reports of a JSON file entry, wherever they are (Mach-O, .pte blobs,
    archive members)."""
    found = []
    if "macho" in report_file:
        found += report_file["macho"]["slices"]
    for blob in report_file.get("pte", {}).get("blobs", []):
        found += blob["macho"]["slices"]
    for member in report_file.get("members", []):
        found += slices_of(member)
    return found


def check_resigned(arguments, output, arch, problem_text, problem_offset, verify):
    """Runs a machofix command with --resign-invalid (and --json to stdout): exit 0,
    the JSON says the input signature of the `arch` slice was invalid, at
    `problem_offset`, naming `problem_text`, and warns that it was re-signed;
    `verify(output)` (a list of problems) must be empty."""
    result = run(*arguments)
    if result.returncode != 0:
        return [f"with --resign-invalid: exit {result.returncode}: {result.stderr.strip()[:300]}"]
    problems = []
    try:
        report = json.loads(result.stdout)
    except ValueError:
        return [f"with --resign-invalid: no JSON report on stdout: {result.stdout[:200]}"]
    slices = [s for s in slices_of(report["files"][0]) if s["arch"] == arch and s["signature"]["status"] == "invalid"]
    if len(slices) != 1:
        return [f"JSON: expected one {arch} slice with an invalid input signature, found {len(slices)}"]
    signature = slices[0]["signature"]
    if problem_text not in signature["problems"][0]:
        problems.append(f"JSON: first problem {signature['problems'][0]!r} does not name {problem_text!r}")
    if signature["first_problem_offset"] != problem_offset:
        problems.append(f"JSON: first_problem_offset {signature['first_problem_offset']}, expected {problem_offset}")
    if not any("re-signed because of --resign-invalid" in w and problem_text in w for w in slices[0]["warnings"]):
        problems.append(f"JSON: no warning that the invalid signature was re-signed: {slices[0]['warnings']}")
    if not slices[0]["changed"] or slices[0]["signature_after"] is None:
        problems.append("JSON: the slice is not reported as re-signed")
    return problems + verify(output)


class CaseDirectory:
    """One case's scratch directory (`work`/`name`, emptied first) and the fixtures it
    reads: the base of each test script's Case."""

    def __init__(self, machofix, pte_writer, fixtures, work, name):
        self.machofix, self.pte_writer, self.fixtures = machofix, pte_writer, fixtures
        self.dir = os.path.join(work, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)

    def path(self, name):
        return os.path.join(self.dir, name)

    def fixture(self, name):
        with open(os.path.join(self.fixtures, name), "rb") as handle:
            return bytearray(handle.read())

    def write(self, name, data):
        with open(self.path(name), "wb") as handle:
            handle.write(data)
        return self.path(name)


def run_cases(tests, make_case, arguments):
    """Runs each test(case) with a case made from `arguments` (MACHOFIX PTE_WRITER
    FIXTURES WORK) and the test's name, prints what failed; the exit status."""
    machofix, pte_writer, fixtures, work = arguments
    failures = 0
    for test in tests:
        name = test.__name__[len("test_"):]
        problems = test(make_case(machofix, pte_writer, fixtures, work, name))
        print(f"{'FAIL' if problems else 'ok  '} {name}")
        for problem in problems:
            print(f"     {problem}")
        failures += bool(problems)
    print(f"{len(tests) - failures}/{len(tests)} cases pass")
    return 1 if failures else 0


def with_i386_slice(thin):
    """A universal file of a 32-bit i386 slice (a bare header: machofix does not read
    32-bit slices) and the thin 64-bit file `thin`, as lipo lays them out."""
    i386 = struct.pack("<7I", 0xFEEDFACE, 7, 3, 6, 0, 0, 0x85) + bytes(100)
    align = 0x4000
    first = align
    second = first + (len(i386) + align - 1) // align * align
    cputype = struct.unpack_from("<I", thin, 4)[0]
    out = bytearray(struct.pack(">II", 0xCAFEBABE, 2))
    out += struct.pack(">5I", 7, 3, first, len(i386), 14)
    out += struct.pack(">5I", cputype, struct.unpack_from("<I", thin, 8)[0] & 0xFFFFFF, second, len(thin), 14)
    out += bytes(first - len(out)) + i386
    out += bytes(second - len(out)) + bytes(thin)
    return bytes(out)
