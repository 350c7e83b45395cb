#!/usr/bin/env python3
"""Every proof step refuses a wrong rewrite.

machofix re-reads and proves every rewrite before writing it. A step switched off
would pass every other test, since correct rewrites pass it anyway; here each step is
handed wrong bytes through the proof seam (core/base/proof_seam.h, machofix_spoiled) and
must refuse the file: exit 2, its own message, nothing written (no output, no
temporary file left), the input byte-identical, in every mode that runs it. The same
runs without a spoiled byte must succeed, so it is the spoiled byte that is refused.
Usage: test_proof_steps.py MACHOFIX_SPOILED MACHOFIX PTE_WRITER FIXTURE_DIR WORK_DIR
"""
import os
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support"))
import codesign_check  # noqa: E402

LC_LOAD_DYLIB, LC_DYLD_INFO_ONLY = 0xC, 0x80000022
MACHO_MODES = (["-o", "OUT"], ["--in-place"], ["--dry-run"])
FILE_MODES = (["-o", "OUT"], ["--in-place"])  # the file steps run only when a file is written


def first_dylib_name(image):
    """Slice offset of the first LC_LOAD_DYLIB's name (kept by prune: libSystem)."""
    for cmd, offset in codesign_check.load_commands(image):
        if cmd == LC_LOAD_DYLIB:
            return offset + struct.unpack_from("<I", image, offset + 8)[0] + 1
    raise AssertionError("no LC_LOAD_DYLIB")


def text_offset(image):
    """Slice offset of the first byte of __TEXT,__text."""
    for cmd, offset in codesign_check.load_commands(image):
        if cmd == 0x19 and image[offset + 8:offset + 24].rstrip(b"\0") == b"__TEXT":
            for i in range(struct.unpack_from("<I", image, offset + 64)[0]):
                section = offset + 72 + 80 * i
                if image[section:section + 16].rstrip(b"\0") == b"__text":
                    return struct.unpack_from("<I", image, section + 48)[0]
    raise AssertionError("no __text")


def first_bind_ordinal(image):
    """Slice offset of the first SET_DYLIB_ORDINAL_IMM of the bind stream, and the byte
    that names another (kept) library instead."""
    for cmd, offset in codesign_check.load_commands(image):
        if cmd == LC_DYLD_INFO_ONLY:
            bind_off, bind_size = struct.unpack_from("<II", image, offset + 16)
            for at in range(bind_off, bind_off + bind_size):
                if image[at] == 0x11:  # ordinal 1 (libSystem)
                    return at, 0x13
    raise AssertionError("no SET_DYLIB_ORDINAL_IMM 1")


def weak_import_flag(image):
    """Slice offset of the SET_SYMBOL_TRAILING_FLAGS_IMM byte that makes _weakused_fn a
    weak import (0x41, in the lazy-bind stream), and the byte that makes it strong."""
    for cmd, offset in codesign_check.load_commands(image):
        if cmd == LC_DYLD_INFO_ONLY:
            lazy_off, lazy_size = struct.unpack_from("<II", image, offset + 32)
            at = image.find(b"\x41_weakused_fn\0", lazy_off, lazy_off + lazy_size)
            if at >= 0:
                return at, 0x40
    raise AssertionError("no weak import _weakused_fn in the lazy-bind stream")


class Run:
    def __init__(self, spoiled, machofix, pte_writer, fixtures, work):
        self.spoiled, self.machofix, self.pte_writer = spoiled, machofix, pte_writer
        self.fixtures, self.work = fixtures, work
        self.failures, self.refusals = [], 0
        self.command = ["prune"]  # the command and its options; `edit` runs the same steps

    def fixture(self, name):
        with open(os.path.join(self.fixtures, name), "rb") as handle:
            return handle.read()

    def place(self, name, data):
        directory = os.path.join(self.work, name)
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        path = os.path.join(directory, "input")
        with open(path, "wb") as handle:
            handle.write(data)
        return directory, path

    def prune(self, spoil, path, mode, directory):
        arguments = [a.replace("OUT", os.path.join(directory, "output")) for a in mode]
        env = dict(os.environ, MACHOFIX_SPOIL=spoil)
        return subprocess.run([self.spoiled, self.command[0], path, *arguments, *self.command[1:]], capture_output=True,
                              text=True, env=env,
                              timeout=120)

    def expect_refusal(self, label, data, spoil, expected, modes):
        step = spoil.split("@")[0]
        for mode in modes:
            directory, path = self.place(label, data)
            result = self.prune(spoil, path, mode, directory)
            what = f"{label} {step} ({' '.join(mode)})"
            problems = []
            if result.returncode != 2:
                problems.append(f"exit {result.returncode}, not 2")
            if f"spoiled {step} at" not in result.stderr:
                problems.append("the step was never handed the spoiled bytes")
            if expected not in result.stderr:
                problems.append(f"no '{expected}' in the error")
            if sorted(os.listdir(directory)) != ["input"]:
                problems.append(f"files written: {sorted(os.listdir(directory))}")
            with open(path, "rb") as handle:
                if handle.read() != data:
                    problems.append("the input changed")
            if problems:
                self.failures.append(f"{what}: {'; '.join(problems)}\n    stderr: {result.stderr.strip()[:400]}")
            else:
                self.refusals += 1
            print(f"{what}: {'refused' if not problems else 'NOT REFUSED'}")

    def expect_success(self, label, data, modes):
        """The control: the same file and modes with nothing spoiled are pruned."""
        for mode in modes:
            directory, path = self.place(label, data)
            result = self.prune("none@0", path, mode, directory)
            if result.returncode != 0:
                self.failures.append(f"{label} unspoiled ({' '.join(mode)}): exit {result.returncode}: "
                                     f"{result.stderr.strip()[:300]}")

    def wrap(self, name):
        so = os.path.join(self.fixtures, name)
        pte = os.path.join(self.work, name + ".pte")
        subprocess.run([self.pte_writer, "wrap", so, pte, "hash"], check=True, capture_output=True)
        with open(pte, "rb") as handle:
            return handle.read()

    def blob_offset(self, pte_data, label):
        _, path = self.place(label + "-inspect", pte_data)
        import json
        report = json.loads(subprocess.run([self.machofix, "inspect", "--json", path], capture_output=True, text=True,
                                           check=True).stdout)
        return report["files"][0]["pte"]["blobs"][0]["offset"]


def dylib_name(image, name):
    """Slice offset of the second byte of the install name of the LC_LOAD_DYLIB whose
    install name contains `name` (set to 'X' (0x58): the name stays printable)."""
    for cmd, offset in codesign_check.load_commands(image):
        if cmd == LC_LOAD_DYLIB:
            start = offset + struct.unpack_from("<I", image, offset + 8)[0]
            if name in image[start:image.index(b"\0", start)]:
                return start + 1
    raise AssertionError(f"no LC_LOAD_DYLIB of {name}")


def weak_link_steps(runner):
    """`edit --weak-link`: its own proof (verify_weak_link: the re-read dylib kinds and
    weak marks, every other byte, LIEF) refuses a spoiled weak link."""
    runner.command = ["edit", "--weak-link", "libomp.dylib"]
    chained = runner.fixture("aoti_metal_arm64_chained.in")
    omp, code = dylib_name(chained, b"libomp"), text_offset(chained)
    runner.expect_success("weak-link", chained, MACHO_MODES)
    runner.expect_refusal("weak-link", chained, f"reread@{omp}=0x58",
                          "verification of the weak-linked file failed, nothing written: dylib", MACHO_MODES)
    runner.expect_refusal("weak-link", chained, f"untouched@{code}",
                          "verification of the weak-linked file failed, nothing written: byte at slice offset", MACHO_MODES)
    runner.expect_refusal("weak-link", chained, f"lief@{omp}=0x58", "LIEF reads the rewritten slice differently", MACHO_MODES)
    pte = runner.wrap("aoti_metal_arm64_chained.in")
    runner.expect_success("weak-link-pte", pte, MACHO_MODES)
    runner.expect_refusal("weak-link-pte", pte, f"reread@{omp}=0x58", "verification of the weak-linked file failed", MACHO_MODES)


def edit_steps(runner):
    """`edit`: the same steps refuse an edited slice (the re-read compares the load
    commands with the planned ones, and every import with the input's)."""
    runner.command = ["edit", "--change", "*libomp*", "@rpath/libomp.dylib", "--add-rpath", "@loader_path"]
    chained = runner.fixture("aoti_metal_arm64_chained_headerpad.in")
    dyldinfo = runner.fixture("aoti_metal_x86_64_dyldinfo_headerpad.in")
    name, code = first_dylib_name(chained), text_offset(chained)
    bind_at, other_ordinal = first_bind_ordinal(dyldinfo)
    runner.expect_success("edit", chained, MACHO_MODES)
    runner.expect_success("edit-imports", dyldinfo, MACHO_MODES)
    runner.expect_refusal("edit", chained, f"reread@{name}", "is not the planned one", MACHO_MODES)
    runner.expect_refusal("edit-imports", dyldinfo, f"reread@{bind_at}={other_ordinal}",
                          "bind import dyld_stub_binder is not bound as before", MACHO_MODES)
    runner.expect_refusal("edit", chained, f"untouched@{code}", "changed outside the load commands", MACHO_MODES)
    runner.expect_refusal("edit", chained, f"lief@{name}", "LIEF reads the rewritten slice differently", MACHO_MODES)
    runner.expect_refusal("edit", chained, f"signature@{code}", "the renewed signature does not verify", MACHO_MODES)
    runner.expect_refusal("edit", chained, "loader-rules@16=0x7f", "the rewritten slice breaks the loader rule lc-walk",
                          MACHO_MODES)
    pte = runner.wrap("aoti_metal_arm64_chained_headerpad.in")
    runner.expect_success("edit-pte", pte, MACHO_MODES)
    runner.expect_refusal("edit-pte", pte, f"reread@{name}", "is not the planned one", MACHO_MODES)
    runner.expect_refusal("edit-pte", pte, f"untouched@{code}", "changed outside the load commands", MACHO_MODES)


def layout_change_steps(runner):
    """A rewrite that changes the file's size (`sign` adds a signature to an unsigned
    slice): the code and data stay where they were, so the early copy of the input
    holds them (the file then cut or extended to its new size) and is compared behind
    the copy. (A rewrite that moves them, a universal file laid out again, keeps the
    early copy up to the first slice that moves and copies the moved ones again:
    tests/unit/test_macho_write.cc spoils both copies.)"""
    runner.command = ["sign"]
    unsigned = runner.fixture("aoti_metal_arm64_dyldinfo_unsigned.in")
    runner.expect_success("sign-unsigned", unsigned, FILE_MODES)
    runner.expect_refusal("sign-unsigned", unsigned, "copy@16484", "the output differs from input offset 0x4064, which it copies",
                          FILE_MODES)
    runner.command = ["prune"]


def main():
    runner = Run(*[os.path.abspath(a) for a in sys.argv[1:6]])
    chained = runner.fixture("aoti_metal_arm64_chained.in")
    dyldinfo = runner.fixture("aoti_metal_arm64_dyldinfo.in")
    name, code = first_dylib_name(chained), text_offset(chained)
    bind_at, other_ordinal = first_bind_ordinal(dyldinfo)

    # Mach-O steps, on a thin file (offsets from the slice's start).
    runner.expect_success("thin", chained, MACHO_MODES)
    runner.expect_refusal("thin", chained, f"reread@{name}", "the dependent dylibs are not the planned ones", MACHO_MODES)
    runner.expect_refusal("thin-imports", dyldinfo, f"reread@{bind_at}={other_ordinal}",
                          "bind import dyld_stub_binder bound to /usr/lib/libSystem.B.dylib before", MACHO_MODES)
    # The weak-import flag is part of what the re-read compares: a rewrite that made a
    # weak import strong would make dyld refuse to load the file where the library is
    # missing (the point of a weak import).
    weak = runner.fixture("weak_dylibs_arm64_dyldinfo.in")
    weak_at, strong = weak_import_flag(weak)
    runner.expect_success("thin-weak", weak, MACHO_MODES)
    runner.expect_refusal("thin-weak", weak, f"reread@{weak_at}={strong}",
                          "lazy-bind import _weakused_fn was weak before and is not after", MACHO_MODES)
    runner.expect_refusal("thin", chained, f"untouched@{code}", "changed outside any ordinal or load command", MACHO_MODES)
    runner.expect_refusal("thin", chained, f"lief@{name}", "LIEF reads the rewritten slice differently", MACHO_MODES)
    runner.expect_refusal("thin", chained, f"signature@{code}", "the renewed signature does not verify", MACHO_MODES)
    runner.expect_refusal("thin", chained, "loader-rules@16=0x7f", "the rewritten slice breaks the loader rule lc-walk",
                          MACHO_MODES)  # ncmds 127: commands run past sizeofcmds
    # The code and data between the load commands and __LINKEDIT are copied from the
    # input by the kernel (core/io/macho_write.h), and compared behind the copy: here
    # a byte of __DATA_CONST (16 KiB on) spoiled in the output as it is copied.
    runner.expect_refusal("thin", chained, "copy@16484", "the output differs from input offset 0x4064, which it copies",
                          FILE_MODES)

    # A universal file: the arm64 slice's steps (both slices are offered; offsets are
    # from each slice's start).
    universal = runner.fixture("universal_fat64_chained.in")
    runner.expect_success("universal", universal, MACHO_MODES)
    runner.expect_refusal("universal", universal, f"signature@{code}", "the renewed signature does not verify",
                          MACHO_MODES)
    # The file laid out again, checked as a whole (offsets from the file's start): the
    # arm64 slice's offset in the fat64 header (entry 1, big-endian u64 at 48) moved one
    # byte on, so that the slice, the last one, runs past the end of the file.
    runner.expect_refusal("universal", universal, "universal-rules@55=0x01",
                          "the rewritten file breaks the loader rule fat-slice-in-file", MACHO_MODES)

    # A .pte: the Mach-O steps inside it, the re-read of the written file, the copy check.
    pte = runner.wrap("aoti_metal_arm64_chained.in")
    blob = runner.blob_offset(pte, "pte")
    runner.expect_success("pte", pte, MACHO_MODES)
    runner.expect_refusal("pte", pte, f"reread@{name}", "the dependent dylibs are not the planned ones", MACHO_MODES)
    runner.expect_refusal("pte", pte, f"signature@{code}", "the renewed signature does not verify", MACHO_MODES)
    runner.expect_refusal("pte", pte, f"pte-reread@{blob + name}", "verifying the output before committing it",
                          FILE_MODES)
    runner.expect_refusal("pte", pte, f"pte-reread@{len(pte) // 2}", "verifying the output before committing it",
                          FILE_MODES)
    runner.expect_refusal("pte", pte, "copy@100", "the output differs from input offset 0x64, which it copies", FILE_MODES)
    runner.expect_refusal("pte", pte, f"copy@{len(pte) - 5}", "which it copies", FILE_MODES)

    layout_change_steps(runner)
    edit_steps(runner)
    weak_link_steps(runner)

    for failure in runner.failures:
        print("FAIL:", failure)
    print(f"proof steps: {runner.refusals} refusals as required, {len(runner.failures)} failures")
    return 1 if runner.failures else 0


if __name__ == "__main__":
    sys.exit(main())
