#!/usr/bin/env python3
"""Every command's --json report validates against docs/report.schema.json.

The schema is strict (every object closed with additionalProperties: false, closed
sets of words as enums), so a field the writer adds without the schema fails here.
The reports come from inspect, prune (-o, --dry-run, --in-place, --sign), sign
(--adhoc, --resign-invalid), edit (each edit kind, --weak-link, in a walk), verify and
check (a contract, --provided, --forbid, --app, --min-macos, --arch), on the generated fixtures: thin, universal
(fat and fat64), .pte and .ptd files of tests/pte/pte_writer, a zip of models, a
directory with files that are not models, and failures (a file that is not a model,
refusals of an invalid signature and of an identity signature).

So that neither the schema nor this test can pass vacuously: every property the
schema declares must occur in some report, and so must every value of the enums
listed in COVERED_ENUMS; the schema's rule ids must be the code's (the SARIF
driver's rules, docs/loader-rules.md); and documents spoiled by an extra field, a
wrong enum value, a negative offset or a missing field must be rejected.
Exit 77 (skipped) only when no Python here has jsonschema.
Usage: test_report_schema.py MACHOFIX PTE_WRITER FIXTURE_DIR WORK_DIR
"""
import copy
import importlib.metadata
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import zipfile

try:
    import jsonschema
except ImportError:  # pyenv's Python: Debian's has python3-jsonschema
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])
    print("SKIP: no jsonschema module")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import pte_models  # noqa: E402
import tamper  # noqa: E402
from relative_name import dylib_with_relative_dependency  # noqa: E402

SCHEMA = os.path.join(ROOT, "docs", "report.schema.json")
THIN = "aoti_metal_arm64_chained.in"  # lld-signed arm64, libomp unused
CLEAN = "aoti_metal_arm64_chained.ref"  # nothing to prune
UNSIGNED = "aoti_metal_arm64_dyldinfo_unsigned.in"
FAT = "universal_fat_dyldinfo.in"  # x86_64 unsigned + arm64 signed
FAT64 = "universal_fat64_chained.in"
RPATHS = "contract_rpaths_arm64_chained.in"  # absolute and repeated LC_RPATHs, @rpath/libomp
WEAK = "contract_weak_x86_64_dyldinfo.in"  # libomp weak-linked
# Weak, re-exported and upward dylibs, flat lookups, executables and bundles.
DYLIB_KINDS = ("weak_dylibs_arm64_dyldinfo.in", "reexport_used_arm64_chained.in", "reexport_trie_arm64_chained.in",
               "upward_arm64_dyldinfo.in", "dynamic_lookup_arm64_chained.in", "flat_namespace_arm64_dyldinfo.in",
               "execute_arm64_chained.in", "bundle_arm64_dyldinfo.in")
MH_OBJECT = 1
# Enums whose every value some report must show: the ones the fixtures can reach.
COVERED_ENUMS = ("#/properties/command", "#/$defs/FILE/properties/kind", "#/$defs/FILE/properties/status",
                 "#/$defs/DYLIB/properties/kind", "#/$defs/EDIT/properties/kind", "#/$defs/EDIT/properties/status",
                 "#/$defs/FINDING/properties/rule", "#/$defs/PTE/properties/container",
                 "#/$defs/SIGNATURE/properties/status", "#/$defs/SLICE/properties/signature/properties/status")

failures = []


def expect(condition, what, detail=""):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what + (f"\n    {detail}" if detail else ""))


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, (bytes, bytearray)) else "w") as handle:
        handle.write(data)
    return path


def read(path):
    with open(path, "rb") as handle:
        return bytearray(handle.read())


class Inputs:
    """The files the reports are made of, in WORK/inputs."""

    def __init__(self, pte_writer, fixtures, work):
        self.pte_writer, self.fixtures, self.dir = pte_writer, fixtures, os.path.join(work, "inputs")
        os.makedirs(self.dir)

    def path(self, name):
        return os.path.join(self.dir, name)

    def copy(self, fixture, name=None):
        return shutil.copyfile(os.path.join(self.fixtures, fixture), self.path(name or fixture))

    def changed(self, fixture, name, change):
        """A copy of the fixture with change(bytearray) applied."""
        data = read(os.path.join(self.fixtures, fixture))
        change(data)
        return write(self.path(name), data)

    def wrap(self, so, name):
        subprocess.run([self.pte_writer, "wrap", so, self.path(name), "hash"], check=True, capture_output=True)
        return self.path(name)

    def identity_signed(self, fixture, name):
        subprocess.run([sys.executable, os.path.join(HERE, "..", "support", "identity_sign.py"),
                        os.path.join(self.fixtures, fixture), self.path(name)], check=True)
        return self.path(name)

    def zip(self, name, members):
        with zipfile.ZipFile(self.path(name), "w") as archive:
            for member in members:
                archive.write(member, os.path.basename(member))
        return self.path(name)


def spoiled_inputs(inputs):
    """Mach-O files machofix reports on but refuses to rewrite, and one it cannot read."""
    inputs.changed(THIN, "tampered.dylib", lambda data: tamper.tamper_text(data, "arm64"))
    inputs.changed(UNSIGNED, "writable_text.dylib", lambda data: tamper.writable_text(data, "arm64"))
    inputs.changed(THIN, "object.o", lambda data: struct.pack_into("<I", data, 12, MH_OBJECT))
    inputs.changed(THIN, "broken.so", lambda data: struct.pack_into("<I", data, 16, 100000))  # ncmds past sizeofcmds
    inputs.identity_signed(THIN, "identity.dylib")


def make_inputs(pte_writer, fixtures, work):
    inputs = Inputs(pte_writer, fixtures, work)
    for fixture in (THIN, CLEAN, UNSIGNED, FAT, FAT64, RPATHS, WEAK, *DYLIB_KINDS):
        inputs.copy(fixture)
    spoiled_inputs(inputs)
    inputs.wrap(inputs.path(THIN), "model.pte")
    inputs.wrap(inputs.path(FAT), "universal.pte")
    inputs.wrap(inputs.path("broken.so"), "broken.pte")  # the blob cannot be analyzed: its report says why
    inputs.zip("models.zip", [inputs.path(THIN), inputs.path(RPATHS), inputs.path("model.pte")])
    inputs.zip("tampered.zip", [inputs.path(CLEAN), inputs.path("tampered.dylib")])
    write(inputs.path("notes.txt"), "not a model\n")
    write(inputs.path("lib.so"), b"\x7fELF" + bytes(60))
    write(inputs.path("machofix.toml"), 'provided = "@rpath/libomp.dylib"\nrequired = "libomp.dylib"\n')
    return inputs


def matrix(pte_writer, work):
    """The writer's .pte/.ptd matrix over tests/pte/make_blobs.sh's images, in a directory."""
    models = pte_models.pte_models(pte_writer, os.path.join(work, "pte"))
    ptd = [m for m in models if m.endswith(".ptd")]
    expect(ptd and len(ptd) < len(models), f"the writer's matrix has .pte and .ptd files ({len(models)} files)")
    return os.path.dirname(models[0])


class Reports:
    """Runs machofix with --json and keeps every document with what made it."""

    def __init__(self, machofix, work):
        self.machofix, self.dir = machofix, os.path.join(work, "reports")
        os.makedirs(self.dir)
        self.documents = []  # (label, document)

    def out(self, name):
        return os.path.join(self.dir, name)

    def run(self, label, command, *args, status=0):
        report = self.out(f"{len(self.documents)}.json")
        result = subprocess.run([self.machofix, command, *map(str, args), "--json", report], capture_output=True,
                                text=True, timeout=300)
        expect(result.returncode == status, f"{label}: exit {status}",
               f"exit {result.returncode}; stderr: {result.stderr.strip()[:400]}")
        if not os.path.exists(report):
            expect(False, f"{label}: a report is written")
            return {}
        with open(report) as handle:
            document = json.load(handle)
        self.documents.append((label, document))
        return document


def files(document):
    """Every FILE of a document, members included."""
    pending, found = list(document.get("files", [])), []
    while pending:
        entry = pending.pop()
        found.append(entry)
        pending += entry.get("members", [])
    return found


def inspect_runs(reports, inputs, pte_dir):
    reports.run("inspect a thin dylib", "inspect", inputs.path(THIN))
    reports.run("inspect every fixture kind", "inspect", *[inputs.path(f) for f in (FAT, FAT64, RPATHS, *DYLIB_KINDS)])
    # A broken Mach-O among them fails, and with it the run.
    document = reports.run("inspect a directory with other files, an archive, models", "inspect", inputs.dir, status=2)
    expect({"skipped", "failed", "inspected"} <= {f["status"] for f in files(document)},
           "the directory: skipped, failed and inspected files")
    reports.run("inspect the .pte/.ptd matrix", "inspect", pte_dir)
    document = reports.run("inspect a .pte whose blob cannot be analyzed", "inspect", inputs.path("broken.pte"))
    expect(any("error" in b for f in files(document) for b in f.get("pte", {}).get("blobs", [])),
           "a blob that cannot be analyzed: its error is in the report")


def prune_runs(reports, inputs, pte_dir):
    reports.run("prune -o", "prune", inputs.path(THIN), "-o", reports.out("thin.out"))
    reports.run("prune -o, nothing to prune", "prune", inputs.path(CLEAN), "-o", reports.out("clean.out"))
    reports.run("prune --dry-run, universal", "prune", inputs.path(FAT), "--dry-run")
    in_place = shutil.copyfile(inputs.path(FAT64), reports.out("fat64.dylib"))
    reports.run("prune --in-place --backup", "prune", in_place, "--in-place", "--backup", ".orig")
    reports.run("prune --sign", "prune", inputs.path(UNSIGNED), "--sign", "-o", reports.out("unsigned.out"))
    document = reports.run("prune a .pte -o", "prune", inputs.path("model.pte"), "-o", reports.out("model.pte"))
    expect(any(b["key_renewals"] for f in files(document) for b in f.get("pte", {}).get("blobs", [])),
           "prune of a .pte with content-hash keys: the renewals are reported")
    reports.run("prune the .pte/.ptd matrix -o DIR", "prune", pte_dir, "-o", reports.out("matrix"))
    reports.run("prune an archive -o", "prune", inputs.path("models.zip"), "-o", reports.out("models.zip"))


def sign_runs(reports, inputs):
    reports.run("sign an unsigned file", "sign", inputs.path(UNSIGNED), "-o", reports.out("signed.out"))
    reports.run("sign a signed file", "sign", inputs.path(THIN), "-o", reports.out("resigned.out"))
    reports.run("sign --adhoc an identity signature", "sign", inputs.path("identity.dylib"), "--adhoc", "-o",
                reports.out("adhoc.out"))
    reports.run("sign --resign-invalid", "sign", inputs.path("tampered.dylib"), "--resign-invalid", "-o",
                reports.out("tampered.out"))
    reports.run("sign a .pte with a universal blob", "sign", inputs.path("universal.pte"), "-o",
                reports.out("universal.pte"))


def edit_runs(reports, inputs):
    rpaths = inputs.path(RPATHS)
    document = reports.run("edit: every kind of edit", "edit", rpaths, "-o", reports.out("edited.out"),
                           "--delete-rpath", "/opt/*", "--rpath", "@loader_path/../lib", "@loader_path/lib", "--id",
                           "@rpath/renamed.dylib", "--change", "*libfoo*", "@rpath/libbar.dylib", "--add-rpath",
                           "@executable_path", "--weak-link", "*libomp*", "--delete-duplicate-rpaths")
    kinds = {e["kind"] for f in files(document) for s in f.get("macho", {}).get("slices", []) for e in s["edits"]}
    expect(len(kinds) == 7, "edit: seven kinds of edit in one report", str(sorted(kinds)))
    reports.run("edit: already so", "edit", rpaths, "-o", reports.out("same.out"), "--change", "*libomp*",
                "@rpath/libomp.dylib")
    walk = os.path.join(reports.dir, "walk")
    os.makedirs(walk)
    for fixture in (THIN, WEAK):
        shutil.copyfile(inputs.path(fixture), os.path.join(walk, fixture))
    reports.run("edit in a walk: an edit that matches nothing is a note", "edit", walk, "--dry-run", "--delete-rpath",
                "/nowhere/*", "--weak-link", "*libomp*")
    reports.run("edit a .pte", "edit", inputs.path("model.pte"), "-o", reports.out("edited.pte"), "--add-rpath",
                "@loader_path")


def verify_runs(reports, inputs):
    reports.run("verify valid files", "verify", inputs.path(THIN), inputs.path(FAT64))
    document = reports.run("verify an invalid signature", "verify", inputs.path("tampered.dylib"), status=1)
    expect(first(document, "files", "*", "macho", "slices", "*", "signature", "first_problem_offset") is not None,
           "verify: the first problem's offset")
    document = reports.run("verify a file breaking a loader rule", "verify", inputs.path("writable_text.dylib"),
                           status=1)
    expect(any(s["loader_rules"] for f in files(document) for s in f.get("macho", {}).get("slices", [])),
           "verify: the loader rule")


def fix_runs(reports, inputs):
    all_used = inputs.copy("all_used_arm64_chained.in")
    reports.run("fix -o: an unused dependency removed", "fix", "--no-contract", inputs.path(THIN), "-o",
                reports.out("thin.fix"))
    reports.run("fix -o: nothing to fix, a byte copy", "fix", "--no-contract", inputs.path(CLEAN), "-o",
                reports.out("clean.fix"))
    # absolute-rpath is a warning, which fix leaves (the file passes): an error here.
    document = reports.run("fix --dry-run: rpaths under a declaration", "fix", "--no-contract", "--provided", "@rpath/*",
                           "--level", "absolute-rpath=error", inputs.path(RPATHS), "--dry-run")
    edits = {e["edit"] for f in files(document) for e in f.get("fix", {}).get("edits", [])}
    expect({"delete-rpath", "delete-duplicate-rpaths"} <= edits, "fix: rpath edits", sorted(edits))
    # A used libomp at /opt renamed to the provided name; @rpath/libfoo.dylib is provided
    # by nothing, so the repaired form still fails: not written.
    document = reports.run("fix: a rename, not written", "fix", "--no-contract", "--provided", "@rpath/libomp.dylib",
                           all_used, "-o", reports.out("all_used.fix"), status=1)
    edits = {e["edit"] for f in files(document) for e in f.get("fix", {}).get("edits", [])}
    expect("change" in edits and not os.path.exists(reports.out("all_used.fix")),
           "fix: the rename is listed, nothing is written", sorted(edits))
    # --app: a libomp.dylib that exports none of libomp's symbols: refused, named.
    app = inputs.path("app")
    os.makedirs(app, exist_ok=True)
    shutil.copy(os.path.join(inputs.fixtures, CLEAN), os.path.join(app, "libomp.dylib"))
    document = reports.run("fix --app: refusals", "fix", "--no-contract", "--app", app,
                           all_used, "--dry-run", status=1)
    expect(any(f.get("fix", {}).get("refusals") for f in files(document)), "fix --app: the refusals are listed")
    document = reports.run("fix: a rewrite refused (an identity signature): not written", "fix", "--no-contract",
                           inputs.path("identity.dylib"), "--dry-run", status=1)
    expect(any("--adhoc" in r["reason"] for f in files(document) for r in f.get("fix", {}).get("refusals", [])),
           "fix: the refusal says what to do (--adhoc)")
    reports.run("fix: a file that is not a model", "fix", "--no-contract", inputs.path("notes.txt"), "--dry-run", status=2)


def check_runs(reports, inputs):
    models = [inputs.path(n) for n in (THIN, RPATHS, WEAK, FAT, "model.pte", "models.zip")]
    document = reports.run("check: a contract and --forbid", "check", "--contract", inputs.path("machofix.toml"),
                           "--forbid", "*foo*", *models, status=1)
    expect(document.get("contracts") == [inputs.path("machofix.toml")], "check: the contract read is listed")
    expect(any(f["member"] for f in document.get("findings", [])), "check: findings in an archive's members")
    reports.run("check: --provided, no contract file", "check", "--no-contract", "--provided", "@rpath/libfoo.dylib",
                inputs.path(RPATHS), status=1)
    reports.run("check: no finding", "check", "--no-contract", inputs.path(CLEAN))
    # What verify fails: a flipped byte of code, __TEXT writable.
    broken = [inputs.path("tampered.dylib"), inputs.path("writable_text.dylib"), inputs.path("with_i386.dylib")]
    with open(os.path.join(inputs.fixtures, CLEAN), "rb") as handle:
        data = handle.read()
    with open(broken[-1], "wb") as handle:  # an unchecked-slice note
        handle.write(tamper.with_i386_slice(data))
    broken.append(dylib_with_relative_dependency(inputs.path("relative")))
    document = reports.run("check: what verify fails", "check", "--no-contract", *broken, status=1)
    expect({"invalid-signature", "loader-rule", "unchecked-slice", "relative-install-name"}
           <= {f["rule"] for f in document.get("findings", [])},
           "check: invalid-signature, loader-rule, unchecked-slice and relative-install-name findings")
    # --app: a directory of libraries whose libomp.dylib is another library (it exports
    # none of libomp's symbols), the targets' rules beside.
    app = inputs.path("app")
    os.makedirs(app, exist_ok=True)
    shutil.copy(os.path.join(inputs.fixtures, CLEAN), os.path.join(app, "libomp.dylib"))
    document = reports.run("check: --app, --min-macos, --arch", "check", "--no-contract", "--app", app,
                           "--min-macos", "10.15", "--arch", "x86_64", inputs.path(THIN), inputs.path(RPATHS),
                           inputs.path(WEAK), inputs.path(FAT), status=1)
    rules = {finding["rule"] for finding in document.get("findings", [])}
    expect({"library-not-loaded", "symbol-not-found", "min-macos", "arch-missing"} <= rules,
           "check --app: each rule of the application and the targets", sorted(rules))
    expect(document.get("app_checks"), "check --app: each slice's load")
    # missing-weights: a delegate whose weights key is empty, one whose weights are in no
    # .pte (a warning without --ptd).
    weights = []
    for case in ("empty-key", "absent"):
        weights.append(inputs.path(f"weights_{case}.pte"))
        subprocess.run([inputs.pte_writer, "weights-case", case, os.path.join(inputs.fixtures, CLEAN), weights[-1]],
                       check=True, capture_output=True)
    document = reports.run("check: missing weights", "check", "--no-contract", *weights, status=1)
    expect(sorted(f["level"] for f in document.get("findings", []) if f["rule"] == "missing-weights") == ["error", "warning"],
           "check: missing-weights, an error and a warning")


def error_kinds(document):
    return {f.get("error_kind") for f in files(document) if f["status"] == "failed"}


def failure_runs(reports, inputs):
    document = reports.run("a named file that is not a model", "inspect", inputs.path("notes.txt"), status=2)
    expect(error_kinds(document) == {"malformed"}, "a file that is not a model: error_kind malformed")
    document = reports.run("an edit that matches nothing", "edit", "--dry-run", "--delete-rpath", "/nowhere/*",
                           inputs.path(CLEAN), status=2)
    expect(error_kinds(document) == {"inapplicable"}, "an edit matching nothing: error_kind inapplicable")
    reports.run("a Mach-O object file named", "prune", inputs.path("object.o"), "--dry-run", status=2)
    document = reports.run("refused: an invalid signature", "prune", inputs.path("tampered.dylib"), "-o",
                           reports.out("refused.out"), status=2)
    expect(any(f.get("refused") for f in files(document)), "an invalid signature: refused")
    expect(error_kinds(document) == {"refused"}, "an invalid signature: error_kind refused")
    reports.run("refused: an identity signature", "sign", inputs.path("identity.dylib"), "-o",
                reports.out("identity.out"), status=2)
    reports.run("refused: an archive with a tampered member", "prune", inputs.path("tampered.zip"), "-o",
                reports.out("tampered.zip"), status=2)
    document = reports.run("a file that does not exist", "verify", inputs.path("missing.dylib"), status=2)
    expect(error_kinds(document) == {"system"}, "a file that does not exist: error_kind system")


def resolve(root, pointer):
    node = root
    for part in pointer.lstrip("#/").split("/"):
        node = node[int(part)] if isinstance(node, list) else node[part.replace("~1", "/").replace("~0", "~")]
    return node


def json_type(value):
    for name, kind in (("null", type(None)), ("boolean", bool), ("integer", int), ("number", float), ("string", str),
                       ("array", list), ("object", dict)):
        if isinstance(value, kind):
            return name
    return "?"


class Coverage:
    """Which (object schema, property) pairs and enum values the documents reach.

    Walks the structure the schema gives each value: $ref, properties, items, and the
    branches of anyOf/oneOf that admit the value's type. if/then/else, not and
    dependentSchemas only constrain, they declare nothing."""

    def __init__(self, schema):
        self.schema = schema
        self.properties, self.values = set(), {}

    def declared(self):
        found, pending, seen = set(), [("#", self.schema)], set()
        while pending:
            pointer, node = pending.pop()
            if pointer in seen:
                continue
            seen.add(pointer)
            found |= {(pointer, name) for name in node.get("properties", {})}
            pending += self.children(pointer, node)
        return found

    def children(self, pointer, node):
        found = [(f"{pointer}/properties/{name}", sub) for name, sub in node.get("properties", {}).items()]
        if "$ref" in node:
            found.append((node["$ref"], resolve(self.schema, node["$ref"])))
        if "items" in node:
            found.append((f"{pointer}/items", node["items"]))
        for keyword in ("anyOf", "oneOf", "allOf"):
            found += [(f"{pointer}/{keyword}/{i}", sub) for i, sub in enumerate(node.get(keyword, []))]
        return found

    def types(self, node):
        if "$ref" in node:
            return self.types(resolve(self.schema, node["$ref"]))
        kinds = node.get("type", [])
        return {kinds} if isinstance(kinds, str) else set(kinds)

    def admits(self, node, value):
        kinds = self.types(node)
        return not kinds or json_type(value) in kinds or (json_type(value) == "integer" and "number" in kinds)

    def walk(self, value, pointer="#", node=None):
        node = self.schema if node is None else node
        if "enum" in node and isinstance(value, (str, int, bool)):
            self.values.setdefault(pointer, set()).add(value)
        if isinstance(value, dict):
            self.properties |= {(pointer, name) for name in value if name in node.get("properties", {})}
        for child_pointer, child in self.children(pointer, node):
            self.walk_child(value, pointer, child_pointer, child)

    def walk_child(self, value, pointer, child_pointer, child):
        keyword, _, name = child_pointer[len(pointer) + 1:].partition("/")
        if not child_pointer.startswith(pointer + "/"):  # a $ref's target
            self.walk(value, child_pointer, child)
        elif keyword == "properties":
            if isinstance(value, dict) and name in value:
                self.walk(value[name], child_pointer, child)
        elif keyword == "items":
            for item in value if isinstance(value, list) else []:
                self.walk(item, child_pointer, child)
        elif keyword == "allOf" or self.admits(child, value):
            self.walk(value, child_pointer, child)


def validate_all(validator, documents):
    for label, document in documents:
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
        expect(not errors, f"{label}: the report validates",
               "; ".join(f"{list(e.absolute_path)}: {e.message[:200]}" for e in errors[:5]))


def check_coverage(schema, documents):
    coverage = Coverage(schema)
    for _, document in documents:
        coverage.walk(document)
    missing = sorted(coverage.declared() - coverage.properties)
    expect(not missing, f"every one of the schema's {len(coverage.declared())} properties occurs in a report",
           "never seen: " + ", ".join(f"{pointer} {name}" for pointer, name in missing))
    for pointer in COVERED_ENUMS:
        unseen = [v for v in resolve(schema, pointer)["enum"] if v not in coverage.values.get(pointer, set())]
        expect(not unseen, f"every value of {pointer} occurs in a report", f"never seen: {unseen}")
    for pointer in sorted(set(coverage.values) - set(COVERED_ENUMS)):
        unseen = [v for v in resolve(schema, pointer)["enum"] if v not in coverage.values[pointer]]
        if unseen:
            print(f"note: not produced by these fixtures: {pointer}: {unseen}")


def first(value, *path):
    """The first value at `path` ('*': any item of a list), or None."""
    if not path:
        return value
    if path[0] == "*":
        candidates = value if isinstance(value, list) else []
    else:
        candidates = [value[path[0]]] if isinstance(value, dict) and path[0] in value else []
    for candidate in candidates:
        found = first(candidate, *path[1:])
        if found is not None:
            return found
    return None


SLICE_PATH = ("files", "*", "macho", "slices", "*")
# (what, where: a path for first(), the change made there, the keyword that must refuse it)
SPOILINGS = [
    ("an extra field at the top", (), {"extra": 1}, "additionalProperties"),
    ("an extra field in a dylib", (*SLICE_PATH, "dylibs", "*"), {"weak": True}, "additionalProperties"),
    ("an extra field in a signature", (*SLICE_PATH, "signature"), {"team": "X"}, "additionalProperties"),
    ("an extra field in a blob", ("files", "*", "pte", "blobs", "*"), {"arch": "arm64"}, "additionalProperties"),
    ("an extra field in a finding", ("findings", "*"), {"severity": "error"}, "additionalProperties"),
    ("an unknown file status", ("files", "*"), {"status": "pruned"}, "enum"),
    ("an unknown edit status", (*SLICE_PATH, "edits", "*"), {"status": "done"}, "enum"),
    ("an unknown finding rule", ("findings", "*"), {"rule": "unused-rpath"}, "enum"),
    ("an unknown dylib kind", (*SLICE_PATH, "dylibs", "*"), {"kind": "lazy"}, "enum"),
    ("an unknown loader rule", (*SLICE_PATH, "loader_rules", "*"), {"rule": "seg-writable"}, "enum"),
    ("a negative offset", SLICE_PATH, {"offset": -1}, "minimum"),
    ("a slice without its signature", SLICE_PATH, {"signature": None}, "required"),
]


def spoiled(document, path, change):
    """A copy of the document changed at `path` (None: the field removed); None if it has no such place."""
    spoiled = copy.deepcopy(document)
    target = first(spoiled, *path)
    if not isinstance(target, dict):
        return None
    for name, value in change.items():
        if value is None:
            target.pop(name, None)
        else:
            target[name] = value
    return spoiled


def keywords(errors):
    """The keywords of the errors and of the errors under them (anyOf, if/then...)."""
    found = set()
    for error in errors:
        found |= {error.validator} | keywords(error.context or [])
    return found


def check_rejections(validator, documents):
    for what, path, change, keyword in SPOILINGS:
        document = next((d for d in (spoiled(d, path, change) for _, d in documents) if d is not None), None)
        errors = list(validator.iter_errors(document)) if document is not None else []
        expect(keyword in keywords(errors), f"rejected by {keyword}: {what}",
               "no report has the place" if document is None else f"errors: {[e.message[:100] for e in errors]}")


def check_dead_entry_found(schema, documents):
    """The coverage check itself finds a property no report has."""
    haunted = copy.deepcopy(schema)
    haunted["$defs"]["DYLIB"]["properties"]["dead"] = {"type": "string"}
    coverage = Coverage(haunted)
    for _, document in documents:
        coverage.walk(document)
    expect(coverage.declared() - coverage.properties == {("#/$defs/DYLIB", "dead")},
           "the coverage check finds a property no report has")


def check_rule_ids(machofix, schema, inputs):
    """The schema's rule ids are the code's: the SARIF driver lists every check rule,
    docs/loader-rules.md every loader rule (a unit test holds it to the code)."""
    sarif = subprocess.run([machofix, "check", "--sarif", "-", "--no-contract", inputs.path(CLEAN)],
                           capture_output=True, text=True, timeout=60)
    ids = [rule["id"] for rule in json.loads(sarif.stdout)["runs"][0]["tool"]["driver"]["rules"]]
    expect(ids == resolve(schema, "#/$defs/FINDING/properties/rule")["enum"], "the finding rules are check's rules",
           str(ids))
    with open(os.path.join(ROOT, "docs", "loader-rules.md")) as handle:
        documented = re.findall(r"^#### `([a-z0-9-]+)`", handle.read(), re.M)
    expect(sorted(documented) == sorted(resolve(schema, "#/$defs/RULE/properties/rule")["enum"]),
           f"the loader rules are docs/loader-rules.md's ({len(documented)})")


def main(argv):
    machofix, pte_writer, fixtures, work = [os.path.abspath(a) for a in argv[1:5]]
    started = time.monotonic()
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    with open(SCHEMA) as handle:
        schema = json.load(handle)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    inputs = make_inputs(pte_writer, fixtures, work)
    pte_dir = matrix(pte_writer, work)
    reports = Reports(machofix, work)
    inspect_runs(reports, inputs, pte_dir)
    prune_runs(reports, inputs, pte_dir)
    sign_runs(reports, inputs)
    edit_runs(reports, inputs)
    verify_runs(reports, inputs)
    check_runs(reports, inputs)
    fix_runs(reports, inputs)
    failure_runs(reports, inputs)
    validate_all(validator, reports.documents)
    check_coverage(schema, reports.documents)
    check_rejections(validator, reports.documents)
    check_dead_entry_found(schema, reports.documents)
    check_rule_ids(machofix, schema, inputs)
    print(f"{len(reports.documents)} reports, jsonschema {importlib.metadata.version('jsonschema')}, "
          f"{time.monotonic() - started:.1f} s; {len(failures)} failures")
    for failure in failures:
        print("FAIL " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
