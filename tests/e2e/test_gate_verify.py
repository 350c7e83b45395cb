#!/usr/bin/env python3
"""The gate fails what verify fails: `check` and `check --app` on files the kernel or
dyld refuses (issue: the gate, trusted both ways).

    test_gate_verify.py MACHOFIX PTE_WRITER FIXTURE_DIR APP_FIXTURES WORK

From a signed arm64 AOTI-shaped dylib linked by ld64.lld-16, pruned so that `check`
has nothing else to say, and the same inside a .pte (tests/pte/pte_writer wrap):
- one byte of its code flipped: `verify` INVALID; `check` exits 1 with an
  invalid-signature finding naming the page, whose repair re-signs;
- each of six load-time rules broken (__TEXT not r-x, __LINKEDIT writable, two
  segments overlapping in the file, two in memory, a file size over the VM size, a
  section outside its segment): `check` exits 1 with a loader-rule finding for every
  violation `verify` lists, the same rule id at the same offset;
- `check --app` (an application without libomp, a sysroot) fails each of them too;
- the unbroken file passes all three;
- over every fixture of the matrix: whenever `verify` exits 1, `check` exits 1;
- a dependency on a bare relative install name ("liba.dylib"), which dyld resolves
  against the current directory: a relative-install-name error, also when the
  contract declares '@rpath/*' provided, whose repair makes it @rpath/;
- a universal file with an i386 slice, which machofix does not read: an
  unchecked-slice note for it, never a silent pass; the gate's verdict is the
  other slice's.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from relative_name import dylib_with_relative_dependency  # noqa: E402
from tamper import LC_SEGMENT_64, _commands, tamper_text, with_i386_slice  # noqa: E402

BASE = "aoti_metal_arm64_chained.in"
failures = []


def expect(what, condition, detail=""):
    print(f"{'ok' if condition else 'FAILED'}: {what}{'' if condition or not detail else ': ' + str(detail)[:600]}")
    if not condition:
        failures.append(what)


def run(*arguments):
    return subprocess.run([str(a) for a in arguments], capture_output=True, text=True)


def segments(data):
    """{name: offset of its segment_command_64} of a thin slice."""
    return {data[at + 8:at + 24].rstrip(b"\0").decode(): at for cmd, at in _commands(data, 0) if cmd == LC_SEGMENT_64}


def second_segment(data):
    return sorted((at, name) for name, at in segments(data).items() if name not in ("__PAGEZERO", "__TEXT"))[0][0]


def text_rwx(data):
    struct.pack_into("<I", data, segments(data)["__TEXT"] + 60, 7)


def linkedit_writable(data):
    struct.pack_into("<I", data, segments(data)["__LINKEDIT"] + 60, 3)


def overlap_in_file(data):
    struct.pack_into("<Q", data, second_segment(data) + 40, 0)  # fileoff: over __TEXT's bytes


def overlap_in_memory(data):
    text_vmaddr = struct.unpack_from("<Q", data, segments(data)["__TEXT"] + 24)[0]
    struct.pack_into("<Q", data, second_segment(data) + 24, text_vmaddr)


def filesize_over_vmsize(data):
    at = second_segment(data)
    vmsize = struct.unpack_from("<Q", data, at + 32)[0]
    struct.pack_into("<Q", data, at + 32, vmsize // 2 or 1)  # vmsize now under filesize


def section_outside(data):
    at = segments(data)["__TEXT"]
    vmaddr, vmsize = struct.unpack_from("<QQ", data, at + 24)
    struct.pack_into("<Q", data, at + 72 + 32, vmaddr + vmsize + 0x1000)  # the first section's addr


BREAKS = [text_rwx, linkedit_writable, overlap_in_file, overlap_in_memory, filesize_over_vmsize, section_outside]


def verify_violations(machofix, path):
    """(exit status, [(rule, offset)] of every loader-rule violation) of `verify --json`."""
    done = run(machofix, "verify", "--json=-", path)
    found = []
    for entry in json.loads(done.stdout)["files"]:
        images = ([entry["macho"]] if "macho" in entry else []) + [b["macho"] for b in entry.get("pte", {}).get("blobs", [])]
        for image in images:
            found += [(v["rule"], v["offset"]) for v in image["loader_rules"]]
            found += [(v["rule"], v["offset"]) for s in image["slices"] for v in s["loader_rules"]]
    return done.returncode, sorted(found)


def check_findings(machofix, path, *options):
    done = run(machofix, "check", "--json=-", "--no-contract", *options, path)
    findings = json.loads(done.stdout)["findings"] if done.stdout.strip() else []
    return done.returncode, findings


def judge(machofix, path, app, label):
    """check and check --app on a broken file, against what verify says of it."""
    verify_status, violations = verify_violations(machofix, path)
    status, findings = check_findings(machofix, path)
    loader = sorted((f["loader_rule"], f["offset"]) for f in findings if f["rule"] == "loader-rule")
    expect(f"{label}: verify fails it, naming loader rules", verify_status == 1 and violations, violations)
    expect(f"{label}: check fails it with a loader-rule finding for each ({len(violations)})",
           status == 1 and loader == violations, (status, loader, violations))
    status, findings = check_findings(machofix, path, *app)
    expect(f"{label}: check --app fails it with the same findings",
           status == 1 and sorted((f["loader_rule"], f["offset"]) for f in findings if f["rule"] == "loader-rule")
           == violations, status)


def main(argv):
    machofix, pte_writer, fixtures, app_fixtures, work = argv[1:6]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    app = ["--app", os.path.join(app_fixtures, "apps/AOTIRunnerNoOMP.app"), "--sysroot", os.path.join(app_fixtures, "sysroot")]

    clean = os.path.join(work, "clean.dylib")
    done = run(machofix, "prune", os.path.join(fixtures, BASE), "-o", clean)
    expect("the base pruned", done.returncode == 0, done.stderr)
    clean_bytes = open(clean, "rb").read()

    def write(name, data):
        path = os.path.join(work, name)
        with open(path, "wb") as handle:
            handle.write(data)
        return path

    def wrapped(name, data):
        so = write(name + ".so", data)
        pte = os.path.join(work, name + ".pte")
        subprocess.run([pte_writer, "wrap", so, pte], check=True)
        return pte

    for path in (clean, wrapped("clean", clean_bytes)):
        status, findings = check_findings(machofix, path)
        expect(f"{os.path.basename(path)}: the unbroken file passes check",
               status == 0 and not findings and run(machofix, "verify", path).returncode == 0, findings)

    data = bytearray(clean_bytes)
    page_offset, page_message = tamper_text(data, "arm64")
    for path in (write("flipped.dylib", data), wrapped("flipped", data)):
        label = os.path.basename(path)
        expect(f"{label}: verify says INVALID", run(machofix, "verify", path).returncode == 1)
        for options in ([], app):
            status, findings = check_findings(machofix, path, *options)
            signature = [f for f in findings if f["rule"] == "invalid-signature"]
            expect(f"{label}: check{' --app' if options else ''} fails it: invalid-signature, naming the page, "
                   "repaired by re-signing",
                   status == 1 and len(signature) == 1 and page_message in signature[0]["message"]
                   and page_message in signature[0]["problem"] and "--resign-invalid" in signature[0]["repair"],
                   (status, signature))
        text = run(machofix, "check", "--no-contract", path).stdout
        expect(f"{label}: check's text says so", "[invalid-signature]" in text and page_message in text, text)

    for rule_break in BREAKS:
        data = bytearray(clean_bytes)
        rule_break(data)
        judge(machofix, write(rule_break.__name__ + ".dylib", data), app, rule_break.__name__)
        judge(machofix, wrapped(rule_break.__name__, data), app, rule_break.__name__ + " in a .pte")

    # ncmds shrunk below the first LC_LOAD_DYLIB: machofix's reader fails on the binds
    # before any rule runs, and dyld refuses the binds' ordinals (dylib-ordinal). In a
    # .pte that blob was once passed by check and verify in silence (the randomized
    # differential found it); as a plain file it is an error, never a pass.
    data = bytearray(clean_bytes)
    first_dylib = next(i for i, (cmd, _) in enumerate(_commands(data, 0)) if cmd in (0xC, 0x18, 0x8000001F, 0x80000023))
    struct.pack_into("<I", data, 16, first_dylib)
    hidden = wrapped("dylibs_hidden", data)
    status, findings = check_findings(machofix, hidden)
    expect("dependent dylibs hidden by ncmds, in a .pte: check fails it with dylib-ordinal",
           status == 1 and "dylib-ordinal" in {f["loader_rule"] for f in findings if f["rule"] == "loader-rule"}, findings)
    done = run(machofix, "verify", hidden)
    expect("... and verify fails it", done.returncode == 1 and "dylib-ordinal" in done.stdout, done.stdout + done.stderr)
    done = run(machofix, "prune", hidden, "-o", os.path.join(work, "dylibs_hidden.out.pte"))
    expect("... and prune refuses it for that loader rule", done.returncode == 2 and
           "(loader rule dylib-ordinal" in done.stderr, done.stderr)
    done = run(machofix, "check", "--no-contract", write("dylibs_hidden.dylib", data))
    expect("as a plain file: an error naming the loader rule, never a pass",
           done.returncode == 2 and "(loader rule dylib-ordinal" in done.stderr, done.stderr)

    fat = write("with_i386.dylib", with_i386_slice(clean_bytes))
    status, findings = check_findings(machofix, fat)
    text = run(machofix, "check", "--no-contract", fat).stdout
    expect("an i386 slice is an unchecked-slice note; the clean arm64 slice passes",
           status == 0 and [(f["rule"], f["level"], f["arch"]) for f in findings] == [("unchecked-slice", "note", "i386")]
           and "i386: note: a 32-bit slice" in text and "1 finding (1 note)" in text, (findings, text))

    relative = dylib_with_relative_dependency(os.path.join(work, "relative"))
    for options in ([], ["--provided", "@rpath/*"]):
        status, findings = check_findings(machofix, relative, *options)
        named = [f for f in findings if f["rule"] == "relative-install-name"]
        expect(f"a bare relative install name fails check {' '.join(options)}",
               status == 1 and len(named) == 1 and named[0]["dylib"] == "liba.dylib" and named[0]["level"] == "error"
               and "--change liba.dylib @rpath/liba.dylib" in named[0]["repair"], findings)

    missed = []
    for name in sorted(os.listdir(fixtures)):
        if not name.endswith((".in", ".ref")):
            continue
        path = os.path.join(fixtures, name)
        if run(machofix, "verify", path).returncode == 1 and run(machofix, "check", "--no-contract", path).returncode != 1:
            missed.append(name)
    expect("over the fixture matrix, check fails every file verify fails", not missed, missed)

    print(f"test_gate_verify: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
