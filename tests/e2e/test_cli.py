#!/usr/bin/env python3
"""The command line as a person meets it: mistakes, help, paths, progress.

Every check runs the built machofix on inputs made here (the fixture matrix of
tests/fixtures/make_fixtures.py, .pte files from the test-only pte_writer, an
object file from clang-16) and looks at the exit status, stdout and stderr.
Usage: test_cli.py MACHOFIX PTE_WRITER MAKE_BIG_MACHO FIXTURE_DIR WORK_DIR
"""
import json
import os
import pty
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAILURES = []
COMMANDS = ["inspect", "prune", "sign", "verify", "check"]


def expect(condition, message):
    print(f"{'ok  ' if condition else 'FAIL'} {message}")
    if not condition:
        FAILURES.append(message)
    return condition


def run(*args, **kwargs):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)


def describe(result):
    return f"exit {result.returncode}, stdout {result.stdout[-300:]!r}, stderr {result.stderr[-600:]!r}"


def sha256(path):
    import hashlib
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def write(path, data):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)
    return path


# What each command needs besides its paths, and how to see that a good input was
# processed: (extra arguments, check(result, good_path, scratch)).
def processed_inspect(result, good, scratch):
    return f"{good}: mach-o" in result.stdout


def processed_verify(result, good, scratch):
    return f"{good}: valid" in result.stdout


def processed_check(result, good, scratch):
    return f"{good}: arm64: error: depends on /opt/llvm-openmp/lib/libomp.dylib" in result.stdout


def processed_dry_run(result, good, scratch):
    return f"{good}: would change, 1 dylib removable" in result.stdout


def processed_into(result, good, scratch):
    return os.path.exists(os.path.join(scratch, "out", os.path.basename(good)))


RUNS = {
    "inspect": ([], processed_inspect),
    "prune --dry-run": (["--dry-run"], processed_dry_run),
    "prune -o": (["-o", "out"], processed_into),
    "prune --in-place": (["--in-place"], None),  # checked by the file's hash
    "sign -o": (["-o", "out"], processed_into),
    "verify": ([], processed_verify),
    "check": ([], processed_check),
}


def run_in(scratch, machofix, name, paths, **kwargs):
    extra, _ = RUNS[name]
    return run(machofix, name.split()[0], *paths, *extra, cwd=scratch, **kwargs)


# --- inputs -----------------------------------------------------------------------

class Inputs:
    """Files every check copies from: a dylib with an unused libomp (linked by the
    fixture script), a .pte wrapping it, a real object file and dSYM from clang-16 /
    ld64.lld-16 / dsymutil-16, a universal object file, headers of other file types."""

    def __init__(self, pte_writer, fixtures, work):
        self.dir = os.path.join(work, "inputs")
        os.makedirs(self.dir)
        self.dylib = os.path.join(fixtures, "aoti_metal_arm64_dyldinfo.in")
        self.pte = os.path.join(self.dir, "model.pte")
        subprocess.run([pte_writer, "wrap", self.dylib, self.pte], check=True)
        self.object = self.compile("arm64", "-c")
        self.universal_object = os.path.join(self.dir, "universal.o")
        subprocess.run(["llvm-lipo-16", "-create", self.object, self.compile("x86_64", "-c"), "-output",
                        self.universal_object], check=True)
        self.dsym = self.make_dsym()

    def compile(self, arch, *flags):
        source = write(os.path.join(self.dir, "unit.c"), b"int answer(void) { return 42; }\nint main(void) { return 0; }\n")
        out = os.path.join(self.dir, f"unit_{arch}.o")
        subprocess.run(["clang-16", "-target", f"{arch}-apple-macos11", "-g", *flags, source, "-o", out], check=True)
        return out

    def make_dsym(self):
        exe = os.path.join(self.dir, "tool")
        subprocess.run(["ld64.lld-16", "-arch", "arm64", "-platform_version", "macos", "11.0", "11.0", "-o", exe,
                        self.object, os.path.join(ROOT, "tests", "fixtures", "tbd", "libSystem.tbd")], check=True)
        # dsymutil-16 leaves its temporary directories behind: keep them in the test's own.
        temporaries = os.path.join(self.dir, "tmp")
        os.makedirs(temporaries)
        subprocess.run(["dsymutil-16", exe, "-o", exe + ".dSYM"], check=True, env=dict(os.environ, TMPDIR=temporaries))
        return exe + ".dSYM"

    def with_filetype(self, name, filetype):
        """A copy of the dylib whose header says another file type (MH_CORE, ...)."""
        with open(self.dylib, "rb") as handle:
            data = bytearray(handle.read())
        data[12:16] = filetype.to_bytes(4, "little")
        return write(os.path.join(self.dir, name), bytes(data))


def scratch_dir(work, name):
    path = os.path.join(work, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


# --- mistakes and help ------------------------------------------------------------

def check_suggestions(machofix):
    result = run(machofix, "inspct", "x.dylib")
    expect(result.returncode == 2 and "unknown command 'inspct'" in result.stderr
           and "did you mean 'inspect'?" in result.stderr, f"a misspelt command gets the nearest one: {describe(result)}")
    result = run(machofix, "frobnicate")
    expect(result.returncode == 2 and "unknown command 'frobnicate'" in result.stderr
           and all(c in result.stderr for c in COMMANDS), f"a command far from any lists the commands: {describe(result)}")
    # --jsn before the missing PATH: the misspelling is the mistake to report.
    result = run(machofix, "inspect", "--jsn")
    expect(result.returncode == 2 and "unknown option '--jsn'" in result.stderr
           and "did you mean '--json'?" in result.stderr, f"a misspelt option gets the nearest one: {describe(result)}")
    result = run(machofix, "prune", "--inplace", "x.dylib")
    expect(result.returncode == 2 and "did you mean '--in-place'?" in result.stderr, f"--inplace: {describe(result)}")
    result = run(machofix, "verify", "--keep", "libomp", "x.dylib")
    expect(result.returncode == 2 and "unknown option '--keep' for verify" in result.stderr
           and "inspect, prune, check and fix take '--keep'" in result.stderr,
           f"an option of other commands says which take it: {describe(result)}")
    result = run(machofix, "inspect", "--dryrun", "x.dylib")
    expect(result.returncode == 2 and "prune, edit and fix take '--dry-run'" in result.stderr,
           f"a misspelt option of another command names it: {describe(result)}")
    for words in (["inspct"], ["inspect", "--jsn"]):
        result = run(machofix, *words)
        expect(result.stdout == "" and result.stderr.count("\n") == 1,
               f"{' '.join(words)}: one line of error, nothing on stdout: {describe(result)}")


def check_double_dash(machofix, fixtures, work):
    """After --, every word is a path, even one that starts with a dash."""
    scratch = os.path.join(work, "dashes")
    os.makedirs(scratch)
    shutil.copy(os.path.join(fixtures, "aoti_metal_arm64_dyldinfo.in"), os.path.join(scratch, "-model.dylib"))
    result = run(machofix, "inspect", "--json=-", "--", "-model.dylib", cwd=scratch)
    expect(result.returncode == 0 and json.loads(result.stdout or "{}").get("files", [{}])[0].get("path") == "-model.dylib",
           f"inspect -- -model.dylib: a path: {describe(result)}")


def check_help(machofix):
    top = run(machofix, "help")
    expect(top.returncode == 0 and all(f"\n  {c} " in top.stdout for c in COMMANDS + ["help"]),
           f"machofix help lists the commands: {describe(top)}")
    expect(run(machofix, "--help").stdout == top.stdout, "machofix --help is machofix help")
    for command in COMMANDS:
        own = run(machofix, "help", command)
        flag = run(machofix, command, "--help")
        expect(own.returncode == 0 and own.stdout == flag.stdout and f"Usage: machofix {command} PATH..." in own.stdout,
               f"machofix help {command} is machofix {command} --help: {describe(own)}")
        text = flag.stdout
        expect(flag.returncode == 0 and "--verbose" not in text and "--version" not in text and "--quiet" not in text,
               f"{command} --help shows only its own options")
        noise = [word for word in ("TEXT", "UINT", "INT", "[1 - 1024]", "PATH(existing)", "REQUIRED", "VALUE", "=-")
                 if word in text]
        expect(flag.returncode == 0 and not noise, f"{command} --help has no type noise {noise}")
    prune = run(machofix, "prune", "--help").stdout
    expect("Usage: machofix prune PATH... (-o OUT | --in-place | --dry-run) [OPTIONS]" in prune,
           "prune's usage line says it needs one of -o, --in-place, --dry-run")
    expect("-j, --jobs N " in prune and "--keep GLOB " in prune and "--json [FILE] " in prune,
           "option values have names: N, GLOB, [FILE]")
    verify = run(machofix, "verify", "--help").stdout
    expect("--keep" not in verify and "--in-place" not in verify, "verify --help shows no option of other commands")
    result = run(machofix, "help", "nosuch")
    expect(result.returncode == 2 and "unknown command 'nosuch'" in result.stderr and "inspect" in result.stderr,
           f"machofix help nosuch is an error listing the commands: {describe(result)}")
    result = run(machofix, "help", "pruen")
    expect(result.returncode == 2 and "did you mean 'prune'?" in result.stderr, f"help pruen: {describe(result)}")
    result = run(machofix)
    expect(result.returncode == 2 and "no command given" in result.stderr and "Commands:" in result.stderr,
           f"no command: the help on stderr, exit 2: {describe(result)}")


# --- paths --------------------------------------------------------------------------

def check_missing_path(machofix, inputs, work):
    """A path that does not exist is an error of that path; the others are processed."""
    for name, (_, processed) in RUNS.items():
        scratch = scratch_dir(work, "missing")
        good = "good.dylib"
        shutil.copy(inputs.dylib, os.path.join(scratch, good))
        before = sha256(os.path.join(scratch, good))
        result = run_in(scratch, machofix, name, ["no/such.dylib", good])
        expect(result.returncode == 2 and "machofix: error: no/such.dylib: no such file or directory" in result.stderr,
               f"{name}: a missing path is an error of that path, exit 2: {describe(result)}")
        done = processed(result, good, scratch) if processed else sha256(os.path.join(scratch, good)) != before
        expect(done, f"{name}: the other input is still processed: {describe(result)}")


def check_named_files(machofix, inputs, work):
    """A file named on the command line that is not a model is an error, check included."""
    for name in RUNS:
        scratch = scratch_dir(work, "named")
        write(os.path.join(scratch, "empty.pte"), b"")
        write(os.path.join(scratch, "notes.txt"), b"not a model\n")
        shutil.copy(inputs.dylib, os.path.join(scratch, "good.dylib"))
        for path, message in [("empty.pte", "empty.pte: empty file"),
                              ("notes.txt", "notes.txt: not a Mach-O, .pte or .ptd file"),
                              ("/dev/null", "/dev/null: not a regular file")]:
            result = run_in(scratch, machofix, name, [path])
            expect(result.returncode == 2 and f"machofix: error: {message}" in result.stderr,
                   f"{name} {path}: an error, exit 2: {describe(result)}")
            result = run_in(scratch, machofix, name, ["good.dylib", path])
            expect(result.returncode == 2 and message in result.stderr,
                   f"{name} good.dylib {path}: still an error among several inputs: {describe(result)}")
    check_unreadable(machofix, work)


def check_unreadable(machofix, work):
    """An unreadable file: as root, run as nobody (from a copy of the executable that
    nobody can reach, whatever the permissions of the build tree)."""
    scratch = tempfile.mkdtemp(prefix="machofix-cli-")
    try:
        os.chmod(scratch, 0o777)
        tool = os.path.join(scratch, "machofix")
        shutil.copy(machofix, tool)
        plugin = os.path.join(os.path.dirname(machofix), "machofix-lief.so")
        if os.path.exists(plugin):
            shutil.copy(plugin, scratch)
        secret = write(os.path.join(scratch, "secret.dylib"), b"\xcf\xfa\xed\xfe" + bytes(60))
        os.chmod(secret, 0)
        demote = None
        if os.geteuid() == 0:
            def demote():
                os.setgid(65534)
                os.setuid(65534)
        for name in RUNS:
            result = run_in(scratch, tool, name, ["secret.dylib"], preexec_fn=demote)
            expect(result.returncode == 2 and "secret.dylib: cannot open: Permission denied" in result.stderr,
                   f"{name}: an unreadable file is an error: {describe(result)}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def check_walk_skips(machofix, inputs, work):
    """Inside a directory, files that are not models are skipped and counted."""
    scratch = scratch_dir(work, "walk")
    tree = os.path.join(scratch, "tree")
    shutil.copy(inputs.dylib, write(os.path.join(tree, "lib", "model.dylib"), b""))
    write(os.path.join(tree, "empty.bin"), b"")
    write(os.path.join(tree, "docs", "notes.txt"), b"not a model\n")
    result = run(machofix, "check", "tree", "--json", "-", cwd=scratch)
    summary = json.loads(result.stdout)["summary"]
    expect(result.returncode == 1 and summary["skipped"] == 2 and summary["failed"] == 0,
           f"check of a tree: the model's findings, 2 files skipped: {describe(result)}")
    result = run(machofix, "prune", "--in-place", "tree", cwd=scratch)
    expect(result.returncode == 0 and "1 changed, 0 unchanged, 2 skipped, 0 failed" in result.stdout,
           f"prune of a tree: 2 skipped, none failed: {describe(result)}")


# --- Mach-O file types -------------------------------------------------------------

OTHER_TYPES = [("core", 4, "Mach-O core file (MH_CORE)"), ("preload", 5, "Mach-O preloaded executable (MH_PRELOAD)"),
               ("kext", 11, "kernel extension (MH_KEXT_BUNDLE)"), ("fileset", 12, "Mach-O fileset"),
               ("stub", 9, "Mach-O dylib stub (MH_DYLIB_STUB)")]


def check_file_types(machofix, inputs, work):
    """Object files, dSYMs and the other types machofix does not rewrite: named by
    their type; an error when named, a note and a skip inside a directory."""
    dwarf = os.path.join(inputs.dsym, "Contents", "Resources", "DWARF", "tool")
    named = [(inputs.object, "Mach-O object file (MH_OBJECT)"), (inputs.universal_object, "Mach-O object file (MH_OBJECT)"),
             (dwarf, "dSYM debug-symbols file (MH_DSYM)")]
    named += [(inputs.with_filetype(f"{n}.bin", t), what) for n, t, what in OTHER_TYPES]
    for name in RUNS:
        scratch = scratch_dir(work, "types")
        for path, what in named:
            result = run_in(scratch, machofix, name, [path])
            expect(result.returncode == 2 and f"{path}: a {what}" in result.stderr and "filetype" not in result.stderr,
                   f"{name} {os.path.basename(path)}: an error naming the type: {describe(result)}")
    scratch = scratch_dir(work, "types_tree")
    tree = os.path.join(scratch, "tree")
    clean = os.path.join(tree, "clean.dylib")
    os.makedirs(tree)
    subprocess.run([machofix, "prune", inputs.dylib, "-o", clean], check=True, capture_output=True)
    shutil.copy(inputs.object, os.path.join(tree, "unit.o"))
    shutil.copytree(inputs.dsym, os.path.join(tree, "tool.dSYM"))
    shutil.copy(named[-1][0], os.path.join(tree, "stub.bin"))
    for name in RUNS:
        result = run_in(scratch, machofix, name, ["tree"])
        expect(result.returncode == 0, f"{name} of a tree with an object file and a dSYM: not a failure: {describe(result)}")
        for path, what in [("tree/unit.o", "Mach-O object file (MH_OBJECT)"),
                           ("tree/tool.dSYM/Contents/Resources/DWARF/tool", "dSYM debug-symbols file (MH_DSYM)"),
                           ("tree/stub.bin", "Mach-O dylib stub (MH_DYLIB_STUB)")]:
            expect(f"machofix: note: {path}: skipped: a {what}" in result.stderr,
                   f"{name}: {path} skipped with a note naming its type: {describe(result)}")
    report = json.loads(run(machofix, "check", "tree", "--json", "-", cwd=scratch).stdout)
    skipped = {f["path"]: f.get("skipped_because", "") for f in report["files"] if f["status"] == "skipped"}
    expect("Mach-O object file (MH_OBJECT)" in skipped.get("tree/unit.o", ""), f"JSON: skipped_because {skipped}")


# --- inputs without models -----------------------------------------------------------

def check_no_models(machofix, inputs, work):
    """A directory (or a named archive, a wheel) without models says so: one error, exit
    2, the same for every command; no gate calls it valid or counts it as checked."""
    for name in RUNS:
        scratch = scratch_dir(work, "nomodels")
        write(os.path.join(scratch, "docs", "notes.txt"), b"not a model\n")
        shutil.copy(inputs.object, os.path.join(scratch, "docs", "unit.o"))
        os.makedirs(os.path.join(scratch, "empty"))
        gate = True  # every command: a run that looked at nothing does not pass
        for directory in ("docs", "empty"):
            result = run_in(scratch, machofix, name, [directory])
            level = "error"
            expect(f"machofix: {level}: no models found under {directory}" in result.stderr
                   and result.returncode == (2 if gate else 0), f"{name} {directory}: {describe(result)}")
        shutil.copy(inputs.dylib, os.path.join(scratch, "good.dylib"))
        result = run_in(scratch, machofix, name, ["good.dylib", "empty"])
        expect("no models found under empty" in result.stderr and result.returncode == (2 if gate else 0),
               f"{name}: one input without models among others: {describe(result)}")
        with zipfile.ZipFile(os.path.join(scratch, "docs.zip"), "w") as archive:
            archive.writestr("README.txt", "no model here\n")
        result = run_in(scratch, machofix, name, ["docs.zip"])
        expect("no models found in docs.zip" in result.stderr and result.returncode == (2 if gate else 0),
               f"{name} docs.zip: an archive without models: {describe(result)}")
        with zipfile.ZipFile(os.path.join(scratch, "pkg-1.0-py3-none-any.whl"), "w") as archive:
            archive.writestr("pkg/__init__.py", "x = 1\n")
        result = run_in(scratch, machofix, name, ["pkg-1.0-py3-none-any.whl"])
        expect(result.stderr.count("no models found in pkg-1.0-py3-none-any.whl") == 1 and result.returncode == 2
               and "valid" not in result.stdout and "1 file checked" not in result.stdout,
               f"{name}: a wheel without Mach-O: one error, exit 2, never valid or checked: {describe(result)}")


# --- JSON: what was removed, what would be --------------------------------------------

def dylib_flags(file_report):
    """(install name, removable, removed) of every dylib of every image in a file report."""
    images = [file_report["macho"]] if "macho" in file_report else [b["macho"] for b in file_report["pte"]["blobs"]]
    return [(d["install_name"], d.get("removable"), d["removed"]) for image in images for s in image["slices"] for d in s["dylibs"]]


def check_json_removals(machofix, inputs, work):
    """dylibs_removed counts what was removed: 0 for inspect and dry runs, which report
    what prune would remove under dylibs_removable (and per dylib `removable`)."""
    scratch = scratch_dir(work, "json")
    libomp = "/opt/llvm-openmp/lib/libomp.dylib"
    for model in (inputs.dylib, inputs.pte):
        name = os.path.basename(model)
        runs = {"inspect": ["inspect", model], "prune --dry-run": ["prune", "--dry-run", model],
                "check": ["check", model], "prune -o": ["prune", model, "-o", os.path.join(scratch, name)]}
        for what, arguments in runs.items():
            report = json.loads(run(machofix, *arguments, "--json", "-").stdout)
            removes = what == "prune -o"
            file_report, summary = report["files"][0], report["summary"]
            counts = [file_report.get("dylibs_removed"), file_report.get("dylibs_removable"),
                      summary.get("dylibs_removed"), summary.get("dylibs_removable")]
            expect(counts == [1 if removes else 0, 1, 1 if removes else 0, 1],
                   f"{what} {name}: dylibs_removed, dylibs_removable of the file and the summary: {counts}")
            flags = dylib_flags(file_report)
            expect([f for f in flags if f[1] or f[2]] == [(libomp, True, removes)],
                   f"{what} {name}: only libomp is removable{', and removed' if removes else ', none removed'}: {flags}")
    text = run(machofix, "prune", "--dry-run", inputs.dylib, "-v").stdout
    expect("supplies nothing -> unused: would be removed" in text, f"dry run text: would be removed: {text[-400:]!r}")
    text = run(machofix, "inspect", inputs.dylib).stdout
    expect("supplies nothing -> unused: prune removes it" in text, f"inspect text: prune removes it: {text[-400:]!r}")


# --- -o into a directory that does not exist -----------------------------------------

def check_output_directory(machofix, inputs, work):
    """-o DIR/FILE with DIR missing (or not a directory) is refused, as cp does; a
    mirrored tree's directories are made."""
    scratch = scratch_dir(work, "output")
    write(os.path.join(scratch, "plain"), b"a file\n")
    shutil.copy(inputs.dylib, os.path.join(scratch, "model.dylib"))
    shutil.copy(inputs.pte, os.path.join(scratch, "model.pte"))
    with zipfile.ZipFile(os.path.join(scratch, "models.zip"), "w") as archive:
        archive.write(inputs.dylib, "lib/model.dylib")
    for command in ("prune", "sign"):
        for model in ("model.dylib", "model.pte", "models.zip"):
            for target, why in [("nodir/out", "nodir does not exist"), ("plain/out", "plain is not a directory")]:
                result = run(machofix, command, model, "-o", target, cwd=scratch)
                expect(result.returncode == 2 and f"machofix: error: {target}: cannot create the output: {why}" in result.stderr
                       and not os.path.exists(os.path.join(scratch, "nodir")),
                       f"{command} {model} -o {target}: refused, nothing made: {describe(result)}")
    os.makedirs(os.path.join(scratch, "tree", "deep"))
    shutil.copy(inputs.dylib, os.path.join(scratch, "tree", "deep", "model.dylib"))
    result = run(machofix, "prune", "tree", "-o", "new/mirror", cwd=scratch)
    expect(result.returncode == 0 and os.path.exists(os.path.join(scratch, "new", "mirror", "deep", "model.dylib")),
           f"a mirrored tree's directories are made: {describe(result)}")


# --- progress ---------------------------------------------------------------------

PROGRESS = re.compile(r"\[(\d+)/(\d+) files, ([\d.]+)/([\d.]+) (B|KiB|MiB|GiB|TiB)\]")


def run_on_terminal(*args, env=None, cwd=None):
    """Runs with stderr on a pseudo-terminal (stdout a pipe); returns (status,
    stderr bytes as the terminal got them, seconds)."""
    master, slave = pty.openpty()
    start = time.monotonic()
    process = subprocess.Popen([str(a) for a in args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave,
                               env=env, cwd=cwd)
    os.close(slave)
    received = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the last writer closed the terminal
            break
        if not chunk:
            break
        received += chunk
    process.wait()
    os.close(master)
    return process.returncode, received.decode(errors="replace"), time.monotonic() - start


def progress_lines(terminal):
    """(files done, files, bytes done, bytes total, unit) of every line drawn."""
    return [(int(m[1]), int(m[2]), float(m[3]), float(m[4]), m[5]) for m in PROGRESS.finditer(terminal)]


def with_progress(mode):
    env = dict(os.environ)
    env["MACHOFIX_PROGRESS"] = mode
    return env


def check_single_file_progress(machofix, model, what, work):
    """One large file: lines with its bytes growing on a terminal, cleared at the end;
    nothing in a pipe or with -q."""
    out = os.path.join(work, "progress.out")
    status, terminal, seconds = run_on_terminal(machofix, "prune", model, "-o", out, env=with_progress("always"))
    lines = progress_lines(terminal)
    size_mib = os.path.getsize(model) / (1 << 20)
    expect(status == 0 and lines and all(line[:2] == (0, 1) for line in lines[:-1]) and lines[-1][1] == 1,
           f"{what}: a progress line on the terminal, 1 file: {terminal[-300:]!r}")
    done = [line[2] for line in lines]
    expect(lines and done == sorted(done) and all(abs(line[3] - size_mib) < 0.1 and line[4] == "MiB" for line in lines),
           f"{what}: bytes grow towards the file's {size_mib:.1f} MiB: {done[:20]}")
    partial = [d for d in done if 0 < d < size_mib]
    expect(partial or seconds < 0.25, f"{what}: bytes are reported while the file is processed ({seconds:.2f} s): {done[:20]}")
    expect(terminal.endswith("\r\x1b[K"), f"{what}: the line is cleared at the end: {terminal[-80:]!r}")
    os.remove(out)
    piped = run(machofix, "prune", model, "-o", out, env=with_progress("always"))
    expect(piped.returncode == 0 and "files," not in piped.stderr and "\r" not in piped.stderr,
           f"{what}: nothing on a pipe: {piped.stderr[-300:]!r}")
    os.remove(out)
    status, terminal, _ = run_on_terminal(machofix, "prune", model, "-o", out, "-q", env=with_progress("always"))
    expect(status == 0 and terminal == "", f"{what}: nothing with -q: {terminal[-200:]!r}")
    os.remove(out)


def check_progress(machofix, pte_writer, make_big_macho, inputs, work):
    scratch = scratch_dir(work, "progress")
    blobs = os.path.join(scratch, "blobs")
    subprocess.run([os.path.join(ROOT, "tests", "pte", "make_blobs.sh"), blobs], check=True, capture_output=True)
    big_pte = os.path.join(scratch, "big.pte")
    subprocess.run([pte_writer, "big", blobs, big_pte, str(512 << 20)], check=True)
    # 512 MiB each: long enough that a redraw (every 100 ms) falls inside the work, even
    # where starting the process takes a tenth of a second (a sanitizer build: a
    # 128 MiB dylib took 0.2-0.3 s there and drew only its first line).
    big_macho = os.path.join(scratch, "big.dylib")
    subprocess.run([make_big_macho, big_macho, "512"], check=True)
    check_single_file_progress(machofix, big_pte, "a 512 MiB .pte", scratch)
    check_single_file_progress(machofix, big_macho, "a 512 MiB dylib", scratch)
    # The default: only for a run expected to take more than about a second.
    out = os.path.join(scratch, "auto.out")
    status, terminal, seconds = run_on_terminal(machofix, "prune", big_pte, "-o", out)
    os.remove(out)
    if seconds >= 1.5:
        expect(progress_lines(terminal), f"a run of {seconds:.1f} s shows progress by default: {terminal[-200:]!r}")
    else:
        print(f"note: the 512 MiB .pte took {seconds:.2f} s here, too fast to require a progress line")
    status, terminal, seconds = run_on_terminal(machofix, "prune", inputs.dylib, "-o", out)
    expect(status == 0 and (terminal == "" or seconds > 0.2), f"a short run shows nothing by default: {terminal!r}")
    # Several files: the count of files.
    tree = os.path.join(scratch, "tree")
    for i in range(5):
        shutil.copy(inputs.dylib, write(os.path.join(tree, f"m{i}.dylib"), b""))
    status, terminal, _ = run_on_terminal(machofix, "check", tree, env=with_progress("always"))
    lines = progress_lines(terminal)
    expect(lines and all(line[1] == 5 for line in lines), f"a tree: the count of its files: {terminal[-200:]!r}")
    shutil.rmtree(scratch)


def main():
    machofix, pte_writer, make_big_macho, fixtures, work = [os.path.abspath(a) for a in sys.argv[1:6]]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.chdir(work)
    check_suggestions(machofix)
    check_double_dash(machofix, fixtures, work)
    check_help(machofix)
    inputs = Inputs(pte_writer, fixtures, work)
    check_missing_path(machofix, inputs, work)
    check_named_files(machofix, inputs, work)
    check_walk_skips(machofix, inputs, work)
    check_file_types(machofix, inputs, work)
    check_no_models(machofix, inputs, work)
    check_json_removals(machofix, inputs, work)
    check_output_directory(machofix, inputs, work)
    check_progress(machofix, pte_writer, make_big_macho, inputs, work)
    print(f"{len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
