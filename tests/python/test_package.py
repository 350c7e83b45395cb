#!/usr/bin/env python3
"""The Python package (python/), as a user gets it: a wheel built with no package index,
installed into a fresh virtual environment.

 - `pip wheel --no-build-isolation --no-deps python/ -w DIR` makes
   machofix-VERSION-py3-none-PLATFORM.whl; PLATFORM is manylinux_2_Y_ARCH with 2.Y the
   newest glibc symbol version the binaries use (read here with `objdump -T`, not the
   way setup.py reads it), and the static build (MACHOFIX_STATIC_DEPS, the default)
   needs nothing but glibc (a shared or sanitizer build: linux_ARCH); the WHEEL file, the contents
   (the executable as the wheel's script, machofix-VERSION.data/scripts/machofix,
   executable; its LIEF reader as data, .data/data/lib/machofix/; both the build's
   minus debug information; py.typed; no console-script entry point);
 - binaries that are not ELF (the macOS cross-build) need MACHOFIX_WHEEL_PLATFORM and
   are carried as they are; a tag set (manylinux_2_17_x86_64.manylinux2014_x86_64)
   names the wheel and is one Tag line each in WHEEL;
 - `python -m venv`, `pip install --no-index WHEEL`; then check_api.py, run by the
   environment's Python, tests every function against the command line;
 - the installed bin/machofix is the wheel's executable, not a Python shim, and finds
   its reader in ../lib/machofix/; `python -m machofix` runs it, exit statuses passed
   through;
 - samples/export_step.py, run by the environment's Python, uses the package.
The Python that builds needs setuptools, wheel and venv (Debian: python3-setuptools,
python3-wheel, python3-venv): this one if it has them, else the first python3 on the
PATH that does (a pyenv Python ahead of Debian's, say); which one is printed.
Usage: test_package.py BUILD_DIR PTE_WRITER FIXTURE_DIR WORK_DIR MACHOFIX_STATIC_DEPS [SAMPLES_DIR]
"""
import os
import re
import shutil
import subprocess
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAILURES = []
GLIBC_LIBRARIES = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "ld-linux-x86-64.so.2",
                   "ld-linux-aarch64.so.1"}


def expect(condition, message):
    print(f"{'ok  ' if condition else 'FAIL'} {message}", flush=True)
    if not condition:
        FAILURES.append(message)


def run(*args, **kwargs):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, **kwargs)


def can_build_wheels(python):
    probe = "import setuptools, wheel, venv, ensurepip, pip"
    return subprocess.run([python, "-c", probe], capture_output=True).returncode == 0


def builder_python():
    candidates = [sys.executable]
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(directory, "python3")
        if os.access(candidate, os.X_OK) and candidate not in candidates:
            candidates.append(candidate)
    for candidate in candidates:
        if can_build_wheels(candidate):
            return candidate
    return None


def read(path):
    with open(path, "rb") as handle:
        return handle.read()


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as handle:
        return re.search(r"project\(machofix VERSION ([0-9.]+)", handle.read()).group(1)


def expected_platform(binaries):
    """manylinux_2_Y_ARCH from `objdump -T` (symbol versions) and `readelf -d` (NEEDED)."""
    newest, needed = (0, 0), set()
    for path in binaries:
        symbols = run("objdump", "-T", path).stdout
        for number in re.findall(r"\bGLIBC_([0-9.]+)", symbols):
            newest = max(newest, tuple(int(part) for part in number.split("."))[:2])
        needed.update(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", run("readelf", "-d", path).stdout))
    machine = os.uname().machine
    return f"manylinux_{newest[0]}_{newest[1]}_{machine}", needed


def build_wheel(python, build, work):
    dist = os.path.join(work, "dist")
    environment = {**os.environ, "MACHOFIX_BUILD_DIR": build, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    result = run(python, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
                 os.path.join(ROOT, "python"), "-w", dist, env=environment)
    wheels = os.listdir(dist) if os.path.isdir(dist) else []
    expect(result.returncode == 0 and len(wheels) == 1,
           f"pip wheel --no-build-isolation --no-deps python/ makes one wheel {wheels} {result.stderr[-600:]}")
    return os.path.join(dist, wheels[0]) if len(wheels) == 1 else None


def check_wheel(wheel, build, static_build):
    binaries = [os.path.join(build, "machofix"), os.path.join(build, "machofix-lief.so")]
    platform, needed = expected_platform(binaries)
    if static_build:
        expect(needed <= GLIBC_LIBRARIES, f"the static build's binaries need nothing but glibc ({sorted(needed)})")
    if not needed <= GLIBC_LIBRARIES:  # a shared or sanitizer build: for machines like this one
        platform = f"linux_{os.uname().machine}"
    name = f"machofix-{version()}-py3-none-{platform}.whl"
    expect(os.path.basename(wheel) == name, f"the wheel is {name} ({os.path.basename(wheel)})")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"machofix-{version()}.dist-info"
        tags = archive.read(f"{info}/WHEEL").decode()
        expect(f"Tag: py3-none-{platform}\n" in tags and "Root-Is-Purelib: false" in tags and tags.count("Tag:") == 1,
               f"WHEEL: one tag, py3-none-{platform}, not pure")
        data = f"machofix-{version()}.data"
        members = {os.path.join(build, "machofix"): f"{data}/scripts/machofix",
                   os.path.join(build, "machofix-lief.so"): f"{data}/data/lib/machofix/machofix-lief.so"}
        expected = {"machofix/__init__.py", "machofix/__main__.py", "machofix/py.typed", *members.values()}
        expect(expected <= names, f"it holds the package, py.typed and the binaries ({sorted(expected - names)} missing)")
        expect(not [n for n in names if n.endswith((".pyc", ".egg-info")) or "_bin/" in n],
               "and no bytecode, egg-info or second copy of the binaries")
        expect(not [n for n in names if n.startswith(data) and n not in members.values()],
               f"{data}/ holds the two binaries only")
        for binary, member in members.items():
            if member not in names:
                continue
            mode = archive.getinfo(member).external_attr >> 16
            stripped = os.path.join(os.path.dirname(wheel), "stripped-" + os.path.basename(binary))
            shutil.copy(binary, stripped)
            subprocess.run(["strip", "--strip-debug", stripped], check=True)
            with open(stripped, "rb") as handle:
                same = archive.read(member) == handle.read()
            expect(mode & 0o111 and same, f"{member}: executable, the build's binary less its debug information")
        expect(f"{info}/entry_points.txt" not in names, "no console-script entry point: the script is the executable")


def check_cross_built(python, fixtures, work):
    """Binaries that are not ELF (the macOS cross-build): the platform must be named,
    and the wheel then carries them exactly as they are."""
    binaries = os.path.join(work, "macos-build")
    os.makedirs(binaries)
    shutil.copy(os.path.join(fixtures, "execute_arm64_chained.in"), os.path.join(binaries, "machofix"))
    shutil.copy(os.path.join(fixtures, "aoti_metal_arm64_chained.in"), os.path.join(binaries, "machofix-lief.so"))
    os.chmod(os.path.join(binaries, "machofix"), 0o755)
    dist = os.path.join(work, "macos-dist")
    command = [python, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
               os.path.join(ROOT, "python"), "-w", dist]
    environment = {**os.environ, "MACHOFIX_BUILD_DIR": binaries, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    refused = run(*command, env=environment)
    expect(refused.returncode != 0 and "MACHOFIX_WHEEL_PLATFORM" in refused.stdout + refused.stderr
           and not (os.path.isdir(dist) and os.listdir(dist)), "Mach-O binaries without MACHOFIX_WHEEL_PLATFORM: no wheel, the variable named")
    tag_set = "macosx_11_0_arm64.macosx_11_0_universal2"
    built = run(*command, env={**environment, "MACHOFIX_WHEEL_PLATFORM": tag_set})
    wheel = os.path.join(dist, f"machofix-{version()}-py3-none-{tag_set}.whl")
    expect(built.returncode == 0 and os.path.isfile(wheel), f"with MACHOFIX_WHEEL_PLATFORM={tag_set}: {wheel}")
    if os.path.isfile(wheel):
        data = f"machofix-{version()}.data"
        with zipfile.ZipFile(wheel) as archive:
            same = (archive.read(f"{data}/scripts/machofix") == read(os.path.join(binaries, "machofix"))
                    and archive.read(f"{data}/data/lib/machofix/machofix-lief.so") == read(os.path.join(binaries, "machofix-lief.so")))
            tags = archive.read(f"machofix-{version()}.dist-info/WHEEL").decode()
        expect(same and re.findall(r"^Tag: (.*)$", tags, re.M) == ["py3-none-macosx_11_0_arm64", "py3-none-macosx_11_0_universal2"],
               "carrying the binaries as they are, the compressed tag set named and one Tag line each")


def make_environment(python, wheel, work):
    environment = os.path.join(work, "venv")
    made = run(python, "-m", "venv", environment)
    expect(made.returncode == 0, f"python -m venv {made.stderr[-300:]}")
    venv_python = os.path.join(environment, "bin", "python")
    installed = run(venv_python, "-m", "pip", "install", "--no-index", wheel,
                    env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    expect(installed.returncode == 0, f"pip install --no-index WHEEL into it {installed.stderr[-300:]}")
    return venv_python


def clean_environment():
    """Nothing from the test's own environment decides which machofix runs."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MACHOFIX_EXECUTABLE", "MACHOFIX_LIEF_PLUGIN")}


def check_main(venv_python, work):
    environment = clean_environment()
    version_text = run(venv_python, "-m", "machofix", "--version", env=environment, cwd=work)
    reader = version_text.stdout.partition("LIEF reader: ")[2].strip()
    expect(version_text.returncode == 0 and version_text.stdout.startswith(f"machofix {version()}\n"),
           f"python -m machofix --version: {version_text.stdout.splitlines()[:1]}")
    prefix = os.path.dirname(os.path.dirname(venv_python))
    script = os.path.join(prefix, "bin", "machofix")
    plugin = os.path.join(prefix, "lib", "machofix", "machofix-lief.so")
    expect(os.path.realpath(reader) == os.path.realpath(plugin), f"it uses the LIEF reader the wheel installed ({reader})")
    with open(script, "rb") as handle:
        expect(handle.read(4) == b"\x7fELF" and os.access(script, os.X_OK),
               "bin/machofix is the executable itself (ELF, executable), not a Python shim")
    from_script = run(script, "--version", env={**environment, "PATH": "/nonexistent"}, cwd=work)
    expect(from_script.returncode == 0 and from_script.stdout == version_text.stdout,
           "bin/machofix --version: the same, with no Python on the PATH")
    api = run(venv_python, "-c", "import machofix; print(machofix.find_executable())", env=environment, cwd=work)
    expect(os.path.realpath(api.stdout.strip()) == os.path.realpath(script), f"the API runs that same executable ({api.stdout.strip()})")
    bad = os.path.join(work, "not_a_model")
    with open(bad, "w") as handle:
        handle.write("text\n")
    failed = run(venv_python, "-m", "machofix", "inspect", bad, env=environment)
    expect(failed.returncode == 2 and "not a Mach-O" in failed.stderr, "python -m machofix: exit status 2 passed through")
    usage = run(venv_python, "-m", "machofix", "frobnicate", env=environment)
    expect(usage.returncode == 2, "and a usage error's")


def check_export_step(venv_python, sample, work):
    exports = os.path.join(work, "exports")
    os.makedirs(exports)
    shutil.copy(sample, exports)
    step = os.path.join(ROOT, "samples", "export_step.py")
    result = run(venv_python, step, exports, env=clean_environment(), cwd=work)
    expect(result.returncode == 0 and "prune" in result.stdout,
           f"samples/export_step.py with the package installed repairs the export {result.stderr[-300:]}")
    again = run(venv_python, step, exports, env=clean_environment(), cwd=work)
    expect(again.returncode == 0 and "prune" not in again.stdout, "and finds nothing to do the second time")


def main():
    build, pte_writer, fixtures, work = [os.path.abspath(a) for a in sys.argv[1:5]]
    static_build = sys.argv[5] in ("ON", "1", "TRUE", "YES")
    samples = os.path.abspath(sys.argv[6]) if len(sys.argv) > 6 else ""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    python = builder_python()
    if python is None:
        expect(False, "a python3 with setuptools, wheel and venv (Debian: python3-setuptools python3-wheel python3-venv)")
        return 1
    print(f"building and installing with {python}" + ("" if python == sys.executable else f" ({sys.executable} lacks setuptools, wheel or venv)"))
    wheel = build_wheel(python, build, work)
    if not wheel:
        return 1
    check_wheel(wheel, build, static_build)
    check_cross_built(python, fixtures, work)
    venv_python = make_environment(python, wheel, work)
    check_main(venv_python, work)
    sample_dir = os.path.join(work, "sample")
    subprocess.run([os.path.join(ROOT, "samples", "aoti_metal", "build.sh"), sample_dir, pte_writer], check=True,
                   capture_output=True)
    api = run(venv_python, os.path.join(HERE, "check_api.py"), os.path.join(build, "machofix"), pte_writer, fixtures,
              os.path.join(work, "api"), samples, env=clean_environment(), cwd=work)
    print(api.stdout, end="")
    print(api.stderr, end="", file=sys.stderr)
    expect(api.returncode == 0, "check_api.py, in the environment: every function as the command line")
    check_export_step(venv_python, os.path.join(sample_dir, "metal_model.pte"), work)
    print(f"{len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
