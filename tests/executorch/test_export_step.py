#!/usr/bin/env python3
"""machofix.executorch, the export step, run inside ExecuTorch's own export code:

    test_export_step.py MACHOFIX RUNTIME_LOADER EXECUTORCH_PYTHON TBD_DIR APP_FIXTURES WORK [--patched PATCH]

ExecuTorch's real MetalBackend.preprocess and serializer (tests/executorch/
export_harness.py stands in for torch only) export a method whose .so was linked by
ld64.lld-16 the way Inductor links it: with -lomp against a libomp whose install name
is /opt/llvm-openmp/lib/libomp.dylib.
- without the step the .pte fails `check`, and `check --app` in an application
  without libomp;
- with it the .pte passes both, its so key is ExecuTorch's own (the sha256 of the
  repaired .so), ExecuTorch's runtime loads it and its signature verifies;
- with a codesign identity, ExecuTorch's codesign_so still runs, after the repair;
- a .so that finds libomp only beside it in Inductor's output directory stops the export
  (it is checked as the blob it becomes, from a temporary directory);
- a used libomp under forbid ["*omp*"] stops the export with the finding, and so
  does one that the application given as `app` does not ship; one the application
  ships is renamed to its name there (fix), and the model loads;
- a .so that needs nothing is not touched; a backend's non-Mach-O .so is passed over,
  also for a backend class defined after the step was installed;
- an ExecuTorch without the seam fails install() with what to do; uninstall restores.
With --patched, ExecuTorch's sources are first patched with PATCH
(patches/executorch/), and the step goes through the patch's hook instead.
"""
import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "python"))
sys.dont_write_bytecode = True

import export_harness  # noqa: E402

OMP = "/opt/llvm-openmp/lib/libomp.dylib"
SOURCES = {
    # A kernel library that calls libSystem and Metal; libomp is linked, never used.
    "unused_omp": "int printf(const char *, ...); void *MTLCreateSystemDefaultDevice(void);\n"
                  "int run(void) { return printf(\"%p\", MTLCreateSystemDefaultDevice()); }\n",
    # One whose loops really are OpenMP's.
    "used_omp": "int printf(const char *, ...); int omp_get_max_threads(void);\n"
                "int run(void) { return printf(\"%d\", omp_get_max_threads()); }\n",
}
failures = []


def expect(what, condition, detail=""):
    print(f"{'ok' if condition else 'FAILED'}: {what}{'' if condition or not detail else ': ' + str(detail)}")
    if not condition:
        failures.append(what)


def run(*command, **kwargs):
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, **kwargs)


def link(name, tbd, work):
    """NAME's .so, linked as Inductor links one (-lomp among the libraries)."""
    obj, so = work / f"{name}.o", work / f"{name}.so"
    (work / f"{name}.c").write_text(SOURCES[name])
    for command in (["clang-16", "-target", "arm64-apple-macos13", "-O2", "-fno-builtin", "-c", work / f"{name}.c",
                     "-o", obj],
                    ["ld64.lld-16", "-arch", "arm64", "-platform_version", "macos", "13.0", "14.0", "-dylib",
                     "-install_name", f"{name}.so", obj, tbd / "libSystem.tbd", tbd / "libomp.tbd", tbd / "Metal.tbd",
                     "-o", so]):
        done = run(*command)
        if done.returncode:
            sys.exit(f"{command[0]}: {done.stderr}")
    return so


def link_with_libomp_beside(tbd, work):
    """A .so that uses an @rpath/libomp.dylib it finds through LC_RPATH @loader_path,
    and that libomp: a .so that loads only where libomp lies beside it."""
    (work / "omp_stub.c").write_text("int omp_get_max_threads(void) { return 4; }\n")
    (work / "beside.c").write_text(SOURCES["used_omp"])
    libomp, so = work / "libomp.dylib", work / "beside.so"
    for command in (["clang-16", "-target", "arm64-apple-macos13", "-O2", "-c", work / "omp_stub.c", "-o", work / "omp_stub.o"],
                    ["clang-16", "-target", "arm64-apple-macos13", "-O2", "-fno-builtin", "-c", work / "beside.c",
                     "-o", work / "beside.o"],
                    ["ld64.lld-16", "-arch", "arm64", "-platform_version", "macos", "13.0", "14.0", "-dylib",
                     "-install_name", "@rpath/libomp.dylib", work / "omp_stub.o", tbd / "libSystem.tbd", "-o", libomp],
                    ["ld64.lld-16", "-arch", "arm64", "-platform_version", "macos", "13.0", "14.0", "-dylib",
                     "-install_name", "beside.so", work / "beside.o", tbd / "libSystem.tbd", libomp,
                     "-rpath", "@loader_path", "-o", so]):
        done = run(*command)
        if done.returncode:
            sys.exit(f"{command[0]}: {done.stderr}")
    return so, libomp


def check(args, pte, *options):
    done = run(args.machofix, "check", "--json=-", *options, pte)
    return done.returncode, [f["rule"] for f in json.loads(done.stdout)["findings"]] if done.stdout else done.stderr


def so_blob(args, pte):
    """(key, bytes) of the .pte's one Mach-O blob, as machofix reads them."""
    inspected = json.loads(run(args.machofix, "inspect", "--json=-", pte).stdout)
    blob = inspected["files"][0]["pte"]["blobs"][0]
    data = Path(pte).read_bytes()[blob["offset"]:blob["offset"] + blob["size"]]
    return blob["keys"][0], data


def export(args, so, work, name, specs=(), beside=()):
    """beside: files Inductor's output directory holds next to the .so."""
    out = work / f"{name}.pte"
    scratch = work / f"{name}.export"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    for path in beside:
        shutil.copyfile(path, scratch / Path(path).name)
    out.write_bytes(export_harness.export_pte(str(so), b"w" * 64, list(specs), str(scratch)))
    return out


def main():
    parser = argparse.ArgumentParser()
    for name in ("machofix", "loader", "executorch", "tbd", "app_fixtures", "work"):
        parser.add_argument(name, type=Path)
    parser.add_argument("--patched", type=Path)
    args = parser.parse_args()
    if not str(args.executorch) or str(args.executorch) == "." or not str(args.loader) or str(args.loader) == ".":
        print("test_export_step: skipped: ExecuTorch's sources are not here (tests/executorch/CMakeLists.txt)")
        return 77
    missing = [package for module, package in (("flatbuffers", "python3-flatbuffers"),
                                                ("typing_extensions", "python3-typing-extensions"))
               if importlib.util.find_spec(module) is None]
    if missing:
        print(f"test_export_step: {sys.executable} lacks what ExecuTorch's export code imports: "
              f"{', '.join(missing)} (scripts/setup.sh installs them)")
        return 1
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    # A copy of its own: the harness writes beside ExecuTorch's serializer, and the
    # patched variant runs at the same time as the plain one.
    executorch = work / "executorch-sources"
    shutil.copytree(args.executorch, executorch)
    if args.patched:
        done = run("patch", "-p1", "--no-backup-if-mismatch", "-i", args.patched.resolve(),
                   cwd=executorch / "executorch")
        expect("the patch applies to ExecuTorch at the pinned commit", done.returncode == 0, done.stdout + done.stderr)
        if done.returncode:
            return 1
    os.environ["MACHOFIX_EXECUTABLE"] = str(args.machofix)
    export_harness.prepare(str(executorch))
    import machofix.executorch as step_module
    from executorch.backends.aoti.aoti_backend import AotiBackend
    from executorch.backends.apple.metal.metal_backend import MetalBackend

    app = ["--app", args.app_fixtures / "apps/AOTIRunnerNoOMP.app", "--sysroot", args.app_fixtures / "sysroot"]
    app_options = dict(app=app[1], sysroot=app[3])
    unused, used = link("unused_omp", args.tbd, work), link("used_omp", args.tbd, work)
    unused_bytes = unused.read_bytes()

    # Without the step: the .pte carries libomp's absolute path.
    plain = export(args, unused, work, "plain")
    status, rules = check(args, plain)
    expect("without the step, check fails the exported .pte", status == 1 and "unused-dependency" in rules, rules)
    status, rules = check(args, plain, *app)
    expect("without the step, check --app fails it in an application without libomp",
           status == 1 and "library-not-loaded" in rules, rules)

    originals = (AotiBackend.__dict__["codesign_so"], MetalBackend.__dict__["codesign_so"])
    with step_module.export_step(**app_options) as step:
        during = (AotiBackend.__dict__["codesign_so"], MetalBackend.__dict__["codesign_so"])
        born = export(args, unused, work, "born")
    seam = "register_so_hook" if args.patched else "codesign_so"
    expect(f"the step runs at {seam}", step.seam == seam and (during == originals) == bool(args.patched), step.seam)
    status, rules = check(args, born)
    expect("with the step, check passes the .pte", status == 0, rules)
    status, rules = check(args, born, *app)
    expect("with the step, check --app passes it", status == 0, rules)
    expect("the step repaired the .so once", step.repaired and len(step.repaired) == 1, step.repaired)
    key, data = so_blob(args, born)
    computed = export_harness.last_preprocess_result.processed_bytes.decode().split("\n")[0]
    expect("the so key is ExecuTorch's own: the sha256 of the repaired .so",
           key == computed == hashlib.sha256(data).hexdigest() + "_so_blob", (key, computed))
    expect("the .so in the .pte has no libomp dependency", OMP.encode() not in data and data != unused_bytes)
    loaded = run(args.loader, born)
    expect("ExecuTorch's runtime loads the .pte", loaded.returncode == 0, loaded.stdout + loaded.stderr)
    expect("its signature verifies", run(args.machofix, "verify", born).returncode == 0)
    expect("uninstall restores ExecuTorch's methods",
           (AotiBackend.__dict__["codesign_so"], MetalBackend.__dict__["codesign_so"]) == originals)

    # An identity: ExecuTorch's codesign_so signs after the repair.
    bin_dir, calls = work / "bin", work / "codesign.calls"
    bin_dir.mkdir()
    (bin_dir / "codesign").write_text(
        f'#!/bin/sh\necho "$@" "$(sha256sum < "$4" | cut -c1-64)" >> "{calls}"\n')
    (bin_dir / "codesign").chmod(0o755)
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    with step_module.export_step():
        signed = export(args, unused, work, "signed", [("codesign_identity", b"-")])
    recorded = calls.read_text().split() if calls.exists() else []
    _, data = so_blob(args, signed)
    expect("with an identity, ExecuTorch's codesign_so runs, over the repaired .so",
           recorded[:3] == ["-f", "-s", "-"] and recorded[-1] == hashlib.sha256(data).hexdigest()
           and OMP.encode() not in data, recorded)

    # A used libomp, forbidden: the export stops with the finding.
    with step_module.export_step(forbid=["*omp*"]):
        try:
            export(args, used, work, "forbidden")
            stopped = None
        except step_module.ExportStepError as error:
            stopped = error
    expect("a used libomp under forbid *omp* stops the export with the finding",
           stopped is not None and "[forbidden-dependency]" in str(stopped) and stopped.report is not None,
           stopped)
    expect("and no .pte is written", not (work / "forbidden.pte").exists())
    # A used libomp the application does not ship: the model would not load there.
    with step_module.export_step(**app_options):
        try:
            export(args, used, work, "unloadable")
            stopped = None
        except step_module.ExportStepError as error:
            stopped = error
    expect("a used libomp the application lacks stops the export with library-not-loaded",
           stopped is not None and "[library-not-loaded]" in str(stopped), stopped)

    # A used libomp the application ships: `fix` renames it to the name under which the
    # application has it, and the model is born loading there.
    omp_app = args.app_fixtures / "apps/OMP.app"
    with step_module.export_step(app=omp_app, sysroot=app[3]) as step:
        export(args, used, work, "renamed")
    renamed = work / "renamed.pte"
    status, found = check(args, renamed, "--app", omp_app, "--sysroot", app[3]) if renamed.exists() else (None, None)
    dylibs = ""
    if renamed.exists():
        (work / "renamed.so").write_bytes(so_blob(args, renamed)[1])
        dylibs = run("llvm-objdump-16", "--macho", "--dylibs-used", work / "renamed.so").stdout
    expect("a used libomp the application ships: the step renames it to @rpath/libomp.dylib (llvm-objdump-16), the "
           ".pte passes check --app there", step.repaired and status == 0 and "@rpath/libomp.dylib" in dylibs
           and "/opt/llvm-openmp" not in dylibs, (status, found, dylibs))
    if renamed.exists():
        loaded = run(args.loader, renamed)
        expect("ExecuTorch's runtime loads the renamed model", loaded.returncode == 0, loaded.stdout + loaded.stderr)

    # Checked where the runtime loads it: a .so that finds libomp only beside it in
    # Inductor's output directory will be dlopen()ed from a temporary directory.
    beside_so, beside_omp = link_with_libomp_beside(args.tbd, work)
    status, _ = check(args, beside_so, *app)
    expect("control: checked as a file, with libomp beside it, the .so loads in the application", status == 0, status)
    with step_module.export_step(**app_options):
        try:
            export(args, beside_so, work, "beside", beside=[beside_omp])
            stopped = None
        except step_module.ExportStepError as error:
            stopped = error
    expect("the step checks the .so as the blob it becomes: libomp beside it in Inductor's output directory does "
           "not count, the export stops with library-not-loaded", stopped is not None
           and "[library-not-loaded]" in str(stopped) and "<temporary directory>/libomp.dylib" in str(stopped), stopped)

    # A clean .so: not touched.
    clean = work / "clean.so"
    clean.write_bytes(so_blob(args, born)[1])
    with step_module.export_step() as step:
        again = export(args, clean, work, "clean")
    expect("a .so that needs nothing is not touched",
           not step.repaired and so_blob(args, again)[1] == clean.read_bytes(), step.repaired)

    # A backend whose .so is not Mach-O, defined after the step was installed.
    with step_module.export_step() as step:
        class ElfBackend(AotiBackend):
            signed = []

            @classmethod
            def codesign_so(cls, so_path, compile_specs):
                cls.signed.append(so_path)
        elf = work / "kernel.so"
        elf.write_bytes(b"\x7fELF" + bytes(60))
        # What preprocess calls, in its order (validate_so: the patch's hook).
        if hasattr(ElfBackend, "validate_so"):
            ElfBackend.validate_so(str(elf), [])
        ElfBackend.codesign_so(str(elf), [])
    expect("a non-Mach-O .so is passed over, and the backend's own codesign_so still runs",
           step.passed_over == [str(elf)] and ElfBackend.signed == [str(elf)], step.passed_over)

    if args.patched:
        print(f"test_export_step: {len(failures)} failed")
        return 1 if failures else 0
    # An ExecuTorch without the seam.
    seam = AotiBackend.__dict__["codesign_so"]
    del AotiBackend.codesign_so
    try:
        step_module.install()
        refused = None
    except step_module.ExportStepError as error:
        refused = str(error)
    finally:
        AotiBackend.codesign_so = seam
    expect("install() on an ExecuTorch without the seam fails, saying what to do",
           refused is not None and "no AotiBackend.codesign_so" in refused and "repair_bytes" in refused, refused)

    print(f"test_export_step: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
