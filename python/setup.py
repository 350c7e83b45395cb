"""Builds the machofix wheel: the Python package, the machofix executable as the
wheel's script and its LIEF reader plugin as data, from a CMake build directory, tagged
py3-none-PLATFORM for the platform of those binaries (they do not depend on the
Python version).

The executable is a script of the wheel (machofix-VERSION.data/scripts/machofix), as
maturin ships ruff's and uv's: pip installs it in the environment's bin/ as it is, so
the `machofix` command starts without Python. Its reader goes to
machofix-VERSION.data/data/lib/machofix/, which pip installs in lib/machofix/ of the
same prefix: bin/machofix finds ../lib/machofix/ itself, in a venv, a --user or a
system install. The Python API runs that same installed executable.

    MACHOFIX_BUILD_DIR       the directory holding `machofix` and `machofix-lief.*`
                             (default: ../build, the repository's build directory;
                             a relative path is taken from this directory). When it
                             is the default and holds no executable yet, CMake
                             configures and builds it first (pip install from a clone).
    MACHOFIX_LICENCE_DIR     a directory of licences of what the binaries link in
                             statically (a release's licences/), carried as
                             machofix/licences/.
    MACHOFIX_WHEEL_PLATFORM  the platform tag, e.g. macosx_11_0_arm64 for binaries
                             cross-built for macOS (also: bdist_wheel --plat-name), or
                             a compressed tag set such as
                             manylinux_2_17_x86_64.manylinux2014_x86_64.
                             Default, for ELF binaries: manylinux_2_Y_ARCH when they
                             need nothing but glibc (2.Y being the newest glibc symbol
                             version they use, read with objdump), else linux_ARCH.
"""
import os
import re
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py
# setuptools 66 has no subclasses of these two: distutils' own (setuptools' copy of it,
# since setuptools is imported first).
from distutils.command.build_scripts import build_scripts
from distutils.command.install_data import install_data

try:  # setuptools 70.1 and later have their own; Debian 12's setuptools 66 uses the wheel package's
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXECUTABLE = "machofix"
PLUGIN_PREFIX = "machofix-lief."

# What a manylinux wheel may link besides itself (PEP 600: the libraries every glibc
# system has); libstdc++ and libgcc_s are left out on purpose: machofix links them
# statically, and a binary that needs them is tagged linux_ARCH rather than checked
# against the GLIBCXX versions of each manylinux policy.
GLIBC_LIBRARIES = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libutil.so.1", "libresolv.so.2",
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "ld-linux.so.2",
}
ELF_ARCHITECTURES = {"elf64-x86-64": "x86_64", "elf64-littleaarch64": "aarch64", "elf32-i386": "i686"}


def log(message):
    print(f"machofix wheel: {message}", file=sys.stderr)


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as handle:
        match = re.search(r"project\(machofix VERSION ([0-9.]+)", handle.read())
    if not match:
        sys.exit("machofix wheel: no version in ../CMakeLists.txt")
    return match.group(1)


def build_directory():
    named = os.environ.get("MACHOFIX_BUILD_DIR")
    return os.path.normpath(os.path.join(HERE, named or os.path.join("..", "build"))), bool(named)


def ensure_built(directory, named):
    if os.path.isfile(os.path.join(directory, EXECUTABLE)):
        return
    if named:
        sys.exit(f"machofix wheel: no {EXECUTABLE} executable in MACHOFIX_BUILD_DIR ({directory})")
    log(f"no {EXECUTABLE} in {directory}: building it with CMake (scripts/setup.sh installs what it needs)")
    if not os.path.isfile(os.path.join(directory, "CMakeCache.txt")):
        generator = ["-G", "Ninja"] if shutil.which("ninja") and "CMAKE_GENERATOR" not in os.environ else []
        subprocess.run(["cmake", "-S", ROOT, "-B", directory, *generator, "-DCMAKE_BUILD_TYPE=Release",
                        "-DMACHOFIX_TESTS=OFF"], check=True, stdout=sys.stderr)
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
    subprocess.run(["cmake", "--build", directory, "--parallel", jobs, "--target", "machofix", "machofix_lief"],
                   check=True, stdout=sys.stderr)


def binaries():
    """The executable and the LIEF reader plugin the wheel carries."""
    directory, named = build_directory()
    ensure_built(directory, named)
    plugins = sorted(n for n in os.listdir(directory) if n.startswith(PLUGIN_PREFIX))
    if len(plugins) != 1:
        sys.exit(f"machofix wheel: expected one LIEF reader {PLUGIN_PREFIX}* in {directory}, found {plugins or 'none'}")
    return [os.path.join(directory, EXECUTABLE), os.path.join(directory, plugins[0])]


def elf_platform(paths):
    """manylinux_2_Y_ARCH if the binaries need only glibc, else linux_ARCH."""
    needed, glibc, others, architectures = set(), [], set(), set()
    for path in paths:
        try:
            headers = subprocess.run(["objdump", "-p", path], check=True, capture_output=True, text=True).stdout
        except (OSError, subprocess.CalledProcessError) as error:
            sys.exit(f"machofix wheel: cannot read {path} with objdump ({error}); set MACHOFIX_WHEEL_PLATFORM")
        architectures.update(re.findall(r"file format (\S+)", headers))
        needed.update(re.findall(r"^\s+NEEDED\s+(\S+)$", headers, re.M))
        references = headers.partition("Version References:")[2]
        for name, number in re.findall(r"\s([A-Z]+)_([0-9][0-9.]*)$", references, re.M):
            if name == "GLIBC":
                glibc.append(tuple(int(part) for part in number.split(".")))
            else:
                others.add(f"{name}_{number}")
    if len(architectures) != 1 or next(iter(architectures)) not in ELF_ARCHITECTURES:
        sys.exit(f"machofix wheel: binaries for {sorted(architectures)}: set MACHOFIX_WHEEL_PLATFORM")
    architecture = ELF_ARCHITECTURES[architectures.pop()]
    foreign = sorted(needed - GLIBC_LIBRARIES)
    if foreign or others or not glibc:
        log(f"the binaries need {', '.join(foreign + sorted(others)) or 'no glibc version'}: "
            f"tagged linux_{architecture}, for machines like this one (link them statically for a manylinux wheel)")
        return f"linux_{architecture}"
    newest = max(glibc)
    return f"manylinux_{newest[0]}_{newest[1]}_{architecture}"


def binary_platform(paths):
    with open(paths[0], "rb") as handle:
        magic = handle.read(4)
    if magic != b"\x7fELF":
        sys.exit(f"machofix wheel: {paths[0]} is not an ELF file (a macOS binary?): name its platform with "
                 "MACHOFIX_WHEEL_PLATFORM, e.g. macosx_11_0_arm64, macosx_10_15_x86_64 or macosx_11_0_universal2")
    return elf_platform(paths)


def strip_debug_information(path):
    """A RelWithDebInfo build's executable is 80% DWARF: the wheel leaves it out (the code
    is the same). ELF only, with binutils' strip; other binaries are carried as they are."""
    with open(path, "rb") as handle:
        if handle.read(4) != b"\x7fELF":
            return
    # A binary without debug information (a release's) is carried byte for byte as
    # built: strip would still rewrite its layout.
    try:
        sections = subprocess.run(["objdump", "-h", path], capture_output=True, text=True).stdout
    except OSError:
        return
    if ".debug_" not in sections:
        return
    before = os.path.getsize(path)
    if shutil.which("strip") and subprocess.run(["strip", "--strip-debug", path]).returncode == 0:
        log(f"{os.path.basename(path)}: debug information left out ({before} -> {os.path.getsize(path)} bytes)")


class build_py_with_licences(build_py):
    """The licences of what the binaries link in, as machofix/licences/."""

    def run(self):
        # pip builds in the source tree (python/build/): the package is staged afresh,
        # so that nothing an earlier build left there (an older layout's files) ships.
        shutil.rmtree(os.path.join(self.build_lib, "machofix"), ignore_errors=True)
        super().run()
        target = os.path.join(self.build_lib, "machofix", "licences")
        licences = os.environ.get("MACHOFIX_LICENCE_DIR")
        if licences:
            shutil.copytree(licences, target)


class build_executable(build_scripts):
    """The executable, byte for byte (less its debug information), as the wheel's only
    script: distutils would open it as a Python script to rewrite its #! line."""

    def get_source_files(self):
        return []

    def run(self):
        self.mkpath(self.build_dir)
        executable = binaries()[0]
        log(f"carries {executable} as a script")
        target = os.path.join(self.build_dir, EXECUTABLE)
        shutil.copy2(executable, target)
        strip_debug_information(target)
        return [target], [target]


class install_plugin(install_data):
    """The LIEF reader in lib/machofix/ of the install's prefix (the wheel's
    .data/data/lib/machofix/), where bin/machofix looks for it."""

    def run(self):
        plugin = binaries()[1]
        log(f"carries {plugin} as lib/machofix/{os.path.basename(plugin)}")
        staged = os.path.join(self.distribution.get_command_obj("build").build_temp, "machofix-data")
        self.mkpath(staged)
        copy = shutil.copy2(plugin, staged)
        strip_debug_information(copy)
        self.data_files = [("lib/machofix", [copy])]
        super().run()


class BinaryDistribution(Distribution):
    """Not pure Python: the package goes to the wheel's root (platlib), not to .data/purelib."""

    def has_ext_modules(self):
        return True


class platform_wheel(bdist_wheel):
    """py3-none-PLATFORM: any Python 3, the binaries' platform."""

    def get_tag(self):
        platform = os.environ.get("MACHOFIX_WHEEL_PLATFORM")
        if not platform and self.plat_name_supplied:
            platform = self.plat_name
        if not platform:
            platform = binary_platform(binaries())
        if "-" in platform:  # --plat-name macosx-11.0-arm64; dots otherwise join a tag set
            platform = platform.replace("-", "_").replace(".", "_")
        log(f"tagged py3-none-{platform}")
        return "py3", "none", platform


# The script and the data file are named when they are built (binaries() may build
# them): these entries only make setuptools run the two commands.
setup(version=version(), distclass=BinaryDistribution, scripts=[EXECUTABLE], data_files=[("lib/machofix", [])],
      cmdclass={"build_py": build_py_with_licences, "build_scripts": build_executable,
                "install_data": install_plugin, "bdist_wheel": platform_wheel})
