#!/usr/bin/env python3
"""`check --min-macos` holds a slice to the macOS it declares it needs, never its SDK.

dyld refuses an image whose minimum (LC_BUILD_VERSION's minos, LC_VERSION_MIN_MACOSX's
version) is newer than the running macOS; the SDK it was built against says nothing
about where it runs. The fixtures of tests/app link minimum and SDK alike, so here
dylibs are linked by clang-16 + ld64.lld-16 with `-platform_version macos MIN SDK`,
each with an SDK that differs from its minimum:
 - build_11_sdk_14: LC_BUILD_VERSION minos 11.0, sdk 14.0 (arm64);
 - build_13_sdk_11: LC_BUILD_VERSION minos 13.0, sdk 11.0 (arm64);
 - vmin_10_13_sdk_10_15: LC_VERSION_MIN_MACOSX 10.13, sdk 10.15 (x86_64: ld64.lld
   writes the old command for a minimum below 10.14).
Each is first read back with llvm-objdump-16 (the fixture is what the case says); then
`check --min-macos V` must give a min-macos finding (exit 1, at the load command's
offset, naming the minimum, in the text and in --json) exactly when the minimum is
newer than V, whatever the SDK is, and pass (exit 0) otherwise.

Usage: test_min_macos.py MACHOFIX TBD_DIR WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

CC, LD, OBJDUMP = "clang-16", "ld64.lld-16", "llvm-objdump-16"
SOURCE = "int answer(void) { return 42; }\n"

# name: (arch, minimum, sdk, load command)
FIXTURES = {
    "build_11_sdk_14": ("arm64", "11.0", "14.0", "LC_BUILD_VERSION"),
    "build_13_sdk_11": ("arm64", "13.0", "11.0", "LC_BUILD_VERSION"),
    "vmin_10_13_sdk_10_15": ("x86_64", "10.13", "10.15", "LC_VERSION_MIN_MACOSX"),
}

# (fixture, --min-macos, the minimum a finding names, or None for no finding)
CASES = [
    ("build_11_sdk_14", "12.0", None),     # the SDK (14.0) is newer than 12.0; the minimum is not
    ("build_11_sdk_14", "11.0", None),
    ("build_11_sdk_14", "10.15", "11.0"),  # the finding names the minimum, not the SDK
    ("build_13_sdk_11", "12.0", "13.0"),   # the SDK (11.0) is older than 12.0; the minimum is not
    ("build_13_sdk_11", "13.0", None),
    ("vmin_10_13_sdk_10_15", "10.14", None),  # LC_VERSION_MIN: its version, not its sdk field
    ("vmin_10_13_sdk_10_15", "10.12", "10.13"),
]


def run(*command, **options):
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=120, **options)


def must(*command):
    result = run(*command)
    if result.returncode != 0:
        sys.exit(f"{' '.join(map(str, command))}: exit {result.returncode}: {result.stderr}")
    return result.stdout


def build(work, tbd_dir, name, arch, minimum, sdk):
    source = os.path.join(work, "answer.c")
    obj = os.path.join(work, f"answer.{arch}.o")
    if not os.path.exists(obj):
        must(CC, "-target", f"{arch}-apple-macos10.13", "-O1", "-c", source, "-o", obj)
    out = os.path.join(work, name + ".dylib")
    must(LD, "-arch", arch, "-platform_version", "macos", minimum, sdk, "-dylib", "-install_name", f"@rpath/{name}.dylib",
         obj, os.path.join(tbd_dir, "libSystem.tbd"), "-o", out)
    return out


def version_command(path, command):
    """(minimum, sdk, offset of the command) as llvm-objdump-16 reads them."""
    text = must(OBJDUMP, "--macho", "--private-headers", path)
    header_size = 32  # mach_header_64
    offset = header_size
    for block in re.split(r"\nLoad command \d+\n", text)[1:]:
        size = int(re.search(r"cmdsize (\d+)", block).group(1))
        if re.search(rf"cmd {command}\b", block):
            minimum = re.search(r"(?:minos|version) ([\d.]+)", block).group(1)
            sdk = re.search(r"sdk ([\d.]+)", block).group(1)
            return minimum, sdk, offset
        offset += size
    return None


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    machofix, tbd_dir, work = sys.argv[1:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    with open(os.path.join(work, "answer.c"), "w") as handle:
        handle.write(SOURCE)
    problems = []
    paths, offsets = {}, {}
    for name, (arch, minimum, sdk, command) in FIXTURES.items():
        paths[name] = build(work, tbd_dir, name, arch, minimum, sdk)
        read = version_command(paths[name], command)
        # objdump prints 13.0 as "13.0" and 10.13 as "10.13"
        if read is None or read[:2] != (minimum, sdk):
            problems.append(f"{name}: the fixture should have {command} minimum {minimum}, sdk {sdk}; objdump reads {read}")
            continue
        offsets[name] = read[2]

    for name, required, named in CASES:
        if name not in offsets:
            continue
        path = paths[name]
        what = f"{name} --min-macos {required}"
        text = run(machofix, "check", "--no-contract", "--min-macos", required, path)
        report = run(machofix, "check", "--no-contract", "--min-macos", required, path, "--json")
        try:
            findings = [f for f in json.loads(report.stdout)["findings"] if f["rule"] == "min-macos"]
        except (ValueError, KeyError) as error:
            problems.append(f"{what}: --json is not a report ({error}): {report.stdout[:300]} {report.stderr[:300]}")
            continue
        if named is None:
            if text.returncode != 0 or "min-macos" in text.stdout or findings or report.returncode != 0:
                problems.append(f"{what}: the minimum is not newer, so no finding and exit 0: exit {text.returncode}, "
                                f"{text.stdout.strip()[:400]}; json {findings}")
            continue
        expected = [(named, required, offsets[name])]
        got = [(f["min_macos"], f["required"], f["offset"]) for f in findings]
        if text.returncode != 1 or report.returncode != 1 or got != expected:
            problems.append(f"{what}: one min-macos finding {expected} (minimum, required, offset) and exit 1: "
                            f"exit {text.returncode}/{report.returncode}, json {got}")
        line = [l for l in text.stdout.splitlines() if "[min-macos]" in l]
        if len(line) != 1 or named not in line[0] or FIXTURES[name][2] in line[0].replace(named, ""):
            problems.append(f"{what}: the text's finding should name the minimum {named} (not the SDK "
                            f"{FIXTURES[name][2]}): {line}")

    for problem in problems:
        print("FAIL " + problem)
    print(f"{len(problems)} problem(s) in {len(CASES)} cases over {len(FIXTURES)} fixtures")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
