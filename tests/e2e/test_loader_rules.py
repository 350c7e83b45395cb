#!/usr/bin/env python3
"""Files that break a loader rule (docs/loader-rules.md), through the command line.

From the unsigned images of the fixtures linked by ld64.lld-16 (tests/fixtures), one
rule broken on purpose: __TEXT mapped writable (seg-protection; the fixtures' SDK is
11.0, for which dyld enforces it). In a thin file, in the x86_64 slice of a universal
file, in the Mach-O inside a .pte (tests/pte/pte_writer wrap) and in an archive member:
 - `verify` exits 1 naming the rule, the slice and the absolute offset of the field,
   and its JSON lists the violation at that offset;
 - `inspect` exits 0 and shows it;
 - `prune` and `sign` (-o, --in-place, --dry-run, --resign-invalid too) exit 2 with
   an error naming the file, the .pte key or archive member, the slice, the offset and
   the rule; nothing is written, the input is byte-identical, nothing is left behind;
   an archive with such a member is refused as a whole;
 - each of these commands' help says so;
 - the same files unbroken pass every rule (the breakage alone makes the difference).
Usage: test_loader_rules.py MACHOFIX PTE_WRITER FIXTURE_DIR WORK_DIR
"""
import json
import os
import subprocess
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import tamper  # noqa: E402
from tamper import check_refused, run, writable_text  # noqa: E402

THIN = "aoti_metal_arm64_dyldinfo_unsigned.in"  # arm64, unsigned: no signature to invalidate
FAT = "universal_fat_dyldinfo.in"  # x86_64 unsigned + arm64 signed
RULE = "loader rule seg-protection"


class Case(tamper.CaseDirectory):
    def reported(self, source, parts, offset):
        """verify names every part and exits 1; its JSON has the violation at `offset`;
        inspect shows it and exits 0."""
        problems = []
        result = run(self.machofix, "verify", source)
        if result.returncode != 1 or not all(part in result.stdout for part in parts):
            problems.append(f"verify: exit {result.returncode}, stdout {result.stdout.strip()[:300]}")
        report = json.loads(run(self.machofix, "verify", source, "--json").stdout)
        found = [v for f in report["files"] for v in violations_in(f)]
        if [(v["rule"], v["offset"]) for v in found] != [("seg-protection", offset)]:
            problems.append(f"verify --json: {found}")
        result = run(self.machofix, "inspect", source)
        if result.returncode != 0 or RULE not in result.stdout:
            problems.append(f"inspect: exit {result.returncode}, stdout {result.stdout.strip()[-300:]}")
        return problems

    def refused(self, source, parts, commands=("prune", "sign")):
        """Every way of running prune and sign on `source` refuses it."""
        problems = []
        output = self.path("out")
        for command in commands:
            for mode in (["-o", output], ["--in-place"], ["--dry-run"], ["-o", output, "--resign-invalid"]):
                if command == "sign" and mode == ["--dry-run"]:
                    continue  # sign has no dry run
                arguments = [self.machofix, command, source, *mode]
                problems += [f"{' '.join(arguments[1:])}: {p}" for p in
                             check_refused(arguments, source, output, self.dir, parts)]
        return problems

    def passes(self, source):
        """The unbroken file passes every rule (verify --json lists none)."""
        report = json.loads(run(self.machofix, "verify", source, "--json").stdout)
        found = [v for f in report["files"] for v in violations_in(f)]
        return [f"the unbroken file breaks {found}"] if found else []


def violations_in(report_file):
    """Every loader-rule violation of a JSON file entry (Mach-O, .pte blobs, members)."""
    images = []
    if "macho" in report_file:
        images.append(report_file["macho"])
    images += [blob["macho"] for blob in report_file.get("pte", {}).get("blobs", [])]
    found = [v for member in report_file.get("members", []) for v in violations_in(member)]
    for image in images:
        found += image["loader_rules"] + [v for s in image["slices"] for v in s["loader_rules"]]
    return found


def test_thin(case):
    data = case.fixture(THIN)
    problems = case.passes(case.write("good", data))
    offset = writable_text(data, "arm64")
    source = case.write("broken.dylib", data)
    parts = [source, "slice arm64", f"offset {offset:#x}: ", RULE]
    return problems + case.reported(source, [f"arm64: {RULE} at offset {offset:#x}: "], offset) + case.refused(source, parts)


def test_universal_slice(case):
    data = case.fixture(FAT)
    problems = case.passes(case.write("good", data))
    offset = writable_text(data, "x86_64")
    source = case.write("broken", data)
    parts = [source, "slice x86_64", f"offset {offset:#x}: ", RULE]
    return problems + case.reported(source, [f"x86_64: {RULE} at offset {offset:#x}: "], offset) + case.refused(source, parts)


def test_pte(case):
    image = case.fixture(THIN)
    offset = writable_text(image, "arm64")
    so = case.write("broken.so", image)
    source = case.path("model.pte")
    subprocess.run([case.pte_writer, "wrap", so, source], check=True)
    os.unlink(so)
    with open(source, "rb") as handle:
        blob_at = handle.read().find(bytes(image))
    key = json.loads(run(case.machofix, "inspect", source, "--json").stdout)["files"][0]["pte"]["blobs"][0]["keys"][0]
    parts = [source, f"named data '{key}'", "slice arm64", f"offset {blob_at + offset:#x}: ", RULE]
    return case.reported(source, [key, "arm64", f"offset {blob_at + offset:#x}: ", RULE], blob_at + offset) + \
        case.refused(source, parts)


def test_archive_member(case):
    image = case.fixture(THIN)
    offset = writable_text(image, "arm64")
    source = case.path("models.zip")
    with zipfile.ZipFile(source, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("README.txt", "kernels\n")
        archive.writestr("kernels/good.dylib", bytes(case.fixture(THIN)))
        archive.writestr("kernels/broken.dylib", bytes(image))
    parts = [source, "kernels/broken.dylib", "slice arm64", f"offset {offset:#x}: ", RULE]
    # The archive as a whole is refused: its good member is not written either.
    return case.reported(source, ["kernels/broken.dylib", "arm64", RULE], offset) + \
        case.refused(source, parts, commands=("prune",))


def test_help(case):
    """Each command's help says what the loader's rules do to it (tool/command_line.cc)."""
    said = {"verify": ["loader's rules", "docs/loader-rules.md", "Exit status 1"],
            "inspect": ["loader rule", "docs/loader-rules.md"],
            "prune": ["docs/loader-rules.md", "is refused", "--resign-invalid too"],
            "sign": ["docs/loader-rules.md", "is refused", "--resign-invalid too"]}
    problems = []
    for command, phrases in said.items():
        text = run(case.machofix, "help", command).stdout
        problems += [f"help {command} does not say {phrase!r}" for phrase in phrases if phrase not in text]
    return problems


TESTS = [test_thin, test_universal_slice, test_pte, test_archive_member, test_help]


def main():
    return tamper.run_cases(TESTS, Case, sys.argv[1:5])


if __name__ == "__main__":
    sys.exit(main())
