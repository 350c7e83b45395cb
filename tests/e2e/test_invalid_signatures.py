#!/usr/bin/env python3
"""Invalid input signatures are refused, and re-signed only with --resign-invalid.

A repair tool must not turn a file that was changed after signing (or whose
signature is corrupt) into one with a fresh, valid signature. On fixtures linked by
ld64.lld-16 (tests/fixtures), broken on purpose (tests/support/tamper.py): a byte of
__text flipped in a thin file, in the arm64 slice of a fat and a fat64 file, in the
Mach-O inside a .pte (tests/pte/pte_writer wrap) and in an archive member; a
CodeDirectory with a bad magic; a requirements blob changed under its special slot;
an identity-signed file changed (also refused under --adhoc). For each, `prune` and
`sign`:
 - without the flag: exit 2, the error names the file, the slice (and the .pte key or
   archive member) and the first wrong page or slot with its byte range, no output,
   the input byte-identical, no file left behind (in place and --dry-run too);
 - with --resign-invalid: exit 0, the output verifies (machofix verify and the
   independent tests/support/codesign_check.py), and the JSON says the input signature
   was invalid, where, and that it was re-signed because of the flag.
Refusals come before any rewriting work: with no LIEF reader (which re-reads every
rewrite) and with an output path that cannot be created, the error is still the
refusal. A directory with one broken file: the others are still repaired.
Usage: test_invalid_signatures.py MACHOFIX PTE_WRITER FIXTURE_DIR WORK_DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import codesign_check  # noqa: E402
import tamper  # noqa: E402
from tamper import check_refused, check_resigned, run  # noqa: E402

THIN = "aoti_metal_arm64_chained.in"  # arm64, signed by lld, libomp unused
FAT = "universal_fat_dyldinfo.in"  # x86_64 unsigned + arm64 signed
FAT64 = "universal_fat64_chained.in"
FLAT = "flat_namespace_arm64_dyldinfo.in"  # left unchanged by prune
CD_MAGIC, REQUIREMENTS_SLOT, ENTITLEMENTS_SLOT = 0xFADE0C02, 2, 5
NO_LIEF = {**os.environ, "MACHOFIX_LIEF_PLUGIN": "/nonexistent/machofix-lief.so"}


def first_file(result):
    """The first file entry of a --json report on stdout; None if there is none."""
    try:
        return json.loads(result.stdout)["files"][0]
    except (ValueError, KeyError, IndexError):
        return None


def signature_after(machofix, source, *flags):
    """The signature_after of the first slice in a dry run, or a description of the failure."""
    result = run(machofix, "prune", source, "--dry-run", "--json", *flags)
    entry = first_file(result)
    if not entry or "macho" not in entry:
        return f"no report (exit {result.returncode}: {result.stderr.strip()[:200]})"
    return entry["macho"]["slices"][0]["signature_after"]


class Case(tamper.CaseDirectory):
    def identity_signed(self, fixture, *options):
        """The fixture re-signed as if with a Developer ID (tests/support/identity_sign.py)."""
        target = self.path("identity-" + fixture)
        subprocess.run([sys.executable, os.path.join(HERE, "..", "support", "identity_sign.py"),
                        os.path.join(self.fixtures, fixture), target, *options], check=True)
        with open(target, "rb") as handle:
            data = bytearray(handle.read())
        os.unlink(target)
        return data

    def verified(self, path):
        """Problems with a Mach-O output's signatures: machofix verify, then the
        independent checker on every slice."""
        problems = []
        result = run(self.machofix, "verify", path)
        if result.returncode != 0:
            problems.append(f"machofix verify rejects the output: {result.stdout.strip()[:300]}")
        for index, (status, details) in enumerate(codesign_check.check_file(path)):
            if status == "invalid":
                problems.append(f"independent check: slice {index} invalid: {details[:2]}")
        return problems

    def refusals(self, source, parts, commands=("prune", "sign"), extra=()):
        """Every way of running prune and sign on `source` without the flag refuses it."""
        problems = []
        output = self.path("out")
        for command in commands:
            for mode in (["-o", output], ["--in-place"], ["--dry-run"]):
                if command == "sign" and mode == ["--dry-run"]:
                    continue  # sign has no dry run
                arguments = [self.machofix, command, source, *mode, *extra]
                problems += [f"{command} {mode[0]}: {p}" for p in check_refused(arguments, source, output, self.dir, parts)]
        return problems

    def resigned(self, source, arch, problem_text, problem_offset, verify=None, commands=("prune", "sign"), extra=()):
        problems = []
        for command in commands:
            output = self.path(f"{command}-resigned")
            arguments = [self.machofix, command, source, "-o", output, "--resign-invalid", "--json", *extra]
            problems += [f"{command} --resign-invalid: {p}" for p in
                         check_resigned(arguments, output, arch, problem_text, problem_offset, verify or self.verified)]
        return problems


def text_case(case, fixture, arch):
    """A byte of __text flipped in the `arch` slice of a thin or universal fixture."""
    data = case.fixture(fixture)
    page_at, page_text = tamper.tamper_text(data, arch)
    source = case.write("tampered", data)
    parts = [source, f"slice {arch}", f"offset {page_at:#x}", page_text, "--resign-invalid"]
    return case.refusals(source, parts) + case.resigned(source, arch, page_text, page_at)


def test_thin(case):
    return text_case(case, THIN, "arm64")


def test_fat(case):
    return text_case(case, FAT, "arm64")


def test_fat64(case):
    return text_case(case, FAT64, "arm64")


def test_flat_namespace(case):
    """prune leaves a flat-namespace file unchanged, but a broken one is refused
    first; with the flag only its signature is renewed."""
    problems = text_case(case, FLAT, "arm64")
    result = run(case.machofix, "prune", case.path("tampered"), "-o", case.path("out"), "--resign-invalid", "--json")
    entry = first_file(result)
    if not entry or "macho" not in entry:
        return problems + [f"flat namespace: no report (exit {result.returncode})"]
    slices = entry["macho"]["slices"]
    if not slices[0]["left_unchanged_because"] or any(d["removed"] for d in slices[0]["dylibs"]):
        problems.append("flat namespace: dylibs removed")
    return problems


def pte_blob_verified(case, path):
    """A .pte output: machofix verify, and the independent checker on its Mach-O blob."""
    problems = []
    result = run(case.machofix, "verify", path)
    if result.returncode != 0:
        problems.append(f"machofix verify rejects the .pte: {result.stdout.strip()[:300]}")
    entry = first_file(run(case.machofix, "inspect", path, "--json"))
    with open(path, "rb") as handle:
        data = handle.read()
    for blob in entry["pte"]["blobs"]:
        status, details = codesign_check.check_slice(data[blob["offset"]:blob["offset"] + blob["size"]])
        if status != "valid":
            problems.append(f"independent check of the blob {blob['keys']}: {status} {details[:2]}")
    return problems


def test_pte(case):
    image = case.fixture(THIN)
    page_at, page_text = tamper.tamper_text(image, "arm64")
    so = case.write("tampered.so", image)
    source = case.path("model.pte")
    subprocess.run([case.pte_writer, "wrap", so, source], check=True)
    os.unlink(so)
    with open(source, "rb") as handle:
        blob_at = handle.read().find(bytes(image))
    key = first_file(run(case.machofix, "inspect", source, "--json"))["pte"]["blobs"][0]["keys"][0]
    parts = [source, f"named data '{key}'", "slice arm64", f"offset {blob_at + page_at:#x}", page_text]
    problems = case.refusals(source, parts)
    problems += case.resigned(source, "arm64", page_text, blob_at + page_at, lambda out: pte_blob_verified(case, out))
    # Refused before the output is created: an output path that cannot be made does not matter.
    blocked = case.write("a-file", b"")
    problems += [f"-o below a file: {p}" for p in
                 check_refused([case.machofix, "prune", source, "-o", os.path.join(blocked, "out.pte")], source, None,
                               case.dir, [page_text, "--resign-invalid"])]
    return problems


def test_archive_member(case):
    image = case.fixture(THIN)
    page_at, page_text = tamper.tamper_text(image, "arm64")
    source = case.path("models.zip")
    with zipfile.ZipFile(source, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("README.txt", "kernels\n")
        archive.writestr("kernels/good.dylib", bytes(case.fixture(THIN)))
        archive.writestr("kernels/tampered.dylib", bytes(image))
    parts = [source, "kernels/tampered.dylib", "slice arm64", f"offset {page_at:#x}", page_text]
    problems = case.refusals(source, parts, commands=("prune",))

    def members_verified(output):
        found = []
        with zipfile.ZipFile(output) as archive:
            if archive.namelist() != ["README.txt", "kernels/good.dylib", "kernels/tampered.dylib"]:
                found.append(f"members: {archive.namelist()}")
            for name in ("kernels/good.dylib", "kernels/tampered.dylib"):
                member = case.write("member", archive.read(name))
                found += [f"{name}: {p}" for p in case.verified(member)]
                os.unlink(member)
        return found

    return problems + case.resigned(source, "arm64", page_text, page_at, members_verified, commands=("prune",))


def test_malformed_code_directory(case):
    data = case.fixture(THIN)
    cd_at = tamper.blob_offset(data, 0, 0)
    data[cd_at + 3] ^= 0x01  # fade0c02 -> fade0c03
    source = case.write("malformed", data)
    magic_text = f"has magic {CD_MAGIC ^ 1:#x} instead of {CD_MAGIC:#x}"
    parts = [source, "slice arm64", f"offset {cd_at:#x}", magic_text]
    problems = case.refusals(source, parts)
    problems += case.resigned(source, "arm64", magic_text, cd_at)
    after = signature_after(case.machofix, source, "--resign-invalid")
    if not isinstance(after, dict) or after["status"] != "replaced (ad hoc)":
        problems.append(f"a malformed signature is not reported as replaced: {after}")
    return problems


def test_special_slot(case):
    """codesign's ad hoc layout (made by `sign --adhoc` from an identity signature),
    its requirements blob changed under the hash in special slot 2."""
    identity = case.write("identity", case.identity_signed(THIN))
    adhoc = case.path("adhoc")
    result = run(case.machofix, "sign", identity, "--adhoc", "-o", adhoc)
    if result.returncode != 0:
        return [f"cannot make the codesign-style fixture: {result.stderr}"]
    os.unlink(identity)
    with open(adhoc, "rb") as handle:
        data = bytearray(handle.read())
    os.unlink(adhoc)
    blob_at = tamper.blob_offset(data, 0, REQUIREMENTS_SLOT)
    data[blob_at + 11] ^= 0x01  # the requirement count
    source = case.write("requirements", data)
    slot_text = f"special slot 2 (requirements) hash mismatch (its blob: slice bytes {blob_at:#x}-{blob_at + 12:#x})"
    parts = [source, "slice arm64", f"offset {blob_at:#x}", slot_text]
    return case.refusals(source, parts) + case.resigned(source, "arm64", slot_text, blob_at)


def special_hashes(data):
    """{slot: hash} of every special slot of the thin image's CodeDirectory."""
    cd_at = tamper.blob_offset(data, 0, 0)
    hash_offset, _, n_special = struct.unpack_from(">III", data, cd_at + 16)
    hash_size = data[cd_at + 36]
    return {slot: bytes(data[cd_at + hash_offset - slot * hash_size:cd_at + hash_offset - (slot - 1) * hash_size])
            for slot in range(1, n_special + 1)}


def test_adhoc_keeps_special_slots(case):
    """--adhoc replaces an identity signature keeping every special-slot hash it had:
    the requirements, a bundle's resources (slot 3, the highest here) and the
    entitlements."""
    problems = []
    for options, slots in ((["--resources"], 3), (["--resources", "--entitlements"], 5)):
        identity = case.identity_signed(THIN, *options)
        source = case.write("identity" + "".join(options), identity)
        output = case.path("adhoc" + "".join(options))
        result = run(case.machofix, "sign", source, "--adhoc", "-o", output)
        if result.returncode != 0:
            problems.append(f"sign --adhoc {options}: exit {result.returncode}: {result.stderr.strip()}")
            continue
        with open(output, "rb") as handle:
            after = special_hashes(bytearray(handle.read()))
        before = special_hashes(identity)
        if len(before) != slots or after != before:
            problems.append(f"sign --adhoc {options}: special slots {sorted(before)} became {sorted(after)}, or a hash "
                            f"changed: {[s for s in before if before[s] != after.get(s)]}")
        verified = run(case.machofix, "-v", "verify", output)
        if verified.returncode != 0 or "special slot 3 (resources) seals a file outside the Mach-O" not in verified.stdout:
            problems.append(f"verify of the ad hoc replacement {options}: exit {verified.returncode}, "
                            f"{verified.stdout.strip()[:300]}")
    return problems


def test_stripped_special_blob(case):
    """A special slot that holds a hash while its blob was stripped from the superblob:
    an invalid signature (the kernel refuses it). verify says so; prune and sign refuse
    to launder it, and re-sign it only with --resign-invalid."""
    data = case.identity_signed(THIN, "--entitlements")
    dataoff, _ = tamper.signature_location(data, 0)
    count = struct.unpack_from(">I", data, dataoff + 8)[0]
    index = [struct.unpack_from(">II", data, dataoff + 12 + 8 * i) for i in range(count)]
    kept = [(slot, offset) for slot, offset in index if slot != ENTITLEMENTS_SLOT]
    struct.pack_into(">I", data, dataoff + 8, len(kept))
    for i, (slot, offset) in enumerate(kept + [(0, 0)]):
        struct.pack_into(">II", data, dataoff + 12 + 8 * i, slot, offset)
    identity = case.write("stripped-identity", data)
    cd_at = tamper.blob_offset(data, 0, 0)
    hash_offset = struct.unpack_from(">I", data, cd_at + 16)[0]
    hash_size = data[cd_at + 36]
    slot_at = cd_at + hash_offset - ENTITLEMENTS_SLOT * hash_size
    slot_text = (f"special slot 5 (entitlements) (slice bytes {slot_at:#x}-{slot_at + hash_size:#x}) "
                 "holds a hash but no blob is there")
    problems = []
    verified = run(case.machofix, "verify", identity)
    if verified.returncode != 1 or slot_text not in verified.stdout:
        problems.append(f"verify does not say the entitlements blob is missing: exit {verified.returncode}, "
                        f"{verified.stdout.strip()[:400]}")
    parts = [identity, "slice arm64", f"offset {slot_at:#x}", slot_text]
    problems += case.refusals(identity, parts, extra=["--adhoc"])
    problems += case.resigned(identity, "arm64", slot_text, slot_at, extra=["--adhoc"])
    return problems


def test_identity_signed_changed(case):
    """--adhoc replaces an identity signature only if its hashes are valid."""
    data = case.identity_signed(THIN)
    page_at, page_text = tamper.tamper_text(data, "arm64")
    source = case.write("identity-tampered", data)
    parts = [source, "slice arm64", page_text, "--resign-invalid"]
    problems = case.refusals(source, parts, extra=["--adhoc"])
    problems += case.resigned(source, "arm64", page_text, page_at, extra=["--adhoc"])
    after = signature_after(case.machofix, source, "--adhoc", "--resign-invalid")
    if not isinstance(after, dict) or after["status"] != "replaced (ad hoc)":
        problems.append(f"the identity signature is not reported as replaced: {after}")
    return problems


def test_refused_before_rewriting(case):
    """An identity-signed file that prune would change is refused before the rewrite
    is re-read by LIEF (a missing reader does not matter), as a .pte too, whose
    refusal also comes before its output is created; a universal file whose second
    slice is broken is refused before its first slice (which prune changes) is
    rewritten."""
    image = case.identity_signed(THIN)
    source = case.write("identity", image)
    problems = [f"Mach-O: {p}" for p in check_refused([case.machofix, "prune", source, "-o", case.path("out")], source,
                                                      case.path("out"), case.dir, ["slice arm64", "--adhoc"], env=NO_LIEF)]
    fat = case.fixture(FAT)
    if list(tamper.slice_offsets(fat)) != ["x86_64", "arm64"]:
        problems.append(f"{FAT}: slices {list(tamper.slice_offsets(fat))}, expected x86_64 first")
    _, page_text = tamper.tamper_text(fat, "arm64")
    fat_source = case.write("fat", fat)
    problems += [f"universal: {p}" for p in check_refused([case.machofix, "prune", fat_source, "-o", case.path("out")],
                                                          fat_source, case.path("out"), case.dir,
                                                          ["slice arm64", page_text], env=NO_LIEF)]
    so = case.write("identity.so", image)
    model = case.path("identity.pte")
    subprocess.run([case.pte_writer, "wrap", so, model], check=True)
    os.unlink(so)
    blocked = case.write("a-file", b"")
    for output in (case.path("out.pte"), os.path.join(blocked, "out.pte")):
        problems += [f".pte -o {output}: {p}" for p in
                     check_refused([case.machofix, "prune", model, "-o", output], model, output, case.dir,
                                   ["slice arm64", "--adhoc"], env=NO_LIEF)]
    return problems


def test_directory(case):
    """One broken file in a tree: refused (the JSON says so), the others still
    repaired; exit 2."""
    tree = case.path("tree")
    os.makedirs(tree)
    data = case.fixture(THIN)
    _, page_text = tamper.tamper_text(data, "arm64")
    with open(os.path.join(tree, "a-tampered.dylib"), "wb") as handle:
        handle.write(data)
    shutil.copyfile(os.path.join(case.fixtures, THIN), os.path.join(tree, "b-good.dylib"))
    out = case.path("out")
    result = run(case.machofix, "prune", tree, "-o", out, "--json", case.path("report.json"))
    problems = []
    if result.returncode != 2 or page_text not in result.stderr or "a-tampered.dylib" not in result.stderr:
        problems.append(f"exit {result.returncode}, stderr {result.stderr.strip()[:300]}")
    with open(case.path("report.json")) as handle:
        files = {os.path.basename(f["path"]): f for f in json.load(handle)["files"]}
    refused = files.get("a-tampered.dylib", {})
    if refused.get("status") != "failed" or not refused.get("refused") or page_text not in refused.get("error", ""):
        problems.append(f"JSON for the refused file: {refused}")
    if files.get("b-good.dylib", {}).get("status") != "changed" or "refused" in files.get("b-good.dylib", {}):
        problems.append(f"JSON for the good file: {files.get('b-good.dylib')}")
    if tamper.files_under(out) != ["b-good.dylib"]:
        problems.append(f"output tree: {tamper.files_under(out)}")
    return problems + case.verified(os.path.join(out, "b-good.dylib"))


TESTS = [test_thin, test_fat, test_fat64, test_flat_namespace, test_pte, test_archive_member,
         test_malformed_code_directory, test_special_slot, test_adhoc_keeps_special_slots, test_stripped_special_blob,
         test_identity_signed_changed, test_refused_before_rewriting,
         test_directory]


def main():
    return tamper.run_cases(TESTS, Case, sys.argv[1:5])


if __name__ == "__main__":
    sys.exit(main())
