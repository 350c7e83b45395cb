#!/usr/bin/env python3
"""`check` with a portability contract: --provided, --allowed-rpath,
--required, --contract FILE and machofix.toml found beside the models.

On linker-made fixtures (make_fixtures.py: contract_clean_arm64_chained, the same with
a build machine's absolute LC_RPATH and a repeated one, and with libomp weak-linked),
thin and inside a .pte: a clean model passes its contract; each rule fails on the
crafted one with its id, reason and repair; the load command's offset is the one
llvm-objdump's load commands give (and, in a .pte, the bytes there are that command);
without a declaration check behaves as before; malformed and unknown-key contract files
are refused (exit 2, file, line and key, nothing on stdout); discovery beside the model
and in its parents, --contract overriding it, --no-contract; the command line adding to
the file; samples/export_step.py --contract.
Usage: test_contract.py MACHOFIX PTE_WRITER FIXTURE_DIR WORK_DIR
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OBJDUMP = "llvm-objdump-16"
LC_RPATH = 0x8000001C

failures = []


def expect(condition, what, result=None):
    if not condition and result is not None:
        what += f"\n    exit {result.returncode}; stdout: {result.stdout.strip()[:800]}; stderr: {result.stderr.strip()[:400]}"
    print(("ok   " if condition else "FAIL ") + what.splitlines()[0], flush=True)
    if not condition:
        failures.append(what)


def run(*args, **kwargs):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120, **kwargs)


def check_json(machofix, *args, cwd=None):
    """`check --json -`: (result, findings, document)."""
    result = run(machofix, "check", "--json", "-", *args, cwd=cwd)
    document = json.loads(result.stdout) if result.stdout.startswith("{") else {}
    return result, document.get("findings", []), document


def rules(found):
    return sorted(f["rule"] for f in found)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)
    return path


def copy(source, destination):
    os.makedirs(os.path.dirname(destination), exist_ok=True)
    shutil.copyfile(source, destination)
    return destination


def rpath_offsets(path):
    """(path, offset of its LC_RPATH) in load-command order, from llvm-objdump's load
    commands: the header (32 bytes) plus every earlier cmdsize."""
    out = subprocess.run([OBJDUMP, "--macho", "--private-headers", path], capture_output=True, text=True,
                         check=True).stdout
    offsets, offset, command = [], 32, None
    for line in out.splitlines():
        words = line.split()
        if words[:1] == ["cmd"]:
            command = words[1]
        elif words[:1] == ["cmdsize"] and command:
            size = int(words[1])
            if command == "LC_RPATH":
                offsets.append(offset)
            offset += size
            command = None
        elif words[:1] == ["path"] and len(offsets) and command is None:
            offsets[-1] = (" ".join(words[1:]).rsplit(" (offset", 1)[0], offsets[-1])
    return offsets


CLEAN = "contract_clean_arm64_chained.in"
RPATHS = "contract_rpaths_arm64_chained.in"
WEAK = "contract_weak_x86_64_dyldinfo.in"
PROVIDES_BOTH = 'provided = ["@rpath/libomp.dylib", "@rpath/libfoo.dylib"]\n'


def without_contract(machofix, fixtures):
    for name in (CLEAN, RPATHS, WEAK):
        result, found, document = check_json(machofix, os.path.join(fixtures, name))
        expect(result.returncode == 0 and found == [] and document.get("contracts") == [],
               f"{name} without a contract: no finding (the contract rules need a declaration)", result)


def each_rule(machofix, fixtures, work):
    contract = write(os.path.join(work, "rules", "machofix.toml"), PROVIDES_BOTH)
    result, found, _ = check_json(machofix, os.path.join(fixtures, CLEAN), "--contract", contract)
    expect(result.returncode == 0 and found == [], "the clean model passes a contract providing libomp and libfoo", result)

    rpaths = os.path.join(fixtures, RPATHS)
    result, found, _ = check_json(machofix, rpaths, "--contract", contract)
    expect(result.returncode == 1 and rules(found) == ["absolute-rpath", "duplicate-rpath"],
           "absolute and repeated LC_RPATH: one absolute-rpath and one duplicate-rpath finding", result)
    reference = rpath_offsets(rpaths)
    by_rule = {f["rule"]: f for f in found}
    absolute, duplicate = by_rule.get("absolute-rpath", {}), by_rule.get("duplicate-rpath", {})
    expect(len(reference) == 3 and (absolute.get("rpath"), absolute.get("offset")) == reference[0]
           and (duplicate.get("rpath"), duplicate.get("offset")) == reference[2],
           f"the findings name the rpaths at llvm-objdump's load-command offsets {reference}")
    expect(absolute.get("repair") == f"machofix edit {rpaths} --in-place --delete-rpath /opt/llvm-openmp/lib"
           and duplicate.get("repair") == f"machofix fix {rpaths} --in-place --contract {contract}"
           and "build machine" in absolute.get("reason", "") and "duplicate LC_RPATH" in duplicate.get("reason", ""),
           "each carries its reason and the command that repairs it: the edit for a warning, fix (with the "
           "contract) for an error")
    result, found, _ = check_json(machofix, rpaths, "--contract", contract, "--allowed-rpath", "/opt/llvm-openmp/*")
    expect(rules(found) == ["duplicate-rpath"], "--allowed-rpath GLOB accepts the absolute rpath", result)
    result, found, _ = check_json(machofix, rpaths, "--contract", contract, "--allow-prefix", "/opt/llvm-openmp/")
    expect(rules(found) == ["duplicate-rpath"], "--allow-prefix accepts an rpath under it too", result)

    only_omp = write(os.path.join(work, "rules", "omp.toml"), 'provided = "@rpath/libomp.dylib"\n')
    result, found, _ = check_json(machofix, os.path.join(fixtures, CLEAN), "--contract", only_omp)
    expect(result.returncode == 1 and rules(found) == ["unprovided-dependency"]
           and found[0]["dylib"] == "@rpath/libfoo.dylib" and found[0]["repair"] == "",
           "an @rpath dependency the contract does not provide: unprovided-dependency, no machofix repair", result)
    result, found, _ = check_json(machofix, os.path.join(fixtures, CLEAN), "--contract", only_omp,
                                  "--provided", "@rpath/libfoo.dylib")
    expect(result.returncode == 0 and found == [], "--provided adds to the file's provided list", result)

    required = write(os.path.join(work, "rules", "required.toml"),
                     PROVIDES_BOTH + "required = ['@rpath/libomp.dylib']\n")
    result, found, _ = check_json(machofix, os.path.join(fixtures, WEAK), "--contract", required)
    expect(result.returncode == 1 and rules(found) == ["weak-required-dependency"]
           and found[0]["dylib"] == "@rpath/libomp.dylib" and "weakly depends on" in found[0]["message"],
           "a weak link to a required library: weak-required-dependency", result)
    result, found, _ = check_json(machofix, os.path.join(fixtures, CLEAN), "--contract", required)
    expect(result.returncode == 0 and found == [], "the same library linked normally: no finding", result)
    result, found, _ = check_json(machofix, os.path.join(fixtures, WEAK), "--contract", contract)
    expect(result.returncode == 0 and found == [], "weak but not required (nor an unprovided weak @rpath link): no finding",
           result)
    result, found, _ = check_json(machofix, os.path.join(fixtures, WEAK), "--provided", "@rpath/*", "--required",
                                  "libomp.dylib")
    expect(rules(found) == ["weak-required-dependency"], "--required on the command line alone, matched by last component",
           result)

    aoti = os.path.join(fixtures, "aoti_metal_arm64_chained.in")
    result, found, _ = check_json(machofix, aoti, "--contract", contract)
    omp = [f for f in found if f["dylib"] == "/opt/llvm-openmp/lib/libomp.dylib"]
    expect(rules(found) == ["absolute-install-name", "unused-dependency"] and len(omp) == 2
           and all(f["repair"] == f"machofix fix {aoti} --in-place --contract {contract}" for f in omp),
           "the AOTI shape: libomp at /opt is unused and absolute; its repair is fix (which removes it), not an edit",
           result)
    used = os.path.join(fixtures, "all_used_arm64_chained.in")
    result, found, _ = check_json(machofix, used, "--contract", contract)
    expect(rules(found) == ["absolute-install-name"] and found[0]["repair"] ==
           f"machofix edit {used} --in-place --change /opt/llvm-openmp/lib/libomp.dylib @rpath/libomp.dylib",
           "a used libomp at /opt: absolute-install-name, repaired by edit --change to @rpath", result)
    result, found, _ = check_json(machofix, used, "--contract", contract, "--provided", "/opt/llvm-openmp/lib/*")
    expect(result.returncode == 0 and found == [], "an absolute install name the contract provides is no finding", result)

    text = run(machofix, "check", rpaths, "--contract", contract)
    expect(text.returncode == 1 and "[absolute-rpath]" in text.stdout and "[duplicate-rpath]" in text.stdout
           and "  repair: machofix edit" in text.stdout, "the text report: rule ids and repair lines", text)


def declarations(machofix, fixtures, work):
    """--allowed-rpath alone declares a contract; @executable_path/ and @loader_path/
    dependencies are held to it as @rpath/ ones are."""
    clean = os.path.join(fixtures, CLEAN)
    result, found, document = check_json(machofix, clean, "--no-contract", "--allowed-rpath", "@loader_path/*")
    expect(result.returncode == 1 and rules(found) == ["unprovided-dependency", "unprovided-dependency"]
           and sorted(f["dylib"] for f in found) == ["@rpath/libfoo.dylib", "@rpath/libomp.dylib"],
           "--allowed-rpath alone declares a contract: both @rpath dependencies are unprovided", result)
    only_omp = write(os.path.join(work, "declarations", "omp.toml"), 'provided = "@rpath/libomp.dylib"\n')
    for prefix in ("@executable_path/", "@loader_path/"):
        renamed = copy(clean, os.path.join(work, "declarations", prefix.strip("@/") + ".dylib"))
        # LLVM's install_name_tool, not machofix's edit: the fixture's name comes from another tool.
        done = run("llvm-install-name-tool-16", "-change", "@rpath/libfoo.dylib", prefix + "libfoo.dylib", renamed)
        expect(done.returncode == 0, f"llvm-install-name-tool-16 renames libfoo to {prefix}libfoo.dylib", done)
        result, found, _ = check_json(machofix, renamed, "--contract", only_omp)
        expect(result.returncode == 1 and rules(found) == ["unprovided-dependency"]
               and found[0]["dylib"] == prefix + "libfoo.dylib",
               f"a {prefix} dependency the contract does not provide: unprovided-dependency", result)
        result, found, _ = check_json(machofix, renamed, "--contract", only_omp, "--provided", prefix + "libfoo.dylib")
        expect(result.returncode == 0 and found == [], f"the same {prefix} dependency provided: no finding", result)
        result, found, _ = check_json(machofix, renamed, "--no-contract")
        expect(result.returncode == 0 and found == [], f"a {prefix} dependency without a declaration: no finding", result)


def repairs_repair(machofix, fixtures, work):
    """Each repair command check suggests, run as printed (on a copy), clears its
    finding and leaves the file's other findings as they were: the suggestions are
    commands that work, not prose."""
    contract = write(os.path.join(work, "repairs", "machofix.toml"), PROVIDES_BOTH)
    cases = [(RPATHS, "absolute-rpath"), (RPATHS, "duplicate-rpath"),
             ("all_used_arm64_chained.in", "absolute-install-name"),
             ("aoti_metal_arm64_chained.in", "unused-dependency")]
    for name, rule in cases:
        model = copy(os.path.join(fixtures, name), os.path.join(work, "repairs", rule, "model.dylib"))
        result, found, _ = check_json(machofix, model, "--contract", contract)
        finding = next((f for f in found if f["rule"] == rule), {})
        repair = finding.get("repair", "")
        expect(repair.startswith("machofix "), f"{name}: {rule} suggests a machofix command", result)
        if not repair.startswith("machofix "):
            continue
        fixed = run("sh", "-c", machofix + repair[len("machofix"):])
        result, after, _ = check_json(machofix, model, "--contract", contract)
        left = [f for f in found if f["rule"] != rule and not (rule == "unused-dependency" and f["dylib"] == finding["dylib"])]
        expect(fixed.returncode == 0 and rules(after) == rules(left),
               f"{name}: `{repair}` clears {rule} and nothing else changes (before {rules(found)}, after {rules(after)})", fixed)
        verified = run(machofix, "verify", model)
        expect(verified.returncode == 0, f"{name}: the repaired file verifies", verified)
        if rule == "duplicate-rpath":  # one copy stays: the image still searches that directory
            distinct = lambda document: sorted({r["path"] for f in document.get("files", []) for s in f["macho"]["slices"]
                                                for r in s["rpaths"]})
            before = distinct(check_json(machofix, os.path.join(fixtures, name), "--no-contract")[2])
            after = distinct(check_json(machofix, model, "--no-contract")[2])
            expect(before == after and len(before) == 2, f"{name}: every rpath is still there once ({after})")
    # A trailing slash makes another path: dyld compares LC_RPATHs with strcmp
    # (mach_o::Header::validSemanticsRPath), so it is no repeat.
    slash = copy(os.path.join(fixtures, "aoti_metal_arm64_chained_headerpad.in"),
                 os.path.join(work, "repairs", "slash", "model.dylib"))
    added = run(machofix, "edit", slash, "--in-place", "--add-rpath", "@loader_path/x", "--add-rpath", "@loader_path/x/")
    result, found, _ = check_json(machofix, slash, "--contract", contract)
    expect(added.returncode == 0 and not [f for f in found if f["rule"] == "duplicate-rpath"],
           "'@loader_path/x' and '@loader_path/x/': two paths for dyld, no duplicate-rpath", result)


def sample_cpu(machofix, pte_writer, work):
    """samples/aoti_cpu: a model that really calls OpenMP from /opt/llvm-openmp. Its
    contract provides @rpath/libomp.dylib; `edit --change` to that name is the repair
    (prune removes nothing), and then check with the contract passes."""
    out = os.path.join(work, "cpu")
    subprocess.run([os.path.join(ROOT, "samples", "aoti_cpu", "build.sh"), out, pte_writer], check=True,
                   capture_output=True)
    model = os.path.join(out, "cpu_model.pte")
    result, found, _ = check_json(machofix, model)
    expect(result.returncode == 1 and rules(found) == ["absolute-install-name"]
           and "--change /opt/llvm-openmp/lib/libomp.dylib @rpath/libomp.dylib" in found[0].get("repair", ""),
           "the CPU sample under its contract: libomp is used at an absolute path; the repair is edit --change", result)
    pruned = run(machofix, "prune", model, "--dry-run", "--json", "-")
    expect(pruned.returncode == 0 and json.loads(pruned.stdout)["files"][0]["status"] == "unchanged",
           "prune removes nothing from it (libomp is used)", pruned)
    fixed = os.path.join(out, "cpu_model.fixed.pte")
    edited = run(machofix, "edit", model, "--change", "/opt/llvm-openmp/lib/libomp.dylib", "@rpath/libomp.dylib", "-o", fixed)
    result, found, _ = check_json(machofix, fixed)
    verified = run(machofix, "verify", fixed)
    expect(edited.returncode == 0 and result.returncode == 0 and found == [] and verified.returncode == 0,
           "after edit --change: check with the contract passes and the model verifies", result)
    names = run(machofix, "inspect", fixed, "--json", "-")
    dylibs = [d["install_name"] for f in [json.loads(names.stdout)["files"][0]] for b in f["pte"]["blobs"]
              for s in b["macho"]["slices"] for d in s["dylibs"]] if names.returncode == 0 else []
    expect("@rpath/libomp.dylib" in dylibs and not any(d.startswith("/opt") for d in dylibs),
           f"the embedded .so now names @rpath/libomp.dylib ({dylibs})", names)


def in_a_pte(machofix, pte_writer, fixtures, work):
    contract = write(os.path.join(work, "pte", "machofix.toml"), PROVIDES_BOTH)
    pte = os.path.join(work, "pte", "model.pte")
    subprocess.run([pte_writer, "wrap", os.path.join(fixtures, RPATHS), pte, "hash"], check=True)
    result, found, document = check_json(machofix, pte)
    expect(result.returncode == 1 and rules(found) == ["absolute-rpath", "duplicate-rpath"]
           and all(f["blob"].endswith("_so_blob") for f in found) and document.get("contracts") == [contract],
           "inside a .pte, machofix.toml beside it: both rpath findings, naming the blob", result)
    with open(pte, "rb") as handle:
        data = handle.read()
    at_offsets = [struct.unpack_from("<I", data, f["offset"])[0] for f in found if f.get("offset") is not None]
    path_of = [data[f["offset"] + 12:].split(b"\0", 1)[0].decode() for f in found if f.get("offset") is not None]
    expect(at_offsets == [LC_RPATH, LC_RPATH] and path_of == [f["rpath"] for f in found],
           "each finding's offset in the .pte is its LC_RPATH command, holding that path")
    clean = os.path.join(work, "pte", "clean.pte")
    subprocess.run([pte_writer, "wrap", os.path.join(fixtures, CLEAN), clean, "hash"], check=True)
    result, found, _ = check_json(machofix, clean)
    expect(result.returncode == 0 and found == [], "the clean model in a .pte passes its contract", result)


def malformed(machofix, fixtures, work):
    model = os.path.join(fixtures, CLEAN)
    cases = [
        ("syntax.toml", 'provided = ["@rpath/libomp.dylib"\n', r"syntax\.toml: line 1, column 35: not a valid TOML file: Error while parsing array"),
        ("typo.toml", PROVIDES_BOTH + "\nprovidd = ['@rpath/libfoo.dylib']\n",
         r"typo\.toml: line 3, column 1: unknown key 'providd' \(the keys are provided, allow_prefix"),
        ("table.toml", "[check]\nprovided = []\n", r"table\.toml: line 1, column \d+: unknown key 'check'"),
        ("number.toml", "forbid = 3\n", r"number\.toml: line 1, column \d+: key 'forbid' takes a string or an array"),
        ("entry.toml", "required = ['ok', 7]\n", r"entry\.toml: line 1, column \d+: key 'required': every entry must be a string"),
        ("empty.toml", "provided = ['']\n", r"empty\.toml: line 1, column \d+: key 'provided': an entry is an empty string"),
        ("prefix.toml", "allow_prefix = ['opt/']\n", r"prefix\.toml: line 1, column \d+: key 'allow_prefix': 'opt/' is not an absolute"),
    ]
    for name, text, message in cases:
        path = write(os.path.join(work, "malformed", name), text)
        for args in (("--contract", path), ()):
            if not args:  # found beside the model instead of named
                beside = copy(model, os.path.join(work, "malformed", name + ".d", "model.dylib"))
                shutil.copyfile(path, os.path.join(os.path.dirname(beside), "machofix.toml"))
                message_here = message.replace(re.escape(name), r"machofix\.toml")
                result = run(machofix, "check", beside)
            else:
                message_here = message
                result = run(machofix, "check", model, *args)
            expect(result.returncode == 2 and result.stdout == "" and re.search(r"machofix: error: \S*" + message_here,
                                                                               result.stderr),
                   f"{name} ({'named' if args else 'found beside the model'}): refused, exit 2, file:line, nothing on stdout",
                   result)
    missing = run(machofix, "check", model, "--contract", os.path.join(work, "malformed", "absent.toml"))
    expect(missing.returncode == 2 and "absent.toml: cannot read the contract file" in missing.stderr and missing.stdout == "",
           "a named contract that does not exist: exit 2", missing)
    both = run(machofix, "check", model, "--contract", os.path.join(work, "rules", "machofix.toml"), "--no-contract")
    expect(both.returncode == 2 and "contradict" in both.stderr, "--contract with --no-contract: exit 2", both)


def discovery(machofix, fixtures, work):
    tree = os.path.join(work, "tree")
    write(os.path.join(tree, "machofix.toml"), 'provided = "@rpath/libomp.dylib"\n')
    nested = copy(os.path.join(fixtures, CLEAN), os.path.join(tree, "models", "a", "model.dylib"))
    result, found, document = check_json(machofix, nested)
    expect(result.returncode == 1 and rules(found) == ["unprovided-dependency"]
           and document.get("contracts") == [os.path.join(tree, "machofix.toml")],
           "machofix.toml in a parent of the model's directory applies", result)
    beside = write(os.path.join(tree, "models", "a", "machofix.toml"), PROVIDES_BOTH)
    result, found, document = check_json(machofix, nested)
    expect(result.returncode == 0 and document.get("contracts") == [beside],
           "one in the model's own directory comes first", result)
    result, found, document = check_json(machofix, os.path.join(tree, "models"))
    expect(result.returncode == 0 and document.get("contracts") == [beside], "a directory input: each file's own", result)
    other = copy(os.path.join(fixtures, CLEAN), os.path.join(tree, "models", "b", "model.dylib"))
    result, found, document = check_json(machofix, nested, other)
    expect(result.returncode == 1 and [f["file"] for f in found] == [other]
           and sorted(document.get("contracts", [])) == sorted([beside, os.path.join(tree, "machofix.toml")]),
           "two models, two contracts: each held to its own", result)
    override = write(os.path.join(work, "override.toml"), 'provided = "@rpath/libfoo.dylib"\n')
    result, found, document = check_json(machofix, nested, "--contract", override)
    expect(result.returncode == 1 and [f["dylib"] for f in found] == ["@rpath/libomp.dylib"]
           and document.get("contracts") == [override], "--contract FILE overrides the one found", result)
    result, found, document = check_json(machofix, nested, "--no-contract")
    expect(result.returncode == 0 and document.get("contracts") == [], "--no-contract reads none", result)
    relative = run(machofix, "check", os.path.join("models", "a", "model.dylib"), "--json", "-", cwd=tree)
    expect(relative.returncode == 0 and json.loads(relative.stdout)["contracts"] == [beside],
           "a relative model path finds it too", relative)


def export_step(machofix, pte_writer, fixtures, work):
    exports = os.path.join(work, "exports")
    os.makedirs(exports)
    subprocess.run([pte_writer, "wrap", os.path.join(fixtures, RPATHS), os.path.join(exports, "model.pte"), "hash"],
                   check=True)
    contract = write(os.path.join(work, "export.toml"), PROVIDES_BOTH)
    step = os.path.join(ROOT, "samples", "export_step.py")
    result = run(sys.executable, step, exports, "--machofix", machofix, "--contract", contract)
    expect(result.returncode == 1 and "absolute-rpath" in result.stderr and "duplicate-rpath" in result.stderr,
           "export_step.py --contract: the rpath findings fail the step", result)
    result = run(sys.executable, step, exports, "--machofix", machofix)
    expect(result.returncode == 0, "export_step.py without a contract: passes (what the contract adds)", result)
    result = run(sys.executable, step, exports, "--machofix", machofix, "--provided", "@rpath/libomp.dylib")
    expect(result.returncode == 1 and "unprovided-dependency" in result.stderr and "libfoo" in result.stderr,
           "export_step.py --provided: an @rpath library not provided fails the step", result)


def sample_contract(machofix, pte_writer, work):
    """samples/aoti_metal: build.sh puts its contract beside the model; check and the
    export step hold the model to it (no OpenMP under any name)."""
    out = os.path.join(work, "sample")
    subprocess.run([os.path.join(ROOT, "samples", "aoti_metal", "build.sh"), out, pte_writer], check=True,
                   capture_output=True)
    model = os.path.join(out, "metal_model.pte")
    result, found, document = check_json(machofix, model)
    expect(result.returncode == 1 and rules(found) == ["absolute-install-name", "forbidden-dependency", "unused-dependency"]
           and document.get("contracts") == [os.path.join(out, "machofix.toml")],
           "the sample's contract, beside the model: libomp is forbidden, unused and absolute", result)
    text = run(machofix, "check", model)
    expect(f"machofix check: contract {os.path.join(out, 'machofix.toml')}" in text.stdout,
           "the text report names the contract it read", text)
    step = os.path.join(ROOT, "samples", "export_step.py")
    result = run(sys.executable, step, out, "--machofix", machofix)
    expect(result.returncode == 0 and "dylibs removed" in result.stdout,
           "the export step removes libomp and passes the sample's contract", result)
    result, found, _ = check_json(machofix, model)
    expect(result.returncode == 0 and found == [], "after it, check with the contract is clean", result)


def main(argv):
    machofix, pte_writer, fixtures, work = [os.path.abspath(a) for a in argv[1:5]]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    work = os.path.realpath(work)
    without_contract(machofix, fixtures)
    each_rule(machofix, fixtures, work)
    declarations(machofix, fixtures, work)
    in_a_pte(machofix, pte_writer, fixtures, work)
    malformed(machofix, fixtures, work)
    discovery(machofix, fixtures, work)
    export_step(machofix, pte_writer, fixtures, work)
    sample_contract(machofix, pte_writer, work)
    repairs_repair(machofix, fixtures, work)
    sample_cpu(machofix, pte_writer, work)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
