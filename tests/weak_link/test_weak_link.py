#!/usr/bin/env python3
"""Reference test of core/rewrite/weak_link.h: a weak link made after linking must equal the
linker's own -weak_library.

    test_weak_link.py WEAK_LINK_DRIVER WORKDIR

Each case is linked twice by ld64.lld-16 from the same object: `.in` with the
dependency linked normally, `.ref` with it linked by -weak_library. The driver
(tests/weak_link/weak_link_driver.cc: plan_weak_link, apply_weak_link,
verify_weak_link) weak-links the dependency in `.in`, giving `.out`, which must equal
`.ref`:
  - read by LLVM's tools (tests/fixtures/imports.py: llvm-objdump-16 --bind
    --lazy-bind --weak-bind --chained-fixups, llvm-nm-16): the same dylib commands,
    and every import (source, symbol, library) with the same weak mark; the lazy-bind
    flags, which llvm-objdump does not print, from obj2yaml-16's opcode listing;
  - byte for byte, except LC_UUID (a relink makes a new one, the edit keeps the old)
    and the code signature blob (the driver does not re-sign).
Each comparison must also tell `.in` from `.ref`, so it can fail. The driver run
again on `.out` changes nothing. Dylibs that cannot be weak-linked (re-exported) are
refused with nothing written.
"""

import re
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
sys.dont_write_bytecode = True

import imports    # noqa: E402  (LLVM's tools as the reader)
import machoraw   # noqa: E402

CC, LD, OBJ2YAML = "clang-16", "ld64.lld-16", "obj2yaml-16"
CFLAGS = ["-O2", "-fno-builtin", "-fno-stack-protector"]
LC_UUID = 0x1B
DYNAMIC_LOOKUP = ["-undefined", "dynamic_lookup"]


@dataclass
class Case:
    name: str
    src: str            # tests/weak_link/src or tests/fixtures/src
    arch: str
    chained: bool
    libs: list          # tbd keys, in link order
    weak: list          # the keys weak-linked (-weak_library in .ref, globs for the driver)
    flags: list = field(default_factory=list)
    reexport: list = field(default_factory=list)   # keys linked with -reexport_library
    expect_refusal: str = None                      # text the driver must print


def cases():
    out = []
    for arch in ("arm64", "x86_64"):
        for chained in (False, True):
            kind = "chained" if chained else "dyldinfo"
            out.append(Case(f"weak_link_{arch}_{kind}", "weak_link.c", arch, chained,
                            ["libSystem", "libomp", "libfoo"], ["libfoo"]))
    out += [
        Case("aoti_metal_arm64_dyldinfo", "aoti_metal.c", "arm64", False,
             ["libSystem", "libomp", "libcxx", "libfoo", "Metal"], ["libcxx", "Metal", "libomp"], DYNAMIC_LOOKUP),
        Case("aoti_metal_x86_64_chained", "aoti_metal.c", "x86_64", True,
             ["libSystem", "libomp", "libcxx", "libfoo", "Metal"], ["libcxx", "Metal"], DYNAMIC_LOOKUP),
        Case("addend_arm64_dyldinfo", "addend.c", "arm64", False, ["libSystem", "libfoo"], ["libfoo"]),
        Case("addend_arm64_chained", "addend.c", "arm64", True, ["libSystem", "libfoo"], ["libfoo"]),
        Case("addend64_arm64_chained", "addend64.c", "arm64", True, ["libSystem", "libfoo"], ["libfoo"]),
        Case("addend64_x86_64_chained", "addend64.c", "x86_64", True, ["libSystem", "libfoo"], ["libfoo"]),
        Case("weakdef_arm64_dyldinfo", "weakdef.c", "arm64", False, ["libSystem", "libwdef"], ["libwdef"]),
        Case("weakdef_arm64_chained", "weakdef.c", "arm64", True, ["libSystem", "libwdef"], ["libwdef"]),
        Case("weakdef_x86_64_chained", "weakdef.c", "x86_64", True, ["libSystem", "libwdef"], ["libwdef"]),
        Case("many_dylibs_arm64_dyldinfo", "many_dylibs.c", "arm64", False,
             ["libSystem"] + [f"lib{n:02d}" for n in range(1, 21)], ["lib18", "lib02"]),
        Case("many_dylibs_x86_64_chained", "many_dylibs.c", "x86_64", True,
             ["libSystem"] + [f"lib{n:02d}" for n in range(1, 21)], ["lib18"]),
        Case("reexport_arm64_chained", "reexport_used.c", "arm64", True, ["libSystem"], ["libreexp"],
             reexport=["libreexp"], expect_refusal="re-exported (LC_REEXPORT_DYLIB)"),
    ]
    return out


class Failure(Exception):
    pass


def run(cmd, check=True):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if check and (proc.returncode != 0 or proc.stderr.strip()):
        raise Failure(f"{' '.join(map(str, cmd))}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return proc


class Linker:
    def __init__(self, work):
        self.work = work
        self.tbd = {p.stem: p for p in sorted((FIXTURES / "tbd").glob("*.tbd"))}
        for n in range(1, 21):
            key = f"lib{n:02d}"
            path = work / f"{key}.tbd"
            path.write_text("--- !tapi-tbd\ntbd-version: 4\ntargets: [ arm64-macos, x86_64-macos ]\n"
                            f"install-name: '/usr/local/lib/{key}.dylib'\nexports:\n"
                            "  - targets: [ arm64-macos, x86_64-macos ]\n"
                            f"    symbols: [ _fn{n:02d}, _var{n:02d} ]\n...\n")
            self.tbd[key] = path

    def install_name(self, key):
        return re.search(r"^install-name:\s*'?([^'\n]+)'?$", self.tbd[key].read_text(), re.M).group(1)

    def link(self, case, weak):
        src = HERE / "src" / case.src
        if not src.exists():
            src = FIXTURES / "src" / case.src
        obj = self.work / f"{case.name}.o"
        run([CC, "-target", f"{case.arch}-apple-macos11", *CFLAGS, "-c", src, "-o", obj])
        args = ["-arch", case.arch, "-platform_version", "macos", "11.0", "11.0", "-dylib",
                "-install_name", f"@rpath/{case.name}.dylib",
                "-fixup_chains" if case.chained else "-no_fixup_chains", obj]
        for key in case.libs + case.reexport:
            if key in case.reexport:
                args.append("-reexport_library")
            elif weak and key in case.weak:
                args.append("-weak_library")
            args.append(self.tbd[key])
        # Same basename for both links: lld names the signature after the output.
        variant = self.work / ("ref" if weak else "in") / case.name
        variant.parent.mkdir(exist_ok=True)
        run([LD, *args, *case.flags, "-o", variant])
        return variant


# ------------------------------------------------------------------ LLVM's reading

def weak_view(path):
    """What LLVM's tools say about dylib kinds and weak marks."""
    s = imports.inspect(path)["slices"][0]
    marks = sorted((i["source"], i["symbol"], i["library"], bool(i.get("weak_import") or i.get("weak_ref")))
                   for i in s["imports"])
    return {"dylibs": [(c["cmd"], c["name"]) for c in s["dylib_commands"]],
            "imports": marks, "lazy_bind_flags": lazy_bind_flags(path)}


def lazy_bind_flags(path):
    """[(symbol, flags)] of the lazy-bind stream's SET_SYMBOL_TRAILING_FLAGS_IMM opcodes."""
    text = run([OBJ2YAML, path]).stdout
    stream = re.search(r"^  LazyBindOpcodes:\n((?:    .*\n)*)", text, re.M)
    if not stream:
        return []
    return re.findall(r"Opcode:\s+BIND_OPCODE_SET_SYMBOL_TRAILING_FLAGS_IMM\n\s+Imm:\s+(\d+)\n\s+Symbol:\s+(\S+)",
                      stream.group(1))


def differences(a, b):
    return [f"{key}: {a[key]} != {b[key]}" for key in a if a[key] != b[key]]


# ------------------------------------------------------------------ bytes

def masked(data):
    """The bytes a relink and a post-link edit must share: LC_UUID's uuid and the
    code signature blob zeroed."""
    data = bytearray(data)
    for off, cmd, _size in machoraw.load_commands(data):
        if cmd == LC_UUID:
            data[off + 8:off + 24] = bytes(16)
    signature = machoraw.code_signature(data)
    if signature:
        start, size = signature
        data[start:start + size] = bytes(size)
    return bytes(data)


def first_difference(a, b):
    if len(a) != len(b):
        return f"sizes {len(a)} and {len(b)}"
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"offset {i:#x}: {x:#04x} != {y:#04x}"
    return None


# ------------------------------------------------------------------ cases

def check_case(case, linker, driver, work):
    path_in, path_ref = linker.link(case, False), linker.link(case, True)
    out = work / "out" / case.name
    out.parent.mkdir(exist_ok=True)
    globs = [linker.install_name(key).rsplit("/", 1)[-1] for key in case.weak]
    proc = run([driver, path_in, out, *globs], check=False)
    if case.expect_refusal:
        if proc.returncode != 2 or case.expect_refusal not in proc.stdout or out.exists():
            raise Failure(f"expected a refusal ({case.expect_refusal}), got exit {proc.returncode}:\n"
                          f"{proc.stdout}{proc.stderr}")
        return "refused as expected"
    if proc.returncode != 0:
        raise Failure(f"driver exit {proc.returncode}:\n{proc.stdout}{proc.stderr}")

    view_in, view_ref, view_out = weak_view(path_in), weak_view(path_ref), weak_view(out)
    if not differences(view_in, view_ref):
        raise Failure("LLVM's tools see no difference between .in and .ref: the case tests nothing")
    problems = differences(view_out, view_ref)
    if problems:
        raise Failure("LLVM's tools: .out differs from the relink:\n  " + "\n  ".join(problems))

    raw_in, raw_ref, raw_out = (p.read_bytes() for p in (path_in, path_ref, out))
    if first_difference(masked(raw_in), masked(raw_ref)) is None:
        raise Failure(".in and .ref have the same bytes: the case tests nothing")
    diff = first_difference(masked(raw_out), masked(raw_ref))
    if diff:
        raise Failure(f".out differs from the relink's bytes at {diff}")

    again = work / "out" / f"{case.name}.again"
    proc = run([driver, out, again, *globs])
    if again.read_bytes() != raw_out or "nothing-to-do" not in proc.stdout:
        raise Failure(f"a second weak link changed the file or did not say so:\n{proc.stdout}")
    weak_imports = sum(1 for i in view_out["imports"] if i[3])
    return f"{len(globs)} dylib(s) weak, {weak_imports} weak import marks, bytes equal to the relink"


def main(argv):
    if len(argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    driver = Path(argv[1]).resolve()
    Path(argv[2]).mkdir(parents=True, exist_ok=True)
    failures = 0
    with tempfile.TemporaryDirectory(dir=argv[2]) as scratch:
        work = Path(scratch)
        linker = Linker(work)
        for case in cases():
            try:
                print(f"ok   {case.name}: {check_case(case, linker, driver, work)}")
            except (Failure, imports.ReaderError) as exc:
                failures += 1
                print(f"FAIL {case.name}: {exc}")
    print(f"{len(cases()) - failures}/{len(cases())} cases equal to the relink")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
