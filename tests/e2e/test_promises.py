#!/usr/bin/env python3
"""Documented promises that a broken product could otherwise break unseen, offline.

Each check names the promise. Found missing by a mutation audit (tests/mutation/): the
dry-run guard, verify failing an unsigned arm64 slice, check refusing what it cannot
read, and the CLI paths no other test ran (--backup as a hard link, GitHub
annotations, sign --identifier, prune --sign, --keep, --only), with every exit status.
Usage: test_promises.py MACHOFIX PTE_WRITER FIXTURE_DIR WORK_DIR
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import codesign_check  # noqa: E402

UNUSED = "aoti_metal_arm64_chained.in"  # signed by the linker; libomp unused
UNSIGNED = "aoti_metal_arm64_dyldinfo_unsigned.in"
CLEAN = "aoti_metal_arm64_chained.ref"  # the -dead_strip_dylibs relink: nothing to remove
UNIVERSAL = "universal_fat64_chained.in"
EXECUTABLE_UNSIGNED = "execute_x86_64_dyldinfo.in"  # no install name: a new signature takes the file's name

failures = []


def expect(condition, promise, result=None):
    detail = ""
    if not condition and result is not None:
        detail = f"\n    exit {result.returncode}; stdout: {result.stdout.strip()[:300]}; stderr: {result.stderr.strip()[:300]}"
    print(("ok   " if condition else "FAIL ") + promise)
    if not condition:
        failures.append(promise + detail)


def run(*args, env=None, cwd=None):
    return subprocess.run(list(args), capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def state(path):
    """What must not change when nothing is written: bytes, inode, modification time."""
    info = os.stat(path)
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest(), info.st_ino, info.st_mtime_ns


def tree_state(directory):
    return {name: state(os.path.join(directory, name)) for name in sorted(os.listdir(directory))}


class Scratch:
    def __init__(self, work, fixtures, pte_writer):
        self.work, self.fixtures, self.pte_writer = work, fixtures, pte_writer

    def directory(self, name):
        path = os.path.join(self.work, name)
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        return path

    def copy(self, fixture, directory, name):
        path = os.path.join(directory, name)
        shutil.copyfile(os.path.join(self.fixtures, fixture), path)
        return path

    def pte(self, directory, name):
        path = os.path.join(directory, name)
        subprocess.run([self.pte_writer, "wrap", os.path.join(self.fixtures, UNUSED), path, "hash"], check=True,
                       capture_output=True)
        return path

    def tar(self, directory, name, members):
        path = os.path.join(directory, name)
        with tarfile.open(path, "w:gz") as archive:
            for member in members:
                archive.add(member, arcname=os.path.basename(member))
        return path


def dry_run_writes_nothing(machofix, scratch):
    """--dry-run wins over --in-place and -o: nothing is written, whatever the input."""
    directory = scratch.directory("dry_run")
    inputs = {
        "thin Mach-O": scratch.copy(UNUSED, directory, "thin.dylib"),
        "universal Mach-O": scratch.copy(UNIVERSAL, directory, "universal.dylib"),
        ".pte": scratch.pte(directory, "model.pte"),
    }
    inputs["archive"] = scratch.tar(directory, "models.tar.gz", [inputs["thin Mach-O"], inputs[".pte"]])
    for what, path in inputs.items():
        for mode in (["--in-place"], ["-o", os.path.join(directory, "out")], ["--in-place", "--backup", ".orig"]):
            before = tree_state(directory)
            result = run(machofix, "prune", "--dry-run", *mode, path)
            expect(result.returncode in (0, 2) and tree_state(directory) == before,
                   f"prune --dry-run {' '.join(mode)} on a {what}: nothing written, the input untouched", result)
    before = tree_state(directory)
    result = run(machofix, "prune", "--dry-run", "--in-place", directory)
    expect(result.returncode == 0 and tree_state(directory) == before and "would change" in result.stdout,
           "prune --dry-run --in-place on a directory: reports what would change, writes nothing", result)


def verify_statuses(machofix, scratch):
    directory = scratch.directory("verify")
    signed = scratch.copy(UNUSED, directory, "signed.dylib")
    unsigned = scratch.copy(UNSIGNED, directory, "unsigned.dylib")
    tampered = scratch.copy(UNUSED, directory, "tampered.dylib")
    with open(tampered, "r+b") as handle:
        handle.seek(0x600)
        byte = handle.read(1)
        handle.seek(0x600)
        handle.write(bytes([byte[0] ^ 0xFF]))
    result = run(machofix, "verify", signed)
    expect(result.returncode == 0, "verify: a validly signed arm64 dylib exits 0", result)
    result = run(machofix, "verify", unsigned)
    expect(result.returncode == 1 and "not signed" in result.stdout + result.stderr,
           "verify: an unsigned arm64 slice fails (exit 1), saying it is not signed", result)
    result = run(machofix, "verify", tampered)
    expect(result.returncode == 1 and "hash mismatch" in result.stdout + result.stderr,
           "verify: a changed page fails (exit 1), naming the mismatch", result)
    result = run(machofix, "verify", os.path.join(directory, "missing.dylib"))
    expect(result.returncode == 2, "verify: a missing file is an error (exit 2)", result)
    result = run(machofix, "verify", signed, unsigned)
    expect(result.returncode == 1, "verify: one failing file of two makes the run fail (exit 1)", result)


def check_statuses(machofix, scratch):
    directory = scratch.directory("check")
    unused = scratch.copy(UNUSED, directory, "unused.dylib")
    clean = scratch.copy(CLEAN, directory, "clean.dylib")
    empty = os.path.join(directory, "empty.dylib")
    open(empty, "wb").close()
    result = run(machofix, "check", unused)
    expect(result.returncode == 1 and "libomp" in result.stdout + result.stderr,
           "check: an unused dependency is a finding (exit 1) naming it", result)
    result = run(machofix, "check", clean, "--allow-prefix", "/opt/llvm-openmp")
    expect(result.returncode == 0, "check: a file with nothing to find passes (exit 0)", result)
    for what, path in (("an empty file", empty), ("a missing file", os.path.join(directory, "missing.dylib"))):
        result = run(machofix, "check", path)
        expect(result.returncode == 2 and "1 file could not be checked" in result.stdout,
               f"check: {what} is an error (exit 2), and the summary says it was not checked", result)
    result = run(machofix, "check", scratch.directory("check_empty_dir"))
    expect(result.returncode == 2 and "no models found under" in result.stderr,
           "check: a directory with no model is an error (exit 2), not a pass", result)
    result = run(machofix, "check", unused, empty)
    expect(result.returncode == 2, "check: an unreadable file among findings still exits 2", result)
    env = dict(os.environ, GITHUB_ACTIONS="true")
    result = run(machofix, "check", unused, env=env)
    annotations = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("::error file=")]
    expect(result.returncode == 1 and annotations and unused in annotations[0] and "libomp" in annotations[0],
           "check under GitHub Actions: each finding is also an ::error annotation naming the file", result)
    result = run(machofix, "check", unused)
    expect("::error" not in result.stdout + result.stderr, "check outside GitHub Actions: no annotations", result)


def backup_is_a_hard_link(machofix, scratch):
    directory = scratch.directory("backup")
    path = scratch.copy(UNUSED, directory, "model.dylib")
    original_inode = os.stat(path).st_ino
    original = state(path)[0]
    result = run(machofix, "prune", "--in-place", "--backup", ".orig", path)
    backup = path + ".orig"
    expect(result.returncode == 0 and os.path.exists(backup), "prune --in-place --backup: the backup exists", result)
    if os.path.exists(backup):
        expect(os.stat(backup).st_ino == original_inode and state(backup)[0] == original,
               "--backup: the backup is the original inode (a hard link), its bytes unchanged")
        expect(os.stat(path).st_ino != original_inode, "--in-place: the repaired file is a new inode")


def backup_of_models(machofix, scratch):
    """--in-place --backup on a .pte, and on the files of a directory walk: each
    replaced original is kept as NAME+SUFFIX, the original inode with its bytes; the
    repaired file is a new inode; a file that does not change gets no backup."""
    directory = scratch.directory("backup_models")
    pte = scratch.pte(directory, "model.pte")
    before = {"model.pte": (state(pte)[0], os.stat(pte).st_ino)}
    result = run(machofix, "prune", "--in-place", "--backup", ".orig", pte)
    backup = pte + ".orig"
    expect(result.returncode == 0 and os.path.exists(backup), "prune --in-place --backup on a .pte: the backup exists", result)
    if os.path.exists(backup):
        expect((state(backup)[0], os.stat(backup).st_ino) == before["model.pte"],
               "--backup on a .pte: the backup is the original inode with the original bytes")
        expect(os.stat(pte).st_ino != before["model.pte"][1] and state(pte)[0] != before["model.pte"][0],
               "--in-place on a .pte: the repaired model is a new inode with new bytes")
    tree = scratch.directory("backup_tree")
    os.makedirs(os.path.join(tree, "sub"))
    files = {"sub/model.pte": scratch.pte(os.path.join(tree, "sub"), "model.pte"),
             "thin.dylib": scratch.copy(UNUSED, tree, "thin.dylib"),
             "clean.dylib": scratch.copy(CLEAN, tree, "clean.dylib")}
    before = {name: (state(path)[0], os.stat(path).st_ino) for name, path in files.items()}
    result = run(machofix, "prune", "--in-place", "--backup", ".orig", tree)
    expect(result.returncode == 0, "prune --in-place --backup on a directory: exits 0", result)
    for name in ("sub/model.pte", "thin.dylib"):
        backup = files[name] + ".orig"
        expect(os.path.exists(backup) and (state(backup)[0], os.stat(backup).st_ino) == before[name]
               and os.stat(files[name]).st_ino != before[name][1],
               f"--backup in a directory walk: {name}'s backup is its original inode and bytes, the file a new inode")
    expect(not os.path.exists(files["clean.dylib"] + ".orig") and state(files["clean.dylib"])[0] == before["clean.dylib"][0]
           and os.stat(files["clean.dylib"]).st_ino == before["clean.dylib"][1],
           "--backup in a directory walk: a file with nothing to change is left as it is, with no backup")


def archive_gate(machofix, scratch):
    """An archive one of whose members cannot be read: check and prune fail (exit 2),
    the error names the archive, the member and the offset, prune writes nothing; a
    finding in a member gives the load command's offset in the member's own bytes."""
    directory = scratch.directory("archive_gate")
    good = scratch.copy(UNUSED, directory, "good.dylib")
    broken = os.path.join(directory, "broken.dylib")
    with open(good, "rb") as source, open(broken, "wb") as target:
        target.write(source.read(100))  # a Mach-O header whose load commands are cut off
    archive = scratch.tar(directory, "models.tar.gz", [good, broken])
    before = state(archive)
    result = run(machofix, "check", archive)
    expect(result.returncode == 2 and f"{archive}: broken.dylib: offset 0x14:" in result.stderr
           and "libomp" in result.stdout, "check on an archive with an unreadable member: exit 2, the member's error "
           "named with its offset, the other member's findings still reported", result)
    out = os.path.join(directory, "out.tar.gz")
    for mode in (["-o", out], ["--in-place"]):
        result = run(machofix, "prune", archive, *mode)
        expect(result.returncode == 2 and "broken.dylib" in result.stderr and not os.path.exists(out)
               and state(archive) == before and sorted(os.listdir(directory)) == ["broken.dylib", "good.dylib", "models.tar.gz"],
               f"prune {' '.join(mode)} on it: exit 2, nothing written, the archive untouched", result)
    clean_archive = scratch.tar(directory, "good.tar.gz", [good])
    document = json.loads(run(machofix, "check", clean_archive, "--json", "-").stdout)
    sarif_path = os.path.join(directory, "findings.sarif")
    run(machofix, "check", clean_archive, "--sarif", sarif_path)
    sarif = json.load(open(sarif_path))["runs"][0]["results"]
    with open(good, "rb") as handle:
        member_bytes = handle.read()
    for finding, result_entry in zip(document["findings"], sarif):
        at = finding["member_offset"]
        command = struct.unpack_from("<II", member_bytes, at) if at is not None else (0, 0)
        name_at = at + struct.unpack_from("<I", member_bytes, at + 8)[0] if at is not None else 0
        named = member_bytes[name_at:member_bytes.index(b"\0", name_at)].decode() if at is not None else ""
        expect(finding["offset"] is None and finding["member"] == "good.dylib" and command[0] == 0xC
               and named == finding["dylib"],
               f"JSON: a finding in a member ({finding['rule']}) has no archive offset, and its member_offset is the "
               f"LC_LOAD_DYLIB naming {finding['dylib']} in the member")
        properties = result_entry["properties"]
        expect(properties.get("member") == "good.dylib" and properties.get("memberOffset") == at
               and "region" not in result_entry["locations"][0]["physicalLocation"],
               "SARIF: the same finding carries member and memberOffset, and no region in the archive")


def signing_options(machofix, scratch):
    directory = scratch.directory("signing")
    unsigned = scratch.copy(UNSIGNED, directory, "unsigned.dylib")
    signed = os.path.join(directory, "signed.dylib")
    result = run(machofix, "sign", unsigned, "-o", signed, "--identifier", "com.example.model")
    expect(result.returncode == 0, "sign --identifier: exits 0", result)
    if result.returncode == 0:
        report = json.loads(run(machofix, "inspect", signed, "--json", "-").stdout)
        identifier = report["files"][0]["macho"]["slices"][0]["signature"]["identifier"]
        expect(identifier == "com.example.model", f"sign --identifier: the signature's identifier is it ({identifier})")
        expect(all(status == "valid" for status, _ in codesign_check.check_file(signed)),
               "sign: the new signature is valid for the independent checker")
    pruned = os.path.join(directory, "pruned.dylib")
    renamed = os.path.join(directory, "renamed.dylib")
    result = run(machofix, "sign", signed, "-o", renamed, "--identifier", "com.example.other")
    expect(result.returncode == 2 and "cannot change the identifier of an existing signature (it is 'com.example.model')"
           in result.stderr and "keeps the signature's CodeDirectory" in result.stderr and not os.path.exists(renamed),
           "sign --identifier on a signed file: refused, saying it cannot and why; nothing written", result)
    result = run(machofix, "sign", signed, "-o", renamed, "--identifier", "com.example.model")
    expect(result.returncode == 0, "sign --identifier naming the identifier it already has: exits 0", result)
    result = run(machofix, "prune", unsigned, "-o", pruned)
    expect(result.returncode == 0 and all(status == "unsigned" for status, _ in codesign_check.check_file(pruned)),
           "prune without --sign leaves an unsigned slice unsigned", result)
    result = run(machofix, "prune", unsigned, "-o", pruned, "--sign")
    expect(result.returncode == 0 and all(status == "valid" for status, _ in codesign_check.check_file(pruned)),
           "prune --sign: an unsigned slice comes out validly signed", result)


def archive_member_signed_as_alone(machofix, scratch):
    """prune --sign names a new signature by the member's own name: an archive member's
    output equals the same file pruned on its own, byte for byte (an executable has no
    install name to take the identifier from)."""
    directory = scratch.directory("member_identifier")
    tool = scratch.copy(EXECUTABLE_UNSIGNED, directory, "tool")
    alone = os.path.join(directory, "alone")
    os.makedirs(alone)
    result = run(machofix, "prune", tool, "-o", os.path.join(alone, "tool"), "--sign")
    expect(result.returncode == 0, "prune --sign on an unsigned executable: exits 0", result)
    with open(os.path.join(alone, "tool"), "rb") as handle:
        expected = handle.read()
    archives = {"tar.gz": os.path.join(directory, "tools.tar.gz"), "zip": os.path.join(directory, "tools.zip")}
    with tarfile.open(archives["tar.gz"], "w:gz") as archive:
        archive.add(scratch.copy(UNUSED, directory, "other.dylib"), arcname="lib/other.dylib")
        archive.add(tool, arcname="bin/tool")
    with zipfile.ZipFile(archives["zip"], "w") as archive:
        archive.write(os.path.join(directory, "other.dylib"), "lib/other.dylib")
        archive.write(tool, "bin/tool")
    for kind, path in archives.items():
        out = os.path.join(directory, "out." + kind)
        result = run(machofix, "prune", path, "-o", out, "--sign")
        if kind == "zip":
            member = zipfile.ZipFile(out).read("bin/tool") if result.returncode == 0 else None
        else:
            member = tarfile.open(out).extractfile("bin/tool").read() if result.returncode == 0 else None
        expect(member == expected, f"prune --sign in a .{kind}: the member bin/tool is the standalone output, byte for byte"
               " (its signature's identifier is 'tool', not the temporary file's name)", result)


def policy_options(machofix, scratch):
    directory = scratch.directory("policy")
    path = scratch.copy(UNUSED, directory, "model.dylib")
    for flag, glob, removed in (("--keep", "*libomp*", 0), ("--keep", "*libfoo*", 1), ("--only", "*libomp*", 1),
                                ("--only", "*libnothing*", 0)):
        result = run(machofix, "prune", "--dry-run", flag, glob, path, "--json", "-")
        count = json.loads(result.stdout)["summary"]["dylibs_removable"] if result.returncode == 0 else None
        expect(count == removed, f"prune {flag} '{glob}': {removed} dylib(s) to remove (got {count})", result)


def fat_slices(path):
    """(cputype, offset, size, align) of each slice of a universal file, and its size."""
    with open(path, "rb") as handle:
        data = handle.read()
    magic, count = struct.unpack_from(">II", data, 0)
    wide = magic == 0xCAFEBABF
    slices = []
    for index in range(count):
        if wide:
            cputype, _, offset, length, align = struct.unpack_from(">iiQQI", data, 8 + 32 * index)
        else:
            cputype, _, offset, length, align = struct.unpack_from(">iiIII", data, 8 + 20 * index)
        slices.append((cputype, offset, length, align))
    return slices, len(data)


def universal_layout(machofix, scratch):
    """A slice that grows (a signature added to the unsigned x86_64 slice) makes the
    universal file be laid out again: every slice at a multiple of the alignment its
    header entry gives (dyld and the kernel map it so), none overlapping another or
    running past the end, and the result verifies."""
    directory = scratch.directory("universal_layout")
    for fixture in ("universal_fat_dyldinfo.in", UNIVERSAL):
        source = scratch.copy(fixture, directory, fixture)
        output = os.path.join(directory, fixture + ".signed")
        result = run(machofix, "sign", source, "-o", output)
        expect(result.returncode == 0, f"sign of the universal {fixture}: exits 0", result)
        if result.returncode != 0:
            continue
        before, _ = fat_slices(source)
        after, size = fat_slices(output)
        expect([entry[2] for entry in after] != [entry[2] for entry in before],
               f"sign of the universal {fixture}: a slice grew (the case this checks)")
        misaligned = [entry for entry in after if entry[1] % (1 << entry[3])]
        expect(not misaligned, f"sign of the universal {fixture}: every slice aligned as its header says "
                               f"(misaligned: {misaligned})")
        ranges = sorted((offset, offset + length) for _, offset, length, _ in after)
        expect(all(end <= start for (_, end), (start, _) in zip(ranges, ranges[1:])) and ranges[-1][1] <= size,
               f"sign of the universal {fixture}: slices neither overlap nor run past the end ({ranges}, {size})")
        result = run(machofix, "verify", output)
        expect(result.returncode == 0, f"sign of the universal {fixture}: the output verifies", result)


def main():
    machofix, pte_writer, fixtures, work = [os.path.abspath(a) for a in sys.argv[1:5]]
    scratch = Scratch(work, fixtures, pte_writer)
    for test in (dry_run_writes_nothing, verify_statuses, check_statuses, backup_is_a_hard_link, backup_of_models,
                 archive_gate, signing_options, archive_member_signed_as_alone, policy_options, universal_layout):
        test(machofix, scratch)
    for failure in failures:
        print("FAIL:", failure)
    print(f"promises: {len(failures)} broken")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
