#!/usr/bin/env python3
"""`machofix edit`: install names and rpaths against llvm-install-name-tool-16.

For every edit (--change with an exact name and a glob, --id, --add-rpath, --rpath,
--delete-rpath, all of them at once) on linker-made fixtures (dyld-info and chained,
arm64 and x86_64, signed and unsigned), universal files (fat and fat64), a .pte's
Mach-O blob and an archive member: the output's load commands, as `llvm-otool-16 -l`
prints them, equal those of llvm-install-name-tool-16 applied to the same image, but
for the signature's size (install_name_tool makes a signature of its own) and the
__LINKEDIT size that follows from it; `machofix verify` passes the output and
llvm-objdump-16 reads it. Then: header padding exhausted (refused with the room
needed and available, nothing written; llvm-install-name-tool-16 writes a file its
own otool cannot read), each edit that matches nothing and a duplicate rpath (exit 2,
nothing written; a note in a directory walk), --dry-run, a second identical edit
(unchanged, byte-identical), --in-place with --backup, and the JSON report's edits.
Usage: test_edit.py MACHOFIX PTE_WRITER FIXTURE_DIR WORK_DIR [SAMPLES_DIR]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

LIBOMP = "/opt/llvm-openmp/lib/libomp.dylib"
THIN = ["aoti_metal_arm64_chained", "aoti_metal_arm64_dyldinfo", "aoti_metal_x86_64_chained",
        "aoti_metal_x86_64_dyldinfo", "aoti_metal_x86_64_dyldinfo_signed", "aoti_metal_arm64_dyldinfo_unsigned",
        "aoti_metal_arm64_chained_headerpad", "aoti_metal_x86_64_dyldinfo_headerpad"]
ROOMY = "aoti_metal_x86_64_dyldinfo_headerpad"  # -headerpad 0x400: room for several edits
UNSIGNED_ARM64 = "aoti_metal_arm64_dyldinfo_unsigned"  # stays unsigned: verify says so, nothing else
UNIVERSAL = ["universal_fat_dyldinfo", "universal_fat64_chained"]

# (name, machofix's edits, install_name_tool's options, a step before: an rpath both tools start from)
EDITS = [
    ("change", ["--change", LIBOMP, "@rpath/libomp.dylib"], ["-change", LIBOMP, "@rpath/libomp.dylib"], None),
    ("change-glob", ["--change", "*libomp*", "@rpath/libomp.dylib"], ["-change", LIBOMP, "@rpath/libomp.dylib"], None),
    ("change-longer", ["--change", "/usr/lib/libc++.1.dylib", "/usr/local/lib/libc++.1.dylib"],
     ["-change", "/usr/lib/libc++.1.dylib", "/usr/local/lib/libc++.1.dylib"], None),
    ("id", ["--id", "@rpath/model.so"], ["-id", "@rpath/model.so"], None),
    ("add-rpath", ["--add-rpath", "@loader_path/../lib"], ["-add_rpath", "@loader_path/../lib"], None),
    ("rpath", ["--rpath", "/b/lib", "@loader_path"], ["-rpath", "/b/lib", "@loader_path"], "/b/lib"),
    ("delete-rpath", ["--delete-rpath", "/b/*"], ["-delete_rpath", "/b/lib"], "/b/lib"),
    ("all", ["--change", LIBOMP, "@rpath/libomp.dylib", "--id", "@rpath/m.so", "--add-rpath", "@loader_path",
             "--delete-rpath", "/b/lib"],
     ["-change", LIBOMP, "@rpath/libomp.dylib", "-id", "@rpath/m.so", "-add_rpath", "@loader_path",
      "-delete_rpath", "/b/lib"], "/b/lib"),
]

failures = []


def expect(condition, what, result=None):
    if not condition and result is not None:
        what += f"\n    exit {result.returncode}; stdout: {result.stdout.strip()[:600]}; stderr: {result.stderr.strip()[:600]}"
    print(("ok   " if condition else "FAIL ") + what.splitlines()[0])
    if not condition:
        failures.append(what)


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300)


def read(path):
    with open(path, "rb") as handle:
        return handle.read()


def write(path, data):
    with open(path, "wb") as handle:
        handle.write(data)


def load_commands(path, arch=None):
    """`llvm-otool-16 -l` as a list of commands, each a list of "key value" lines; the
    signature's datasize and __LINKEDIT's sizes are set apart (see compare)."""
    result = run("llvm-otool-16", *(["-arch", arch] if arch else []), "-l", path)
    if result.returncode != 0:
        return None
    commands = []
    for line in result.stdout.splitlines()[1:]:
        if line.startswith("Load command"):
            commands.append([])
        elif commands:
            commands[-1].append(" ".join(line.split()))
    return commands


def normalized(commands):
    """Everything but the signature's size and the __LINKEDIT sizes, plus __LINKEDIT's
    file size less the signature's (what both tools must agree on)."""
    kept, linkedit, signature = [], None, None
    for command in commands:
        lines = []
        is_linkedit = "segname __LINKEDIT" in command
        for line in command:
            key, _, value = line.partition(" ")
            if is_linkedit and key in ("vmsize", "filesize"):
                linkedit = int(value, 0) if key == "filesize" else linkedit
                continue
            if "cmd LC_CODE_SIGNATURE" in command and key == "datasize":
                signature = int(value, 0)
                continue
            lines.append(line)
        kept.append(lines)
    return kept, (linkedit - signature if linkedit is not None and signature is not None else linkedit)


def same_commands(mine, reference):
    return mine is not None and reference is not None and normalized(mine) == normalized(reference)


def llvm_edit(source, target, options):
    shutil.copyfile(source, target)
    return run("llvm-install-name-tool-16", *options, target)


def with_rpath(machofix, source, target, rpath):
    """The image with an LC_RPATH `rpath` added by machofix (both tools then start from it)."""
    result = run(machofix, "edit", source, "-o", target, "--add-rpath", rpath)
    assert result.returncode == 0, result.stderr
    return target


def readable(path):
    return run("llvm-objdump-16", "--macho", "--private-headers", path).returncode == 0


def normalized_image(fixtures, work, name):
    """The fixture as llvm-objcopy-16 lays it out: install_name_tool rewrites LINKEDIT
    as well (it drops the padding before lld's string table, so stroff moves), which
    is its writer's habit, not the edit's. Both tools start from this copy."""
    target = os.path.join(work, name + ".norm")
    subprocess.run(["llvm-objcopy-16", os.path.join(fixtures, name + ".in"), target], check=True, capture_output=True)
    return target


def verifies(machofix, name, path):
    result = run(machofix, "verify", path)
    if name == UNSIGNED_ARM64:  # unsigned in, unsigned out (edit signs with --sign only)
        return result.returncode == 1 and result.stdout.count("not signed") == 1, result
    return result.returncode == 0, result


def references(machofix, fixtures, work):
    for name in THIN + UNIVERSAL:
        source = normalized_image(fixtures, work, name)
        archs = ["arm64", "x86_64"] if name in UNIVERSAL else [None]
        for edit, ours, theirs, rpath in EDITS:
            start = with_rpath(machofix, source, os.path.join(work, f"{name}.{edit}.start"), rpath) if rpath else source
            mine, reference = os.path.join(work, f"{name}.{edit}.out"), os.path.join(work, f"{name}.{edit}.ref")
            result = run(machofix, "edit", start, "-o", mine, *ours)
            made = llvm_edit(start, reference, theirs)
            if result.returncode != 0 or made.returncode != 0:
                expect(False, f"{name}: {edit}: both tools edit it", result if result.returncode else made)
                continue
            equal = all(same_commands(load_commands(mine, arch), load_commands(reference, arch)) for arch in archs)
            expect(equal, f"{name}: {edit}: load commands equal llvm-install-name-tool-16's")
            verified, result = verifies(machofix, name, mine)
            expect(verified and readable(mine),
                   f"{name}: {edit}: machofix verify passes and llvm-objdump-16 reads the output", result)


def weak_dependency(machofix, fixtures, work):
    """--change renames a weak-linked dependency (LC_LOAD_WEAK_DYLIB) as it renames a
    plain one, as llvm-install-name-tool does, and keeps it weak."""
    name = "contract_weak_x86_64_dyldinfo"  # libomp linked with -weak_library
    source = normalized_image(fixtures, work, name)
    for old, new in (("@rpath/libomp.dylib", "@rpath/libomp5.dylib"), ("*libomp*", "@loader_path/libomp.dylib")):
        mine, reference = os.path.join(work, f"{name}.weak.out"), os.path.join(work, f"{name}.weak.ref")
        for path in (mine, reference):
            if os.path.exists(path):
                os.remove(path)
        result = run(machofix, "edit", source, "-o", mine, "--change", old, new)
        made = llvm_edit(source, reference, ["-change", "@rpath/libomp.dylib", new])
        commands = load_commands(mine) if result.returncode == 0 else None
        weak = [c for c in commands or [] if "cmd LC_LOAD_WEAK_DYLIB" in c]
        expect(result.returncode == 0 and made.returncode == 0 and same_commands(commands, load_commands(reference))
               and len(weak) == 1 and f"name {new} (offset 24)" in weak[0],
               f"{name}: --change {old} {new} renames the weak dependency, kept weak, as llvm-install-name-tool-16 does",
               result)


def blob_of(machofix, pte):
    """The Mach-O blob of a .pte, as inspect's JSON places it."""
    document = json.loads(run(machofix, "inspect", pte, "--json", "-").stdout)
    [blob] = document["files"][0]["pte"]["blobs"]
    return read(pte)[blob["offset"]:blob["offset"] + blob["size"]], blob


def pte_and_archive(machofix, pte_writer, fixtures, work):
    image = normalized_image(fixtures, work, "aoti_metal_arm64_chained_headerpad")
    model = os.path.join(work, "model.pte")
    subprocess.run([pte_writer, "wrap", image, model, "hash"], check=True, capture_output=True)
    edits = ["--change", "*libomp*", "@rpath/libomp.dylib", "--add-rpath", "@loader_path"]
    edited = os.path.join(work, "model.edited.pte")
    result = run(machofix, "edit", model, "-o", edited, *edits, "--json", "-")
    expect(result.returncode == 0, ".pte: edited", result)
    if result.returncode != 0:
        return
    document = json.loads(result.stdout)
    [blob] = document["files"][0]["pte"]["blobs"]
    expect(blob["key_renewals"] and blob["key_renewals"][0]["new_key"].startswith(blob["new_sha256"]),
           ".pte: the blob's content-hash key is renewed to its new SHA-256")
    slice_edits = blob["macho"]["slices"][0]["edits"]
    expect([(e["kind"], e["old"], e["new"], e["status"]) for e in slice_edits] ==
           [("change", LIBOMP, "@rpath/libomp.dylib", "applied"), ("add-rpath", "", "@loader_path", "applied")],
           ".pte: the JSON report lists the edits applied (kind, old, new, status)")
    data, _ = blob_of(machofix, edited)
    write(os.path.join(work, "model.blob"), data)
    reference = os.path.join(work, "model.blob.ref")
    llvm_edit(image, reference, ["-change", LIBOMP, "@rpath/libomp.dylib", "-add_rpath", "@loader_path"])
    expect(same_commands(load_commands(os.path.join(work, "model.blob")), load_commands(reference)),
           ".pte: the extracted blob's load commands equal llvm-install-name-tool-16's on the image")
    expect(run(machofix, "verify", edited).returncode == 0, ".pte: machofix verify passes the output")
    again = os.path.join(work, "model.again.pte")
    result = run(machofix, "edit", edited, "-o", again, *edits, "--json", "-")
    statuses = [e["status"] for e in json.loads(result.stdout)["files"][0]["pte"]["blobs"][0]["macho"]["slices"][0]["edits"]] \
        if result.returncode == 0 else []
    expect(result.returncode == 0 and read(again) == read(edited) and statuses == ["already", "already"],
           ".pte: a second identical edit: unchanged, byte-identical, every edit 'already'", result)

    # An archive with the .pte and a thin image: each member edited as on its own.
    archive, out = os.path.join(work, "models.tar"), os.path.join(work, "models.edited.tar")
    with tarfile.open(archive, "w") as tar:
        tar.add(model, "m/model.pte")
        tar.add(image, "m/model.dylib")
    result = run(machofix, "edit", archive, "-o", out, *edits)
    expect(result.returncode == 0, "archive: edited", result)
    if result.returncode == 0:
        with tarfile.open(out) as tar:
            pte_member = tar.extractfile("m/model.pte").read()
            dylib_member = tar.extractfile("m/model.dylib").read()
        thin = os.path.join(work, "model.dylib.edited")
        run(machofix, "edit", image, "-o", thin, *edits)
        expect(pte_member == read(edited) and dylib_member == read(thin),
               "archive: each member is byte-identical to the file edited on its own")


def blobs_of(machofix, path):
    """[(offset, size, blob report)] of every Mach-O blob of a .pte/.ptd."""
    result = run(machofix, "inspect", path, "--json", "-")
    return [(b["offset"], b["size"], b) for b in json.loads(result.stdout)["files"][0]["pte"]["blobs"]]


def pte_matrix(machofix, pte_writer, work, samples):
    """Every .pte/.ptd of the writer's matrix (tests/pte/make_blobs.sh images) and of
    ExecuTorch's samples: each edited blob is byte-identical to the same edit of the
    extracted blob as a file of its own, whose load commands equal
    llvm-install-name-tool-16's (both from llvm-objcopy-16's copy, as above)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
    import pte_models
    edits = ["--change", "*libomp*", "@rpath/libomp.dylib", "--add-rpath", "@loader_path"]
    theirs = ["-change", LIBOMP, "@rpath/libomp.dylib", "-add_rpath", "@loader_path"]
    for model in pte_models.pte_models(pte_writer, os.path.join(work, "models"), samples):
        name = os.path.basename(model)
        out = os.path.join(work, name + ".edited")
        result = run(machofix, "edit", model, "-o", out, *edits)
        before = blobs_of(machofix, model)
        has_libomp = [any(d["install_name"] == LIBOMP for s in b["macho"]["slices"] for d in s["dylibs"])
                      for _, _, b in before]
        if not all(has_libomp):
            expect(result.returncode == 2 and "no dependent dylib's install name matches '*libomp*'" in result.stderr
                   and "named data '" in result.stderr and not os.path.exists(out),
                   f"{name}: a blob without libomp: --change is an error naming the blob, nothing written", result)
            continue
        if result.returncode != 0:
            expect(False, f"{name}: edited", result)
            continue
        after = blobs_of(machofix, out)
        data, edited = read(model), read(out)
        same, like_llvm, renewed = True, True, True
        for (offset, size, blob), (new_offset, new_size, new_blob) in zip(before, after):
            extracted = os.path.join(work, f"{name}.blob{offset}")
            write(extracted, data[offset:offset + size])
            alone = extracted + ".edited"
            run(machofix, "edit", extracted, "-o", alone, *edits)
            same &= os.path.exists(alone) and read(alone) == edited[new_offset:new_offset + new_size]
            normal = extracted + ".norm"
            subprocess.run(["llvm-objcopy-16", extracted, normal], check=True, capture_output=True)
            mine, reference = normal + ".edited", normal + ".ref"
            run(machofix, "edit", normal, "-o", mine, *edits)
            llvm_edit(normal, reference, theirs)
            archs = [s["arch"] for s in blob["macho"]["slices"]] if blob["macho"]["universal"] else [None]
            like_llvm &= all(same_commands(load_commands(mine, arch), load_commands(reference, arch)) for arch in archs)
            hash_keys = [k for k in new_blob["keys"] if re.match(r"[0-9a-f]{64}_", k)]  # not the method-named ones
            renewed &= new_blob["sha256"] != blob["sha256"]
            if name.endswith(".ptd"):  # as prune: kept, with a warning (the .pte naming it is not rewritten)
                renewed &= all(k in blob["keys"] and f"content-hash key '{k}' kept" in result.stdout for k in hash_keys)
            else:
                renewed &= all(k.startswith(new_blob["sha256"]) for k in hash_keys)
        expect(same, f"{name}: every edited blob is byte-identical to the edit of the extracted blob")
        expect(like_llvm, f"{name}: the extracted blob's load commands equal llvm-install-name-tool-16's")
        expect(renewed and run(machofix, "verify", out).returncode in (0, 1),
               f"{name}: every blob changed, its content-hash keys renewed to its new SHA-256 (.ptd: kept, said)")


def padding(machofix, fixtures, work):
    image = normalized_image(fixtures, work, "aoti_metal_arm64_chained")  # lld's default: a little padding
    commands = load_commands(image)
    header = run("llvm-otool-16", "-h", image).stdout.split()
    sizeofcmds = int(header[-2])
    first = min(int(line.split()[1]) for command in commands for line in command
                if line.startswith("offset ") and int(line.split()[1]) > 0)
    room = first - 32 - sizeofcmds
    # LC_LOAD_DYLIB of libomp: 24 bytes + name + NUL, rounded to 8. A name `room` bytes
    # longer than fits exactly; one byte more (past a multiple of 8) does not.
    old_size = (24 + len(LIBOMP) + 1 + 7) // 8 * 8
    fits = "/" + "f" * (old_size + room - 24 - 2)
    too_long = "/" + "x" * (old_size + room - 24)
    out = os.path.join(work, "padding.fits")
    result = run(machofix, "edit", image, "-o", out, "--change", LIBOMP, fits)
    expect(result.returncode == 0 and run(machofix, "verify", out).returncode == 0,
           f"padding: a name that fills the {room} bytes of header padding exactly is written and verifies", result)
    reference = os.path.join(work, "padding.fits.ref")
    llvm_edit(image, reference, ["-change", LIBOMP, fits])
    expect(same_commands(load_commands(out), load_commands(reference)), "padding: that edit equals llvm-install-name-tool-16's")
    out = os.path.join(work, "padding.refused")
    result = run(machofix, "edit", image, "-o", out, "--change", LIBOMP, too_long)
    needed = sizeofcmds - old_size + (24 + len(too_long) + 1 + 7) // 8 * 8
    expect(result.returncode == 2 and not os.path.exists(out)
           and f"would need {needed} bytes, but only {first - 32} are available" in result.stderr
           and f"({room} bytes of header padding)" in result.stderr,
           "padding: 8 bytes more: refused naming the room needed and available, exit 2, nothing written", result)
    in_place = os.path.join(work, "padding.inplace")
    shutil.copyfile(image, in_place)
    result = run(machofix, "edit", in_place, "--in-place", "--change", LIBOMP, too_long)
    expect(result.returncode == 2 and read(in_place) == read(image), "padding: --in-place: refused, the input untouched", result)
    theirs = os.path.join(work, "padding.refused.ref")
    made = llvm_edit(image, theirs, ["-change", LIBOMP, too_long])
    none = os.path.join(fixtures, "aoti_metal_arm64_chained_headerpad0.in")
    result = run(machofix, "edit", none, "-o", out, "--add-rpath", "@loader_path")
    expect(result.returncode == 2 and "(0 bytes of header padding)" in result.stderr and not os.path.exists(out),
           "padding: -headerpad 0: an added rpath is refused (0 bytes of header padding)", result)
    result = run(machofix, "edit", none, "-o", out, "--change", LIBOMP, "@rpath/libomp.dylib", "--id", "@rpath/m.so",
                 "--add-rpath", "@loader_path")
    expect(result.returncode == 0 and run(machofix, "verify", out).returncode == 0,
           "padding: -headerpad 0: shorter install names free the room the rpath then takes", result)
    print(f"note llvm-install-name-tool-16 on the same edit: exit {made.returncode}, its output "
          f"{'readable' if load_commands(theirs) is not None else 'unreadable'} by llvm-otool-16")


def errors(machofix, fixtures, work):
    image = os.path.join(fixtures, ROOMY + ".in")
    executable = os.path.join(fixtures, "execute_arm64_chained.in")
    with_b = with_rpath(machofix, image, os.path.join(work, "errors.rpath"), "/b/lib")
    with_both = os.path.join(work, "errors.rpaths")
    run(machofix, "edit", with_b, "-o", with_both, "--add-rpath", "@loader_path")
    cases = [
        ("--change, no such dependency", image, ["--change", "*libnothere*", "@rpath/x.dylib"],
         "--change '*libnothere*' '@rpath/x.dylib': no dependent dylib's install name matches '*libnothere*'"),
        ("--delete-rpath, no such rpath", image, ["--delete-rpath", "/nowhere/*"], "--delete-rpath '/nowhere/*': no LC_RPATH matches"),
        ("--rpath, no such rpath", image, ["--rpath", "/nowhere", "@loader_path"], "--rpath '/nowhere' '@loader_path': no LC_RPATH is '/nowhere'"),
        ("--id on an executable", executable, ["--id", "@rpath/x"], "--id '@rpath/x': not a dylib with an LC_ID_DYLIB (the file type is executable)"),
        ("--rpath onto an rpath that exists", with_both, ["--rpath", "/b/lib", "@loader_path"],
         "would duplicate the LC_RPATH '@loader_path'"),
    ]
    for what, source, edits, message in cases:
        out = os.path.join(work, "error.out")
        result = run(machofix, "edit", source, "-o", out, *edits)
        expect(result.returncode == 2 and message in result.stderr and source in result.stderr and not os.path.exists(out),
               f"{what}: an error naming the file and the edit, exit 2, nothing written", result)
    # A good edit beside a bad one: the file is refused as a whole.
    out = os.path.join(work, "error.out")
    result = run(machofix, "edit", image, "-o", out, "--add-rpath", "@loader_path", "--change", "*libnothere*", "x")
    expect(result.returncode == 2 and not os.path.exists(out), "a good edit beside a bad one: nothing written", result)
    result = run(machofix, "edit", image, "-o", out)
    expect(result.returncode == 2 and "at least one edit" in result.stderr and not os.path.exists(out),
           "no edit given: exit 2", result)

    # Found in a directory, the same edit is a note for that file: the walk goes on.
    tree = os.path.join(work, "tree")
    os.makedirs(tree)
    shutil.copyfile(image, os.path.join(tree, "a.dylib"))
    shutil.copyfile(with_b, os.path.join(tree, "b.dylib"))
    result = run(machofix, "edit", tree, "--in-place", "--delete-rpath", "/b/*", "--json", "-")
    files = {os.path.basename(f["path"]): f for f in json.loads(result.stdout)["files"]} if result.returncode == 0 else {}
    statuses = {name: [e["status"] for e in f["macho"]["slices"][0]["edits"]] for name, f in files.items()}
    expect(result.returncode == 0 and files["a.dylib"]["status"] == "unchanged" and files["b.dylib"]["status"] == "changed"
           and statuses == {"a.dylib": ["no match"], "b.dylib": ["applied"]},
           "directory walk: the edit that matches nothing is a note ('no match') for that file, the other is edited", result)
    text = run(machofix, "edit", tree, "--dry-run", "--delete-rpath", "/b/*")
    expect(text.returncode == 0 and "matches nothing" in text.stdout, "directory walk: the text report says so", text)


def dry_run_idempotence_in_place(machofix, fixtures, work):
    for name in ["aoti_metal_arm64_chained_headerpad", "aoti_metal_x86_64_dyldinfo", "universal_fat64_chained"]:
        source = os.path.join(fixtures, name + ".in")
        edits = ["--change", "*libomp*", "@rpath/libomp.dylib", "--add-rpath", "@loader_path/../lib", "--id", "@rpath/m.so"]
        copy = os.path.join(work, name + ".dry")
        shutil.copyfile(source, copy)
        result = run(machofix, "edit", copy, "--dry-run", *edits, "--json", "-")
        status = json.loads(result.stdout)["files"][0]["status"] if result.returncode == 0 else None
        expect(status == "would change" and read(copy) == read(source), f"{name}: --dry-run: 'would change', nothing written", result)
        once, twice = os.path.join(work, name + ".once"), os.path.join(work, name + ".twice")
        run(machofix, "edit", source, "-o", once, *edits)
        result = run(machofix, "edit", once, "-o", twice, *edits)
        expect(result.returncode == 0 and "unchanged" in result.stdout.splitlines()[0] and read(once) == read(twice),
               f"{name}: a second identical edit: unchanged, byte-identical output", result)
        shutil.copyfile(source, copy)
        result = run(machofix, "edit", copy, "--in-place", "--backup", ".orig", *edits)
        expect(result.returncode == 0 and read(copy) == read(once) and read(copy + ".orig") == read(source),
               f"{name}: --in-place --backup: the edited file in place, the original kept", result)
    result = run(machofix, "edit", os.path.join(fixtures, "aoti_metal_arm64_chained.in"), "--dry-run",
                 "--change", LIBOMP, "@rpath/libomp.dylib")
    expect(f"edit: change {LIBOMP} -> @rpath/libomp.dylib" in result.stdout, "text report: one line per edit", result)


def build_version(path):
    """(platform number, minos, sdk) of each LC_BUILD_VERSION, as llvm-otool-16 reads them."""
    versions = []
    for command in load_commands(path) or []:
        if "cmd LC_BUILD_VERSION" in command:
            fields = dict(line.split(" ", 1) for line in command if " " in line)
            versions.append((fields["platform"], fields["minos"], fields["sdk"]))
    return versions


def set_sdk(path, packed):
    """Writes `packed` as the sdk of a thin 64-bit image's LC_BUILD_VERSION (unsigned: no hash to renew)."""
    data = bytearray(read(path))
    ncmds, offset = int.from_bytes(data[16:20], "little"), 32
    for _ in range(ncmds):
        cmd, size = int.from_bytes(data[offset:offset + 4], "little"), int.from_bytes(data[offset + 4:offset + 8], "little")
        if cmd == 0x32:  # LC_BUILD_VERSION: cmd, cmdsize, platform, minos, sdk, ntools
            data[offset + 16:offset + 20] = packed.to_bytes(4, "little")
        offset += size
    write(path, bytes(data))


def inspect_rpaths_and_build(machofix, fixtures, work):
    """inspect's text shows each LC_RPATH in load-command order and the build version
    as llvm-otool-16 reads it; its JSON gives the same build version."""
    image = os.path.join(work, "inspect.dylib")
    rpaths = ["@loader_path/../lib", "/opt/build/lib", "@executable_path/Frameworks"]
    options = [word for rpath in rpaths for word in ("--add-rpath", rpath)]
    result = run(machofix, "edit", os.path.join(fixtures, ROOMY + ".in"), "-o", image, *options)
    expect(result.returncode == 0, "inspect: rpaths added", result)
    set_sdk(image, 14 << 16)  # an SDK other than the minimum OS (both 11.0 in the fixture)
    text = run(machofix, "inspect", image).stdout
    shown = [line.strip()[len("rpath "):] for line in text.splitlines() if line.strip().startswith("rpath ")]
    expect(shown == rpaths, f"inspect text: every rpath in order: {shown}")
    versions = build_version(image)
    wanted = [f"built for macOS {minos} and later, SDK {sdk}" for platform, minos, sdk in versions if platform == "1"]
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("built for ")]
    expect(versions and lines == wanted, f"inspect text: the build version as llvm-otool-16 reads it: {lines} {versions}")
    report = json.loads(run(machofix, "inspect", image, "--json=-").stdout)
    targets = [(t["platform"], t["min_os"], t["sdk"]) for f in report["files"] for s in f["macho"]["slices"]
               for t in s["build_targets"]]
    expect(targets == [("macOS", minos, sdk) for _, minos, sdk in versions], f"inspect JSON: build_targets: {targets}")


def main():
    machofix, pte_writer, fixtures, work = [os.path.abspath(a) for a in sys.argv[1:5]]
    samples = os.path.abspath(sys.argv[5]) if len(sys.argv) > 5 else ""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    references(machofix, fixtures, work)
    weak_dependency(machofix, fixtures, work)
    pte_and_archive(machofix, pte_writer, fixtures, work)
    pte_matrix(machofix, pte_writer, work, samples)
    padding(machofix, fixtures, work)
    inspect_rpaths_and_build(machofix, fixtures, work)
    errors(machofix, fixtures, work)
    dry_run_idempotence_in_place(machofix, fixtures, work)
    if failures:
        print(f"\n{len(failures)} failure(s)")
        for failure in failures:
            print(" -", failure)
        return 1
    print("\nall edit checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
