#!/usr/bin/env python3
"""The LIEF plugin's shared libraries (readelf -d, NEEDED): the C library and its
loader only. libstdc++ and libgcc are linked in, hidden; and where ld.lld linked it
(LINKER=lld), libm is not needed either: LIEF's only call into it (log2, in
LIEF::Section::entropy) is in a function the Mach-O reader never reaches, and loading
libm was a third of the plugin's dlopen (BENCHMARKS.md).

  tests/lief/plugin_libraries.py PLUGIN LINKER      (LINKER: lld, or anything else)
"""
import re
import subprocess
import sys

ALWAYS = {"libc.so.6", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}


def needed(plugin):
    dynamic = subprocess.run(["readelf", "-d", plugin], check=True, capture_output=True, text=True).stdout
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic))


def main():
    plugin, linker = sys.argv[1:3]
    allowed = ALWAYS if linker == "lld" else ALWAYS | {"libm.so.6"}
    libraries = needed(plugin)
    extra = sorted(libraries - allowed)
    if not libraries or extra:
        print(f"FAIL: {plugin} needs {', '.join(extra) or 'nothing at all (not a dynamic module?)'}; "
              f"allowed: {', '.join(sorted(allowed))}")
        return 1
    print(f"ok: {plugin} needs {', '.join(sorted(libraries))} (linker: {linker})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
