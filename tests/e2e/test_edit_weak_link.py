#!/usr/bin/env python3
"""`machofix edit --weak-link GLOB` against the linker's own -weak_library.

The cases of tests/weak_link (each linked twice by ld64.lld-16 from one object: `.in`
with the dependency linked normally, `.ref` with it linked by -weak_library) are
edited by the real command, thin, as universal files (llvm-lipo-16) and as the blob
of a .pte (tests/pte/pte_writer wrap); the output (each slice, the extracted blob)
must equal the relink as LLVM's tools read it (dylib commands, every import and its
weak mark, the lazy-bind flags: tests/weak_link/test_weak_link.py's weak_view) and
byte for byte but LC_UUID and the signature blob; the signature must verify
(tests/support/codesign_check.py), a .pte's keys are renewed. Then: a second
identical edit is byte-identical with every record 'already'; archive members are
edited as on their own; --change OLD NEW with --weak-link matching NEW (and not
OLD) equals the relink renamed by llvm-install-name-tool-16; a re-exported, a
flat-namespace and an upward dependency are refused naming the slice, the dylib and
why, nothing written; a glob that matches nothing is an error for a named file and
a note in a directory walk; --dry-run writes nothing.
Usage: test_edit_weak_link.py MACHOFIX PTE_WRITER WORK_DIR
"""
import dataclasses
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "weak_link"))
sys.path.insert(0, str(HERE.parent / "support"))
sys.dont_write_bytecode = True

import codesign_check          # noqa: E402
import test_weak_link as relink  # noqa: E402  (the relink cases and LLVM's reading)

THIN = ["weak_link_arm64_dyldinfo", "weak_link_arm64_chained", "weak_link_x86_64_dyldinfo", "weak_link_x86_64_chained",
        "aoti_metal_arm64_dyldinfo", "aoti_metal_x86_64_chained", "weakdef_arm64_chained", "many_dylibs_arm64_dyldinfo"]
UNIVERSAL = {"dyldinfo": ["weak_link_arm64_dyldinfo", "weak_link_x86_64_dyldinfo"],
             "chained": ["weak_link_arm64_chained", "weak_link_x86_64_chained"]}
PTE = ["weak_link_arm64_chained", "aoti_metal_arm64_dyldinfo"]

LC_LOAD_UPWARD_DYLIB = 0x80000023
failures = []


def expect(condition, what, result=None):
    if not condition and result is not None:
        what += f"\n    exit {result.returncode}; stdout: {result.stdout.strip()[:600]}; stderr: {result.stderr.strip()[:600]}"
    print(("ok   " if condition else "FAIL ") + what.splitlines()[0])
    if not condition:
        failures.append(what)


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300)


def records(document, blob=False):
    """[(kind, old, new, status)] of every slice's edits of the first file."""
    found = document["files"][0]
    machos = [b["macho"] for b in found["pte"]["blobs"]] if blob else [found["macho"]]
    return [(e["kind"], e["old"], e["new"], e["status"]) for m in machos for s in m["slices"] for e in s["edits"]]


def signature_verifies(path):
    statuses = [status for status, _ in codesign_check.check_file(path)]
    return all(status in ("valid", "unsigned") for status in statuses) and "valid" in statuses


class Cases:
    def __init__(self, work):
        self.work = work
        self.linker = relink.Linker(work)
        self.by_name = {case.name: case for case in relink.cases()}
        self.linked = {}

    def pair(self, name):
        """(.in, .ref, the globs naming the weak dylibs)"""
        if name not in self.linked:
            case = self.by_name[name]
            globs = [self.linker.install_name(key).rsplit("/", 1)[-1] for key in case.weak]
            self.linked[name] = (self.linker.link(case, False), self.linker.link(case, True), globs)
        return self.linked[name]

    def install_names(self, name):
        return [self.linker.install_name(key) for key in self.by_name[name].weak]


def same_as_relink(label, out, reference, original):
    view_out, view_ref, view_in = (relink.weak_view(p) for p in (out, reference, original))
    expect(relink.differences(view_in, view_ref), f"{label}: LLVM's tools tell the input from the relink (the case tests something)")
    problems = relink.differences(view_out, view_ref)
    expect(not problems, f"{label}: dylib kinds and weak-import marks equal the -weak_library relink (LLVM's tools)\n    "
           + "\n    ".join(problems))
    diff = relink.first_difference(relink.masked(Path(out).read_bytes()), relink.masked(Path(reference).read_bytes()))
    expect(diff is None, f"{label}: every byte but LC_UUID and the signature equals the relink ({diff})")


def thin(machofix, cases, work):
    for name in THIN:
        source, reference, globs = cases.pair(name)
        out, again = work / f"{name}.out", work / f"{name}.again"
        weak_args = [a for glob in globs for a in ("--weak-link", glob)]
        result = run(machofix, "edit", source, "-o", out, *weak_args, "--json", "-")
        expect(result.returncode == 0, f"{name}: edited", result)
        if result.returncode != 0:
            continue
        applied = [("weak-link", n, "", "applied") for n in cases.install_names(name)]
        expect(sorted(records(json.loads(result.stdout))) == sorted(applied),
               f"{name}: JSON: a weak-link record per dylib (old = its install name, applied)", result)
        same_as_relink(name, out, reference, source)
        if cases.by_name[name].arch == "arm64":  # lld signs arm64 output only
            expect(signature_verifies(out), f"{name}: the output's signature verifies (codesign_check.py)")
        result = run(machofix, "edit", out, "-o", again, *weak_args, "--json", "-")
        statuses = {r[3] for r in records(json.loads(result.stdout))} if result.returncode == 0 else set()
        expect(result.returncode == 0 and again.read_bytes() == out.read_bytes() and statuses == {"already"},
               f"{name}: a second identical weak link: byte-identical, every record 'already'", result)


def universal(machofix, cases, work):
    for kind, names in UNIVERSAL.items():
        pairs = [cases.pair(name) for name in names]
        fat_in, fat_out = work / f"universal_{kind}.in", work / f"universal_{kind}.out"
        subprocess.run(["llvm-lipo-16", "-create", *[str(p[0]) for p in pairs], "-output", str(fat_in)], check=True)
        result = run(machofix, "edit", fat_in, "-o", fat_out, "--weak-link", pairs[0][2][0])
        expect(result.returncode == 0, f"universal {kind}: edited", result)
        if result.returncode != 0:
            continue
        expect(signature_verifies(fat_out), f"universal {kind}: every slice's signature verifies (codesign_check.py)")
        for name, (source, reference, _) in zip(names, pairs):
            arch = cases.by_name[name].arch
            sliced = work / f"universal_{kind}.{arch}"
            subprocess.run(["llvm-lipo-16", "-thin", arch, str(fat_out), "-output", str(sliced)], check=True)
            same_as_relink(f"universal {kind} slice {arch}", sliced, reference, source)


def blob_of(machofix, pte):
    document = json.loads(run(machofix, "inspect", pte, "--json", "-").stdout)
    [blob] = document["files"][0]["pte"]["blobs"]
    return Path(pte).read_bytes()[blob["offset"]:blob["offset"] + blob["size"]]


def pte(machofix, pte_writer, cases, work):
    for name in PTE:
        source, reference, globs = cases.pair(name)
        model, edited = work / f"{name}.pte", work / f"{name}.edited.pte"
        subprocess.run([str(pte_writer), "wrap", str(source), str(model), "hash"], check=True, capture_output=True)
        weak_args = [a for glob in globs for a in ("--weak-link", glob)]
        result = run(machofix, "edit", model, "-o", edited, *weak_args, "--json", "-")
        expect(result.returncode == 0, f"{name}.pte: edited", result)
        if result.returncode != 0:
            continue
        document = json.loads(result.stdout)
        [blob] = document["files"][0]["pte"]["blobs"]
        expect(blob["key_renewals"] and blob["key_renewals"][0]["new_key"].startswith(blob["new_sha256"]),
               f"{name}.pte: the blob's content-hash key is renewed to its new SHA-256")
        extracted = work / f"{name}.pte.blob"
        extracted.write_bytes(blob_of(machofix, edited))
        same_as_relink(f"{name}.pte blob", extracted, reference, source)
        expect(signature_verifies(extracted), f"{name}.pte: the blob's signature verifies (codesign_check.py)")
        again = work / f"{name}.again.pte"
        result = run(machofix, "edit", edited, "-o", again, *weak_args, "--json", "-")
        statuses = {r[3] for r in records(json.loads(result.stdout), blob=True)} if result.returncode == 0 else set()
        expect(result.returncode == 0 and again.read_bytes() == edited.read_bytes() and statuses == {"already"},
               f"{name}.pte: a second identical weak link: byte-identical, every record 'already'", result)


def archive(machofix, pte_writer, cases, work):
    """A tar with a .pte and a thin image: each member weak-linked as on its own."""
    source, _, globs = cases.pair("weak_link_arm64_chained")
    model, tar_in, tar_out = work / "member.pte", work / "models.tar", work / "models.out.tar"
    subprocess.run([str(pte_writer), "wrap", str(source), str(model), "hash"], check=True, capture_output=True)
    with tarfile.open(tar_in, "w") as tar:
        tar.add(model, "m/model.pte")
        tar.add(source, "m/model.dylib")
    weak_args = [a for glob in globs for a in ("--weak-link", glob)]
    result = run(machofix, "edit", tar_in, "-o", tar_out, *weak_args)
    expect(result.returncode == 0, "archive: edited", result)
    if result.returncode != 0:
        return
    alone_pte, alone_dylib = work / "member.alone.pte", work / "member.alone.dylib"
    run(machofix, "edit", model, "-o", alone_pte, *weak_args)
    run(machofix, "edit", source, "-o", alone_dylib, *weak_args)
    with tarfile.open(tar_out) as tar:
        members = tar.extractfile("m/model.pte").read(), tar.extractfile("m/model.dylib").read()
    expect(members == (alone_pte.read_bytes(), alone_dylib.read_bytes()) and members[1] != source.read_bytes(),
           "archive: each member is byte-identical to the file weak-linked on its own")


def with_change(machofix, cases, work):
    """--change OLD NEW --weak-link GLOB: the glob matches NEW, the name after --change."""
    base = cases.by_name["weak_link_arm64_chained"]
    case = dataclasses.replace(base, name="change_then_weak", weak=["libfoo"])  # libfoo supplies 3 imports
    old, new = cases.linker.install_name("libfoo"), "@loader_path/libfoo.dylib"
    source, reference = cases.linker.link(case, False), cases.linker.link(case, True)
    renamed = work / "change_then_weak.ref"
    shutil.copyfile(reference, renamed)
    subprocess.run(["llvm-install-name-tool-16", "-change", old, new, str(renamed)], check=True)
    out = work / "change_then_weak.out"
    result = run(machofix, "edit", source, "-o", out, "--change", old, new, "--weak-link", "@loader_path/*", "--json", "-")
    expect(result.returncode == 0 and records(json.loads(result.stdout)) ==
           [("change", old, new, "applied"), ("weak-link", new, "", "applied")],
           "--change then --weak-link NEW: both applied, the weak link names the new install name", result)
    if result.returncode == 0:
        view_out, view_renamed = relink.weak_view(out), relink.weak_view(renamed)
        problems = relink.differences(view_out, view_renamed)
        expect(not problems and any(i[2] == new and i[3] for i in view_out["imports"]),
               "--change + --weak-link: equal to the -weak_library relink renamed by llvm-install-name-tool-16 "
               "(imports from NEW marked weak)\n    " + "\n    ".join(problems))
        expect(signature_verifies(out), "--change + --weak-link: the signature verifies")
    old_glob = work / "change_old_glob.out"
    result = run(machofix, "edit", source, "-o", old_glob, "--change", old, new, "--weak-link", old)
    expect(result.returncode == 2 and f"--weak-link '{old}': no dependent dylib's install name matches" in result.stderr
           and not old_glob.exists(), "--change then --weak-link OLD: OLD is gone, an error, nothing written", result)


def refusals_and_notes(machofix, cases, work):
    source, _, _ = cases.pair("reexport_arm64_chained")
    out = work / "reexport.out"
    result = run(machofix, "edit", source, "-o", out, "--weak-link", "libreexp*")
    expect(result.returncode == 2 and "slice arm64" in result.stderr and "re-exported (LC_REEXPORT_DYLIB)" in result.stderr
           and "cannot weak-link '" in result.stderr and not out.exists(),
           "a re-exported dependency: refused naming the slice, the dylib and why, exit 2, nothing written", result)
    # Flat namespace (lld links it; imports then name no library) and an upward
    # dependency (lld-16 cannot link one: the command word of an unsigned x86_64 relink's
    # LC_LOAD_DYLIB made LC_LOAD_UPWARD_DYLIB).
    flat_case = dataclasses.replace(cases.by_name["weak_link_arm64_chained"], name="flat_arm64_chained",
                                    flags=["-flat_namespace"])
    flat = cases.linker.link(flat_case, False)
    plain, _, _ = cases.pair("weak_link_x86_64_chained")
    upward = work / "upward_x86_64_chained"
    data = bytearray(plain.read_bytes())
    [offset] = [off for off, _, name in relink.machoraw.dylib_commands(data) if name == "@rpath/libfoo.dylib"]
    struct.pack_into("<I", data, offset, LC_LOAD_UPWARD_DYLIB)
    upward.write_bytes(data)
    for label, path, arch, why in [("flat namespace", flat, "arm64", "flat namespace (MH_TWOLEVEL clear)"),
                                   ("an upward dependency", upward, "x86_64", "upward dependency (LC_LOAD_UPWARD_DYLIB)")]:
        result = run(machofix, "edit", path, "-o", out, "--weak-link", "libfoo.dylib")
        expect(result.returncode == 2 and f"slice {arch}: --weak-link 'libfoo.dylib': cannot weak-link "
               f"'@rpath/libfoo.dylib' (dylib ordinal 3): {why}" in result.stderr and not out.exists(),
               f"{label}: refused naming the slice, the dylib and why, exit 2, nothing written", result)
    copy = work / "reexport.inplace"
    shutil.copyfile(source, copy)
    result = run(machofix, "edit", copy, "--in-place", "--change", "/usr/lib/libSystem.B.dylib", "/x/libSystem.B.dylib",
                 "--weak-link", "libreexp*")
    expect(result.returncode == 2 and copy.read_bytes() == source.read_bytes() and sorted(os.listdir(work)).count(copy.name) == 1,
           "a refusal with another edit beside it: --in-place leaves the input untouched", result)

    image, _, _ = cases.pair("weak_link_arm64_chained")
    out = work / "nomatch.out"
    result = run(machofix, "edit", image, "-o", out, "--weak-link", "libnothere*")
    expect(result.returncode == 2 and "--weak-link 'libnothere*': no dependent dylib's install name matches 'libnothere*'"
           in result.stderr and str(image) in result.stderr and not out.exists(),
           "a glob that matches nothing in a named file: an error naming the file and the glob, nothing written", result)
    tree = work / "tree"
    tree.mkdir()
    shutil.copyfile(image, tree / "a.dylib")
    result = run(machofix, "edit", tree, "--in-place", "--weak-link", "libnothere*", "--json", "-")
    edits = records(json.loads(result.stdout)) if result.returncode == 0 else []
    expect(result.returncode == 0 and edits == [("weak-link", "libnothere*", "", "no match")]
           and (tree / "a.dylib").read_bytes() == image.read_bytes(),
           "a glob that matches nothing in a directory walk: a note ('no match'), the file unchanged", result)
    text = run(machofix, "edit", tree, "--dry-run", "--weak-link", "libnothere*")
    expect(text.returncode == 0 and "weak-link libnothere* (note: matches nothing in this file)" in text.stdout,
           "directory walk: the text report says so", text)

    dry = work / "dry.dylib"
    shutil.copyfile(image, dry)
    result = run(machofix, "edit", dry, "--dry-run", "--weak-link", "libfoo.dylib")
    expect(result.returncode == 0 and "edit: weak-link @rpath/libfoo.dylib" in result.stdout
           and dry.read_bytes() == image.read_bytes(), "--dry-run: the text report's weak-link line, nothing written", result)


def main():
    machofix, pte_writer = (Path(a).resolve() for a in sys.argv[1:3])
    work = Path(sys.argv[3]).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cases = Cases(work)
    try:
        thin(machofix, cases, work)
        universal(machofix, cases, work)
        pte(machofix, pte_writer, cases, work)
        archive(machofix, pte_writer, cases, work)
        with_change(machofix, cases, work)
        refusals_and_notes(machofix, cases, work)
    except (relink.Failure, relink.imports.ReaderError) as exc:
        expect(False, f"a relink or LLVM's reading failed: {exc}")
    if failures:
        print(f"\n{len(failures)} failure(s)")
        for failure in failures:
            print(" -", failure)
        return 1
    print("\nall weak-link edit checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
