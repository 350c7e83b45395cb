#!/usr/bin/env python3
"""Build the fixtures of `machofix check --app`: applications, models, a sysroot.

    make_app_fixtures.py OUTDIR

Everything is compiled from src/*.c (no system headers) by clang-16 and linked by
ld64.lld-16 (llvm-lipo-16 for universal files), against real dylibs built here and
the .tbd stubs of tests/fixtures/tbd/. OUTDIR receives:

  apps/     application bundles (Contents/Info.plist, Contents/MacOS/EXE,
            Contents/Frameworks/), an iOS-style flat bundle and two directories of
            libraries (the three forms --app takes)
  models/   model dylibs, each judged against some of the apps
  sysroot/  an SDK-layout tree of .tbd stubs (v4 with inlined libraries, v3, v5 JSON)
  twins/    the v5 stub rewritten as v4, for ld64.lld-16 (which cannot read v5)
  manifest.json  every image built and the claims verified on it, every case
            (model or .pte x app x options) with the findings expected, and the
            sample cases (see README.md)

After the build every claim about every image (install name, dependent dylibs and
their command kinds, LC_RPATHs, imports and the library each binds to, weak
imports, exported symbols, minimum macOS, architectures) is checked through
llvm-objdump-16 / llvm-nm-16 (tests/fixtures/imports.py); any failure, or any
diagnostic a tool prints, aborts the run. Output is deterministic: links happen in a
scratch directory under the final basenames and nothing records paths or times.
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
FIXTURES = HERE.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
sys.dont_write_bytecode = True      # keep __pycache__ out of the source tree

import imports    # noqa: E402  (independent reader: llvm-objdump / llvm-nm)
from fixture_build import (CC, CFLAGS, LD, LIBSYSTEM, LIPO, MACOS, OBJDUMP, OPT_OMP, RPATH_OMP,  # noqa: E402
                           SYSROOT_TARGETS, StagedImages, info_plist)

LIBCXX = "/usr/lib/libc++.1.dylib"
METAL = "/System/Library/Frameworks/Metal.framework/Versions/A/Metal"
MPSGRAPH = ("/System/Library/Frameworks/MetalPerformanceShadersGraph.framework/Versions/A/"
            "MetalPerformanceShadersGraph")
WRAP = "@rpath/Wrap.framework/Versions/A/Wrap"
OMP_SYMBOLS = ["_omp_get_num_threads", "___kmpc_fork_call", "___kmpc_barrier"]
LOAD, WEAK, REEXPORT = "LC_LOAD_DYLIB", "LC_LOAD_WEAK_DYLIB", "LC_REEXPORT_DYLIB"


class BuildError(Exception):
    pass


def run(cmd, cwd=None):
    """Run a tool; any failure or diagnostic aborts the build."""
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0 or proc.stderr.strip():
        raise BuildError(f"{' '.join(map(str, cmd))}\nexit {proc.returncode}\n{proc.stderr}")
    return proc.stdout


# --------------------------------------------------------------------------- images

@dataclass
class Image:
    """One Mach-O file built here (thin, or universal when it has several archs).

    libs: "tbd:NAME" (tests/fixtures/tbd), "gen:NAME" (a stub written here, GEN_TBDS),
    "img:KEY" (an image built earlier), each optionally prefixed "weak:" or
    "reexport:" (-weak_library / -reexport_library).
    claims: what llvm-objdump must show (checked per slice): "dylibs" [(cmd, name)],
    "imports" {symbol: install name or "flat-lookup"}, "weak_imports" [symbol],
    "exports" / "not_exports" [symbol]; the install name, LC_RPATHs, minimum macOS and
    architectures are always checked. Models are also held to "every dependency
    supplies an import" (no unused-dependency finding of the plain check rules).
    """
    key: str
    stage: str                  # path under the staging directory (final basename)
    kind: str                   # dylib | execute
    src: str
    archs: list
    purpose: str
    install_name: str = None
    defines: list = field(default_factory=list)
    arch_defines: dict = field(default_factory=dict)
    libs: list = field(default_factory=list)
    rpaths: list = field(default_factory=list)
    exported: list = None       # -exported_symbol list (executables)
    flags: list = field(default_factory=list)
    chained: dict = None        # arch -> bool; default: arm64 chained, x86_64 dyld-info
    minos: str = MACOS
    model: bool = False
    claims: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


def lib_image(key, stage, src, install_name, archs=("arm64",), purpose="", **kw):
    return Image(key, stage, "dylib", src, list(archs), purpose, install_name=install_name, **kw)


def omp_claims(partial=False):
    present = ["_omp_get_num_threads", "_omp_get_thread_num", "_omp_get_max_threads",
               "___kmpc_fork_call"]
    return {"exports": present + ([] if partial else ["___kmpc_barrier"]),
            "not_exports": ["___kmpc_barrier"] if partial else [],
            "dylibs": [(LOAD, LIBSYSTEM)], "imports": {"_malloc": LIBSYSTEM}}


LIBRARIES = [
    lib_image("libomp", "libomp/libomp.dylib", "libomp.c", RPATH_OMP, ("arm64", "x86_64"),
              "libomp as an application ships it (@rpath/libomp.dylib): every OpenMP symbol",
              claims=omp_claims()),
    lib_image("libomp_partial", "libomp_partial/libomp.dylib", "libomp.c", RPATH_OMP,
              purpose="@rpath/libomp.dylib lacking ___kmpc_barrier",
              defines=["OMP_PARTIAL"], claims=omp_claims(partial=True)),
    lib_image("libomp_mixed", "libomp_mixed/libomp.dylib", "libomp.c", RPATH_OMP, ("arm64", "x86_64"),
              "universal @rpath/libomp.dylib: the arm64 slice complete, the x86_64 slice "
              "lacking ___kmpc_barrier", arch_defines={"x86_64": ["OMP_PARTIAL"]},
              claims={"exports": ["_omp_get_num_threads", "___kmpc_fork_call"]}),
    lib_image("libomp_x86_64", "libomp_x86_64/libomp.dylib", "libomp.c", RPATH_OMP, ("x86_64",),
              "@rpath/libomp.dylib for x86_64 only (an arm64 process cannot load it)",
              claims=omp_claims()),
    lib_image("libomp_opt", "libomp_opt/libomp.dylib", "libomp.c", OPT_OMP,
              purpose="libomp as PyTorch's wheel has it: install name "
              "/opt/llvm-openmp/lib/libomp.dylib, every OpenMP symbol", claims=omp_claims()),
    lib_image("libfoo", "libfoo/libfoo.dylib", "libfoo.c", "@rpath/libfoo.dylib",
              purpose="@rpath/libfoo.dylib with _foo_init and _foo_run (the samples import both)",
              claims={"exports": ["_foo_init", "_foo_run"], "dylibs": [(LOAD, LIBSYSTEM)]}),
    lib_image("libmid", "libmid/libmid.dylib", "libmid.c", "@rpath/libmid.dylib",
              purpose="@rpath/libmid.dylib, which depends on @rpath/libgone.dylib (never shipped)",
              libs=["gen:libgone"],
              claims={"exports": ["_mid_run"],
                      "dylibs": [(LOAD, LIBSYSTEM), (LOAD, "@rpath/libgone.dylib")],
                      "imports": {"_gone_fn": "@rpath/libgone.dylib", "_malloc": LIBSYSTEM}}),
    lib_image("libompuser", "libompuser/libompuser.dylib", "libompuser.c", "@rpath/libompuser.dylib",
              purpose="@rpath/libompuser.dylib, which imports ___kmpc_barrier from @rpath/libomp.dylib",
              libs=["img:libomp"],
              claims={"exports": ["_ompuser_run"],
                      "dylibs": [(LOAD, LIBSYSTEM), (LOAD, RPATH_OMP)],
                      "imports": {"___kmpc_barrier": RPATH_OMP, "_malloc": LIBSYSTEM}}),
    lib_image("libinner", "fw/libinner.dylib", "libinner.c", "@rpath/libinner.dylib",
              purpose="@rpath/libinner.dylib, re-exported by Wrap.framework",
              claims={"exports": ["_inner_fn"]}),
    # lld-16 writes LC_LOAD_DYLIB and LC_REEXPORT_DYLIB for -reexport_library (see
    # tests/fixtures/README.md); the re-exported library is therefore linked last.
    lib_image("wrap", "fw/Wrap.framework/Versions/A/Wrap", "wrap.c", WRAP,
              purpose="Wrap.framework (versioned layout): _wrap_fn, and @rpath/libinner.dylib "
              "re-exported (LC_REEXPORT_DYLIB); its LC_RPATH @loader_path/../../.. is the "
              "application's Frameworks directory",
              libs=["reexport:img:libinner"], rpaths=["@loader_path/../../.."],
              claims={"exports": ["_wrap_fn"],
                      "dylibs": [(LOAD, LIBSYSTEM), (LOAD, "@rpath/libinner.dylib"),
                                 (REEXPORT, "@rpath/libinner.dylib")]}),
]

# Stubs written here for linking only (neither is shipped anywhere).
GEN_TBDS = {
    "libgone": ("@rpath/libgone.dylib", ["_gone_fn"]),
    "MPSGraph": (MPSGRAPH, ["_MPSGraphCreate"]),
}

BUNDLE_RPATH = "@executable_path/../Frameworks"


def exe_image(key, archs, purpose, defines=(), libs=(), exported=None, rpath=BUNDLE_RPATH, claims=None):
    return Image(key, f"exe_{key}/{key}", "execute", "app_main.c", list(archs), purpose,
                 defines=list(defines), libs=list(libs), rpaths=[rpath], exported=exported,
                 claims=claims or {})


EXECUTABLES = [
    exe_image("OMPApp", ["arm64"], "links @rpath/libomp.dylib (loaded at launch)",
              ["WITH_OMP"], ["img:libomp"],
              claims={"dylibs": [(LOAD, LIBSYSTEM), (LOAD, RPATH_OMP)],
                      "imports": {"_omp_get_thread_num": RPATH_OMP}}),
    exe_image("PartialApp", ["arm64"], "links the partial @rpath/libomp.dylib",
              ["WITH_OMP"], ["img:libomp_partial"],
              claims={"dylibs": [(LOAD, LIBSYSTEM), (LOAD, RPATH_OMP)]}),
    exe_image("PlainApp", ["arm64"], "links no libomp", claims={"dylibs": [(LOAD, LIBSYSTEM)]}),
    exe_image("UniversalApp", ["arm64", "x86_64"], "arm64 + x86_64, links @rpath/libomp.dylib",
              ["WITH_OMP"], ["img:libomp"],
              claims={"dylibs": [(LOAD, LIBSYSTEM), (LOAD, RPATH_OMP)]}),
    exe_image("ReexportApp", ["arm64"], "links @rpath/libomp.dylib and Wrap.framework",
              ["WITH_OMP", "WITH_WRAP"], ["img:libomp", "img:wrap"],
              claims={"dylibs": [(LOAD, LIBSYSTEM), (LOAD, RPATH_OMP), (LOAD, WRAP)],
                      "imports": {"_wrap_fn": WRAP}}),
    exe_image("napi-host", ["arm64"], "exports N-API-like functions to flat lookups "
              "(-exported_symbol); napi_module_register is defined but not exported",
              ["NAPI"], exported=["_napi_create_function", "_napi_get_cb_info"],
              claims={"exports": ["_napi_create_function", "_napi_get_cb_info"],
                      "not_exports": ["_napi_module_register"]}),
    # Linked against a stub named @rpath/libomp.dylib while the file shipped at that
    # path is PyTorch's libomp, whose LC_ID_DYLIB is /opt/llvm-openmp/lib/libomp.dylib:
    # dyld loads it at launch through the rpath and then knows it by that install name.
    exe_image("AOTIRunner", ["arm64"], "loads PyTorch's libomp (install name "
              "/opt/llvm-openmp/lib/libomp.dylib) at launch through @rpath/libomp.dylib; exports "
              "the samples' flat lookups _aoti_torch_create_tensor_from_blob and _bzero",
              ["WITH_OMP", "AOTI"], ["tbd:libomp_rpath"],
              exported=["_aoti_torch_create_tensor_from_blob", "_bzero"],
              claims={"dylibs": [(LOAD, LIBSYSTEM), (LOAD, RPATH_OMP)],
                      "exports": ["_aoti_torch_create_tensor_from_blob", "_bzero"],
                      "imports": {"_omp_get_thread_num": RPATH_OMP}}),
    exe_image("AOTIRunnerNoOMP", ["arm64"], "as AOTIRunner without libomp",
              ["AOTI"], exported=["_aoti_torch_create_tensor_from_blob", "_bzero"],
              claims={"dylibs": [(LOAD, LIBSYSTEM)],
                      "exports": ["_aoti_torch_create_tensor_from_blob", "_bzero"]}),
    exe_image("FlatApp", ["arm64"], "iOS-style flat bundle: LC_RPATH @executable_path/Frameworks",
              ["WITH_OMP"], ["img:libomp"], rpath="@executable_path/Frameworks",
              claims={"dylibs": [(LOAD, LIBSYSTEM), (LOAD, RPATH_OMP)]}),
]


def model(key, src, libs, purpose, archs=("arm64",), flags=(), rpaths=(), minos=MACOS,
          chained=None, claims=None, notes=()):
    return Image(key, f"models/{key}.dylib", "dylib", src, list(archs), purpose,
                 install_name=f"@rpath/{key}.dylib", libs=["tbd:libSystem"] + list(libs),
                 flags=list(flags), rpaths=list(rpaths), minos=minos, chained=chained,
                 model=True, claims=claims or {}, notes=list(notes))


def omp_imports(lib, weak=False):
    claims = {"imports": {s: lib for s in OMP_SYMBOLS}}
    if weak:
        claims["weak_imports"] = list(OMP_SYMBOLS)
    return claims


DYNAMIC_LOOKUP = ["-undefined", "dynamic_lookup"]

MODELS = [
    model("m_omp", "model_omp.c", ["img:libomp"],
          "uses _omp_get_num_threads, ___kmpc_fork_call, ___kmpc_barrier from @rpath/libomp.dylib "
          "(arm64, chained fixups)",
          claims=dict(omp_imports(RPATH_OMP), dylibs=[(LOAD, LIBSYSTEM), (LOAD, RPATH_OMP)])),
    model("m_omp_lazy", "model_omp.c", ["img:libomp"],
          "as m_omp with dyld-info: the libomp calls are lazy binds", chained={"arm64": False},
          claims=omp_imports(RPATH_OMP)),
    model("m_optomp", "model_omp.c", ["img:libomp_opt"],
          "as m_omp linked against PyTorch's libomp: depends on /opt/llvm-openmp/lib/libomp.dylib",
          claims=dict(omp_imports(OPT_OMP), dylibs=[(LOAD, LIBSYSTEM), (LOAD, OPT_OMP)])),
    model("m_weakomp", "model_omp.c", ["weak:img:libomp"],
          "as m_omp with libomp weak-linked (-weak_library): every libomp import is weak",
          claims=dict(omp_imports(RPATH_OMP, weak=True), dylibs=[(LOAD, LIBSYSTEM), (WEAK, RPATH_OMP)])),
    model("m_loaderpath", "model_omp.c", ["img:libomp"],
          "as m_omp with its own LC_RPATH @loader_path (the temporary directory it is "
          "written to: nothing there)", rpaths=["@loader_path"], claims=omp_imports(RPATH_OMP)),
    model("m_newer", "model_omp.c", ["img:libomp"],
          "as m_omp built for macOS 14.0 (LC_BUILD_VERSION minos 14.0)", minos="14.0",
          claims=omp_imports(RPATH_OMP)),
    model("m_universal", "model_omp.c", ["img:libomp"],
          "as m_omp for arm64 (chained) + x86_64 (dyld-info)", archs=("arm64", "x86_64"),
          claims=omp_imports(RPATH_OMP)),
    model("m_flat", "model_flat.c", [],
          "-undefined dynamic_lookup: _napi_create_function and _napi_get_cb_info (exported by "
          "napi-host) and _bzero (libSystem's) are flat lookups", flags=DYNAMIC_LOOKUP,
          claims={"imports": {"_napi_create_function": "flat-lookup",
                              "_napi_get_cb_info": "flat-lookup", "_bzero": "flat-lookup",
                              "_malloc": LIBSYSTEM}}),
    model("m_flat_hidden", "model_flat_hidden.c", [],
          "-undefined dynamic_lookup of _napi_module_register, which napi-host defines but "
          "does not export", flags=DYNAMIC_LOOKUP,
          claims={"imports": {"_napi_module_register": "flat-lookup"}}),
    model("m_chain", "model_chain.c", ["img:libmid"],
          "needs @rpath/libmid.dylib (_mid_run), whose @rpath/libgone.dylib is missing",
          claims={"imports": {"_mid_run": "@rpath/libmid.dylib"}}),
    model("m_ompuser", "model_ompuser.c", ["img:libompuser"],
          "needs @rpath/libompuser.dylib (_ompuser_run), which needs ___kmpc_barrier of libomp",
          claims={"imports": {"_ompuser_run": "@rpath/libompuser.dylib"}}),
    model("m_reexport", "model_reexport.c", ["img:wrap"],
          "linked against Wrap.framework: _wrap_fn is Wrap's own, _inner_fn comes from "
          "libinner through Wrap's LC_REEXPORT_DYLIB (both bind to Wrap's ordinal)",
          claims={"dylibs": [(LOAD, LIBSYSTEM), (LOAD, WRAP)],
                  "imports": {"_wrap_fn": WRAP, "_inner_fn": WRAP}}),
    model("m_system", "model_system.c", ["tbd:libcxx", "tbd:Metal"],
          "only system libraries: libSystem (_malloc, _free), libc++ (__Znwm, __ZdlPv), Metal "
          "(_MTLCreateSystemDefaultDevice, and _MTLCopyAllDevices which the sysroot's Metal "
          "stub lacks)",
          claims={"dylibs": [(LOAD, LIBSYSTEM), (LOAD, LIBCXX), (LOAD, METAL)],
                  "imports": {"_malloc": LIBSYSTEM, "_free": LIBSYSTEM, "__Znwm": LIBCXX,
                              "__ZdlPv": LIBCXX, "_MTLCreateSystemDefaultDevice": METAL,
                              "_MTLCopyAllDevices": METAL}}),
    model("m_mpsgraph", "model_mpsgraph.c", ["gen:MPSGraph"],
          "needs MetalPerformanceShadersGraph.framework, which the sysroot does not have",
          claims={"imports": {"_MPSGraphCreate": MPSGRAPH}}),
]

IMAGES = LIBRARIES + EXECUTABLES + MODELS


# --------------------------------------------------------------------------- apps

@dataclass
class App:
    """An application as --app takes it.

    form: bundle (X.app/Contents/{Info.plist,MacOS/EXE,Frameworks/}), flat (iOS style:
    X.app/{Info.plist,EXE,Frameworks/}) or libdir (a directory of dylibs, no executable).
    """
    name: str
    form: str
    purpose: str
    exe: str = None                 # image key; the file is named after it
    libs: dict = field(default_factory=dict)      # path under Frameworks (or libdir) -> image key
    symlinks: dict = field(default_factory=dict)  # path under Frameworks -> link target

    @property
    def path(self):
        return f"apps/{self.name}"

    @property
    def lib_dir(self):
        return {"bundle": f"{self.path}/Contents/Frameworks", "flat": f"{self.path}/Frameworks",
                "libdir": self.path}[self.form]

    @property
    def exe_path(self):
        if self.exe is None:
            return None
        return {"bundle": f"{self.path}/Contents/MacOS/{self.exe}",
                "flat": f"{self.path}/{self.exe}"}[self.form]

    def lib(self, name):
        return f"{self.lib_dir}/{name}"


WRAP_FILES = {"Wrap.framework/Versions/A/Wrap": "wrap", "libinner.dylib": "libinner"}
WRAP_LINKS = {"Wrap.framework/Versions/Current": "A", "Wrap.framework/Wrap": "Versions/Current/Wrap"}

APPS = {a.name: a for a in [
    App("OMP.app", "bundle", "(a) ships libomp whole, the executable links it",
        "OMPApp", {"libomp.dylib": "libomp", "libompuser.dylib": "libompuser"}),
    App("Partial.app", "bundle", "(b) ships the partial libomp (no ___kmpc_barrier)",
        "PartialApp", {"libomp.dylib": "libomp_partial", "libompuser.dylib": "libompuser"}),
    App("Plain.app", "bundle", "(c) no libomp at all; ships libfoo, libompuser (whose libomp "
        "is missing) and libmid (whose libgone is missing)",
        "PlainApp", {"libfoo.dylib": "libfoo", "libompuser.dylib": "libompuser",
                     "libmid.dylib": "libmid"}),
    App("AOTIRunner.app", "bundle", "(d) ships PyTorch's libomp (install name "
        "/opt/llvm-openmp/lib/libomp.dylib) as Frameworks/libomp.dylib, loaded at launch; "
        "ships libfoo; exports the samples' flat lookups",
        "AOTIRunner", {"libomp.dylib": "libomp_opt", "libfoo.dylib": "libfoo"}),
    App("AOTIRunnerNoOMP.app", "bundle", "as AOTIRunner.app without libomp",
        "AOTIRunnerNoOMP", {"libfoo.dylib": "libfoo"}),
    App("NapiHost.app", "bundle", "(e) an executable named napi-host (not after the bundle) "
        "exporting _napi_create_function and _napi_get_cb_info to flat lookups; empty Frameworks",
        "napi-host"),
    App("Universal.app", "bundle", "(f) arm64 + x86_64 executable and libomp",
        "UniversalApp", {"libomp.dylib": "libomp"}),
    App("UniversalMixed.app", "bundle", "arm64 + x86_64; the x86_64 slice of its libomp lacks "
        "___kmpc_barrier", "UniversalApp", {"libomp.dylib": "libomp_mixed"}),
    App("Reexport.app", "bundle", "(g) the executable links libomp and Wrap.framework, which "
        "re-exports libinner", "ReexportApp",
        {"libomp.dylib": "libomp", **WRAP_FILES}, WRAP_LINKS),
    App("WrongArch.app", "bundle", "arm64 executable; Frameworks/libomp.dylib is x86_64 only",
        "PlainApp", {"libomp.dylib": "libomp_x86_64"}),
    App("Flat.app", "flat", "iOS-style bundle: Info.plist and the executable at the top, "
        "Frameworks/libomp.dylib", "FlatApp", {"libomp.dylib": "libomp"}),
    App("libdir", "libdir", "a directory of the application's libraries: libomp, libfoo",
        None, {"libomp.dylib": "libomp", "libfoo.dylib": "libfoo"}),
    App("libdir_opt", "libdir", "a directory holding PyTorch's libomp (found by install name)",
        None, {"libomp.dylib": "libomp_opt"}),
]}


# --------------------------------------------------------------------------- sysroot

LIBSYSTEM_TBD = f"""--- !tapi-tbd
tbd-version: 4
targets: {SYSROOT_TARGETS}
install-name: '/usr/lib/libSystem.B.dylib'
current-version: 1319
reexported-libraries:
  - targets: {SYSROOT_TARGETS}
    libraries: [ '/usr/lib/system/libsystem_c.dylib', '/usr/lib/system/libsystem_malloc.dylib' ]
exports:
  - targets: {SYSROOT_TARGETS}
    symbols: [ dyld_stub_binder ]
--- !tapi-tbd
tbd-version: 4
targets: {SYSROOT_TARGETS}
install-name: '/usr/lib/system/libsystem_c.dylib'
parent-umbrella:
  - targets: {SYSROOT_TARGETS}
    umbrella: System
exports:
  - targets: {SYSROOT_TARGETS}
    symbols: [ _bzero, _memcpy, _printf ]
--- !tapi-tbd
tbd-version: 4
targets: {SYSROOT_TARGETS}
install-name: '/usr/lib/system/libsystem_malloc.dylib'
parent-umbrella:
  - targets: {SYSROOT_TARGETS}
    umbrella: System
exports:
  - targets: {SYSROOT_TARGETS}
    symbols: [ _calloc, _free, _malloc ]
...
"""
LIBCXX_TBD_V3 = """--- !tapi-tbd-v3
archs: [ x86_64, arm64 ]
platform: macosx
install-name: '/usr/lib/libc++.1.dylib'
current-version: 1300.36
compatibility-version: 1
exports:
  - archs: [ x86_64, arm64 ]
    symbols: [ __ZdlPv, __Znwm ]
...
"""
METAL_SYMBOLS = ["_MTLCreateSystemDefaultDevice"]   # _MTLCopyAllDevices left out on purpose
METAL_TBD_V5 = json.dumps({
    "tapi_tbd_version": 5,
    "main_library": {
        "target_info": [{"target": "x86_64-macos", "min_deployment": "10.13"},
                        {"target": "arm64-macos", "min_deployment": "11.0"}],
        "install_names": [{"name": METAL}],
        "current_versions": [{"version": "343.14"}],
        "exported_symbols": [{"text": {"global": METAL_SYMBOLS}}],
    },
}, indent=2) + "\n"
METAL_TBD_V4_TWIN = f"""--- !tapi-tbd
# sysroot/{{path}} (v5 JSON) as v4, for ld64.lld-16, which cannot read v5.
tbd-version: 4
targets: {SYSROOT_TARGETS}
install-name: '{METAL}'
current-version: 343.14
exports:
  - targets: {SYSROOT_TARGETS}
    symbols: [ {', '.join(METAL_SYMBOLS)} ]
...
"""
METAL_DIR = "System/Library/Frameworks/Metal.framework"
SYSROOT_FILES = {
    "usr/lib/libSystem.B.tbd": LIBSYSTEM_TBD,
    "usr/lib/libc++.1.tbd": LIBCXX_TBD_V3,
    f"{METAL_DIR}/Versions/A/Metal.tbd": METAL_TBD_V5,
}
# A real SDK's framework layout: Metal.tbd -> Versions/Current/Metal.tbd, Current -> A.
SYSROOT_LINKS = {f"{METAL_DIR}/Versions/Current": "A",
                 f"{METAL_DIR}/Metal.tbd": "Versions/Current/Metal.tbd"}
SYSROOT_INSTALL_NAMES = {
    LIBSYSTEM: "sysroot/usr/lib/libSystem.B.tbd",
    "/usr/lib/system/libsystem_c.dylib": "sysroot/usr/lib/libSystem.B.tbd",
    "/usr/lib/system/libsystem_malloc.dylib": "sysroot/usr/lib/libSystem.B.tbd",
    LIBCXX: "sysroot/usr/lib/libc++.1.tbd",
    METAL: f"sysroot/{METAL_DIR}/Versions/A/Metal.tbd",
}
TWINS = {f"sysroot/{METAL_DIR}/Versions/A/Metal.tbd": "twins/Metal.tbd"}
SYSROOT_DESCRIPTION = {
    "usr/lib/libSystem.B.tbd": "tbd v4, three documents: libSystem.B (dyld_stub_binder) "
                               "re-exporting the inlined /usr/lib/system/libsystem_c.dylib "
                               "(_bzero, _memcpy, _printf) and libsystem_malloc.dylib "
                               "(_calloc, _free, _malloc)",
    "usr/lib/libc++.1.tbd": "tbd v3: __ZdlPv, __Znwm",
    f"{METAL_DIR}/Versions/A/Metal.tbd": "tbd v5 JSON: _MTLCreateSystemDefaultDevice only "
                                         "(_MTLCopyAllDevices deliberately missing)",
}


def write_sysroot(outdir):
    for rel, text in SYSROOT_FILES.items():
        path = outdir / "sysroot" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for rel, target in SYSROOT_LINKS.items():
        os.symlink(target, outdir / "sysroot" / rel)
    for source, twin in TWINS.items():
        path = outdir / twin
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(METAL_TBD_V4_TWIN.format(path=source[len("sysroot/"):]))


# --------------------------------------------------------------------------- build

class Builder(StagedImages):
    def __init__(self, scratch):
        super().__init__(scratch, GEN_TBDS, IMAGES)

    def compile(self, image, arch):
        defines = image.defines + image.arch_defines.get(arch, [])
        tag = "-".join([Path(image.src).stem, arch] + defines)
        obj = self.scratch / "obj" / f"{tag}.o"
        if not obj.exists():
            obj.parent.mkdir(exist_ok=True)
            run([CC, "-target", f"{arch}-apple-macos{MACOS}", *CFLAGS,
                 *[f"-D{d}" for d in defines], "-c", HERE / "src" / image.src, "-o", obj])
        return obj

    def link_args(self, image, arch, labels=False):
        chained = (image.chained or {}).get(arch, arch == "arm64")
        args = ["-arch", arch, "-platform_version", "macos", image.minos, image.minos]
        if image.kind == "dylib":
            args += ["-dylib", "-install_name", image.install_name]
        else:
            args.append("-execute")
        args.append("-fixup_chains" if chained else "-no_fixup_chains")
        args.append(f"src/{image.src}" if labels else self.compile(image, arch))
        libs = image.libs if image.model else ["tbd:libSystem"] + image.libs
        for spec in libs:
            mode = ""
            if spec.startswith(("weak:", "reexport:")):
                mode, _, spec = spec.partition(":")
            args += {"": [], "weak": ["-weak_library"], "reexport": ["-reexport_library"]}[mode]
            args.append(self.lib_path(spec, labels))
        for rpath in image.rpaths:
            args += ["-rpath", rpath]
        for symbol in image.exported or []:
            args += ["-exported_symbol", symbol]
        return args + image.flags

    def build(self, image):
        dest = self.staged(image.key)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if len(image.archs) == 1:
            run([LD, *self.link_args(image, image.archs[0]), "-o", dest])
            return
        thin = []
        for arch in image.archs:
            out = self.scratch / "thin" / arch / image.stage
            out.parent.mkdir(parents=True, exist_ok=True)
            run([LD, *self.link_args(image, arch), "-o", out])
            thin.append(out)
        run([LIPO, "-create", *thin, "-output", dest])

    def build_all(self):
        for image in IMAGES:        # listed so that every image comes after what it links
            self.build(image)


def app_plist(executable, name):
    return info_plist(executable, name, f"org.machofix.fixtures.{name.replace('_', '-')}", MACOS)


def assemble_app(builder, app, outdir):
    root = outdir / app.path
    root.mkdir(parents=True)
    if app.form == "bundle":
        (root / "Contents" / "MacOS").mkdir(parents=True)
        (root / "Contents" / "Info.plist").write_bytes(app_plist(app.exe, app.name[:-4]))
    elif app.form == "flat":
        (root / "Info.plist").write_bytes(app_plist(app.exe, app.name[:-4]))
    if app.exe:
        shutil.copyfile(builder.staged(app.exe), outdir / app.exe_path)
        os.chmod(outdir / app.exe_path, 0o755)
    libdir = outdir / app.lib_dir
    libdir.mkdir(parents=True, exist_ok=True)
    for rel, key in app.libs.items():
        (libdir / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(builder.staged(key), libdir / rel)
    for rel, target in app.symlinks.items():
        os.symlink(target, libdir / rel)


# --------------------------------------------------------------------------- verify

def exports(path, arch):
    out = run([OBJDUMP, "--macho", "--exports-trie", f"--arch={arch}", path])
    names = set()
    for line in out.splitlines():
        m = re.match(r"^(?:0x[0-9A-Fa-f]+|\[re-export\])\s+(\S+)", line)
        if m:
            names.add(m.group(1))
    return names


def minos(path, arch):
    out = run([OBJDUMP, "--macho", "--private-headers", f"--arch={arch}", path])
    found = re.findall(r"^\s*minos (\S+)$", out, re.M)
    if len(found) != 1:
        raise BuildError(f"{path} [{arch}]: {len(found)} LC_BUILD_VERSION minos lines")
    return found[0]


def verify_image(image, path):
    """Check every claim about one built image; return what the manifest records."""
    info = imports.inspect(path)
    archs = [s["arch"] for s in info["slices"]]
    problems = []
    if sorted(archs) != sorted(image.archs):
        problems.append(f"architectures {archs}, expected {image.archs}")
    for s in info["slices"]:
        arch = s["arch"]
        tag = f"[{arch}] "
        filetype = {"dylib": "DYLIB", "execute": "EXECUTE"}[image.kind]
        if s["filetype"] != filetype:
            problems.append(f"{tag}file type {s['filetype']}")
        if s["id"] != image.install_name:
            problems.append(f"{tag}install name {s['id']}, expected {image.install_name}")
        if s["rpaths"] != image.rpaths:
            problems.append(f"{tag}LC_RPATHs {s['rpaths']}, expected {image.rpaths}")
        if minos(path, arch) != image.minos:
            problems.append(f"{tag}minos {minos(path, arch)}, expected {image.minos}")
        dylibs = [(c["cmd"], c["name"]) for c in s["dylib_commands"]]
        if "dylibs" in image.claims and dylibs != [tuple(d) for d in image.claims["dylibs"]]:
            problems.append(f"{tag}dylibs {dylibs}, expected {image.claims['dylibs']}")
        by_symbol = {}
        for imp in s["imports"]:
            by_symbol.setdefault(imp["symbol"], []).append(imp)
        for symbol, library in image.claims.get("imports", {}).items():
            libs = {i["library"] for i in by_symbol.get(symbol, [])}
            if libs != {library}:
                problems.append(f"{tag}{symbol} binds to {sorted(libs)}, expected {library}")
        for symbol in image.claims.get("weak_imports", []):
            entries = by_symbol.get(symbol, [])
            weak = [i.get("weak_import", i.get("weak_ref", False)) for i in entries]
            if not entries or not all(weak):
                problems.append(f"{tag}{symbol} is not a weak import: {entries}")
        if image.model:
            used = {i["library"] for i in s["imports"]}
            unused = [name for _cmd, name in dylibs if name not in used]
            if unused:
                problems.append(f"{tag}dependencies that supply nothing: {unused}")
        exported = exports(path, arch)
        for symbol in image.claims.get("exports", []):
            if symbol not in exported:
                problems.append(f"{tag}{symbol} is not exported")
        for symbol in image.claims.get("not_exports", []):
            if symbol in exported:
                problems.append(f"{tag}{symbol} is exported")
    if problems:
        raise BuildError(f"{image.key} ({path}): " + "; ".join(problems))
    return {arch: {"dylibs": [f"{c['cmd']} {c['name']}" for c in s["dylib_commands"]],
                   "rpaths": s["rpaths"], "fixups": s["fixups"],
                   "imports": sorted({(i["symbol"], i["library"]) for i in s["imports"]})}
            for arch, s in zip(archs, info["slices"])}


def verify_x86_64_lib_is_foreign(outdir):
    """WrongArch.app's libomp must have no arm64 slice (llvm-lipo's own word)."""
    out = run([LIPO, "-archs", outdir / APPS["WrongArch.app"].lib("libomp.dylib")]).split()
    if out != ["x86_64"]:
        raise BuildError(f"WrongArch.app libomp.dylib has archs {out}")


def verify_witness_inputs(outdir):
    """ld64.lld-16 reads the sysroot's v4 and v3 stubs and the v5 twin (the test's
    linker witness relies on it); it cannot read the v5 stub itself."""
    scratch = Path(tempfile.mkdtemp(prefix="machofix-app-witness-"))
    try:
        src = scratch / "w.c"
        src.write_text('extern char a __asm__("_bzero"), b __asm__("_malloc"), c __asm__("__Znwm"),\n'
                       '  d __asm__("_MTLCreateSystemDefaultDevice");\nvoid *refs[] = {&a, &b, &c, &d};\n')
        run([CC, "-target", "arm64-apple-macos11", "-c", src, "-o", scratch / "w.o"])
        run([LD, "-arch", "arm64", "-platform_version", "macos", MACOS, MACOS, "-dylib",
             scratch / "w.o", outdir / "sysroot/usr/lib/libSystem.B.tbd",
             outdir / "sysroot/usr/lib/libc++.1.tbd", outdir / "twins/Metal.tbd", "-o", scratch / "w"])
        v5 = subprocess.run([LD, "-arch", "arm64", "-platform_version", "macos", MACOS, MACOS, "-dylib",
                             scratch / "w.o", outdir / f"sysroot/{METAL_DIR}/Metal.tbd", "-o", scratch / "x"],
                            capture_output=True, text=True)
        if v5.returncode == 0:
            raise BuildError("ld64.lld-16 read the v5 stub: the twin is no longer needed")
    finally:
        shutil.rmtree(scratch)


# --------------------------------------------------------------------------- cases

def finding(rule, dylib="", symbol="", needed_by="", arch="arm64", **fields):
    """One expected finding: the five fields every comparison uses (needed_by as a
    basename), and in "fields" others the finding must carry (paths relative to OUTDIR;
    "" must be empty; a list: any of them)."""
    return {"rule": rule, "dylib": dylib, "symbol": symbol,
            "needed_by": needed_by.rsplit("/", 1)[-1], "arch": arch, "fields": fields}


KEY_FIELDS = ("rule", "dylib", "symbol", "needed_by", "arch")


def lnl(dylib, needed_by="", arch="arm64"):
    return finding("library-not-loaded", dylib, needed_by=needed_by, arch=arch, needed_by_path=needed_by)


def snf(symbol, dylib, expected_in, needed_by="", arch="arm64"):
    return finding("symbol-not-found", dylib, symbol, needed_by, arch, expected_in=expected_in,
                   needed_by_path=needed_by)


def plain_rule_findings(model_slices, provided=()):
    """What `check` finds besides --app's rules (the rules that always run): an absolute
    install name outside /usr/lib and /System/Library, unless the application provides
    it (a library it loads carries that install name: dyld finds it there). No model
    has an unused dependency (verify_image holds every model to that)."""
    found = []
    for arch, s in model_slices.items():
        for name in dict.fromkeys(d.split(" ", 1)[1] for d in s["dylibs"]):
            if name in provided:
                continue
            if name.startswith("/") and not name.startswith(("/usr/lib/", "/System/Library/")):
                found.append(finding("absolute-install-name", name, arch=arch))
    return found


def contract_extra_findings(model_slices, app_archs, findings):
    """What a machofix.toml with app= adds to the --app form: nothing. A contract is a
    declaration, but with an application what it provides is what dyld finds in it:
    library-not-loaded takes the place of unprovided-dependency, and a slice the
    application has no process for is not loaded, so not judged."""
    return []


def bound(path):
    return {"verdict": "bound", "found_in": path}


UNCHECKED = {"verdict": "unchecked", "found_in": None}
SYSROOT_BOUND = {"verdict": "bound", "found_in": "*"}      # somewhere in the sysroot


def missing():
    return {"verdict": "missing", "found_in": None}


def weak_missing():
    return {"verdict": "weak-missing", "found_in": None}


def omp_bindings(app, lib="libomp.dylib", only=None, arch="arm64"):
    where = APPS[app].lib(lib)
    return {arch: {s: bound(where) for s in (only or OMP_SYMBOLS)}}


@dataclass
class Check:
    name: str
    model: str                      # image key, or "pte:KEY" for the .pte around it
    app: str
    purpose: str
    findings: list = field(default_factory=list)    # app rules; plain rules are added
    sysroot: bool = False
    min_macos: str = None
    arch: list = field(default_factory=list)
    app_path: str = None            # --app given as another path (e.g. the executable)
    bindings: dict = field(default_factory=dict)    # arch -> symbol -> {verdict, found_in}
    tried: dict = field(default_factory=dict)       # dylib -> [{path, reason}] (ordered, a subsequence)
    not_tried: dict = field(default_factory=dict)   # dylib -> [path] none of which is tried
    app_checks: list = None                         # archs judged against the app
    notes: list = field(default_factory=list)


CHECKS = [
    # libomp: shipped whole, partial, not at all, under PyTorch's name; the app's forms.
    Check("omp_vs_omp", "m_omp", "OMP.app", "every libomp symbol binds in the shipped libomp",
          bindings=omp_bindings("OMP.app") | {}, app_checks=["arm64"]),
    Check("omp_vs_partial", "m_omp", "Partial.app", "___kmpc_barrier is missing from the partial libomp",
          [snf("___kmpc_barrier", RPATH_OMP, APPS["Partial.app"].lib("libomp.dylib"))],
          bindings={"arm64": {"_omp_get_num_threads": bound(APPS["Partial.app"].lib("libomp.dylib")),
                              "___kmpc_barrier": missing()}}),
    Check("omp_vs_plain", "m_omp", "Plain.app", "no libomp in the app: @rpath/libomp.dylib is not found "
          "at the executable's @executable_path/../Frameworks",
          [lnl(RPATH_OMP)],
          tried={RPATH_OMP: [{"path": APPS["Plain.app"].lib("libomp.dylib"), "reason": "no such file"},
                             {"path": "/usr/lib/libomp.dylib"}]},
          notes=["built against SDK 11 (before 2022's), so dyld also tries the fallback "
                 "/usr/lib/libomp.dylib, which is no system library: not present without a sysroot"]),
    Check("omp_vs_aotirunner", "m_omp", "AOTIRunner.app",
          "@rpath/libomp.dylib expands to Frameworks/libomp.dylib, the image already loaded at "
          "launch (whatever its install name)",
          bindings=omp_bindings("AOTIRunner.app")),
    Check("omp_vs_libdir", "m_omp", "libdir", "a directory of libraries: @rpath/X is DIR/X",
          bindings=omp_bindings("libdir")),
    Check("omp_vs_flat_bundle", "m_omp", "Flat.app", "iOS-style bundle (LC_RPATH @executable_path/Frameworks)",
          bindings=omp_bindings("Flat.app")),
    Check("omp_vs_executable", "m_omp", "OMP.app", "--app names the executable itself",
          app_path=APPS["OMP.app"].exe_path, bindings=omp_bindings("OMP.app")),
    Check("omp_vs_wrongarch", "m_omp", "WrongArch.app", "the shipped libomp has no arm64 slice",
          [lnl(RPATH_OMP)],
          tried={RPATH_OMP: [{"path": APPS["WrongArch.app"].lib("libomp.dylib"),
                              "reason": "mach-o file, but is an incompatible architecture "
                                        "(have 'x86_64', need 'arm64')"}]}),
    Check("omp_lazy_vs_partial", "m_omp_lazy", "Partial.app",
          "a lazy bind that does not bind is a finding too (dyld binds it to "
          "missing_symbol_abort under RTLD_LAZY: the first call aborts)",
          [snf("___kmpc_barrier", RPATH_OMP, APPS["Partial.app"].lib("libomp.dylib"))],
          notes=["dyld4 resolves every bind at load; with RTLD_LAZY a missing lazy symbol is not "
                 "a load error but a crash on first call, with RTLD_NOW a load error"]),
    # The /opt/llvm-openmp install name (PyTorch's libomp).
    Check("optomp_vs_aotirunner", "m_optomp", "AOTIRunner.app",
          "the model's /opt/llvm-openmp/lib/libomp.dylib matches, by install name, the libomp "
          "the executable loaded at launch from Frameworks/",
          bindings=omp_bindings("AOTIRunner.app")),
    Check("optomp_vs_omp", "m_optomp", "OMP.app",
          "OMP.app's libomp is @rpath/libomp.dylib: nothing is known as /opt/llvm-openmp/lib/libomp.dylib",
          [lnl(OPT_OMP)], tried={OPT_OMP: [{"path": OPT_OMP}, {"path": "/usr/lib/libomp.dylib"}]}),
    Check("optomp_vs_libdir_opt", "m_optomp", "libdir_opt",
          "a directory's dylibs count as loaded: matched by install name",
          bindings=omp_bindings("libdir_opt")),
    # Weak-linked libomp.
    Check("weakomp_vs_plain", "m_weakomp", "Plain.app", "a weak-linked libomp may be missing",
          bindings={"arm64": {s: weak_missing() for s in OMP_SYMBOLS}}),
    Check("weakomp_vs_partial", "m_weakomp", "Partial.app", "a weak import may be missing",
          bindings={"arm64": {"___kmpc_barrier": weak_missing(),
                              "_omp_get_num_threads": bound(APPS["Partial.app"].lib("libomp.dylib"))}}),
    Check("weakomp_vs_omp", "m_weakomp", "OMP.app", "weak imports that bind", bindings=omp_bindings("OMP.app")),
    # Flat lookups (-undefined dynamic_lookup).
    Check("flat_vs_napihost", "m_flat", "NapiHost.app",
          "the N-API functions bind in the executable; _bzero is libSystem's, unknown without a sysroot",
          bindings={"arm64": {"_napi_create_function": bound(APPS["NapiHost.app"].exe_path),
                              "_napi_get_cb_info": bound(APPS["NapiHost.app"].exe_path),
                              "_bzero": UNCHECKED, "_malloc": UNCHECKED}}),
    Check("flat_vs_napihost_sysroot", "m_flat", "NapiHost.app", "with the sysroot _bzero binds too "
          "(in libsystem_c, inlined in libSystem.B.tbd)", sysroot=True,
          bindings={"arm64": {"_napi_create_function": bound(APPS["NapiHost.app"].exe_path),
                              "_bzero": SYSROOT_BOUND, "_malloc": SYSROOT_BOUND}}),
    Check("flat_vs_plain_sysroot", "m_flat", "Plain.app", "with every loaded image's exports known, "
          "the N-API functions are in none: symbol-not-found in the flat namespace", sysroot=True,
          findings=[snf("_napi_create_function", "flat namespace", ""),
                    snf("_napi_get_cb_info", "flat namespace", "")],
          bindings={"arm64": {"_napi_create_function": missing(), "_bzero": SYSROOT_BOUND}}),
    Check("flat_vs_plain", "m_flat", "Plain.app", "without a sysroot libSystem's exports are unknown, "
          "so a flat lookup found in no known image is unchecked, not missing",
          bindings={"arm64": {"_napi_create_function": UNCHECKED, "_bzero": UNCHECKED}},
          notes=["cli-spec.md does not say what a flat lookup found nowhere is while system "
                 "libraries with unknown exports are loaded; 'unchecked' is the only answer that "
                 "does not fail a model looking up libSystem's _bzero (as the samples do)"]),
    Check("flat_hidden_vs_napihost_sysroot", "m_flat_hidden", "NapiHost.app",
          "napi-host defines _napi_module_register but does not export it", sysroot=True,
          findings=[snf("_napi_module_register", "flat namespace", "")],
          bindings={"arm64": {"_napi_module_register": missing()}}),
    # The model's own LC_RPATH @loader_path: the temporary directory, then the app's rpath.
    Check("loaderpath_vs_omp", "m_loaderpath", "OMP.app",
          "@loader_path (the model's own directory, loaded from where it lies) has no libomp; the executable's "
          "rpath finds it",
          bindings=omp_bindings("OMP.app")),
    Check("loaderpath_vs_plain", "m_loaderpath", "Plain.app",
          "both rpaths tried, the model's first", [lnl(RPATH_OMP)],
          tried={RPATH_OMP: [{"path": "models/libomp.dylib", "reason": "no such file"},
                             {"path": APPS["Plain.app"].lib("libomp.dylib"), "reason": "no such file"}]}),
    # Minimum macOS.
    Check("newer_vs_omp_min13", "m_newer", "OMP.app", "built for 14.0, the app supports 13.0",
          [finding("min-macos", min_macos="14.0", required="13.0")], min_macos="13.0"),
    Check("newer_vs_omp_min14", "m_newer", "OMP.app", "built for 14.0, the app supports 14.0",
          min_macos="14.0"),
    Check("newer_vs_omp", "m_newer", "OMP.app", "no --min-macos: no minimum to hold it to"),
    Check("newer_vs_plain", "m_newer", "Plain.app", "built against SDK 14.0: dyld gives it no "
          "fallback paths, so only the rpath is tried", [lnl(RPATH_OMP)],
          tried={RPATH_OMP: [{"path": APPS["Plain.app"].lib("libomp.dylib"), "reason": "no such file"}]},
          not_tried={RPATH_OMP: ["/usr/lib/libomp.dylib", "/usr/local/lib/libomp.dylib"]}),
    # Architectures.
    Check("omp_vs_universal_x86_64", "m_omp", "Universal.app", "an arm64-only model, --arch x86_64",
          [finding("arch-missing", arch="x86_64")], arch=["x86_64"]),
    Check("omp_vs_universal", "m_omp", "Universal.app", "the arm64 model in the arm64 process",
          app_checks=["arm64"], bindings=omp_bindings("Universal.app")),
    Check("universal_vs_universal", "m_universal", "Universal.app", "each slice in its own process",
          app_checks=["arm64", "x86_64"],
          bindings=omp_bindings("Universal.app") | omp_bindings("Universal.app", arch="x86_64")),
    Check("universal_vs_universal_both_archs", "m_universal", "Universal.app", "--arch arm64 --arch x86_64",
          arch=["arm64", "x86_64"], app_checks=["arm64", "x86_64"]),
    Check("universal_vs_universalmixed", "m_universal", "UniversalMixed.app",
          "only the x86_64 slice of the app's libomp lacks ___kmpc_barrier",
          [snf("___kmpc_barrier", RPATH_OMP, APPS["UniversalMixed.app"].lib("libomp.dylib"), arch="x86_64")], app_checks=["arm64", "x86_64"],
          bindings={"arm64": {"___kmpc_barrier": bound(APPS["UniversalMixed.app"].lib("libomp.dylib"))},
                    "x86_64": {"___kmpc_barrier": missing()}}),
    Check("universal_vs_omp", "m_universal", "OMP.app",
          "an arm64-only app: the x86_64 slice is not judged (a note says so)", app_checks=["arm64"]),
    Check("universal_vs_universal_sysroot", "m_universal", "Universal.app",
          "both slices with the sysroot (x86_64 lazy binds need dyld_stub_binder)", sysroot=True,
          app_checks=["arm64", "x86_64"]),
    # Libraries the model brings in, and what they need.
    Check("chain_vs_plain", "m_chain", "Plain.app", "libmid is shipped, its libgone is not",
          [lnl("@rpath/libgone.dylib", needed_by=APPS["Plain.app"].lib("libmid.dylib"))],
          tried={"@rpath/libgone.dylib": [{"path": APPS["Plain.app"].lib("libgone.dylib"),
                                           "reason": "no such file"}]}),
    Check("ompuser_vs_partial", "m_ompuser", "Partial.app",
          "libompuser's ___kmpc_barrier is missing from the partial libomp",
          [snf("___kmpc_barrier", RPATH_OMP, APPS["Partial.app"].lib("libomp.dylib"),
               needed_by=APPS["Partial.app"].lib("libompuser.dylib"))]),
    Check("ompuser_vs_plain", "m_ompuser", "Plain.app", "libompuser's libomp is not shipped",
          [lnl(RPATH_OMP, needed_by=APPS["Plain.app"].lib("libompuser.dylib"))]),
    Check("ompuser_vs_omp", "m_ompuser", "OMP.app", "libompuser and its libomp both there",
          bindings={"arm64": {"_ompuser_run": bound(APPS["OMP.app"].lib("libompuser.dylib"))}}),
    # Re-exports.
    Check("reexport_vs_reexport", "m_reexport", "Reexport.app",
          "_inner_fn, imported from Wrap, is found in libinner through Wrap's LC_REEXPORT_DYLIB",
          bindings={"arm64": {"_wrap_fn": bound(APPS["Reexport.app"].lib("Wrap.framework/Versions/A/Wrap")),
                              "_inner_fn": bound(APPS["Reexport.app"].lib("libinner.dylib"))}},
          notes=["found_in of a symbol reached through a re-export is taken to be the library "
                 "that defines it (libinner), not the one the import names (Wrap)"]),
    Check("reexport_vs_plain", "m_reexport", "Plain.app", "no Wrap.framework",
          [lnl(WRAP)]),
    # System libraries and the sysroot.
    Check("system_vs_plain", "m_system", "Plain.app", "without a sysroot system libraries are "
          "taken as present, their symbols unchecked",
          bindings={"arm64": {"_MTLCopyAllDevices": UNCHECKED, "__Znwm": UNCHECKED}}),
    Check("system_vs_plain_sysroot", "m_system", "Plain.app",
          "the sysroot's Metal (tbd v5) lacks _MTLCopyAllDevices; libSystem (v4, inlined "
          "libraries) and libc++ (v3) have the rest", [snf("_MTLCopyAllDevices", METAL, [METAL, SYSROOT_INSTALL_NAMES[METAL]])], sysroot=True,
          bindings={"arm64": {"_MTLCopyAllDevices": missing(), "_MTLCreateSystemDefaultDevice": SYSROOT_BOUND,
                              "__Znwm": SYSROOT_BOUND, "_malloc": SYSROOT_BOUND, "_free": SYSROOT_BOUND}}),
    Check("mpsgraph_vs_plain", "m_mpsgraph", "Plain.app", "a system framework: present without a sysroot"),
    Check("mpsgraph_vs_plain_sysroot", "m_mpsgraph", "Plain.app",
          "the sysroot has no MetalPerformanceShadersGraph.framework", [lnl(MPSGRAPH)], sysroot=True,
          notes=["only the library is reported, not its symbols: dyld stops at the library"]),
    # The .pte around m_omp.
    Check("pte_vs_omp", "pte:m_omp", "OMP.app", "the .so inside a .pte, passing",
          bindings=omp_bindings("OMP.app")),
    Check("pte_vs_plain", "pte:m_omp", "Plain.app", "the .so inside a .pte: library-not-loaded",
          [lnl(RPATH_OMP)]),
    Check("pte_vs_partial", "pte:m_omp", "Partial.app", "the .so inside a .pte: symbol-not-found",
          [snf("___kmpc_barrier", RPATH_OMP, APPS["Partial.app"].lib("libomp.dylib"))]),
]

PTES = {"m_omp": {"file": "m_omp.pte", "model": "models/m_omp.dylib",
                  "tool": "pte_writer", "args": ["wrap", "{model}", "{out}", "hash"],
                  "built_by": "the test driver (tests/pte/pte_writer.cc, a C++ test tool): "
                              "one method 'forward' whose Metal backend .so is the model, "
                              "ExecuTorch 1.4+ content-hash keys"}}

# The samples beside the repository (../shared/samples), against AOTIRunner.app and
# AOTIRunnerNoOMP.app: as they are, and after `machofix prune`.
SAMPLE_FILES = ["metal_hashkeys.pte", "metal_methodkeys.pte"]
SAMPLE_PLAIN_FINDINGS = [finding("unused-dependency", OPT_OMP), finding("absolute-install-name", OPT_OMP)]


def sample_cases():
    cases = []
    for pruned in (False, True):
        for app, app_findings in (("AOTIRunner.app", []), ("AOTIRunnerNoOMP.app", [lnl(OPT_OMP)])):
            for sysroot in (False, True):
                # AOTIRunner loads PyTorch's libomp: dyld finds the dependency there, so
                # it is neither unused (its load succeeds) nor an absolute name to flag.
                plain = SAMPLE_PLAIN_FINDINGS if app_findings else []
                expected = [] if pruned else app_findings + plain
                cases.append({
                    "name": f"{'pruned' if pruned else 'sample'}_vs_{app[:-4]}{'_sysroot' if sysroot else ''}",
                    "prune": pruned, "app": APPS[app].path, "sysroot": "sysroot" if sysroot else None,
                    "findings": expected, "exit": 1 if expected else 0,
                    "bindings": {"arm64": {
                        "_aoti_torch_create_tensor_from_blob": bound(APPS[app].exe_path),
                        "_bzero": bound(APPS[app].exe_path),
                        "_foo_init": bound(APPS[app].lib("libfoo.dylib")),
                        "_foo_run": bound(APPS[app].lib("libfoo.dylib")),
                        "_MTLCreateSystemDefaultDevice": SYSROOT_BOUND if sysroot else UNCHECKED}},
                })
    return cases


def check_entry(check, images):
    pte = check.model.startswith("pte:")
    key = check.model[4:] if pte else check.model
    app = APPS[check.app]
    provided = {images[image]["install_name"] for image in app.libs.values() if "install_name" in images[image]}
    findings = check.findings + plain_rule_findings(images[key]["slices"], provided)
    app_archs = (images[app.exe]["archs"] if app.exe
                 else sorted({a for k in app.libs.values() for a in images[k]["archs"]}))
    return {
        "name": check.name,
        "purpose": check.purpose,
        "model": f"models/{key}.dylib",
        "pte": PTES[key]["file"] if pte else None,
        "app": check.app_path or app.path,
        "app_name": check.app,
        "sysroot": "sysroot" if check.sysroot else None,
        "min_macos": check.min_macos,
        "arch": check.arch,
        "expected_findings": sorted(findings, key=lambda f: [f[k] for k in KEY_FIELDS]),
        "expected_exit": 1 if findings else 0,
        "expected_app_checks": check.app_checks,
        "expected_bindings": check.bindings,
        "expected_tried": check.tried,
        "expected_not_tried": check.not_tried,
        "contract_extra_findings": sorted(contract_extra_findings(images[key]["slices"], app_archs, findings),
                                          key=lambda f: [f[k] for k in KEY_FIELDS]),
        "notes": check.notes,
    }


def app_entry(app, builder):
    exe = builder.images[app.exe] if app.exe else None
    return {
        "path": app.path,
        "form": app.form,
        "purpose": app.purpose,
        "executable": app.exe_path,
        "archs": exe.archs if exe else sorted({a for k in app.libs.values() for a in builder.images[k].archs}),
        "executable_rpaths": exe.rpaths if exe else [],
        "libraries": {app.lib(rel): {"image": key, "install_name": builder.images[key].install_name,
                                     "archs": builder.images[key].archs}
                      for rel, key in app.libs.items()},
        "symlinks": {app.lib(rel): target for rel, target in app.symlinks.items()},
    }


def image_entry(image, builder, slices):
    return {
        "key": image.key,
        "purpose": image.purpose,
        "kind": image.kind,
        "install_name": image.install_name,
        "archs": image.archs,
        "minos": image.minos,
        "link_args": {arch: builder.link_args(image, arch, labels=True) for arch in image.archs},
        "claims": image.claims,
        "slices": slices,
        "notes": image.notes,
    }


# --------------------------------------------------------------------------- main

def main(argv):
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    start = time.monotonic()
    outdir = Path(argv[1])
    outdir.mkdir(parents=True, exist_ok=True)
    for stale in ("apps", "models", "sysroot", "twins"):
        shutil.rmtree(outdir / stale, ignore_errors=True)
    (outdir / "manifest.json").unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="machofix-app-fixtures-") as scratch:
        builder = Builder(scratch)
        builder.build_all()
        images = {}
        for image in IMAGES:
            images[image.key] = image_entry(image, builder, verify_image(image, builder.staged(image.key)))
        for app in APPS.values():
            assemble_app(builder, app, outdir)
        models_dir = outdir / "models"
        models_dir.mkdir()
        for image in MODELS:
            shutil.copyfile(builder.staged(image.key), outdir / image.stage)
        for key in GEN_TBDS:
            images[f"gen:{key}"] = {"install_name": GEN_TBDS[key][0], "exports": GEN_TBDS[key][1],
                                    "purpose": "stub for linking only, shipped nowhere"}
    write_sysroot(outdir)
    verify_x86_64_lib_is_foreign(outdir)
    verify_witness_inputs(outdir)
    manifest = {
        "images": images,
        "apps": {name: app_entry(app, builder) for name, app in APPS.items()},
        "models": {image.key: image.stage for image in MODELS},
        "ptes": PTES,
        "sysroot": {"path": "sysroot", "files": SYSROOT_DESCRIPTION, "symlinks": SYSROOT_LINKS,
                    "install_names": SYSROOT_INSTALL_NAMES, "twins": TWINS},
        "cases": [check_entry(c, images) for c in CHECKS],
        "samples": {"files": SAMPLE_FILES, "cases": sample_cases()},
    }
    (outdir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    for c in manifest["cases"]:
        rules = ", ".join(f"{f['rule']} {f['symbol'] or f['dylib']}" for f in c["expected_findings"]) or "-"
        print(f"{c['name']:36} {c['app_name']:20} {rules}")
    print(f"{len(IMAGES)} images, {len(APPS)} apps, {len(CHECKS)} cases, "
          f"{len(manifest['samples']['cases'])} sample cases in {outdir} ({time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (BuildError, imports.ReaderError, OSError) as exc:
        print(f"make_app_fixtures.py: FAILED: {exc}", file=sys.stderr)
        sys.exit(1)
