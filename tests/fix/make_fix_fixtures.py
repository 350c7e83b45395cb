#!/usr/bin/env python3
"""Build the fixtures of `machofix fix` that tests/app's fixtures lack.

    make_fix_fixtures.py OUTDIR

Everything is compiled from src/*.c and ../app/src/*.c (no system headers) by
clang-16 and linked by ld64.lld-16 against real dylibs built here, the .tbd stubs of
../fixtures/tbd/ and stubs written here. OUTDIR receives:

  models/m_rpath_cxx.dylib        imports __Znwm, __ZdlPv from @rpath/libc++.1.dylib
                                  (a stub with that install name), SDK 15.0 (dyld gives
                                  it no fallback paths), no LC_RPATH: a system library
                                  named through @rpath/ that nothing reaches
  models/m_rpath_cxx_extra.dylib  the same, also importing __ZSt9terminatev, which the
                                  app fixtures' sysroot libc++ stub does not export
  models/m_optomp_rpath.dylib     as the app fixtures' m_optomp (libomp at
                                  /opt/llvm-openmp/lib/libomp.dylib, SDK 11.0) plus the
                                  build machine's LC_RPATH /opt/llvm-openmp/lib
  models/m_tight.dylib            libomp at /opt/..., an unused dependency with a long
                                  absolute install name between libSystem and libomp,
                                  linked with -headerpad 0: renaming libomp to
                                  @executable_path/../Resources/lib/libomp.dylib fits
                                  only in the room the unused dependency's removal frees
  models/m_tight_nounused.dylib   the same without the unused dependency: the rename
                                  cannot fit
  models/dup_15_4.dylib           LC_RPATH @loader_path/../lib twice, SDK 15.4 (dyld
                                  refuses it: the loader rule rpath-duplicate)
  models/dup_aba_15_4.dylib       LC_RPATHs A, B, A, SDK 15.4
  models/dup_15_0.dylib           LC_RPATH @loader_path/../lib twice, SDK 15.0 (dyld
                                  loads it; a contract's duplicate-rpath)
  apps/Resources.app              an executable linking no libomp (LC_RPATH
                                  @executable_path/../Frameworks, an empty Frameworks)
                                  and libomp (@rpath/libomp.dylib, every OpenMP symbol)
                                  at Contents/Resources/lib/libomp.dylib, which no rpath
                                  reaches: dyld finds it only as @executable_path/...
  apps/TwoOMP.app                 the same executable, and libomp twice: in
                                  Contents/Frameworks/ (the rpath reaches it) and in
                                  Contents/Resources/lib/
  apps/Launch.app                 an executable that loads libomp at launch, whose
                                  install name is @executable_path/../Frameworks/
                                  libomp.dylib; its rpath reaches the same file
  manifest.json                   every image's link arguments, the claims verified on
                                  it, the apps, and the header room of the m_tight models

After the build every claim about every image (install name, dependent dylibs and
their order, LC_RPATHs in order, imports and the library each binds to, exports,
minimum macOS and SDK, header room) is checked through llvm-objdump-16 / llvm-nm-16
(../fixtures/imports.py); any failure, or any diagnostic a tool prints, aborts the
run. Output is deterministic: links happen in a scratch directory under the final
basenames and nothing records paths or times.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
FIXTURES = TESTS / "fixtures"
sys.path.insert(0, str(FIXTURES))
sys.dont_write_bytecode = True      # keep __pycache__ out of the source tree

import imports    # noqa: E402  (independent reader: llvm-objdump / llvm-nm)
from fixture_build import (CC, CFLAGS, LD, LIBSYSTEM, MACOS, OBJDUMP, OPT_OMP, RPATH_OMP,  # noqa: E402
                           StagedImages, info_plist)

RPATH_CXX = "@rpath/libc++.1.dylib"
# A build machine's helper library nothing in the model uses; long, so that its
# load command frees more room than the rename below needs.
UNUSED_LONG = "/opt/buildkite-agent/builds/pytorch/pytorch/build/lib/libtorch_inductor_build_helper.dylib"
OMP_SYMBOLS = ["_omp_get_num_threads", "___kmpc_fork_call", "___kmpc_barrier"]
LOAD = "LC_LOAD_DYLIB"
DUP = "@loader_path/../lib"
DUP_OTHER = "@loader_path/other"
BUNDLE_RPATH = "@executable_path/../Frameworks"
RESOURCES_OMP = "Contents/Resources/lib/libomp.dylib"
# The name dyld finds Resources.app's libomp by from a model it dlopen()s: no rpath
# reaches Contents/Resources/lib, so only a path relative to the executable.
RESOURCES_NAME = "@executable_path/../Resources/lib/libomp.dylib"
# The install name of Launch.app's libomp, which its executable loads at launch.
EXE_OMP = "@executable_path/../Frameworks/libomp.dylib"

# Stubs written here for linking only (none is shipped anywhere).
GEN_TBDS = {
    "libomp_opt": (OPT_OMP, ["___kmpc_barrier", "___kmpc_fork_call", "_omp_get_max_threads",
                             "_omp_get_num_threads", "_omp_get_thread_num"]),
    "libcxx_rpath": (RPATH_CXX, ["__ZSt9terminatev", "__ZdlPv", "__Znwm"]),
    "libunused_long": (UNUSED_LONG, ["_torch_build_helper"]),
}


class BuildError(Exception):
    pass


def run(cmd, cwd=None):
    """Run a tool; any failure or diagnostic aborts the build."""
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0 or proc.stderr.strip():
        raise BuildError(f"{' '.join(map(str, cmd))}\nexit {proc.returncode}\n{proc.stderr}")
    return proc.stdout


def align8(n):
    return (n + 7) & ~7


def dylib_cmdsize(name):
    """The size ld64 and lld give an LC_LOAD_DYLIB naming NAME (64-bit)."""
    return align8(24 + len(name) + 1)


# --------------------------------------------------------------------------- images

@dataclass
class Image:
    """One thin arm64 Mach-O built here.

    libs: "tbd:NAME" (tests/fixtures/tbd), "gen:NAME" (GEN_TBDS), "img:KEY" (an image
    built earlier). claims: "dylibs" [install name] in order, "imports" {symbol:
    install name}, "exports" [symbol]; the install name, LC_RPATHs (in order, repeats
    included), minimum macOS and SDK are always checked, and a model is held to
    "every dependency supplies an import" unless it names it in "unused".
    """
    key: str
    stage: str
    kind: str                   # dylib | execute
    src: str                    # relative to tests/
    purpose: str
    install_name: str = None
    defines: list = field(default_factory=list)
    libs: list = field(default_factory=list)
    rpaths: list = field(default_factory=list)
    flags: list = field(default_factory=list)
    minos: str = MACOS
    sdk: str = MACOS
    model: bool = False
    claims: dict = field(default_factory=dict)


def model(key, src, libs, purpose, **kw):
    return Image(key, f"models/{key}.dylib", "dylib", src, purpose, install_name=f"@rpath/{key}.dylib",
                 libs=["tbd:libSystem"] + list(libs), model=True, **kw)


def omp_claims(lib, dylibs):
    return {"dylibs": dylibs, "imports": {**{s: lib for s in OMP_SYMBOLS}, "_malloc": LIBSYSTEM}}


IMAGES = [
    Image("libomp", "libomp/libomp.dylib", "dylib", "app/src/libomp.c",
          "libomp as an application ships it (@rpath/libomp.dylib): every OpenMP symbol",
          install_name=RPATH_OMP, libs=["tbd:libSystem"],
          claims={"dylibs": [LIBSYSTEM], "imports": {"_malloc": LIBSYSTEM},
                  "exports": ["_omp_get_num_threads", "_omp_get_thread_num", "_omp_get_max_threads",
                              "___kmpc_fork_call", "___kmpc_barrier"]}),
    Image("libomp_exe", "libomp_exe/libomp.dylib", "dylib", "app/src/libomp.c",
          "libomp with the install name @executable_path/../Frameworks/libomp.dylib: every OpenMP symbol",
          install_name=EXE_OMP, libs=["tbd:libSystem"],
          claims={"dylibs": [LIBSYSTEM], "exports": ["_omp_get_num_threads", "___kmpc_fork_call", "___kmpc_barrier"]}),
    Image("LaunchApp", "exe_LaunchApp/LaunchApp", "execute", "app/src/app_main.c",
          "an application's executable that loads libomp_exe at launch; LC_RPATH @executable_path/../Frameworks "
          "(which reaches it too)", defines=["WITH_OMP"], libs=["tbd:libSystem", "img:libomp_exe"],
          rpaths=[BUNDLE_RPATH], claims={"dylibs": [LIBSYSTEM, EXE_OMP], "imports": {"_omp_get_thread_num": EXE_OMP}}),
    Image("ResApp", "exe_ResApp/ResApp", "execute", "app/src/app_main.c",
          "an application's executable that links no libomp; LC_RPATH @executable_path/../Frameworks",
          libs=["tbd:libSystem"], rpaths=[BUNDLE_RPATH],
          claims={"dylibs": [LIBSYSTEM], "imports": {"_malloc": LIBSYSTEM}}),
    model("m_rpath_cxx", "fix/src/model_cxx.c", ["gen:libcxx_rpath"],
          "imports __Znwm and __ZdlPv from @rpath/libc++.1.dylib; SDK 15.0, no LC_RPATH",
          sdk="15.0",
          claims={"dylibs": [LIBSYSTEM, RPATH_CXX],
                  "imports": {"__Znwm": RPATH_CXX, "__ZdlPv": RPATH_CXX, "_malloc": LIBSYSTEM,
                              "_free": LIBSYSTEM}}),
    model("m_rpath_cxx_extra", "fix/src/model_cxx.c", ["gen:libcxx_rpath"],
          "as m_rpath_cxx, also importing __ZSt9terminatev (not in the sysroot's libc++ stub)",
          sdk="15.0", defines=["EXTRA"],
          claims={"dylibs": [LIBSYSTEM, RPATH_CXX],
                  "imports": {"__Znwm": RPATH_CXX, "__ZdlPv": RPATH_CXX, "__ZSt9terminatev": RPATH_CXX}}),
    model("m_optomp_rpath", "app/src/model_omp.c", ["gen:libomp_opt"],
          "as the app fixtures' m_optomp (libomp at /opt/llvm-openmp/lib/libomp.dylib) plus the "
          "build machine's LC_RPATH /opt/llvm-openmp/lib",
          rpaths=["/opt/llvm-openmp/lib"], claims=omp_claims(OPT_OMP, [LIBSYSTEM, OPT_OMP])),
    model("m_tight", "app/src/model_omp.c", ["gen:libunused_long", "gen:libomp_opt"],
          "libomp at /opt/..., an unused dependency with a long install name before it, "
          "-headerpad 0 (no room to grow the load commands)",
          sdk="15.0", flags=["-headerpad", "0"],
          claims={**omp_claims(OPT_OMP, [LIBSYSTEM, UNUSED_LONG, OPT_OMP]), "unused": [UNUSED_LONG]}),
    model("m_tight_nounused", "app/src/model_omp.c", ["gen:libomp_opt"],
          "as m_tight without the unused dependency", sdk="15.0", flags=["-headerpad", "0"],
          claims=omp_claims(OPT_OMP, [LIBSYSTEM, OPT_OMP])),
    model("dup_15_4", "fix/src/rpaths.c", [], "LC_RPATH @loader_path/../lib twice, SDK 15.4",
          sdk="15.4", rpaths=[DUP, DUP], claims={"dylibs": [LIBSYSTEM], "imports": {"_malloc": LIBSYSTEM}}),
    model("dup_aba_15_4", "fix/src/rpaths.c", [], "LC_RPATHs @loader_path/../lib, @loader_path/other, "
          "@loader_path/../lib, SDK 15.4", sdk="15.4", rpaths=[DUP, DUP_OTHER, DUP],
          claims={"dylibs": [LIBSYSTEM]}),
    model("dup_15_0", "fix/src/rpaths.c", [], "LC_RPATH @loader_path/../lib twice, SDK 15.0",
          sdk="15.0", rpaths=[DUP, DUP], claims={"dylibs": [LIBSYSTEM]}),
]

# Apps: name -> (executable image, {path under the bundle: image}).
APPS = {
    "Resources.app": ("ResApp", {RESOURCES_OMP: "libomp"},
                      "libomp only under Contents/Resources/lib, which no rpath reaches"),
    "TwoOMP.app": ("ResApp", {"Contents/Frameworks/libomp.dylib": "libomp", RESOURCES_OMP: "libomp"},
                   "libomp twice: in Contents/Frameworks (the executable's rpath reaches it) and "
                   "in Contents/Resources/lib"),
    "Launch.app": ("LaunchApp", {"Contents/Frameworks/libomp.dylib": "libomp_exe"},
                   "the executable loads libomp at launch, whose install name is "
                   "@executable_path/../Frameworks/libomp.dylib (the rpath reaches the same file as "
                   "@rpath/libomp.dylib): dyld knows it by its install name first"),
}

# The m_tight models: libomp's rename that only the removal makes room for.
TIGHT = {"m_tight": {"old": OPT_OMP, "new": RESOURCES_NAME, "removed": UNUSED_LONG},
         "m_tight_nounused": {"old": OPT_OMP, "new": RESOURCES_NAME, "removed": None}}


class Builder(StagedImages):
    def __init__(self, scratch):
        super().__init__(scratch, GEN_TBDS, IMAGES)

    def compile(self, image):
        tag = "-".join([Path(image.src).stem] + image.defines)
        obj = self.scratch / "obj" / f"{tag}.o"
        if not obj.exists():
            obj.parent.mkdir(exist_ok=True)
            run([CC, "-target", f"arm64-apple-macos{MACOS}", *CFLAGS,
                 *[f"-D{d}" for d in image.defines], "-c", TESTS / image.src, "-o", obj])
        return obj

    def link_args(self, image, labels=False):
        args = ["-arch", "arm64", "-platform_version", "macos", image.minos, image.sdk]
        if image.kind == "dylib":
            args += ["-dylib", "-install_name", image.install_name]
        else:
            args.append("-execute")
        args.append("-fixup_chains")
        args.append(f"tests/{image.src}" if labels else self.compile(image))
        args += [self.lib_path(spec, labels) for spec in image.libs]
        for rpath in image.rpaths:
            args += ["-rpath", rpath]
        return args + image.flags

    def build_all(self):
        for image in IMAGES:        # listed so that every image comes after what it links
            dest = self.staged(image.key)
            dest.parent.mkdir(parents=True, exist_ok=True)
            run([LD, *self.link_args(image), "-o", dest])


# --------------------------------------------------------------------------- verify

def load_commands(path):
    """[(cmd, {field: value})] and sizeofcmds, as llvm-objdump-16 prints them."""
    out = run([OBJDUMP, "--macho", "--private-headers", path])
    header = re.search(r"^\s*MH_MAGIC_64\s+\S+\s+\S+\s+\S+\s+\S+\s+(\d+)\s+(\d+)", out, re.M)
    if not header:
        raise BuildError(f"{path}: no 64-bit mach header in llvm-objdump output")
    commands = []
    for block in re.split(r"^Load command \d+$", out, flags=re.M)[1:]:
        fields = {}
        for line in block.splitlines():
            m = re.match(r"^\s*(\w+) (.*?)(?: \(offset \d+\))?$", line)
            if m and m.group(1) not in fields:
                fields[m.group(1)] = m.group(2)
        commands.append(fields)
    sections = [int(m) for m in re.findall(r"^\s+offset (\d+)$", out, re.M)]
    return {"ncmds": int(header.group(1)), "sizeofcmds": int(header.group(2)), "commands": commands,
            "first_section_offset": min(o for o in sections if o > 0)}


def header_room(path):
    """Bytes between the end of the load commands and the first section's content."""
    lc = load_commands(path)
    return lc["first_section_offset"] - (32 + lc["sizeofcmds"])


def exports(path):
    out = run([OBJDUMP, "--macho", "--exports-trie", path])
    return {m.group(1) for m in re.finditer(r"^0x[0-9A-Fa-f]+\s+(\S+)", out, re.M)}


def verify_image(image, path):
    """Check every claim about one built image; return what the manifest records."""
    info = imports.inspect(path)
    problems = []
    if [s["arch"] for s in info["slices"]] != ["arm64"]:
        problems.append(f"architectures {[s['arch'] for s in info['slices']]}, expected arm64")
    s = info["slices"][0]
    if s["filetype"] != {"dylib": "DYLIB", "execute": "EXECUTE"}[image.kind]:
        problems.append(f"file type {s['filetype']}")
    if s["id"] != image.install_name:
        problems.append(f"install name {s['id']}, expected {image.install_name}")
    if s["rpaths"] != image.rpaths:
        problems.append(f"LC_RPATHs {s['rpaths']}, expected {image.rpaths}")
    commands = load_commands(path)["commands"]
    build = [c for c in commands if c.get("cmd") == "LC_BUILD_VERSION"]
    if len(build) != 1 or build[0].get("minos") != image.minos or build[0].get("sdk") != image.sdk:
        problems.append(f"LC_BUILD_VERSION {build}, expected minos {image.minos} sdk {image.sdk}")
    if any(c["cmd"] != LOAD for c in s["dylib_commands"]):
        problems.append(f"dylib commands {s['dylib_commands']}: only LC_LOAD_DYLIB expected")
    if "dylibs" in image.claims and s["dylibs"] != image.claims["dylibs"]:
        problems.append(f"dylibs {s['dylibs']}, expected {image.claims['dylibs']}")
    by_symbol = {}
    for imp in s["imports"]:
        by_symbol.setdefault(imp["symbol"], set()).add(imp["library"])
    for symbol, library in image.claims.get("imports", {}).items():
        if by_symbol.get(symbol) != {library}:
            problems.append(f"{symbol} binds to {sorted(by_symbol.get(symbol, []))}, expected {library}")
    if image.model:
        used = {i["library"] for i in s["imports"]}
        unused = [name for name in s["dylibs"] if name not in used]
        if unused != image.claims.get("unused", []):
            problems.append(f"dependencies that supply nothing: {unused}, expected {image.claims.get('unused', [])}")
    if "signed" in s and not s["signed"]:
        problems.append("no LC_CODE_SIGNATURE (ld64.lld-16 signs arm64 output ad hoc)")
    exported = exports(path)
    for symbol in image.claims.get("exports", []):
        if symbol not in exported:
            problems.append(f"{symbol} is not exported")
    if problems:
        raise BuildError(f"{image.key} ({path}): " + "; ".join(problems))
    return {"dylibs": s["dylibs"], "rpaths": s["rpaths"], "minos": image.minos, "sdk": image.sdk,
            "imports": sorted({(i["symbol"], i["library"]) for i in s["imports"]})}


def verify_tight(builder):
    """The m_tight models' header room, read by llvm-objdump-16: the rename of libomp
    needs more than either has; the unused dependency's command frees enough."""
    rooms = {}
    for key, plan in TIGHT.items():
        path = builder.staged(key)
        lc = load_commands(path)
        olds = [c for c in lc["commands"] if c.get("cmd") == LOAD and c.get("name") == plan["old"]]
        if len(olds) != 1 or int(olds[0]["cmdsize"]) != dylib_cmdsize(plan["old"]):
            raise BuildError(f"{key}: the {plan['old']} command is {olds}")
        needed = dylib_cmdsize(plan["new"]) - dylib_cmdsize(plan["old"])
        room = header_room(path)
        freed = 0
        if plan["removed"]:
            removed = [c for c in lc["commands"] if c.get("cmd") == LOAD and c.get("name") == plan["removed"]]
            if len(removed) != 1:
                raise BuildError(f"{key}: {plan['removed']} is not one LC_LOAD_DYLIB: {removed}")
            freed = int(removed[0]["cmdsize"])
        if room >= needed:
            raise BuildError(f"{key}: {room} bytes of header room hold the rename ({needed} bytes) without any removal")
        if plan["removed"] and room + freed < needed:
            raise BuildError(f"{key}: removing {plan['removed']} frees {freed} bytes, {room + freed} < {needed}")
        rooms[key] = {**plan, "room": room, "needed": needed, "freed": freed,
                      "old_cmdsize": dylib_cmdsize(plan["old"]), "new_cmdsize": dylib_cmdsize(plan["new"])}
    return rooms


# --------------------------------------------------------------------------- apps

def app_plist(executable, name):
    return info_plist(executable, name, f"org.machofix.fixtures.fix.{name}", MACOS)


def assemble_app(builder, name, outdir):
    exe, files, _purpose = APPS[name]
    root = outdir / "apps" / name
    (root / "Contents" / "MacOS").mkdir(parents=True)
    (root / "Contents" / "Frameworks").mkdir()
    (root / "Contents" / "Info.plist").write_bytes(app_plist(exe, name[:-4]))
    shutil.copyfile(builder.staged(exe), root / "Contents" / "MacOS" / exe)
    os.chmod(root / "Contents" / "MacOS" / exe, 0o755)
    for rel, key in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(builder.staged(key), root / rel)


# --------------------------------------------------------------------------- main

def main(argv):
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    start = time.monotonic()
    outdir = Path(argv[1])
    outdir.mkdir(parents=True, exist_ok=True)
    for stale in ("apps", "models"):
        shutil.rmtree(outdir / stale, ignore_errors=True)
    (outdir / "manifest.json").unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="machofix-fix-fixtures-") as scratch:
        builder = Builder(scratch)
        builder.build_all()
        images = {image.key: {"purpose": image.purpose, "file": image.stage if image.model else None,
                              "install_name": image.install_name,
                              "link_args": builder.link_args(image, labels=True), "claims": image.claims,
                              "verified": verify_image(image, builder.staged(image.key))}
                  for image in IMAGES}
        rooms = verify_tight(builder)
        (outdir / "models").mkdir()
        for image in IMAGES:
            if image.model:
                shutil.copyfile(builder.staged(image.key), outdir / image.stage)
        for name in APPS:
            assemble_app(builder, name, outdir)
    manifest = {
        "images": images,
        "apps": {name: {"path": f"apps/{name}", "executable": f"apps/{name}/Contents/MacOS/{exe}",
                        "executable_rpaths": [BUNDLE_RPATH], "files": files, "purpose": purpose}
                 for name, (exe, files, purpose) in APPS.items()},
        "tight": rooms,
        "names": {"opt_omp": OPT_OMP, "rpath_omp": RPATH_OMP, "rpath_cxx": RPATH_CXX,
                  "unused_long": UNUSED_LONG, "resources_name": RESOURCES_NAME, "dup": DUP,
                  "dup_other": DUP_OTHER, "exe_omp": EXE_OMP},
    }
    (outdir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    for key, room in rooms.items():
        print(f"{key}: rename {room['old']} -> {room['new']} needs {room['needed']} bytes, "
              f"{room['room']} available, {room['freed']} freed by the removal")
    print(f"{len(IMAGES)} images, {len(APPS)} apps in {outdir} ({time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (BuildError, imports.ReaderError, OSError) as exc:
        print(f"make_fix_fixtures.py: FAILED: {exc}", file=sys.stderr)
        sys.exit(1)
