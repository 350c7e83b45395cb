#!/usr/bin/env python3
"""Every function of the installed machofix package against the command line.

Run by the Python of a virtual environment the wheel was installed into (see
test_package.py). The inputs: ExecuTorch's samples (when present), the .pte/.ptd
matrix of tests/pte/pte_writer and the Mach-O fixtures of make_fixtures.py. Each
function's result must be, field for field, the JSON the command line writes with
--json (timings aside), files written must be byte-identical, repair_bytes must give
what `prune FILE -o OUT` writes; errors raise MachofixError with machofix's message
and status.
Usage: check_api.py MACHOFIX PTE_WRITER FIXTURE_DIR WORK_DIR [SAMPLES_DIR]
"""
import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import typing

import machofix

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
from pte_models import pte_models  # noqa: E402
import tamper  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAILURES = []
MACHOFIX = ""


def expect(condition, message):
    print(f"{'ok  ' if condition else 'FAIL'} {message}", flush=True)
    if not condition:
        FAILURES.append(message)


def cli(*args, cwd=None, translate=None):
    """The command line: (exit status, parsed JSON or None); `translate` (old, new)
    rewrites a directory named in the report."""
    result = subprocess.run([MACHOFIX, *[str(a) for a in args]], capture_output=True, cwd=cwd, timeout=300)
    text = result.stdout.decode()
    if translate:
        text = text.replace(*translate)
    return result.returncode, (json.loads(text) if text.strip().startswith("{") else None)


def read(path):
    with open(path, "rb") as handle:
        return handle.read()


def differences(value, document, where="report"):
    """Where the typed object and the JSON differ: every JSON key must be a field with
    the same value, every field not in the JSON an optional one at its default (timings
    and exit_status aside)."""
    if dataclasses.is_dataclass(value):
        if not isinstance(document, dict):
            return [f"{where}: an object against {document!r}"]
        found = []
        names = {f.name for f in dataclasses.fields(value)}
        for key, item in document.items():
            if key == "seconds":
                continue
            if key not in names:
                found.append(f"{where}.{key}: not a field of {type(value).__name__}")
            else:
                found += differences(getattr(value, key), item, f"{where}.{key}")
        for f in dataclasses.fields(value):
            if f.name in document or f.name == "exit_status":
                continue
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            if default is dataclasses.MISSING or getattr(value, f.name) != default:
                found.append(f"{where}.{f.name}: {getattr(value, f.name)!r}, absent from the JSON")
        return found
    if isinstance(value, list):
        if not isinstance(document, list) or len(value) != len(document):
            return [f"{where}: {len(value)} items against {document!r}"[:300]]
        return [d for index, item in enumerate(value) for d in differences(item, document[index], f"{where}[{index}]")]
    if value != document or type(value) is not type(document):
        return [f"{where}: {value!r} against {document!r}"]
    return []


def same(report, status, document, what):
    found = differences(report, document) if document is not None else ["the command line wrote no JSON"]
    expect(not found and report.exit_status == status, f"{what}: as the command line (exit {status}) {found[:3]}")


def compare(call, args, what, cwd=None, translate=None):
    """call() against machofix ARGS: the same report, or, where the command line fails
    (exit 2), MachofixError carrying the same report."""
    status, document = cli(*args, cwd=cwd, translate=translate)
    try:
        report = call()
    except machofix.MachofixError as error:
        found = differences(error.report, document) if error.report and document else ["no report"]
        expect(status == error.status == 2 and not found,
               f"{what}: MachofixError as the command line fails, with its report {found[:2]} {error.message[:80]!r}")
        return
    same(report, status, document, what)


def check_reports(inputs):
    for path in inputs:
        name = os.path.basename(path)
        for function, command in ((machofix.inspect, "inspect"), (machofix.check, "check"), (machofix.verify, "verify")):
            compare(lambda: function(path), (command, "--json", "-", path), f"{command}({name})")
    compare(lambda: machofix.check(inputs, allow_prefix="/opt/", only="*libomp*"),
            ("check", "--json", "-", "--allow-prefix", "/opt/", "--only", "*libomp*", "--", *inputs),
            f"check(all {len(inputs)} inputs, allow_prefix=, only=)")
    compare(lambda: machofix.inspect(inputs[0], keep=["*libomp*"], jobs=1),
            ("inspect", "--json", "-", "--keep", "*libomp*", "--jobs", "1", inputs[0]), "inspect(keep=, jobs=)")
    # A path that starts with "-" is a path, not an option.
    original = os.getcwd()
    with tempfile.TemporaryDirectory() as directory:
        shutil.copy(inputs[0], os.path.join(directory, "-dashed.pte"))
        try:
            os.chdir(directory)
            compare(lambda: machofix.inspect("-dashed.pte"), ("inspect", "--json=-", "--", "-dashed.pte"),
                    "inspect('-dashed.pte')", cwd=directory)
        finally:
            os.chdir(original)
    directory = os.path.dirname(inputs[-1])
    compare(lambda: machofix.verify([directory], jobs=2), ("verify", "--json", "-", "--jobs", "2", directory),
            "verify([a directory], jobs=)")


@contextlib.contextmanager
def twin_directories(path, label):
    """Two directories, cli/ and api/, each with a copy of `path`; the block runs in
    api/ and gets both (so that reports, which name files as given, are the same)."""
    twins = [os.path.join(label, side) for side in ("cli", "api")]
    for twin in twins:
        os.makedirs(twin)
        shutil.copy(path, twin)
    original = os.getcwd()
    try:
        os.chdir(twins[1])
        yield twins
    finally:
        os.chdir(original)


def check_prune(inputs, work):
    """prune and sign, -o, in place and dry runs, in two twin directories so that the
    reports (which name the files as given) are the same."""
    for index, path in enumerate(inputs):
        name = os.path.basename(path)
        with twin_directories(path, os.path.join(work, f"prune{index}")) as twins:
            for options, kwargs in ((["-o", "out"], {"output": "out"}), (["--dry-run"], {"dry_run": True}),
                                    (["-o", "only", "--only", "*libomp*"], {"output": "only", "only": "*libomp*"}),
                                    (["--in-place", "--backup", ".orig"], {"in_place": True, "backup": ".orig"})):
                compare(lambda: machofix.prune(name, **kwargs), ("prune", "--json", "-", *options, name),
                        f"prune({name}, {kwargs})", cwd=twins[0], translate=twins)
            if os.path.exists("only"):
                compare(lambda: machofix.sign("only", output="signed"), ("sign", "--json", "-", "-o", "signed", "only"),
                        f"sign(prune({name}), output=)", cwd=twins[0], translate=twins)
        written = sorted(os.listdir(twins[0]))
        expect(written == sorted(os.listdir(twins[1])) and
               all(read(os.path.join(twins[0], n)) == read(os.path.join(twins[1], n)) for n in written),
               f"{name}: the files written are the command line's, byte for byte ({written})")


def check_repair_bytes(inputs, work):
    for path in inputs:
        name = os.path.basename(path)
        reference = os.path.join(work, "reference")
        if subprocess.run([MACHOFIX, "prune", path, "-o", reference], capture_output=True).returncode != 0:
            raises(lambda: machofix.repair_bytes(read(path)), 2, "-: ", f"repair_bytes({name}), which prune refuses")
            continue
        repaired = machofix.repair_bytes(read(path))
        expect(repaired == read(reference), f"repair_bytes({name}) == prune FILE -o OUT, byte for byte ({len(repaired)} bytes)")
    path = inputs[0]
    subprocess.run([MACHOFIX, "prune", path, "-o", reference, "--only", "*libomp*", "--keep", "Metal"], check=True,
                   capture_output=True)
    expect(machofix.repair_bytes(bytearray(read(path)), only=["*libomp*"], keep="Metal") == read(reference),
           "repair_bytes(bytearray, only=, keep=) == prune --only --keep")
    clean = machofix.repair_bytes(read(reference))
    expect(clean == read(reference), "repair_bytes of a repaired image: the same bytes")


def raises(function, status, text, what):
    try:
        function()
    except machofix.MachofixError as error:
        expect(error.status == status and text in error.message and text in str(error),
               f"{what}: MachofixError, status {error.status}, {error.message.splitlines()[0][:100]!r}")
        return error
    except Exception as error:  # noqa: BLE001 - any other type is the failure being tested
        expect(False, f"{what}: {type(error).__name__} instead of MachofixError: {error}")
        return None
    expect(False, f"{what}: no error")
    return None


def check_errors(sample, fixtures, work):
    raises(lambda: machofix.repair_bytes(b"not a model\n"), 2, "-: not a Mach-O", "repair_bytes(garbage)")
    data = read(sample)
    raises(lambda: machofix.repair_bytes(data[: len(data) // 2]), 2, "-: ", "repair_bytes(a truncated .pte)")
    raises(lambda: machofix.prune(sample), 2, "exactly one of", "prune() without in_place, output or dry_run")
    raises(lambda: machofix.inspect(os.path.join(work, "missing.pte")), 2, "missing.pte", "inspect(a missing file)")
    truncated = os.path.join(work, "truncated.pte")
    with open(truncated, "wb") as handle:
        handle.write(data[: len(data) // 2])
    error = raises(lambda: machofix.check([sample, truncated]), 2, "truncated.pte", "check([good, truncated])")
    if error:
        statuses = [f.status for f in error.report.files] if error.report else None
        expect(statuses == ["inspected", "failed"] and error.report.files[1].error,
               f"the error carries the report of both files ({statuses})")
    before = read(truncated)
    raises(lambda: machofix.prune(truncated, in_place=True), 2, "truncated.pte", "prune(truncated, in_place=True)")
    expect(read(truncated) == before, "and the file is untouched")
    raises(lambda: machofix.Machofix(os.path.join(work, "no-such-machofix")).inspect(sample), 127, "cannot run",
           "Machofix(a missing executable)")
    expect(isinstance(machofix.MachofixError("m", 2), Exception), "MachofixError is an Exception")
    try:
        machofix.repair_bytes("text")  # type: ignore[arg-type]
        expect(False, "repair_bytes(str) is refused")
    except TypeError:
        expect(True, "repair_bytes(str): TypeError")


def check_invalid_signature(fixtures, work):
    """A signed file changed after signing: refused (MachofixError, report.refused), or
    re-signed with resign_invalid=True, as the command line does."""
    data = bytearray(read(os.path.join(fixtures, "many_dylibs_arm64_chained.in")))
    tamper.tamper_text(data, "arm64")
    tampered = os.path.join(work, "tampered.so")
    with open(tampered, "wb") as handle:
        handle.write(data)
    compare(lambda: machofix.prune(tampered, output=os.path.join(work, "api.so")),
            ("prune", "--json", "-", "-o", os.path.join(work, "cli.so"), tampered), "prune(a tampered file)",
            translate=("cli.so", "api.so"))
    error = raises(lambda: machofix.prune(tampered, dry_run=True), 2, "input signature is invalid", "prune(tampered)")
    expect(bool(error and error.report and error.report.files[0].refused), "the report says the file was refused")
    raises(lambda: machofix.repair_bytes(bytes(data)), 2, "--resign-invalid", "repair_bytes(tampered)")
    reference = os.path.join(work, "resigned.so")
    subprocess.run([MACHOFIX, "prune", tampered, "-o", reference, "--resign-invalid"], check=True, capture_output=True)
    expect(machofix.repair_bytes(bytes(data), resign_invalid=True) == read(reference),
           "repair_bytes(tampered, resign_invalid=True) == prune --resign-invalid -o OUT")
    compare(lambda: machofix.sign(tampered, output=os.path.join(work, "api.so"), resign_invalid=True),
            ("sign", "--json", "-", "-o", os.path.join(work, "cli.so"), "--resign-invalid", tampered),
            "sign(tampered, resign_invalid=True)", translate=("cli.so", "api.so"))


def check_loader_rules(fixtures, work):
    """A file breaking a loader rule: verify's report is not ok and names the rule, typed,
    as the command line does; prune and repair_bytes refuse it (status 2)."""
    data = bytearray(read(os.path.join(fixtures, "aoti_metal_arm64_dyldinfo_unsigned.in")))
    offset = tamper.writable_text(data, "arm64")
    broken = os.path.join(work, "writable_text.so")
    with open(broken, "wb") as handle:
        handle.write(data)
    compare(lambda: machofix.verify(broken), ("verify", "--json", "-", broken), "verify(breaks a loader rule)")
    report = machofix.verify(broken)
    found = report.files[0].macho.slices[0].loader_rules
    message = found[0].message if found else ""
    expect(not report.ok and found == [machofix.LoaderRuleViolation("seg-protection", offset, message)],
           f"verify(breaks a loader rule): not ok, the rule and its offset, typed ({found})")
    raises(lambda: machofix.prune(broken, dry_run=True), 2, "loader rule seg-protection", "prune(breaks a loader rule)")
    raises(lambda: machofix.repair_bytes(bytes(data)), 2, "loader rule seg-protection",
           "repair_bytes(breaks a loader rule)")


def check_typing():
    package = os.path.dirname(machofix.__file__)
    expect(os.path.isfile(os.path.join(package, "py.typed")), "py.typed is installed")
    hints = {name: typing.get_type_hints(getattr(machofix, name)).get("return")
             for name in ("inspect", "check", "verify", "prune", "sign", "repair_bytes")}
    expect(hints == {"inspect": machofix.Report, "check": machofix.Report, "verify": machofix.Report,
                     "prune": machofix.Report, "sign": machofix.Report, "repair_bytes": bytes},
           f"every function is annotated with what it returns ({hints})")
    installed = os.path.join(sys.prefix, "bin", "machofix")
    expect(os.path.realpath(machofix.find_executable()) == os.path.realpath(installed),
           f"the executable the wheel installed runs ({installed})")
    expect(all(dataclasses.is_dataclass(getattr(machofix, name)) for name in (
        "Report", "FileReport", "MachOReport", "SliceReport", "DylibReport", "SignatureReport", "PteReport", "BlobReport",
        "Finding", "Summary", "LoaderRuleViolation")), "the report types are dataclasses")


def check_contract(fixtures, work):
    """check() takes the command line's contract options (provided=, allowed_rpath=, required=, forbid=,
    contract=, no_contract=, sarif=): the command line's findings, a contract found beside the model, a
    malformed one raising."""
    rpaths = os.path.join(fixtures, "contract_rpaths_arm64_chained.in")
    weak = os.path.join(fixtures, "contract_weak_x86_64_dyldinfo.in")
    directory = os.path.join(work, "contract")
    os.makedirs(directory)
    contract = os.path.join(directory, "machofix.toml")
    with open(contract, "w") as handle:
        handle.write('provided = ["@rpath/libomp.dylib"]\nrequired = "libomp.dylib"\n')
    compare(lambda: machofix.check([rpaths, weak], provided="@rpath/libfoo.dylib", contract=contract),
            ("check", "--json", "-", "--provided", "@rpath/libfoo.dylib", "--contract", contract, rpaths, weak),
            "check(provided=, contract=): the rpath and weak-required findings")
    compare(lambda: machofix.check(rpaths, provided=["@rpath/*"], allowed_rpath="/opt/llvm-openmp/*",
                                   required=["libomp.dylib"], forbid="*omp*", allow_prefix="/opt/"),
            ("check", "--json", "-", "--provided", "@rpath/*", "--allowed-rpath", "/opt/llvm-openmp/*", "--required",
             "libomp.dylib", "--forbid", "*omp*", "--allow-prefix", "/opt/", rpaths),
            "check(provided=, allowed_rpath=, required=, forbid=, allow_prefix=)")
    beside = os.path.join(directory, "model.dylib")
    shutil.copyfile(rpaths, beside)
    report = machofix.check(beside)
    expect(report.contracts == [contract] and sorted(f.rule for f in report.findings) ==
           ["absolute-rpath", "duplicate-rpath", "unprovided-dependency"]
           and all(f.reason for f in report.findings) and report.findings[1].repair.startswith("machofix edit ")
           and report.findings[1].offset, "check(model) reads the machofix.toml beside it; findings carry reason, repair, offset")
    expect(machofix.check(beside, no_contract=True).ok, "check(no_contract=True): none read, no finding")
    sarif = os.path.join(directory, "out.sarif")
    machofix.check(beside, sarif=sarif)
    with open(sarif) as handle:
        expect(len(json.load(handle)["runs"][0]["results"]) == 3, "check(sarif=) writes the SARIF file")
    with open(contract, "w") as handle:
        handle.write('provided = ["@rpath/libomp.dylib"]\nrequird = "libomp.dylib"\n')
    raises(lambda: machofix.check(beside), 2, "line 2, column 1: unknown key 'requird'",
           "check() with a misspelt key in the contract")


def check_edit(fixtures, pte_writer, work):
    """edit(): the command line's report and bytes, on a thin dylib and a .pte; the
    pairs of change=/rpath= as a mapping and as tuples; weak_link= after change=; an edit
    matching nothing raises."""
    pte = os.path.join(work, "edit-model.pte")
    subprocess.run([pte_writer, "wrap", os.path.join(fixtures, "all_used_arm64_chained.in"), pte], check=True)
    cases = [
        (os.path.join(fixtures, "all_used_arm64_chained.in"),
         ["--change", "/opt/llvm-openmp/lib/libomp.dylib", "@rpath/libomp.dylib"],
         {"change": {"/opt/llvm-openmp/lib/libomp.dylib": "@rpath/libomp.dylib"}}),
        (pte, ["--change", "*libomp*", "@rpath/libomp.dylib", "--add-rpath", "@loader_path"],
         {"change": [("*libomp*", "@rpath/libomp.dylib")], "add_rpath": "@loader_path"}),
        (os.path.join(fixtures, "contract_rpaths_arm64_chained.in"),
         ["--rpath", "/opt/llvm-openmp/lib", "@loader_path/omp", "--delete-rpath", "@loader_path/../lib"],
         {"rpath": {"/opt/llvm-openmp/lib": "@loader_path/omp"}, "delete_rpath": ["@loader_path/../lib"]}),
        (os.path.join(fixtures, "all_used_arm64_chained.in"),
         ["--change", "/opt/llvm-openmp/lib/libomp.dylib", "@rpath/libomp.dylib", "--weak-link", "@rpath/libomp.dylib"],
         {"change": {"/opt/llvm-openmp/lib/libomp.dylib": "@rpath/libomp.dylib"}, "weak_link": ["@rpath/libomp.dylib"]}),
    ]
    for index, (path, options, kwargs) in enumerate(cases):
        name = os.path.basename(path)
        with twin_directories(path, os.path.join(work, f"edit{index}")) as twins:
            compare(lambda: machofix.edit(name, output="out", **kwargs), ("edit", "--json", "-", "-o", "out", *options, name),
                    f"edit({name}, {kwargs})", cwd=twins[0], translate=twins)
            report = machofix.edit(name, dry_run=True, **kwargs)
            applied = [e.kind for f in report.files for s in _slices(f) for e in s.edits if e.status == "applied"]
            expect(set(applied) == {k.replace("_", "-") for k in kwargs},
                   f"edit({name}, dry_run=True): slice.edits lists each edit applied ({applied})")
        expect(read(os.path.join(twins[0], "out")) == read(os.path.join(twins[1], "out")),
               f"edit({name}): the file written is the command line's, byte for byte")
    raises(lambda: machofix.edit(cases[0][0], dry_run=True, change={"*libgomp*": "@rpath/libgomp.dylib"}), 2,
           "no dependent dylib's install name matches '*libgomp*'", "edit() with a --change matching nothing")


def _slices(file_report):
    """Every slice of a file report: its own Mach-O's, or those of its .pte blobs."""
    if file_report.macho:
        yield from file_report.macho.slices
    if file_report.pte:
        for blob in file_report.pte.blobs:
            if blob.macho:
                yield from blob.macho.slices


def main():
    global MACHOFIX
    MACHOFIX, pte_writer, fixtures, work = [os.path.abspath(a) for a in sys.argv[1:5]]
    samples = os.path.abspath(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] else ""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    models = pte_models(pte_writer, work, samples)
    machos = sorted(os.path.join(fixtures, n) for n in os.listdir(fixtures) if n.endswith(".in"))
    check_typing()
    check_reports(models + machos)
    check_prune(models + machos, work)
    check_repair_bytes(models + machos, work)
    check_errors(models[0], fixtures, work)
    check_invalid_signature(fixtures, work)
    check_loader_rules(fixtures, work)
    check_contract(fixtures, work)
    check_edit(fixtures, pte_writer, work)
    print(f"{len(FAILURES)} failures (check_api)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
