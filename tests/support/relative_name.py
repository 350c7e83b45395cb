"""A dylib linked by ld64.lld-16 against a library whose install name is a bare
relative path ("liba.dylib": no '/', no '@'), as Apple's ld64 writes when a library
was built without -install_name. dyld resolves such a name against the process's
current directory (check's relative-install-name)."""
import os
import subprocess

TBD = """--- !tapi-tbd
tbd-version:     4
targets:         [ arm64-macos ]
install-name:    'liba.dylib'
exports:
  - targets:         [ arm64-macos ]
    symbols:         [ _a_run ]
...
"""
SOURCE = "int a_run(void);\nint run(void) { return a_run(); }\n"


def dylib_with_relative_dependency(directory, name="relative_dependency.dylib"):
    """Links it into DIRECTORY; returns its path."""
    os.makedirs(directory, exist_ok=True)
    tbd, source, obj, out = (os.path.join(directory, n) for n in ("liba.tbd", "uses_liba.c", "uses_liba.o", name))
    with open(tbd, "w") as handle:
        handle.write(TBD)
    with open(source, "w") as handle:
        handle.write(SOURCE)
    subprocess.run(["clang-16", "-target", "arm64-apple-macos13", "-c", source, "-o", obj], check=True)
    libsystem = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "tbd", "libSystem.tbd")
    subprocess.run(["ld64.lld-16", "-arch", "arm64", "-platform_version", "macos", "13.0", "14.0", "-dylib",
                    "-install_name", f"@rpath/{name}", obj, libsystem, tbd, "-o", out], check=True)
    return out
