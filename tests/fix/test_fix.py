#!/usr/bin/env python3
"""`machofix fix`: every finding `check` reports, repaired by the least edit, the
output checked again in process, written only if it passes:

    test_fix.py MACHOFIX PTE_WRITER RUNTIME_LOADER APP_FIXTURES FIX_FIXTURES WORK

(RUNTIME_LOADER may be "": ExecuTorch's runtime is then not asked, and the test says
so.) Each case runs on a fresh copy in WORK, and first shows that `check`, with the
same options, fails the input for the reason the case is about (or passes it).

- m_optomp (libomp at /opt/llvm-openmp/lib/libomp.dylib) vs OMP.app (ships libomp as
  @rpath/libomp.dylib, loaded at launch): renamed to @rpath/libomp.dylib with -o, in
  place (--backup keeps the original), and --dry-run writes nothing and says "would
  fix"; the output equals `edit --change` of the same rename byte for byte;
- m_optomp vs Plain.app (no libomp): exit 1, no output file, the input untouched, the
  finding that remains is library-not-loaded of /opt/llvm-openmp/lib/libomp.dylib
  (text, JSON and SARIF);
- m_optomp vs Partial.app (libomp without ___kmpc_barrier): refused naming
  ___kmpc_barrier, nothing written;
- m_optomp vs TwoOMP.app (libomp in Frameworks and in Resources/lib): refused naming
  both files; --provided picks either;
- m_optomp vs Launch.app (libomp loaded at launch, install name
  @executable_path/../Frameworks/libomp.dylib, the rpath reaching it too): renamed to
  that install name, dyld's first choice;
- findings no edit removes (a used libomp under --forbid '*omp*', @rpath/libomp.dylib in
  an app without libomp: not a system library to rename to /usr/lib, --min-macos): exit
  1, nothing written, and no edit claims to remove them;
- m_optomp_rpath vs OMP.app: renamed, and its LC_RPATH /opt/llvm-openmp/lib deleted;
- m_rpath_cxx (@rpath/libc++.1.dylib, SDK 15.0) vs Plain.app, with and without the
  sysroot: renamed to /usr/lib/libc++.1.dylib (the sysroot's .tbd install name); with
  an import the sysroot's libc++ lacks, refused naming it;
- m_tight (no header padding): fixed only because removing its unused dependency makes
  room for the longer @executable_path/../Resources/lib/libomp.dylib (Resources.app);
  m_tight_nounused refused with exit 1, the room needed and available named;
- duplicate LC_RPATHs: SDK 15.4 (loader rule), A B A (order kept), SDK 15.0 with
  --provided and with a contract file (duplicate-rpath): one copy left; SDK 15.0
  without a declaration: nothing to fix;
- without --app: a --provided or contract literal name with libomp's leaf renames to
  it; a glob names nothing to rename to;
- a model check passes (m_omp vs OMP.app): exit 0, -o writes a byte copy, in place
  the file is not touched; one whose findings are warnings alone (an absolute rpath)
  too, and at level error that rpath is deleted;
- the m_optomp repair inside a .pte (pte_writer) and inside .tar.gz and .zip archives
  of it: fixed, check --app passes, ExecuTorch's runtime loads the repaired .pte, whose
  so key is the sha256 of the repaired .so;
- m_tight, m_rpath_cxx and dup_15_4 each wrapped in a .pte: fixed there (check with
  the same options and verify pass, ExecuTorch's runtime loads it); m_tight_nounused
  in a .pte refused as the plain file is;
- the ExecuTorch samples (../shared/samples) against AOTIRunnerNoOMP.app: libomp
  removed (as `prune --only libomp.dylib`, byte for byte), the runtime loads them; the
  same with --forbid '*omp*' and no application;
- a directory with a fixable and an unfixable model (-j 2): exit 1, the first
  written, the second not;
- bad usage and bad input: exit 2, nothing written, the input untouched; -q.

Witnesses after every fix: `check` with the same options passes, `verify` passes,
llvm-objdump-16 lists the dependencies and rpaths expected, every import of the
input binds (llvm-objdump-16/llvm-nm-16, ../fixtures/imports.py) to the same library
under its new name, and ld64.lld-16 links a small dylib against the output (an
independent reader of its load commands and exports).
"""
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent / "fixtures"))
sys.dont_write_bytecode = True
import imports    # noqa: E402  (independent reader: llvm-objdump / llvm-nm)

TBD = HERE.parent / "fixtures" / "tbd"
SAMPLE_DIRS = [os.environ.get("MACHOFIX_SAMPLES"), str(ROOT.parent / "shared" / "samples")]
SAMPLES = ["metal_hashkeys.pte", "metal_methodkeys.pte"]
OPT_OMP = "/opt/llvm-openmp/lib/libomp.dylib"
RPATH_OMP = "@rpath/libomp.dylib"
LIBSYSTEM = "/usr/lib/libSystem.B.dylib"
RPATH_CXX = "@rpath/libc++.1.dylib"
USR_CXX = "/usr/lib/libc++.1.dylib"
OBJDUMP = "llvm-objdump-16"

failures = []
not_run = []


def expect(what, condition, detail=""):
    print(f"{'ok' if condition else 'FAILED'}: {what}{'' if condition or not detail else ': ' + str(detail)[:1500]}")
    if not condition:
        failures.append(what)
    return condition


def skipped(what, why):
    print(f"not run: {what}: {why}")
    not_run.append(what)


def run(*arguments, cwd=None):
    return subprocess.run([str(a) for a in arguments], capture_output=True, text=True, timeout=300, cwd=cwd)


def shown(done):
    return f"exit {done.returncode}\nstdout:\n{done.stdout[-1500:]}\nstderr:\n{done.stderr[-800:]}"


def digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def state(path):
    """What must not change when nothing is written: bytes, inode, modification time."""
    info = os.stat(path)
    return digest(path), info.st_ino, info.st_mtime_ns


class Env:
    def __init__(self, argv):
        self.machofix, self.pte_writer = (os.path.abspath(a) for a in argv[1:3])
        self.loader = os.path.abspath(argv[3]) if argv[3] else ""
        self.apps_root, self.fix_root, self.work = (Path(a).resolve() for a in argv[4:7])
        self.manifest = json.loads((self.fix_root / "manifest.json").read_text())
        self.sysroot = self.apps_root / "sysroot"

    def app(self, name):
        for root in (self.apps_root, self.fix_root):
            if (root / "apps" / name).is_dir():
                return root / "apps" / name
        raise FileNotFoundError(name)

    def model(self, name):
        for root in (self.fix_root, self.apps_root):
            if (root / "models" / f"{name}.dylib").is_file():
                return root / "models" / f"{name}.dylib"
        raise FileNotFoundError(name)

    def case_dir(self, name):
        path = self.work / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def copy(self, name, case, as_name=None):
        dest = case / (as_name or f"{name}.dylib")
        shutil.copyfile(self.model(name), dest)
        return dest

    def fix(self, *arguments, contract=False):
        return run(self.machofix, "fix", *([] if contract else ["--no-contract"]), *arguments)

    def check(self, path, *options, contract=False):
        """(exit status, findings of the JSON report or the error)."""
        done = run(self.machofix, "check", *([] if contract else ["--no-contract"]), "--json=-", *options, path)
        if done.returncode not in (0, 1):
            return done.returncode, done.stderr
        return done.returncode, json.loads(done.stdout)["findings"]


def app_options(env, app, sysroot=False):
    return ["--app", env.app(app)] + (["--sysroot", env.sysroot] if sysroot else [])


# --------------------------------------------------------------------------- readers

def dylibs_used(path):
    """Dependencies in load-command order, LC_ID_DYLIB left out (llvm-objdump-16)."""
    done = run(OBJDUMP, "--macho", "--dylibs-used", path)
    if done.returncode or done.stderr.strip():
        return f"llvm-objdump-16 failed: {done.stderr}"
    ident = run(OBJDUMP, "--macho", "--dylib-id", path).stdout.splitlines()
    ident = ident[1].strip() if len(ident) > 1 else None
    names = [line.strip().rsplit(" (compatibility version", 1)[0] for line in done.stdout.splitlines()
             if line.startswith("\t")]
    if ident and names and names[0] == ident:
        names = names[1:]
    return names


def rpaths(path):
    out = run(OBJDUMP, "--macho", "--private-headers", path).stdout
    return re.findall(r"^\s*path (.*) \(offset \d+\)$", out, re.M)


def sizeofcmds(path):
    out = run(OBJDUMP, "--macho", "--private-headers", path).stdout
    m = re.search(r"^\s*MH_MAGIC_64\s+\S+\s+\S+\s+\S+\s+\S+\s+\d+\s+(\d+)", out, re.M)
    return int(m.group(1)) if m else None


def import_witness(env, what, before, after, renames, removed=()):
    """Every import of BEFORE binds in AFTER to the same library under its new name;
    removed libraries supplied none (llvm-objdump-16 / llvm-nm-16)."""
    try:
        old = imports.inspect(before)["slices"]
        new = imports.inspect(after)["slices"]
    except imports.ReaderError as error:
        return expect(f"{what}: LLVM's readers read the input and the output", False, error)
    problems = []
    for o, n in zip(old, new):
        mapped = {}
        for key, libs in imports.import_map(o).items():
            if set(libs) & set(removed):
                problems.append(f"{key} bound to a removed library {libs}")
            mapped[key] = sorted(renames.get(lib, lib) for lib in libs)
        got = imports.import_map(n)
        if got != mapped:
            problems.append(f"{o['arch']}: imports {got} != {mapped}")
    return expect(f"{what}: every import binds to the same library under its new name (llvm-objdump-16)",
                  not problems and len(old) == len(new), problems)


def link_witness(env, what, path, install_name):
    """ld64.lld-16 links a dylib importing the model's entry point from PATH."""
    scratch = env.work / "witness"
    scratch.mkdir(exist_ok=True)
    obj = scratch / "witness.o"
    if not obj.exists():
        done = run("clang-16", "-target", "arm64-apple-macos11", "-c", HERE / "src" / "witness.c", "-o", obj)
        if done.returncode:
            return expect("the witness object compiles", False, done.stderr)
    out = scratch / "witness.dylib"
    out.unlink(missing_ok=True)
    done = run("ld64.lld-16", "-dylib", "-arch", "arm64", "-platform_version", "macos", "11.0", "15.0",
               "-install_name", "@rpath/witness.dylib", obj, path, TBD / "libSystem.tbd", "-o", out)
    deps = dylibs_used(out) if done.returncode == 0 else []
    return expect(f"{what}: ld64.lld-16 links a dylib against the output, which it records as {install_name}",
                  done.returncode == 0 and not done.stderr.strip() and install_name in deps, shown(done) + f"\n{deps}")


def witnesses(env, what, out, options, dylibs, rps=None, original=None, renames=None, removed=(),
              install_name=None, contract=False):
    """The output passes check with the same options and verify; llvm-objdump-16 lists
    the dependencies (and rpaths) expected; imports and the linker witness."""
    got = dylibs_used(out)
    expect(f"{what}: the output's dependencies are {dylibs} (llvm-objdump-16 --dylibs-used)", got == dylibs, got)
    if rps is not None:
        got = rpaths(out)
        expect(f"{what}: the output's LC_RPATHs are {rps} (llvm-objdump-16)", got == rps, got)
    status, found = env.check(out, *options, contract=contract)
    expect(f"{what}: check with the same options passes the output", status == 0, found)
    done = run(env.machofix, "verify", out)
    expect(f"{what}: verify passes the output", done.returncode == 0, shown(done))
    if original is not None:
        import_witness(env, what, original, out, renames or {}, removed)
    if install_name:
        link_witness(env, what, out, install_name)


# --------------------------------------------------------------------------- report

def report(done):
    """The JSON report of a fix run, or None."""
    try:
        return json.loads(done.stdout)
    except ValueError:
        return None


def fixes_of(rep):
    """The fix entries: the report's "fixes", or each file report's "fix" (its path added)."""
    if not isinstance(rep, dict):
        return []
    if "fixes" in rep:
        return rep["fixes"]
    return [dict(f["fix"], path=f.get("path")) for f in rep.get("files", []) if "fix" in f]


def remaining_of(entry):
    """The findings that remain for one file (check's finding objects)."""
    return entry.get("findings", entry.get("remaining", []))


def refusals_of(entry):
    """(rule, dependency or rpath, reason) of each refusal."""
    return [(r.get("rule"), r.get("dylib") or r.get("subject") or r.get("rpath"), r.get("reason", ""))
            for r in entry.get("refusals", [])]


def edit_name(edit):
    return edit.get("old") or edit.get("dylib") or edit.get("rpath") or ""


def edits_of(entry):
    return [(e.get("edit"), edit_name(e), e.get("new") or "", e.get("removes")) for e in entry.get("edits", [])]


def one_fix(what, rep):
    entries = fixes_of(rep)
    expect(f"{what}: the JSON report is fix's, with one entry in fixes",
           isinstance(rep, dict) and rep.get("command") == "fix" and len(entries) == 1, rep)
    return entries[0] if len(entries) == 1 else {}


def status_line(done, path, word):
    """The per-file line: PATH: fixed (N edits) / would fix / nothing to fix / not written."""
    pattern = re.compile(rf"^{re.escape(str(path))}: {word}")
    return [line for line in done.stdout.splitlines() if pattern.match(line)]


VERBS = {"remove": "remove(?:-dependency)?", "change": "change", "delete-rpath": "delete-rpath",
         "delete-duplicate-rpath": "delete-duplicate-rpaths?"}


def edit_line(done, verb, subject, rule=None):
    """The indented line of one edit: `  [would ]VERB SUBJECT (RULE[; where])`."""
    pattern = re.compile(rf"^\s+(?:would )?{VERBS[verb]} {re.escape(subject)}"
                         + (rf" \({re.escape(rule)}[;)]" if rule else r"(?:\s|$)"))
    return [line for line in done.stdout.splitlines() if pattern.match(line)]


def expect_not_written(env, what, done, path, before, out=None, rule=None, dylib=None):
    expect(f"{what}: exit 1", done.returncode == 1, shown(done))
    if out is not None:
        expect(f"{what}: no output file is created", not os.path.exists(out), os.listdir(os.path.dirname(out)))
    expect(f"{what}: the input is untouched (bytes, inode, mtime)", state(path) == before)
    expect(f"{what}: the text says not written, findings remain",
           bool(status_line(done, path, r"not written: \d+ findings? remains?")), done.stdout)


# --------------------------------------------------------------------------- cases

def case_optomp_omp(env):
    what = "m_optomp vs OMP.app"
    case = env.case_dir("optomp_omp")
    path = env.copy("m_optomp", case)
    options = app_options(env, "OMP.app")
    status, found = env.check(path, *options)
    expect(f"{what}: check fails the input with library-not-loaded {OPT_OMP}", status == 1 and
           [(f["rule"], f["dylib"]) for f in found if f["rule"] == "library-not-loaded"] == [("library-not-loaded", OPT_OMP)],
           found)
    before = state(path)

    out = case / "out.dylib"
    done = env.fix(path, *options, "-o", out)
    expect(f"{what}: fix -o exits 0", done.returncode == 0, shown(done))
    expect(f"{what}: the text says fixed (1 edit)", bool(status_line(done, path, r"fixed \(1 edits?\)")), done.stdout)
    expect(f"{what}: the text shows the change and the rule it removes",
           bool(edit_line(done, "change", f"{OPT_OMP} -> {RPATH_OMP}", "library-not-loaded")), done.stdout)
    expect(f"{what}: the input is untouched", state(path) == before)
    if out.exists():
        witnesses(env, what, out, options, [LIBSYSTEM, RPATH_OMP], rps=[], original=path,
                  renames={OPT_OMP: RPATH_OMP}, install_name="@rpath/m_optomp.dylib")
        ref = case / "ref.dylib"
        done_ref = run(env.machofix, "edit", path, "-o", ref, "--change", OPT_OMP, RPATH_OMP)
        expect(f"{what}: the output equals `edit --change {OPT_OMP} {RPATH_OMP}` byte for byte",
               done_ref.returncode == 0 and digest(ref) == digest(out), shown(done_ref))

    # SARIF: the edit is a passed result of the rule it removes, at the load command;
    # the log passes Microsoft's multitool (GitHub's ingestion rules) when npm has it.
    sarif = case / "out.sarif"
    done = env.fix(path, *options, "-o", case / "out_sarif.dylib", "--sarif", sarif)
    try:
        results = json.loads(sarif.read_text())["runs"][0]["results"]
    except (OSError, ValueError, KeyError, IndexError) as error:
        results = error
    passed = [r for r in results if r.get("kind") == "pass"] if isinstance(results, list) else results
    expect(f"{what} --sarif: one passed library-not-loaded result for the change, at its load command, nothing failing",
           isinstance(passed, list) and len(passed) == 1 and len(results) == 1
           and passed[0].get("ruleId") == "library-not-loaded" and passed[0].get("level") == "none"
           and passed[0]["properties"].get("new") == RPATH_OMP
           and "byteOffset" in passed[0]["locations"][0]["physicalLocation"].get("region", {}), results)
    sys.path.insert(0, str(HERE.parent / "support"))
    import sarif_multitool
    validation = case / "sarif_validation"
    validation.mkdir(exist_ok=True)
    problems = sarif_multitool.validate([str(sarif)], str(validation))
    if problems is None:
        skipped(f"{what} --sarif: the multitool validates it", "the SARIF multitool is not installed and npm is unreachable")
    else:
        bad = [p for p in problems if p[0] != "note"]
        expect(f"{what} --sarif: the multitool (SARIF and GitHub rules) finds no error or warning", not bad, bad)

    # JSON: the edit carries the rule it removes.
    out_json = case / "out_json.dylib"
    done = env.fix(path, *options, "-o", out_json, "--json=-")
    rep = report(done)
    entry = one_fix(f"{what} --json", rep)
    expect(f"{what} --json: status fixed, one change edit removing library-not-loaded",
           done.returncode == 0 and entry.get("status") == "fixed"
           and edits_of(entry) == [("change", OPT_OMP, RPATH_OMP, "library-not-loaded")], entry)
    expect(f"{what} --json: every edit names the slice it is in (arch arm64)",
           all(e.get("arch") == "arm64" for e in entry.get("edits", [])), entry.get("edits"))
    expect(f"{what} --json: no finding remains, no refusal",
           remaining_of(entry) == [] and not entry.get("refusals") and isinstance(rep, dict)
           and rep.get("findings") == [], entry)
    expect(f"{what} --json: the per-file report (as prune's) is there", isinstance(rep, dict)
           and len(rep.get("files", [])) == 1, rep and rep.get("files"))
    expect(f"{what} --json: the output is the same as without --json",
           out.exists() and out_json.exists() and digest(out) == digest(out_json))

    # -q: nothing on standard output for a file fixed.
    quiet = case / "quiet.dylib"
    done = env.fix(path, *options, "-o", quiet, "-q")
    expect(f"{what} -q: exit 0, written, nothing printed", done.returncode == 0 and quiet.exists()
           and done.stdout.strip() == "", shown(done))

    # In place, with --backup.
    inplace = case / "inplace" / "m_optomp.dylib"
    inplace.parent.mkdir()
    shutil.copyfile(path, inplace)
    inode = os.stat(inplace).st_ino
    original = inplace.read_bytes()
    done = env.fix(inplace, *options, "--in-place", "--backup", ".orig")
    expect(f"{what} --in-place: exit 0", done.returncode == 0, shown(done))
    expect(f"{what} --in-place: the file is replaced by a new inode", os.stat(inplace).st_ino != inode)
    backup = Path(str(inplace) + ".orig")
    expect(f"{what} --in-place --backup .orig: the original kept beside it, byte-identical",
           backup.exists() and backup.read_bytes() == original)
    witnesses(env, f"{what} --in-place", inplace, options, [LIBSYSTEM, RPATH_OMP], original=path,
              renames={OPT_OMP: RPATH_OMP})
    again = state(inplace)
    done = env.fix(inplace, *options, "--in-place")
    expect(f"{what}: fixed again, nothing to fix, the file untouched",
           done.returncode == 0 and state(inplace) == again
           and bool(status_line(done, inplace, "nothing to fix")), shown(done))

    # Dry run.
    dry = case / "dry"
    dry.mkdir()
    dry_model = dry / "m_optomp.dylib"
    shutil.copyfile(path, dry_model)
    before_dry = state(dry_model)
    done = env.fix(dry_model, *options, "--dry-run", "--json", str(case / "dry.json"))
    expect(f"{what} --dry-run: exit 0 (the repaired form would pass)", done.returncode == 0, shown(done))
    expect(f"{what} --dry-run: says would fix (1 edit)",
           bool(status_line(done, dry_model, r"would fix \(1 edits?\)")), done.stdout)
    expect(f"{what} --dry-run: the change listed",
           bool(edit_line(done, "change", f"{OPT_OMP} -> {RPATH_OMP}")), done.stdout)
    expect(f"{what} --dry-run: nothing written (the file untouched, nothing beside it)",
           state(dry_model) == before_dry and sorted(os.listdir(dry)) == ["m_optomp.dylib"], os.listdir(dry))
    rep = json.loads((case / "dry.json").read_text()) if (case / "dry.json").exists() else None
    entry = one_fix(f"{what} --dry-run --json FILE", rep)
    expect(f"{what} --dry-run --json FILE: status would-fix, the change edit",
           entry.get("status") == "would-fix" and edits_of(entry) == [("change", OPT_OMP, RPATH_OMP, "library-not-loaded")],
           entry)


def case_optomp_plain(env):
    what = "m_optomp vs Plain.app (no libomp)"
    case = env.case_dir("optomp_plain")
    path = env.copy("m_optomp", case)
    options = app_options(env, "Plain.app")
    status, found = env.check(path, *options)
    expect(f"{what}: check fails the input", status == 1, found)
    before = state(path)
    out = case / "out.dylib"
    sarif = case / "out.sarif"
    done = env.fix(path, *options, "-o", out, "--sarif", sarif)
    expect_not_written(env, what, done, path, before, out)
    expect(f"{what}: the remaining finding printed as check prints it",
           any("[library-not-loaded]" in line and OPT_OMP in line for line in done.stdout.splitlines()), done.stdout)
    done = env.fix(path, *options, "-o", out, "--json=-")
    rep = report(done)
    entry = one_fix(f"{what} --json", rep)
    remaining = [(f.get("rule"), f.get("dylib")) for f in remaining_of(entry)]
    expect(f"{what} --json: status not-written, the remaining finding library-not-loaded {OPT_OMP}",
           done.returncode == 1 and entry.get("status") == "not-written"
           and ("library-not-loaded", OPT_OMP) in remaining, entry)
    expect(f"{what} --json: every remaining finding is an object as check's (rule, level, message, repair)",
           remaining_of(entry) and all({"rule", "level", "message", "dylib", "arch"} <= set(f) for f in remaining_of(entry)),
           remaining_of(entry))
    expect(f"{what} --json: the top-level findings list it too",
           isinstance(rep, dict) and ("library-not-loaded", OPT_OMP) in
           [(f.get("rule"), f.get("dylib")) for f in rep.get("findings", [])], rep and rep.get("findings"))
    expect(f"{what} --json: still no output file", not out.exists())
    try:
        results = json.loads(sarif.read_text())["runs"][0]["results"]
        rules = [r.get("ruleId") for r in results]
    except (OSError, ValueError, KeyError, IndexError) as error:
        rules = error
    expect(f"{what} --sarif: a result for the remaining library-not-loaded", isinstance(rules, list)
           and "library-not-loaded" in rules, rules)
    done = env.fix(path, *options, "--in-place")
    expect_not_written(env, f"{what} --in-place", done, path, before)


def case_optomp_partial(env):
    what = "m_optomp vs Partial.app (libomp without ___kmpc_barrier)"
    case = env.case_dir("optomp_partial")
    path = env.copy("m_optomp", case)
    options = app_options(env, "Partial.app")
    status, found = env.check(path, *options)
    expect(f"{what}: check fails the input", status == 1, found)
    before = state(path)
    out = case / "out.dylib"
    done = env.fix(path, *options, "-o", out)
    expect_not_written(env, what, done, path, before, out)
    refusal = [line for line in done.stdout.splitlines()
               if line.startswith("  cannot fix library-not-loaded " + OPT_OMP)]
    expect(f"{what}: refused naming ___kmpc_barrier",
           len(refusal) == 1 and "___kmpc_barrier" in refusal[0], done.stdout)
    done = env.fix(path, *options, "-o", out, "--json=-")
    entry = one_fix(f"{what} --json", report(done))
    refusals = refusals_of(entry)
    expect(f"{what} --json: one refusal of library-not-loaded {OPT_OMP} naming ___kmpc_barrier; no edit made",
           len(refusals) == 1 and refusals[0][:2] == ("library-not-loaded", OPT_OMP) and "___kmpc_barrier" in refusals[0][2]
           and entry.get("status") == "not-written" and entry.get("edits") == [], entry)
    expect(f"{what} --json: nothing written", not out.exists() and state(path) == before)


def case_two_candidates(env):
    what = "m_optomp vs TwoOMP.app (libomp in Frameworks and in Resources/lib)"
    case = env.case_dir("two_candidates")
    path = env.copy("m_optomp", case)
    options = app_options(env, "TwoOMP.app")
    before = state(path)
    out = case / "out.dylib"
    done = env.fix(path, *options, "-o", out)
    expect_not_written(env, what, done, path, before, out)
    refusal = [line for line in done.stdout.splitlines() if line.startswith("  cannot fix library-not-loaded " + OPT_OMP)]
    expect(f"{what}: refused, naming both candidate files",
           len(refusal) == 1 and "Frameworks/libomp.dylib" in refusal[0]
           and "Resources/lib/libomp.dylib" in refusal[0], done.stdout)
    for number, pick in enumerate((RPATH_OMP, env.manifest["names"]["resources_name"])):
        out = case / f"pick{number}.dylib"
        picked = options + ["--provided", pick]
        done = env.fix(path, *picked, "-o", out)
        expect(f"{what} --provided {pick}: exit 0, renamed to it", done.returncode == 0
               and bool(edit_line(done, "change", f"{OPT_OMP} -> {pick}")), shown(done))
        if out.exists():
            witnesses(env, f"{what} --provided {pick}", out, picked, [LIBSYSTEM, pick], original=path,
                      renames={OPT_OMP: pick}, install_name="@rpath/m_optomp.dylib")


def case_launch(env):
    exe_omp = env.manifest["names"]["exe_omp"]
    what = "m_optomp vs Launch.app (libomp loaded at launch as @executable_path/../Frameworks/libomp.dylib)"
    case = env.case_dir("launch")
    path = env.copy("m_optomp", case)
    options = app_options(env, "Launch.app")
    status, found = env.check(path, *options)
    expect(f"{what}: check fails the input", status == 1, found)
    out = case / "out.dylib"
    done = env.fix(path, *options, "-o", out)
    expect(f"{what}: exit 0, renamed to the install name of the image loaded at launch (not @rpath/libomp.dylib, "
           "though the rpath reaches the same file)", done.returncode == 0
           and bool(edit_line(done, "change", f"{OPT_OMP} -> {exe_omp}", "library-not-loaded")), shown(done))
    if out.exists():
        witnesses(env, what, out, options, [LIBSYSTEM, exe_omp], original=path, renames={OPT_OMP: exe_omp},
                  install_name="@rpath/m_optomp.dylib")


def case_unfixable(env):
    """Findings no edit removes: nothing written, and no edit claims to remove them."""
    what = "m_optomp vs OMP.app --forbid '*omp*' (a used libomp: forbidden under any name)"
    case = env.case_dir("unfixable")
    path = env.copy("m_optomp", case)
    before = state(path)
    out = case / "out.dylib"
    options = app_options(env, "OMP.app") + ["--forbid", "*omp*"]
    done = env.fix(path, *options, "-o", out)
    expect_not_written(env, what, done, path, before, out)
    done = env.fix(path, *options, "-o", out, "--json=-")
    entry = one_fix(what, report(done))
    expect(f"{what} --json: forbidden-dependency remains", "forbidden-dependency" in
           [f.get("rule") for f in remaining_of(entry)], remaining_of(entry))
    expect(f"{what} --json: no edit claims to remove forbidden-dependency (a rename leaves it)",
           all(e.get("removes") != "forbidden-dependency" for e in entry.get("edits", [])), entry.get("edits"))

    what = "m_omp vs Plain.app (@rpath/libomp.dylib: libomp is no system library, and Plain.app has none)"
    path = env.copy("m_omp", case)
    before = state(path)
    for sysroot in (False, True):
        done = env.fix(path, *app_options(env, "Plain.app", sysroot), "-o", out, "--json=-")
        entry = one_fix(what, report(done))
        expect(f"{what}{' --sysroot' if sysroot else ''}: exit 1, no edit (not renamed to /usr/lib/libomp.dylib), "
               "a refusal of library-not-loaded @rpath/libomp.dylib, nothing written",
               done.returncode == 1 and entry.get("edits") == []
               and [r[:2] for r in refusals_of(entry)] == [("library-not-loaded", RPATH_OMP)]
               and not out.exists() and state(path) == before, entry)

    what = "m_newer vs OMP.app --min-macos 13.0 (built for 14.0)"
    path = env.copy("m_newer", case)
    before = state(path)
    done = env.fix(path, *app_options(env, "OMP.app"), "--min-macos", "13.0", "-o", out, "--json=-")
    entry = one_fix(what, report(done))
    expect(f"{what}: exit 1, no edit, min-macos remains, nothing written", done.returncode == 1
           and entry.get("edits") == [] and [f.get("rule") for f in remaining_of(entry)] == ["min-macos"]
           and not out.exists() and state(path) == before, entry)


def case_optomp_rpath(env):
    what = "m_optomp_rpath vs OMP.app"
    case = env.case_dir("optomp_rpath")
    path = env.copy("m_optomp_rpath", case)
    options = app_options(env, "OMP.app")
    expect(f"{what}: the input has the LC_RPATH /opt/llvm-openmp/lib (llvm-objdump-16)",
           rpaths(path) == ["/opt/llvm-openmp/lib"], rpaths(path))
    status, found = env.check(path, *options)
    expect(f"{what}: check fails the input", status == 1, found)
    out = case / "out.dylib"
    done = env.fix(path, *options, "-o", out)
    expect(f"{what}: exit 0, fixed (2 edits)", done.returncode == 0
           and bool(status_line(done, path, r"fixed \(2 edits\)")), shown(done))
    expect(f"{what}: the text shows the change and the rpath deleted",
           bool(edit_line(done, "change", f"{OPT_OMP} -> {RPATH_OMP}", "library-not-loaded"))
           and bool(edit_line(done, "delete-rpath", "/opt/llvm-openmp/lib", "absolute-rpath")), done.stdout)
    if out.exists():
        witnesses(env, what, out, options, [LIBSYSTEM, RPATH_OMP], rps=[], original=path,
                  renames={OPT_OMP: RPATH_OMP}, install_name="@rpath/m_optomp_rpath.dylib")
        status, found = env.check(out, *options, "--provided", RPATH_OMP)
        expect(f"{what}: with a declaration (so absolute-rpath runs) the output passes too", status == 0, found)
        ref = case / "ref.dylib"
        done_ref = run(env.machofix, "edit", path, "-o", ref, "--change", OPT_OMP, RPATH_OMP,
                       "--delete-rpath", "/opt/llvm-openmp/lib")
        expect(f"{what}: the output equals `edit --change ... --delete-rpath /opt/llvm-openmp/lib` byte for byte",
               done_ref.returncode == 0 and digest(ref) == digest(out), shown(done_ref))
    done = env.fix(path, *options, "--dry-run", "--json=-")
    entry = one_fix(f"{what} --json", report(done))
    got = sorted(edits_of(entry), key=str)
    want = sorted([("change", OPT_OMP, RPATH_OMP, "library-not-loaded"),
                   ("delete-rpath", "/opt/llvm-openmp/lib", "", "absolute-rpath")], key=str)
    expect(f"{what} --json: the change and the delete-rpath, each with the rule it removes", got == want, got)


def case_rpath_cxx(env):
    usr_cxx = USR_CXX
    tbd = (env.sysroot / "usr/lib/libc++.1.tbd").read_text()
    sysroot_name = re.search(r"^install-name:\s*'([^']+)'", tbd, re.M)
    expect("the sysroot's libc++.1.tbd has the install name /usr/lib/libc++.1.dylib",
           sysroot_name and sysroot_name.group(1) == usr_cxx, tbd[:300])
    for sysroot in (False, True):
        what = f"m_rpath_cxx vs Plain.app{' --sysroot' if sysroot else ''}"
        case = env.case_dir(f"rpath_cxx{'_sysroot' if sysroot else ''}")
        path = env.copy("m_rpath_cxx", case)
        options = app_options(env, "Plain.app", sysroot)
        status, found = env.check(path, *options)
        expect(f"{what}: check fails the input with library-not-loaded {RPATH_CXX}",
               status == 1 and [(f["rule"], f["dylib"]) for f in found] == [("library-not-loaded", RPATH_CXX)], found)
        out = case / "out.dylib"
        done = env.fix(path, *options, "-o", out)
        expect(f"{what}: exit 0, the change to {usr_cxx} shown", done.returncode == 0
               and bool(edit_line(done, "change", f"{RPATH_CXX} -> {usr_cxx}", "library-not-loaded")), shown(done))
        if out.exists():
            witnesses(env, what, out, options, [LIBSYSTEM, usr_cxx], rps=[], original=path,
                      renames={RPATH_CXX: usr_cxx}, install_name="@rpath/m_rpath_cxx.dylib")
    # An import the sysroot's libc++ does not export.
    what = "m_rpath_cxx_extra (imports __ZSt9terminatev) vs Plain.app"
    case = env.case_dir("rpath_cxx_extra")
    path = env.copy("m_rpath_cxx_extra", case)
    out = case / "out.dylib"
    options = app_options(env, "Plain.app")
    done = env.fix(path, *options, "-o", out)
    expect(f"{what}, no sysroot (its exports unknown): exit 0, renamed", done.returncode == 0
           and out.exists() and dylibs_used(out) == [LIBSYSTEM, usr_cxx], shown(done))
    out.unlink(missing_ok=True)
    options = app_options(env, "Plain.app", sysroot=True)
    before = state(path)
    done = env.fix(path, *options, "-o", out, "--json=-")
    entry = one_fix(f"{what} --sysroot", report(done))
    refusals = refusals_of(entry)
    expect(f"{what} --sysroot: exit 1, nothing written", done.returncode == 1 and not out.exists()
           and state(path) == before, shown(done))
    expect(f"{what} --sysroot: refused, naming __ZSt9terminatev (not in the sysroot's libc++)",
           len(refusals) == 1 and refusals[0][1] == RPATH_CXX and "__ZSt9terminatev" in refusals[0][2], entry)
    expect(f"{what} --sysroot: the finding that remains is library-not-loaded {RPATH_CXX}",
           ("library-not-loaded", RPATH_CXX) in [(f.get("rule"), f.get("dylib")) for f in remaining_of(entry)],
           remaining_of(entry))


def case_tight(env):
    tight = env.manifest["tight"]
    new = env.manifest["names"]["resources_name"]
    unused = env.manifest["names"]["unused_long"]
    options = app_options(env, "Resources.app")
    what = "m_tight vs Resources.app"
    case = env.case_dir("tight")
    path = env.copy("m_tight", case)
    plan = tight["m_tight"]
    status, found = env.check(path, *options)
    expect(f"{what}: check fails the input: unused-dependency and library-not-loaded of libomp",
           status == 1 and {("unused-dependency", unused), ("library-not-loaded", OPT_OMP)}
           <= {(f["rule"], f["dylib"]) for f in found}, found)
    out = case / "out.dylib"
    done = env.fix(path, *options, "-o", out)
    expect(f"{what}: exit 0, fixed (2 edits): the removal, then the rename it makes room for",
           done.returncode == 0 and bool(status_line(done, path, r"fixed \(2 edits\)"))
           and bool(edit_line(done, "remove", unused, "unused-dependency"))
           and bool(edit_line(done, "change", f"{OPT_OMP} -> {new}", "library-not-loaded")), shown(done))
    if out.exists():
        witnesses(env, what, out, options, [LIBSYSTEM, new], original=path, renames={OPT_OMP: new},
                  removed=[unused], install_name="@rpath/m_tight.dylib")
        before_cmds = sizeofcmds(path)
        expect(f"{what}: the load commands grew by the rename and shrank by the removal (llvm-objdump-16)",
               sizeofcmds(out) == before_cmds - plan["freed"] + plan["needed"], (before_cmds, sizeofcmds(out), plan))
        step = case / "pruned.dylib"
        ref = case / "ref.dylib"
        first = run(env.machofix, "prune", path, "-o", step, "--only", os.path.basename(unused))
        second = run(env.machofix, "edit", step, "-o", ref, "--change", OPT_OMP, new)
        expect(f"{what}: the output equals `prune --only` then `edit --change` byte for byte",
               first.returncode == 0 and second.returncode == 0 and digest(ref) == digest(out),
               shown(first) + shown(second))
    done = env.fix(path, *options, "--dry-run", "--json=-")
    entry = one_fix(f"{what} --json", report(done))
    got = sorted(edits_of(entry), key=str)
    want = sorted([("remove-dependency", unused, "", "unused-dependency"),
                   ("change", OPT_OMP, new, "library-not-loaded")], key=str)
    expect(f"{what} --json: remove-dependency and change, each with the rule it removes", got == want, got)

    what = "m_tight_nounused vs Resources.app (no room, nothing to remove)"
    case = env.case_dir("tight_nounused")
    path = env.copy("m_tight_nounused", case)
    plan = tight["m_tight_nounused"]
    before = state(path)
    out = case / "out.dylib"
    done = env.fix(path, *options, "-o", out)
    expect_not_written(env, what, done, path, before, out)
    refusal = [line for line in done.stdout.splitlines() if line.startswith("  cannot fix library-not-loaded " + OPT_OMP)]
    cmds = sizeofcmds(path)
    needed_total, available_total = cmds + plan["needed"], cmds + plan["room"]
    text = refusal[0] if refusal else ""
    names_room = ((str(needed_total) in text and str(available_total) in text)
                  or (re.search(rf"\b{plan['needed']} bytes?\b", text) and re.search(rf"\b{plan['room']} bytes?\b", text)))
    expect(f"{what}: refused, saying the room needed ({plan['needed']} more bytes, {needed_total} in all) and "
           f"available ({plan['room']}, {available_total} in all)", bool(refusal) and bool(names_room), done.stdout)
    done = env.fix(path, *options, "--in-place")
    expect_not_written(env, f"{what} --in-place", done, path, before)
    done = env.fix(path, *options, "--dry-run")
    expect(f"{what} --dry-run: exit 1, not 'would fix'", done.returncode == 1
           and not status_line(done, path, "would fix") and state(path) == before, shown(done))


def case_duplicate_rpaths(env):
    dup, other = env.manifest["names"]["dup"], env.manifest["names"]["dup_other"]
    cases = [
        ("dup_15_4", [], [dup], {"loader-rule", "rpath-duplicate"}, "SDK 15.4: the loader rule"),
        ("dup_aba_15_4", [], [dup, other], {"loader-rule", "rpath-duplicate"}, "A B A, SDK 15.4: the order kept"),
        ("dup_15_0", ["--provided", "@rpath/*"], [dup], {"duplicate-rpath"}, "SDK 15.0 with --provided"),
    ]
    for name, options, left, rules, label in cases:
        what = f"{name} ({label})"
        case = env.case_dir(name)
        path = env.copy(name, case)
        status, found = env.check(path, *options)
        expect(f"{what}: check fails the input", status == 1 and {f["rule"] for f in found} & (rules | {"loader-rule"}), found)
        out = case / "out.dylib"
        done = env.fix(path, *options, "-o", out, "--json=-")
        entry = one_fix(what, report(done))
        got = edits_of(entry)
        expect(f"{what}: exit 0, one delete-duplicate-rpaths edit removing {sorted(rules)}",
               done.returncode == 0 and len(got) == 1 and got[0][0] == "delete-duplicate-rpaths"
               and got[0][3] in rules, shown(done))
        if out.exists():
            witnesses(env, what, out, options, [LIBSYSTEM], rps=left, original=path)
            ref = case / "ref.dylib"
            done_ref = run(env.machofix, "edit", path, "-o", ref, "--delete-duplicate-rpaths")
            expect(f"{what}: the output equals `edit --delete-duplicate-rpaths` byte for byte",
                   done_ref.returncode == 0 and digest(ref) == digest(out), shown(done_ref))
        text = env.fix(path, *options, "--dry-run")
        expect(f"{what}: the text shows delete-duplicate-rpath {dup}",
               bool(edit_line(text, "delete-duplicate-rpath", dup)), text.stdout)

    what = "dup_15_0 with a contract file beside it (provided = [\"@rpath/*\"])"
    case = env.case_dir("dup_15_0_contract")
    path = env.copy("dup_15_0", case)
    (case / "machofix.toml").write_text('provided = ["@rpath/*"]\n')
    status, found = env.check(path, contract=True)
    expect(f"{what}: check (the contract found) fails the input with duplicate-rpath",
           status == 1 and [f["rule"] for f in found] == ["duplicate-rpath"], found)
    done = env.fix(path, "--in-place", contract=True)
    expect(f"{what}: fix --in-place exits 0, one copy left", done.returncode == 0 and rpaths(path) == [dup], shown(done))
    witnesses(env, what, path, [], [LIBSYSTEM], rps=[dup], contract=True)

    what = "dup_15_0 without a declaration (dyld loads it)"
    case = env.case_dir("dup_15_0_plain")
    path = env.copy("dup_15_0", case)
    out = case / "out.dylib"
    done = env.fix(path, "-o", out)
    expect(f"{what}: nothing to fix, exit 0, -o writes a byte copy", done.returncode == 0
           and bool(status_line(done, path, "nothing to fix")) and out.exists() and digest(out) == digest(path),
           shown(done))


def case_provided_without_app(env):
    what = "m_optomp, no --app, --provided @rpath/libomp.dylib"
    case = env.case_dir("provided")
    path = env.copy("m_optomp", case)
    options = ["--provided", RPATH_OMP]
    status, found = env.check(path, *options)
    expect(f"{what}: check fails the input with absolute-install-name",
           status == 1 and [(f["rule"], f["dylib"]) for f in found] == [("absolute-install-name", OPT_OMP)], found)
    out = case / "out.dylib"
    done = env.fix(path, *options, "-o", out, "--json=-")
    entry = one_fix(what, report(done))
    expect(f"{what}: exit 0, renamed to the declared name, removing absolute-install-name",
           done.returncode == 0 and edits_of(entry) == [("change", OPT_OMP, RPATH_OMP, "absolute-install-name")], entry)
    if out.exists():
        witnesses(env, what, out, options, [LIBSYSTEM, RPATH_OMP], original=path, renames={OPT_OMP: RPATH_OMP},
                  install_name="@rpath/m_optomp.dylib")
        witnesses(env, f"{what} (then against OMP.app)", out, app_options(env, "OMP.app"), [LIBSYSTEM, RPATH_OMP])

    what = "m_optomp with a contract file (provided = [\"@rpath/libomp.dylib\"])"
    case = env.case_dir("provided_contract")
    path = env.copy("m_optomp", case)
    (case / "machofix.toml").write_text(f'provided = ["{RPATH_OMP}"]\n')
    done = env.fix(path, "--in-place", contract=True)
    expect(f"{what}: fix --in-place exits 0, renamed", done.returncode == 0
           and dylibs_used(path) == [LIBSYSTEM, RPATH_OMP], shown(done))
    witnesses(env, what, path, [], [LIBSYSTEM, RPATH_OMP], contract=True)

    what = "m_optomp, no --app, --provided '@rpath/*' (a glob: no name to rename to)"
    case = env.case_dir("provided_glob")
    path = env.copy("m_optomp", case)
    before = state(path)
    out = case / "out.dylib"
    done = env.fix(path, "--provided", "@rpath/*", "-o", out)
    expect_not_written(env, what, done, path, before, out)


def case_already_passing(env):
    what = "m_omp vs OMP.app (check passes)"
    case = env.case_dir("already_passing")
    path = env.copy("m_omp", case)
    options = app_options(env, "OMP.app")
    status, found = env.check(path, *options)
    expect(f"{what}: check passes the input", status == 0, found)
    out = case / "out.dylib"
    done = env.fix(path, *options, "-o", out, "--json=-")
    entry = one_fix(what, report(done))
    expect(f"{what}: exit 0, status nothing-to-fix, no edit", done.returncode == 0
           and entry.get("status") == "nothing-to-fix" and entry.get("edits") == [], entry)
    expect(f"{what}: -o writes a byte copy", out.exists() and digest(out) == digest(path))
    out.unlink(missing_ok=True)
    done = env.fix(path, *options, "-o", out)
    expect(f"{what}: the text says nothing to fix", bool(status_line(done, path, "nothing to fix")), done.stdout)
    before = state(path)
    done = env.fix(path, *options, "--in-place")
    expect(f"{what} --in-place: exit 0, the file not touched (bytes, inode, mtime)",
           done.returncode == 0 and state(path) == before, shown(done))


def case_warnings_only(env):
    """A warning does not fail the gate: a file whose findings are warnings alone passes
    check, and fix leaves it as it is, though an edit would remove the warning."""
    what = "m_optomp_rpath under a declaration that provides its libomp (absolute-rpath: a warning)"
    case = env.case_dir("warnings_only")
    path = env.copy("m_optomp_rpath", case)
    options = ["--no-contract", "--provided", "/opt/llvm-openmp/lib/*"]
    status, found = env.check(path, *options)
    expect(f"{what}: check passes with the absolute-rpath warning", status == 0 and
           [(f["rule"], f["level"]) for f in found] == [("absolute-rpath", "warning")], found)
    out = case / "out.dylib"
    done = env.fix(path, *options, "-o", out, "--json=-")
    entry = one_fix(what, report(done))
    expect(f"{what}: nothing to fix, a byte copy", done.returncode == 0 and entry.get("status") == "nothing-to-fix"
           and out.exists() and digest(out) == digest(path), entry)
    done = env.fix(path, *options, "--level", "absolute-rpath=error", "-o", out, "--json=-")
    entry = one_fix(f"{what}, absolute-rpath at level error", report(done))
    expect(f"{what}, absolute-rpath at level error: fixed, the rpath deleted", done.returncode == 0
           and entry.get("status") == "fixed" and rpaths(out) == [], entry)


def runtime_loads(env, what, pte):
    """ExecuTorch's runtime loads PTE; returns the .so's (key, size) it found."""
    if not env.loader:
        skipped(f"{what}: ExecuTorch's runtime loads it", "no runtime_loader (ExecuTorch's sources are not here)")
        return None
    done = run(env.loader, pte)
    try:
        result = json.loads(done.stdout)
    except ValueError:
        result = {}
    expect(f"{what}: ExecuTorch's runtime loads it", done.returncode == 0 and result.get("loads") is True, shown(done))
    sos = [d["aoti"]["so"] for m in result.get("methods", []) for d in m.get("delegates", []) if "aoti" in d]
    return (sos[0]["key"], sos[0]["size"]) if len(sos) == 1 and sos[0].get("found") else None


def so_of(env, what, pte, key_size):
    """The .so inside PTE, found where the runtime's key says: the bytes of that size,
    starting at a Mach-O magic, whose sha256 the content-hash key is. None if none."""
    key, size = key_size
    data = Path(pte).read_bytes()
    digest_hex = key.split("_", 1)[0]
    for match in re.finditer(re.escape(b"\xcf\xfa\xed\xfe"), data):
        blob = data[match.start():match.start() + size]
        if hashlib.sha256(blob).hexdigest() == digest_hex:
            out = env.work / "so" / f"{Path(pte).stem}.so"
            out.parent.mkdir(exist_ok=True)
            out.write_bytes(blob)
            return out
    expect(f"{what}: the runtime's so key is the sha256 of a Mach-O in the file", False, key)
    return None


def case_pte_and_archives(env):
    options = app_options(env, "OMP.app")
    case = env.case_dir("pte")
    model = env.copy("m_optomp", case)
    pte = case / "m_optomp.pte"
    subprocess.run([env.pte_writer, "wrap", model, pte, "hash"], check=True, capture_output=True)
    what = "m_optomp.pte vs OMP.app"
    status, found = env.check(pte, *options)
    expect(f"{what}: check fails the input", status == 1, found)
    before = state(pte)
    original = runtime_loads(env, f"{what} (the input)", pte)
    out = case / "out.pte"
    done = env.fix(pte, *options, "-o", out)
    expect(f"{what}: exit 0, fixed", done.returncode == 0 and bool(status_line(done, pte, r"fixed \(1 edits?\)"))
           and bool(edit_line(done, "change", f"{OPT_OMP} -> {RPATH_OMP}")), shown(done))
    expect(f"{what}: the input untouched", state(pte) == before)
    if out.exists():
        status, found = env.check(out, *options)
        expect(f"{what}: check --app passes the output", status == 0, found)
        done_v = run(env.machofix, "verify", out)
        expect(f"{what}: verify passes the output", done_v.returncode == 0, shown(done_v))
        key_size = runtime_loads(env, what, out)
        if key_size:
            expect(f"{what}: the so key is renewed", original is None or key_size[0] != original[0], (original, key_size))
            so = so_of(env, what, out, key_size)
            if so:
                expect(f"{what}: the .so the runtime finds depends on {RPATH_OMP} (llvm-objdump-16)",
                       dylibs_used(so) == [LIBSYSTEM, RPATH_OMP], dylibs_used(so))
                import_witness(env, f"{what}: the .so", model, so, {OPT_OMP: RPATH_OMP})
                link_witness(env, f"{what}: the .so", so, "@rpath/m_optomp.dylib")
        ref = case / "ref.pte"
        done_ref = run(env.machofix, "edit", pte, "-o", ref, "--change", OPT_OMP, RPATH_OMP)
        expect(f"{what}: the output equals `edit --change` of the .pte byte for byte",
               done_ref.returncode == 0 and digest(ref) == digest(out), shown(done_ref))
    plain_out = case / "plain.pte"
    done = env.fix(pte, *app_options(env, "Plain.app"), "-o", plain_out)
    expect_not_written(env, "m_optomp.pte vs Plain.app", done, pte, before, plain_out)

    readme = b"a member that is not a model\n"
    for kind in ("tar.gz", "zip"):
        what = f"m_optomp.pte in a .{kind} vs OMP.app"
        archive = case / f"models.{kind}"
        if kind == "zip":
            with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
                z.write(pte, "models/m_optomp.pte")
                z.writestr("README.txt", readme)
        else:
            with tarfile.open(archive, "w:gz") as t:
                t.add(pte, "models/m_optomp.pte")
                info = tarfile.TarInfo("README.txt")
                info.size = len(readme)
                t.addfile(info, io.BytesIO(readme))
        status, found = env.check(archive, *options)
        expect(f"{what}: check fails the input", status == 1, found)
        before_archive = state(archive)
        out = case / f"out.{kind}"
        done = env.fix(archive, *options, "-o", out)
        expect(f"{what}: exit 0, the change shown", done.returncode == 0
               and bool(edit_line(done, "change", f"{OPT_OMP} -> {RPATH_OMP}")), shown(done))
        expect(f"{what}: the input untouched", state(archive) == before_archive)
        if out.exists():
            status, found = env.check(out, *options)
            expect(f"{what}: check --app passes the output archive", status == 0, found)
            extracted = case / f"extracted_{kind.replace('.', '_')}"
            extracted.mkdir()
            if kind == "zip":
                with zipfile.ZipFile(out) as z:
                    z.extractall(extracted)
            else:
                with tarfile.open(out) as t:
                    t.extractall(extracted, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(extracted)
            member = extracted / "models" / "m_optomp.pte"
            expect(f"{what}: the other member is copied unchanged",
                   (extracted / "README.txt").exists() and (extracted / "README.txt").read_bytes() == readme)
            expect(f"{what}: the repaired member equals the repaired .pte",
                   member.exists() and Path(case / "out.pte").exists() and digest(member) == digest(case / "out.pte"))
            if member.exists():
                runtime_loads(env, f"{what}: its .pte", member)
        done = env.fix(archive, *app_options(env, "Plain.app"), "--in-place")
        expect_not_written(env, f"{what}: against Plain.app, in place", done, archive, before_archive)
        inplace = case / f"inplace.{kind}"
        shutil.copyfile(archive, inplace)
        done = env.fix(inplace, *options, "--in-place")
        status, found = env.check(inplace, *options)
        expect(f"{what} --in-place: exit 0, and check --app passes it", done.returncode == 0 and status == 0,
               shown(done) + str(found))


def case_defects_in_pte(env):
    """Each other defect inside a .pte (the .so ExecuTorch embeds, a blob: no
    @loader_path of its own): fixed there, the key renewed, or refused as the plain
    file is."""
    cases = [("m_tight", "Resources.app", False, True, "the removal frees the room for the rename"),
             ("m_rpath_cxx", "Plain.app", True, True, "@rpath/libc++.1.dylib renamed to /usr/lib/libc++.1.dylib"),
             ("dup_15_4", None, False, True, "the repeated LC_RPATH deleted"),
             ("m_tight_nounused", "Resources.app", False, False, "no room: refused")]
    for name, app, sysroot, fixable, why in cases:
        what = f"{name}.pte" + (f" vs {app}" if app else "") + f" ({why})"
        case = env.case_dir(f"pte_{name}")
        model = env.copy(name, case)
        pte = case / f"{name}.pte"
        subprocess.run([env.pte_writer, "wrap", model, pte, "hash"], check=True, capture_output=True)
        options = app_options(env, app, sysroot) if app else ["--no-contract"]
        status, found = env.check(pte, *options)
        expect(f"{what}: check fails the input", status == 1, found)
        before = state(pte)
        out = case / "out.pte"
        done = env.fix(pte, *options, "-o", out)
        if not fixable:
            expect_not_written(env, what, done, pte, before, out)
            continue
        expect(f"{what}: exit 0, fixed, the input untouched", done.returncode == 0 and state(pte) == before
               and bool(status_line(done, pte, r"fixed \(\d+ edits?\)")), shown(done))
        if out.exists():
            status, found = env.check(out, *options)
            expect(f"{what}: check passes the output with the same options", status == 0, found)
            done_v = run(env.machofix, "verify", out)
            expect(f"{what}: verify passes the output", done_v.returncode == 0, shown(done_v))
            runtime_loads(env, what, out)


def case_samples(env):
    directory = next((d for d in filter(None, SAMPLE_DIRS)
                      if all(os.path.isfile(os.path.join(d, s)) for s in SAMPLES)), None)
    if not directory:
        skipped("the ExecuTorch samples", f"not found in {' or '.join(filter(None, SAMPLE_DIRS))} (set MACHOFIX_SAMPLES)")
        return
    options = app_options(env, "AOTIRunnerNoOMP.app")
    for sample in SAMPLES:
        what = f"{sample} vs AOTIRunnerNoOMP.app"
        case = env.case_dir(f"sample_{Path(sample).stem}")
        path = case / sample
        shutil.copyfile(os.path.join(directory, sample), path)
        status, found = env.check(path, *options)
        expect(f"{what}: check fails the input with unused-dependency {OPT_OMP}", status == 1 and
               ("unused-dependency", OPT_OMP) in [(f["rule"], f["dylib"]) for f in found], found)
        before = state(path)
        out = case / "out.pte"
        done = env.fix(path, *options, "-o", out, "--json=-")
        entry = one_fix(what, report(done))
        expect(f"{what}: exit 0, libomp removed (remove-dependency, removing unused-dependency)",
               done.returncode == 0 and edits_of(entry) == [("remove-dependency", OPT_OMP, "", "unused-dependency")],
               entry)
        expect(f"{what}: the edit names the blob it is in", all(e.get("blob") for e in entry.get("edits", [])),
               entry.get("edits"))
        expect(f"{what}: the input untouched", state(path) == before)
        if not out.exists():
            continue
        for sysroot in (False, True):
            status, found = env.check(out, *app_options(env, "AOTIRunnerNoOMP.app", sysroot))
            expect(f"{what}: check --app passes the output{' (with the sysroot)' if sysroot else ''}", status == 0, found)
        status, found = env.check(out, *app_options(env, "AOTIRunner.app"))
        expect(f"{what}: and against AOTIRunner.app", status == 0, found)
        done_v = run(env.machofix, "verify", out)
        expect(f"{what}: verify passes the output", done_v.returncode == 0, shown(done_v))
        ref = case / "pruned.pte"
        done_ref = run(env.machofix, "prune", path, "-o", ref, "--only", "libomp.dylib")
        expect(f"{what}: the output equals `prune --only libomp.dylib` byte for byte",
               done_ref.returncode == 0 and digest(ref) == digest(out), shown(done_ref))
        key_size = runtime_loads(env, what, out)
        if key_size:
            so = so_of(env, what, out, key_size) if sample == "metal_hashkeys.pte" else None
            if so:
                deps = dylibs_used(so)
                expect(f"{what}: the .so the runtime finds has no libomp (llvm-objdump-16)",
                       isinstance(deps, list) and OPT_OMP not in deps and len(deps) == 4, deps)
        text = env.fix(path, *options, "--dry-run")
        expect(f"{what}: the text shows the removal",
               bool(edit_line(text, "remove", OPT_OMP, "unused-dependency")), text.stdout)
        forbid = case / "forbid.pte"
        done = env.fix(path, "--forbid", "*omp*", "-o", forbid)
        status, found = env.check(forbid, "--forbid", "*omp*") if forbid.exists() else (None, None)
        expect(f"{sample} --forbid '*omp*', no --app: exit 0, libomp removed, check --forbid passes the output",
               done.returncode == 0 and status == 0 and forbid.exists() and digest(forbid) == digest(out), shown(done))


def case_directory(env):
    what = "a directory: m_optomp (fixable) and m_mpsgraph (not) vs OMP.app --sysroot, -j 2"
    case = env.case_dir("directory")
    tree = case / "models"
    tree.mkdir()
    fixable = env.copy("m_optomp", tree)
    unfixable = env.copy("m_mpsgraph", tree)
    options = app_options(env, "OMP.app", sysroot=True)
    status, found = env.check(unfixable, *options)
    expect(f"{what}: check fails m_mpsgraph (a system framework the sysroot lacks)", status == 1
           and [f["rule"] for f in found] == ["library-not-loaded"], found)
    before = {p.name: state(p) for p in (fixable, unfixable)}
    out = case / "out"
    done = env.fix(tree, *options, "-o", out, "-j", "2")
    expect(f"{what}: exit 1 (one file still fails)", done.returncode == 1, shown(done))
    expect(f"{what}: the fixable one written, and it passes", (out / "m_optomp.dylib").exists()
           and env.check(out / "m_optomp.dylib", *options)[0] == 0)
    expect(f"{what}: the unfixable one not written", not (out / "m_mpsgraph.dylib").exists(),
           sorted(os.listdir(out)) if out.exists() else None)
    expect(f"{what}: the inputs untouched", {p.name: state(p) for p in (fixable, unfixable)} == before)
    done = env.fix(tree, *options, "--in-place", "-j", "2")
    expect(f"{what} --in-place: exit 1, m_optomp repaired, m_mpsgraph untouched", done.returncode == 1
           and dylibs_used(fixable) == [LIBSYSTEM, RPATH_OMP] and state(unfixable) == before["m_mpsgraph.dylib"],
           shown(done))


def case_usage(env):
    case = env.case_dir("usage")
    path = env.copy("m_optomp", case)
    before = state(path)
    garbage = case / "garbage.dylib"
    garbage.write_bytes(b"\xcf\xfa\xed\xfe" + b"\0" * 60)
    garbage_before = state(garbage)
    options = app_options(env, "OMP.app")
    for label, arguments, watched in [
        ("no output mode (-o, --in-place or --dry-run)", [path, *options], path),
        ("-o and --in-place together", [path, *options, "-o", case / "x.dylib", "--in-place"], path),
        ("an input that does not exist", [case / "missing.dylib", *options, "-o", case / "x.dylib"], path),
        ("a truncated Mach-O", [garbage, *options, "-o", case / "x.dylib"], garbage),
        ("a truncated Mach-O, in place", [garbage, *options, "--in-place"], garbage),
        ("--load-as with an unknown value", [path, *options, "--load-as", "temporary", "-o", case / "x.dylib"], path),
        ("an application that does not exist", [path, "--app", case / "Missing.app", "-o", case / "x.dylib"], path),
        ("--backup without --in-place", [path, *options, "-o", case / "x.dylib", "--backup", ".orig"], path),
    ]:
        done = env.fix(*arguments)
        expect(f"usage: {label}: exit 2, an error on stderr, nothing written, the input untouched",
               done.returncode == 2 and done.stderr.strip() and not (case / "x.dylib").exists()
               and state(path) == before and state(garbage) == garbage_before, shown(done))


CASES = [case_optomp_omp, case_optomp_plain, case_optomp_partial, case_two_candidates, case_launch, case_unfixable,
         case_optomp_rpath,
         case_rpath_cxx, case_tight, case_duplicate_rpaths, case_provided_without_app, case_already_passing,
         case_warnings_only, case_pte_and_archives, case_defects_in_pte, case_samples, case_directory, case_usage]


def main(argv):
    if len(argv) != 7:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    env = Env(argv)
    shutil.rmtree(env.work, ignore_errors=True)
    env.work.mkdir(parents=True)
    helped = run(env.machofix, "help", "fix")
    if helped.returncode != 0 or "fix" not in helped.stdout:
        print(f"FAILED: {env.machofix} has no fix command (`machofix help fix`: {shown(helped)})")
        print("not run: every case (" + ", ".join(c.__name__[5:] for c in CASES) + ")")
        return 1
    for case in CASES:
        print(f"--- {case.__name__[5:]}")
        try:
            case(env)
        except Exception as error:      # one case's crash must not hide the others
            import traceback
            traceback.print_exc()
            expect(f"{case.__name__[5:]}: runs to the end", False, repr(error))
    print(f"test_fix: {len(failures)} failed" + (f", {len(not_run)} not run" if not_run else ""))
    for what in failures:
        print(f"  FAILED: {what}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
