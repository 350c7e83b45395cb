#!/usr/bin/env python3
"""Batch repair, the CI gate and archives, through the command line.

Builds a tree with nested folders, a read-only model, a symlink, a hard link,
files that are not models, a .zip and a .tar.gz holding models and a file signed
with an identity (refused without --adhoc, while the others are still processed),
then checks: `check` before and after (exit 1, then only the refused file), a dry
run writing nothing, the in-place run and its JSON report, idempotence, determinism
(two mirrored outputs byte-identical, --jobs 1 and 2 alike), --backup.
Usage: test_batch.py MACHOFIX PTE_WRITER FIXTURE_DIR WORK_DIR
"""
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAILURES = []


def expect(condition, message):
    print(f"{'ok  ' if condition else 'FAIL'} {message}")
    if not condition:
        FAILURES.append(message)


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True)


def snapshot(tree):
    """path -> (kind, sha256 or link target, mode, inode) for everything under tree."""
    state = {}
    for directory, _, files in os.walk(tree):
        for name in files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                state[os.path.relpath(path, tree)] = ("link", os.readlink(path), None, None)
            else:
                with open(path, "rb") as handle:
                    digest = hashlib.sha256(handle.read()).hexdigest()
                state[os.path.relpath(path, tree)] = ("file", digest, stat.S_IMODE(info.st_mode), info.st_ino)
    return state


def archive_members(fixtures, sample):
    with open(os.path.join(fixtures, "aoti_metal_arm64_chained.in"), "rb") as handle:
        so = handle.read()
    with open(sample, "rb") as handle:
        pte = handle.read()
    return [("models/metal_model.pte", pte), ("models/kernels/forward.so", so), ("README.txt", b"weights and a model\n")]


def write_zip(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(2025, 1, 2, 3, 4, 6))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)


def write_tar_gz(path, members):
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1735786800, 0o644
            archive.addfile(info, io.BytesIO(data))


def build_tree(tree, machofix, pte_writer, fixtures, work):
    sample_dir = os.path.join(work, "sample")
    subprocess.run([os.path.join(ROOT, "samples", "aoti_metal", "build.sh"), sample_dir, pte_writer], check=True,
                   capture_output=True)
    sample = os.path.join(sample_dir, "metal_model.pte")
    os.makedirs(os.path.join(tree, "exports", "deep", "deeper"))
    os.makedirs(os.path.join(tree, "docs"))
    shutil.copy(sample, os.path.join(tree, "exports", "metal_model.pte"))
    shutil.copy(os.path.join(fixtures, "many_dylibs_x86_64_dyldinfo.in"), os.path.join(tree, "exports", "deep", "deeper", "many.dylib"))
    shutil.copy(os.path.join(fixtures, "universal_fat_dyldinfo.in"), os.path.join(tree, "exports", "deep", "universal.dylib"))
    shutil.copy(os.path.join(fixtures, "all_used_arm64_chained.in"), os.path.join(tree, "exports", "clean.dylib"))
    readonly = os.path.join(tree, "exports", "readonly.so")
    shutil.copy(os.path.join(fixtures, "bundle_arm64_dyldinfo.in"), readonly)
    os.chmod(readonly, 0o444)
    os.symlink("deep/universal.dylib", os.path.join(tree, "exports", "link.dylib"))
    os.link(os.path.join(tree, "exports", "metal_model.pte"), os.path.join(tree, "exports", "hardlink.pte"))
    with open(os.path.join(tree, "docs", "notes.txt"), "w") as handle:
        handle.write("not a model\n")
    with open(os.path.join(tree, "docs", "weights.bin"), "wb") as handle:
        handle.write(bytes(range(256)) * 64)
    members = archive_members(fixtures, sample)
    write_zip(os.path.join(tree, "models.zip"), members)
    write_tar_gz(os.path.join(tree, "models.tar.gz"), members)
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "support", "identity_sign.py"),
                    os.path.join(fixtures, "aoti_metal_arm64_dyldinfo.in"), os.path.join(tree, "devid.dylib")], check=True)


def check_gate(machofix, tree):
    before = run(machofix, "check", tree, "--json", "-")
    expect(before.returncode == 1, f"check before the repair exits 1 (got {before.returncode})")
    findings = json.loads(before.stdout)["findings"]
    flagged = {(f["file"], f["blob"]) for f in findings if f["rule"] == "unused-dependency"}
    # metal_model.pte and hardlink.pte are one file: it is reported under its first name.
    for expected in [("exports/hardlink.pte", None), ("models.zip", "models/metal_model.pte"),
                     ("models.tar.gz", "models/kernels/forward.so"), ("devid.dylib", "")]:
        hit = any(f.endswith(expected[0]) and (expected[1] is None or b.startswith(expected[1])) for f, b in flagged)
        expect(hit, f"check names {expected[0]} {expected[1] or ''}")
    text = run(machofix, "check", tree).stdout
    expect("error: depends on /opt/llvm-openmp/lib/libomp.dylib" in text, "check prints compiler-style lines")


def check_dry_run(machofix, tree):
    state = snapshot(tree)
    result = run(machofix, "prune", "--dry-run", tree, "--json", "-")
    expect(result.returncode == 2, f"dry run exits 2 because the identity-signed file is refused (got {result.returncode})")
    report = json.loads(result.stdout)
    expect(report["summary"]["changed"] >= 6, f"dry run: {report['summary']['changed']} files would change")
    expect(snapshot(tree) == state, "dry run writes nothing")


def check_in_place(machofix, tree, work):
    state = snapshot(tree)
    report_path = os.path.join(work, "report.json")
    result = run(machofix, "prune", "--in-place", tree, "--json", report_path, "--jobs", "2")
    expect(result.returncode == 2, f"in-place run exits 2: one file was refused (got {result.returncode})")
    expect("devid.dylib" in result.stderr and "--adhoc" in result.stderr, "the refusal names the file and --adhoc")
    with open(report_path) as handle:
        report = json.load(handle)
    expect(report["schema"] == "machofix-report" and report["schema_version"] == 1, "report schema and version")
    by_path = {os.path.relpath(f["path"], tree): f for f in report["files"]}
    expect(by_path["devid.dylib"]["status"] == "failed", "identity-signed file failed")
    expect("exports/metal_model.pte" not in by_path, "a hard-linked file is processed once")
    expect(any("metal_model.pte" in note for note in by_path["exports/hardlink.pte"]["notes"]), "the report names the other link")
    for name in ["exports/hardlink.pte", "exports/readonly.so", "exports/deep/universal.dylib",
                 "exports/deep/deeper/many.dylib", "models.zip", "models.tar.gz"]:
        expect(by_path.get(name, {}).get("status") == "changed", f"{name} changed")
    expect(by_path["exports/clean.dylib"]["status"] == "unchanged", "clean file unchanged")
    expect(by_path["docs/notes.txt"]["status"] == "skipped", "non-model file skipped")
    pte = by_path["exports/hardlink.pte"]["pte"]
    expect(pte["blobs"][0]["key_renewals"], "content-hash key renewal reported")
    zip_members = {m["path"]: m["status"] for m in by_path["models.zip"]["members"]}
    expect(zip_members == {"models/metal_model.pte": "changed", "models/kernels/forward.so": "changed"},
           f"zip members reported: {zip_members}")
    expect(report["summary"]["failed"] == 1 and report["summary"]["skipped"] >= 2, f"summary {report['summary']}")
    after = snapshot(tree)
    expect(after["devid.dylib"] == state["devid.dylib"], "refused file untouched")
    expect(after["docs/notes.txt"] == state["docs/notes.txt"], "non-model file untouched")
    expect(after["exports/link.dylib"] == state["exports/link.dylib"], "the symlink is still the same link")
    expect(after["exports/readonly.so"][2] == 0o444, "read-only file keeps its mode")
    expect(after["exports/readonly.so"][3] != state["exports/readonly.so"][3], "changed file has a new inode")
    expect(after["exports/hardlink.pte"][1] == after["exports/metal_model.pte"][1]
           and after["exports/hardlink.pte"][3] == after["exports/metal_model.pte"][3], "hard link re-linked to the repaired file")
    leftovers = [p for p in after if ".machofix-" in p]
    expect(not leftovers, f"no temporary files left {leftovers}")
    with zipfile.ZipFile(os.path.join(tree, "models.zip")) as archive:
        expect(archive.testzip() is None and archive.namelist() == [n for n, _ in archive_members_names()],
               "zip still valid, members in order")
        expect(archive.read("README.txt") == b"weights and a model\n", "zip: other member unchanged")
    gate = run(machofix, "check", tree, "--allow-prefix", "/usr/local/lib/", "--json", "-")
    remaining = {(os.path.relpath(f["file"], tree), f["rule"]) for f in json.loads(gate.stdout)["findings"]}
    # Left: the refused file, and clean.dylib, which really uses libomp from an absolute path.
    expected = {("devid.dylib", "unused-dependency"), ("devid.dylib", "absolute-install-name"),
                ("exports/clean.dylib", "absolute-install-name")}
    expect(gate.returncode == 1 and remaining == expected, f"check after: only the expected findings remain {remaining}")
    again = run(machofix, "prune", "--in-place", tree, "--json", "-")
    statuses = {os.path.relpath(f["path"], tree): f["status"] for f in json.loads(again.stdout)["files"]}
    expect(all(s in ("unchanged", "skipped") for p, s in statuses.items() if p != "devid.dylib"),
           "second run: everything unchanged")
    expect(snapshot(tree) == after, "second run writes nothing")


def archive_members_names():
    return [("models/metal_model.pte", None), ("models/kernels/forward.so", None), ("README.txt", None)]


def check_determinism(machofix, tree, work):
    outputs = []
    for jobs in ("1", "2"):
        out = os.path.join(work, f"mirror-{jobs}")
        result = run(machofix, "prune", tree, "-o", out, "--jobs", jobs)
        expect(result.returncode == 2, f"mirror run --jobs {jobs} exits 2 (the refused file)")
        outputs.append({p: v[:2] for p, v in snapshot(out).items()})
    expect(outputs[0] == outputs[1], "two mirrored runs (--jobs 1, --jobs 2) are byte-identical")
    expect("docs/notes.txt" in outputs[0] and outputs[0]["exports/link.dylib"][0] == "link",
           "the mirror holds the non-model files and the link")


def check_backup(machofix, fixtures, work):
    target = os.path.join(work, "backup", "model.so")
    os.makedirs(os.path.dirname(target))
    shutil.copy(os.path.join(fixtures, "aoti_metal_arm64_dyldinfo.in"), target)
    original = snapshot(os.path.dirname(target))["model.so"]
    result = run(machofix, "prune", "--in-place", "--backup", ".orig", target)
    state = snapshot(os.path.dirname(target))
    expect(result.returncode == 0 and state["model.so.orig"][1] == original[1] and state["model.so"][1] != original[1],
           "--backup keeps the original beside the repaired file")


def main():
    machofix, pte_writer, fixtures, work = [os.path.abspath(a) for a in sys.argv[1:5]]
    shutil.rmtree(work, ignore_errors=True)
    tree = os.path.join(work, "tree")
    os.makedirs(tree)
    build_tree(tree, machofix, pte_writer, fixtures, work)
    pristine = os.path.join(work, "pristine")
    shutil.copytree(tree, pristine, symlinks=True)
    check_gate(machofix, tree)
    check_dry_run(machofix, tree)
    check_determinism(machofix, pristine, work)
    check_in_place(machofix, tree, work)
    check_backup(machofix, fixtures, work)
    print(f"{len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
