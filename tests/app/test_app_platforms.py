#!/usr/bin/env python3
"""`check --app` in processes other than a macOS arm64 one: iOS apps, Mac Catalyst apps,
arm64e processes.

dyld loads into a process only images built for its platform, the platform of the
main executable; a Mac Catalyst process also loads macOS images
(Header::loadableIntoProcess). An arm64e process takes arm64e code and arm64 code; an
arm64 process takes arm64 only (GradedArchitectures). tests/app's matrix is all
macOS, arm64 and x86_64; here, linked by clang-16 + ld64.lld-16 in WORK_DIR:
 - three dylibs, each exporting one function: libios (iOS), libmac (macOS), libcat
   (Mac Catalyst), install names @rpath/...;
 - apps that ship all three beside their executable (LC_RPATH @executable_path):
   IOS (an iOS executable) and Catalyst (a Mac Catalyst one), each linked against a
   libSystem stub of its own platform (.tbd written here); Mac (macOS) shipping libmac
   alone, and MacE, whose libmac's header is patched to arm64e (ld64.lld-16 writes
   arm64 for -arch arm64e), unsigned;
 - model.dylib (macOS arm64), calling the three functions, linked against stubs of
   the three libraries; model_arm64e.dylib, libmac's user alone, its header patched
   to arm64e.
The header patches and the platforms are read back with llvm-objdump-16 first. Then
each `check --app APP/App MODEL --json` must give exactly the library-not-loaded
findings of its case, each with dyld's reason (incompatible platform or
architecture, naming what the file has and what the process needs), and bind every
import of a library that loads.

Usage: test_app_platforms.py MACHOFIX WORK_DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys

CC, LD, OBJDUMP = "clang-16", "ld64.lld-16", "llvm-objdump-16"
# platform: (-platform_version name, clang triple, .tbd target, name in dyld's messages)
PLATFORMS = {
    "ios": ("ios", "arm64-apple-ios16.0", "arm64-ios", "iOS"),
    "mac": ("macos", "arm64-apple-macos11.0", "arm64-macos", "macOS"),
    "cat": ("mac-catalyst", "arm64-apple-ios16.0-macabi", "arm64-maccatalyst", "Mac Catalyst"),
}
VERSION = {"ios": "16.0", "mac": "11.0", "cat": "16.0"}
ARM64E_SUBTYPE = 0x80000002  # CPU_SUBTYPE_ARM64E with the ptrauth ABI flag


def run(*command):
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=120)


def must(*command):
    result = run(*command)
    if result.returncode != 0:
        sys.exit(f"{' '.join(map(str, command))}: exit {result.returncode}: {result.stderr}")
    return result.stdout


class Build:
    def __init__(self, work):
        self.work = work

    def path(self, *parts):
        path = os.path.join(self.work, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def compile(self, name, text, platform):
        source = self.path("src", f"{name}.{platform}.c")
        with open(source, "w") as handle:
            handle.write(text)
        obj = source[:-2] + ".o"
        must(CC, "-target", PLATFORMS[platform][1], "-O1", "-c", source, "-o", obj)
        return obj

    def stub(self, name, install_name, targets, symbols):
        path = self.path("stubs", name + ".tbd")
        with open(path, "w") as handle:
            handle.write(f"--- !tapi-tbd\ntbd-version: 4\ntargets: [ {', '.join(targets)} ]\ninstall-name: '{install_name}'\n"
                         f"exports:\n  - targets: [ {', '.join(targets)} ]\n    symbols: [ {', '.join(symbols)} ]\n...\n")
        return path

    def link(self, out, platform, objects, kind, extra=()):
        version = VERSION[platform]
        # Signed (ad hoc) as Apple's linker signs all arm64 code: ld64.lld-16 does so only
        # for macOS, and the kernel refuses unsigned arm64 code (check --app says so).
        sign = [] if "-no_adhoc_codesign" in (*kind, *extra) else ["-adhoc_codesign"]
        must(LD, "-arch", "arm64", "-platform_version", PLATFORMS[platform][0], version, version, *kind, *objects, *extra,
             *sign, "-o", out)
        return out


def patch_arm64e(path):
    with open(path, "r+b") as handle:
        handle.seek(8)
        handle.write(struct.pack("<I", ARM64E_SUBTYPE))


def header(path):
    """(cpusubtype, platform number) as llvm-objdump-16 reads them."""
    text = must(OBJDUMP, "--macho", "--private-headers", "--non-verbose", path)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "cputype" in line and "cpusubtype" in line)
    fields = lines[at + 1].split()
    names = lines[at].split()
    subtype = int(fields[names.index("cpusubtype")], 0) | (int(fields[names.index("caps")], 0) << 24
                                                          if "caps" in names else 0)
    platform = next((int(line.split()[1]) for line in lines if line.strip().startswith("platform ")), None)
    return subtype, platform


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    machofix, work = sys.argv[1:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    build = Build(work)
    problems = []
    every_target = [PLATFORMS[p][2] for p in PLATFORMS]
    system = build.stub("libSystem", "/usr/lib/libSystem.B.dylib", every_target, ["_abort", "dyld_stub_binder"])

    # The three libraries, each for its platform.
    libraries = {}
    for platform in PLATFORMS:
        obj = build.compile(f"lib{platform}", f"int from_{platform}(void) {{ return 1; }}\n", platform)
        libraries[platform] = build.link(build.path("libs", f"lib{platform}.dylib"), platform, [obj],
                                         ["-dylib", "-install_name", f"@rpath/lib{platform}.dylib"], [system])
    # The apps: an executable of the app's platform, the libraries beside it.
    main_source = "int main(void) { return 0; }\n"
    apps = {}
    for name, platform, shipped in (("IOS", "ios", PLATFORMS), ("Catalyst", "cat", PLATFORMS), ("Mac", "mac", ["mac"]),
                                    ("MacE", "mac", ["mac"])):
        executable = build.link(build.path("apps", name, "App"), platform, [build.compile("main", main_source, platform)],
                                ["-execute"], [system, "-rpath", "@executable_path"])
        for lib in shipped:
            shutil.copyfile(libraries[lib], build.path("apps", name, f"lib{lib}.dylib"))
        apps[name] = executable
    # MacE's libmac: unsigned (the patch would break its signature), then arm64e.
    mac_obj = os.path.join(work, "src", "libmac.mac.o")
    libmac_e = build.link(build.path("apps", "MacE", "libmac.dylib"), "mac", [mac_obj],
                          ["-dylib", "-install_name", "@rpath/libmac.dylib", "-no_adhoc_codesign"], [system])
    patch_arm64e(libmac_e)
    must(machofix, "sign", libmac_e, "--in-place")  # arm64e code must be signed too
    # The models, macOS arm64, linked against stubs of the three libraries.
    stubs = [build.stub(f"lib{p}", f"@rpath/lib{p}.dylib", every_target, [f"_from_{p}"]) for p in PLATFORMS]
    calls = "".join(f"int from_{p}(void);\n" for p in PLATFORMS) + \
        "int model_entry(void) { return " + " + ".join(f"from_{p}()" for p in PLATFORMS) + "; }\n"
    model = build.link(build.path("models", "model.dylib"), "mac", [build.compile("model", calls, "mac")],
                       ["-dylib", "-install_name", "@rpath/model.dylib"], [system, *stubs])
    mac_only = "int from_mac(void);\nint model_entry(void) { return from_mac(); }\n"
    model_e = build.link(build.path("models", "model_arm64e.dylib"), "mac", [build.compile("model_mac", mac_only, "mac")],
                         ["-dylib", "-install_name", "@rpath/model_arm64e.dylib", "-no_adhoc_codesign"], [system, stubs[1]])
    patch_arm64e(model_e)
    must(machofix, "sign", model_e, "--in-place")
    model_mac = build.link(build.path("models", "model_mac.dylib"), "mac", [os.path.join(work, "src", "model_mac.mac.o")],
                           ["-dylib", "-install_name", "@rpath/model_mac.dylib"], [system, stubs[1]])

    # The witness: what each file is, as llvm-objdump-16 reads it.
    platform_numbers = {"ios": 2, "mac": 1, "cat": 6}
    for platform, path in libraries.items():
        if header(path) != (0, platform_numbers[platform]):
            problems.append(f"lib{platform}: llvm-objdump-16 reads (cpusubtype, platform) {header(path)}")
    for path in (libmac_e, model_e):
        if header(path) != (ARM64E_SUBTYPE, 1):
            problems.append(f"{path}: should be arm64e macOS; llvm-objdump-16 reads {header(path)}")
    for name, platform in (("IOS", 2), ("Catalyst", 6), ("Mac", 1)):
        if header(apps[name])[1] != platform:
            problems.append(f"{name}/App: platform {header(apps[name])[1]}, not {platform}")
    if problems:
        for problem in problems:
            print("FAIL " + problem)
        return 1

    def incompatible_platform(have, need):
        return f"mach-o file, but is an incompatible platform (have '{have}', need '{need}')"

    # (app, model, {install name not loaded: the reason tried}, symbols that must bind)
    cases = [
        ("IOS", model, {"@rpath/libmac.dylib": incompatible_platform("macOS", "iOS"),
                        "@rpath/libcat.dylib": incompatible_platform("Mac Catalyst", "iOS")}, ["_from_ios"]),
        ("Catalyst", model, {"@rpath/libios.dylib": incompatible_platform("iOS", "Mac Catalyst")},
         ["_from_mac", "_from_cat"]),
        ("Mac", model_e, {}, ["_from_mac"]),  # an arm64e process takes the arm64 libmac
        ("MacE", model_mac, {"@rpath/libmac.dylib":
                             "mach-o file, but is an incompatible architecture (have 'arm64e', need 'arm64')"}, []),
        ("MacE", model_e, {}, ["_from_mac"]),  # and an arm64e one, its best
    ]
    for app, model_path, not_loaded, bound in cases:
        what = f"{app} with {os.path.basename(model_path)}"
        result = run(machofix, "check", "--no-contract", "--app", apps[app], model_path, "--json", "-")
        try:
            report = json.loads(result.stdout)
        except ValueError:
            problems.append(f"{what}: no JSON report: exit {result.returncode}: {result.stderr.strip()[:400]}")
            continue
        findings = [f for f in report["findings"] if f["rule"] in ("library-not-loaded", "symbol-not-found")]
        got = {f["dylib"]: [t["reason"] for t in f["tried"] if t["path"].startswith(os.path.join(work, "apps", app) + "/")]
               for f in findings if f["rule"] == "library-not-loaded"}
        expected = {name: [reason] for name, reason in not_loaded.items()}
        if got != expected or any(f["rule"] == "symbol-not-found" for f in findings):
            problems.append(f"{what}: library-not-loaded {expected}, no symbol-not-found; got "
                            f"{[(f['rule'], f['dylib'], f.get('symbol'), f['tried']) for f in findings]}")
        checks = report.get("app_checks") or []
        arch = "arm64e" if model_path in (model_e,) else "arm64"
        if [c["arch"] for c in checks] != [arch] or not checks[0]["loaded"]:
            problems.append(f"{what}: one app check, for {arch}, that launched: {[(c['arch'], c['loaded']) for c in checks]}")
            continue
        verdicts = {b["symbol"]: b["verdict"] for b in checks[0]["bindings"]}
        for symbol in bound:
            if verdicts.get(symbol) != "bound":
                problems.append(f"{what}: {symbol} should bind: {verdicts}")

    for problem in problems:
        print("FAIL " + problem)
    print(f"{len(problems)} problem(s) in {len(cases)} cases")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
