#!/usr/bin/env python3
"""The export-pipeline integration, as a user would wire it up.

 - `cmake --install` puts a working machofix under a prefix, with its LIEF reader
   (a plugin): without one, a prune fails cleanly and writes nothing;
 - samples/cmake/Machofix.cmake repairs models at build time into a build
   directory (the sources untouched) and fails the build on a model that cannot be
   made fit to ship;
 - samples/export_step.py gates and repairs an export directory in place.
Usage: test_integration.py BUILD_DIR PTE_WRITER FIXTURE_DIR WORK_DIR
"""
import hashlib
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAILURES = []


def expect(condition, message):
    print(f"{'ok  ' if condition else 'FAIL'} {message}")
    if not condition:
        FAILURES.append(message)


def run(*args, **kwargs):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)


def digest(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def install(build, work):
    prefix = os.path.join(work, "prefix")
    result = run("cmake", "--install", build, "--prefix", prefix)
    machofix = os.path.join(prefix, "bin", "machofix")
    expect(result.returncode == 0 and os.access(machofix, os.X_OK), "cmake --install puts bin/machofix under the prefix")
    version = run(machofix, "--version").stdout
    expect(version.startswith("machofix "), "the installed machofix runs")
    # Its LIEF reader (a plugin) is the installed one, not the build tree's.
    reader = version.partition("LIEF reader: ")[2].strip()
    expect(reader.startswith(prefix + os.sep) and os.path.isfile(reader),
           f"the installed machofix loads the installed LIEF reader ({reader})")
    return machofix


def cmake_project(machofix, models, work, name):
    build = os.path.join(work, name)
    configure = run("cmake", "-S", os.path.join(ROOT, "tests", "integration", "cmake_project"), "-B", build,
                    f"-DMODELS={';'.join(models)}", f"-DMACHOFIX_EXECUTABLE={machofix}")
    if configure.returncode != 0:
        return configure, build
    return run("cmake", "--build", build), build


def check_cmake(machofix, sample, fixtures, work):
    sources = os.path.join(work, "sources")
    os.makedirs(sources)
    models = [shutil.copy(sample, sources), shutil.copy(os.path.join(fixtures, "many_dylibs_arm64_chained.in"),
                                                         os.path.join(sources, "kernels.so"))]
    before = [digest(m) for m in models]
    built, build = cmake_project(machofix, models, work, "good")
    expect(built.returncode == 0, f"the build repairs the models {built.stdout[-300:]}{built.stderr[-300:]}")
    outputs = [os.path.join(build, "models", os.path.basename(m)) for m in models]
    expect(all(os.path.exists(o) for o in outputs), "repaired models are in the build directory")
    expect(run(machofix, "check", "--allow-prefix", "/usr/local/lib/", *outputs).returncode == 0, "they pass machofix check")
    expect([digest(m) for m in models] == before, "the source models are untouched")
    rebuilt = run("cmake", "--build", build)
    expect("repairing" not in rebuilt.stdout, "nothing is redone when nothing changed")
    # libomp really used, from /opt: removing libraries cannot fix it, the build must fail.
    unfit = shutil.copy(os.path.join(fixtures, "all_used_arm64_chained.in"), os.path.join(sources, "uses_omp.so"))
    failed, _ = cmake_project(machofix, [unfit], work, "bad")
    expect(failed.returncode != 0 and "absolute-install-name" in failed.stdout + failed.stderr,
           "a model that cannot be made fit fails the build, naming the finding")


def check_export_step(machofix, sample, fixtures, work):
    exports = os.path.join(work, "exports")
    os.makedirs(exports)
    shutil.copy(sample, exports)
    result = run(sys.executable, os.path.join(ROOT, "samples", "export_step.py"), exports, "--machofix", machofix)
    expect(result.returncode == 0, f"export step repairs the export {result.stderr[-300:]}")
    expect(run(machofix, "check", exports).returncode == 0, "after the export step, check is clean")
    again = run(sys.executable, os.path.join(ROOT, "samples", "export_step.py"), exports, "--machofix", machofix)
    expect(again.returncode == 0 and "prune" not in again.stdout, "a second export step finds nothing to do")
    shutil.copy(os.path.join(fixtures, "all_used_arm64_chained.in"), os.path.join(exports, "uses_omp.so"))
    unfit = run(sys.executable, os.path.join(ROOT, "samples", "export_step.py"), exports, "--machofix", machofix)
    expect(unfit.returncode == 1 and "still not fit to ship" in unfit.stderr, "an unfixable export fails the step")


def check_missing_reader(machofix, fixtures, work):
    """Every rewrite must be re-read by LIEF: no reader, no output."""
    model = shutil.copy(os.path.join(fixtures, "many_dylibs_arm64_chained.in"), os.path.join(work, "no_reader.so"))
    before = digest(model)
    out = os.path.join(work, "no_reader.out.so")
    result = run(machofix, "prune", model, "-o", out, env={**os.environ, "MACHOFIX_LIEF_PLUGIN": "/nonexistent/reader.so"})
    expect(result.returncode == 2 and "cannot find the LIEF reader" in result.stderr + result.stdout
           and "/nonexistent/reader.so" in result.stderr + result.stdout,
           f"without its LIEF reader prune exits 2 naming what it tried ({result.stderr[-200:]!r})")
    expect(not os.path.exists(out) and digest(model) == before, "and writes nothing")
    expect(not [n for n in os.listdir(work) if ".machofix-" in n], "and leaves no temporary file")


def main():
    build, pte_writer, fixtures, work = [os.path.abspath(a) for a in sys.argv[1:5]]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    subprocess.run([os.path.join(ROOT, "samples", "aoti_metal", "build.sh"), os.path.join(work, "sample"), pte_writer],
                   check=True, capture_output=True)
    sample = os.path.join(work, "sample", "metal_model.pte")
    machofix = install(build, work)
    check_missing_reader(machofix, fixtures, work)
    check_cmake(machofix, sample, fixtures, work)
    check_export_step(machofix, sample, fixtures, work)
    print(f"{len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
