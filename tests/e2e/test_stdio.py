#!/usr/bin/env python3
"""`-` for standard input and output, through the command line.

 - `prune - -o -` in a pipe gives, byte for byte, what `prune FILE -o OUT` writes,
   for Mach-O files, .pte/.ptd files (the writer's matrix, ExecuTorch's samples when
   present) and a zip of models; stdout carries the output alone, the report goes
   to stderr; standard input may be a pipe, a file, or a file read from the middle;
   `-o FILE` from a pipe and `FILE -o -` too;
 - `inspect -`, `verify -`, `check -` report what they report for the file (JSON
   compared), naming the input "-";
 - bad input on stdin, a failing verification (no LIEF reader), a truncated model:
   exit 2, nothing on stdout; refusals: `-` in place, twice, into a mirrored
   directory, `-o -` with several inputs, `-o -` with `--json -`, `-o -` to a
   terminal, a terminal on stdin (no hang);
 - no temporary file is left in $TMPDIR, whatever happened.
Usage: test_stdio.py MACHOFIX PTE_WRITER FIXTURE_DIR WORK_DIR [SAMPLES_DIR]
"""
import json
import os
import pty
import shutil
import subprocess
import sys
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
from pte_models import pte_models  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAILURES = []
MACHOFIX = ""
TMPDIR = ""


def expect(condition, message):
    print(f"{'ok  ' if condition else 'FAIL'} {message}")
    if not condition:
        FAILURES.append(message)


def run(*args, data=None, stdin=None, env=None, cwd=None):
    """machofix ARGS with `data` piped in (or `stdin` as given): (status, stdout bytes, stderr text)."""
    environment = {**os.environ, "TMPDIR": TMPDIR, **(env or {})}
    command = [MACHOFIX, *[str(a) for a in args]]
    if data is not None:
        result = subprocess.run(command, input=data, capture_output=True, env=environment, cwd=cwd, timeout=300)
    else:
        result = subprocess.run(command, stdin=stdin if stdin is not None else subprocess.DEVNULL, capture_output=True,
                                env=environment, cwd=cwd, timeout=300)
    return result.returncode, result.stdout, result.stderr.decode(errors="replace")


def read(path):
    with open(path, "rb") as handle:
        return handle.read()


def without_times(document):
    """A JSON report with the timings (which differ from run to run) and paths left out."""
    if isinstance(document, dict):
        return {k: without_times(v) for k, v in document.items() if k not in ("seconds", "path", "file")}
    if isinstance(document, list):
        return [without_times(v) for v in document]
    return document


def check_pipe_equals_file(name, path, work):
    reference = os.path.join(work, "reference.out")
    status, _, _ = run("prune", path, "-o", reference)
    code, out, err = run("prune", "-", "-o", "-", data=read(path))
    expect(code == status == 0 and out == read(reference),
           f"{name}: prune - -o - in a pipe writes what prune FILE -o OUT writes ({len(out)} bytes)")
    expect(err.startswith("-: ") and ("changed" in err.splitlines()[0] or "unchanged" in err.splitlines()[0]),
           f"{name}: the report goes to stderr and names the input - ({err.splitlines()[0] if err else ''!r})")
    with open(path, "rb") as handle:
        code, out, _ = run("prune", "-", "-o", "-", stdin=handle)
    expect(code == 0 and out == read(reference), f"{name}: the same with a file redirected to stdin")
    return read(reference)


def check_pipes(machofix_files, models, work):
    for path in machofix_files + models:
        check_pipe_equals_file(os.path.basename(path), path, work)
    sample = models[0]
    # FILE -o -, and - -o FILE (its mode: 0666 less the umask, like `cat > FILE`).
    reference = os.path.join(work, "sample.out")
    run("prune", sample, "-o", reference)
    code, out, err = run("prune", sample, "-o", "-")
    expect(code == 0 and out == read(reference) and sample in err, "prune FILE -o - writes the output to stdout, the report to stderr")
    target = os.path.join(work, "from_pipe.pte")
    code, out, _ = run("prune", "-", "-o", target, data=read(sample))
    expect(code == 0 and read(target) == read(reference), "prune - -o FILE writes the file")
    expect(out.startswith(b"-: "), "and the report to stdout, as for any file")
    old = os.umask(0o027)
    os.umask(old)
    expect(os.stat(target).st_mode & 0o777 == 0o666 & ~old, f"its mode is 0666 less the umask ({oct(os.stat(target).st_mode & 0o777)})")
    code, out, err = run("-q", "prune", "-", "-o", "-", data=read(sample))
    expect(code == 0 and out == read(reference) and err == "", "-q: stdout the output, stderr empty")
    # Standard input read from the middle of a file: from where it stands, like cat.
    padded = os.path.join(work, "padded")
    with open(padded, "wb") as handle:
        handle.write(b"x" * 1000 + read(sample))
    with open(padded, "rb") as handle:
        handle.seek(1000)
        code, out, _ = run("prune", "-", "-o", "-", stdin=handle)
    expect(code == 0 and out == read(reference), "stdin positioned inside a file is read from its position")


def check_reports(paths):
    for path in paths:
        for command in ("inspect", "verify", "check"):
            status, from_file, _ = run(command, "--json", "-", path)
            # The path also appears inside strings (check's repair commands): named "-" there too.
            from_file = from_file.replace(json.dumps(path)[1:-1].encode(), b"-")
            code, from_pipe, _ = run(command, "--json", "-", "-", data=read(path))
            pipe_report, file_report = json.loads(from_pipe), json.loads(from_file)
            expect(code == status and without_times(pipe_report) == without_times(file_report)
                   and pipe_report["files"][0]["path"] == "-",
                   f"{os.path.basename(path)}: {command} - reports what {command} FILE does (exit {code}), naming -")
    status, text, _ = run("check", paths[0])
    code, piped, _ = run("check", "-", data=read(paths[0]))
    expect(code == status and piped.decode() == text.decode().replace(paths[0], "-"), "check -: the same findings, on -")


def check_archive(models, work):
    archive = os.path.join(work, "models.zip")
    with zipfile.ZipFile(archive, "w") as handle:
        for path in models[:3]:
            handle.write(path, os.path.basename(path))
    reference = os.path.join(work, "models.fixed.zip")
    run("prune", archive, "-o", reference)
    code, out, _ = run("prune", "-", "-o", "-", data=read(archive))
    expect(code == 0 and out == read(reference), "a zip of models through a pipe: what prune FILE -o OUT writes")


def changed_model(models, work):
    """The first model whose blob prune rewrites (so LIEF must read it): without the
    samples, the writer's matrix comes first, and its first model has nothing to prune."""
    probe = os.path.join(work, "probe.pte")
    for path in models:
        code, out, _ = run("prune", path, "-o", probe)
        if code == 0 and b": pte, changed" in out:
            return path
    raise SystemExit("no model that prune changes")


def check_failures(models, fixtures, work):
    sample = models[0]
    code, out, err = run("prune", "-", "-o", "-", data=b"not a model at all\n")
    expect(code == 2 and out == b"" and "-: not a Mach-O" in err, f"garbage on stdin: exit 2, nothing on stdout ({err.strip()!r})")
    for command in ("inspect", "verify", "check"):
        code, out, err = run(command, "-", data=b"\0" * 64)
        expect(code == 2 and "-: " in err, f"{command} - of garbage: exit 2 (not skipped)")
    truncated = read(sample)[: len(read(sample)) // 2]
    code, out, err = run("prune", "-", "-o", "-", data=truncated)
    expect(code == 2 and out == b"", f"a truncated .pte on stdin: exit 2, nothing on stdout ({err.strip()[:90]!r})")
    code, out, err = run("prune", "-", "-o", "-", data=b"")
    expect(code == 2 and out == b"", "empty stdin: exit 2, nothing on stdout")
    # The rewrite cannot be verified (no LIEF reader): nothing reaches stdout.
    model = os.path.join(fixtures, "many_dylibs_arm64_chained.in")
    code, out, err = run("prune", "-", "-o", "-", data=read(model), env={"MACHOFIX_LIEF_PLUGIN": "/nonexistent/reader.so"})
    expect(code == 2 and out == b"" and "LIEF reader" in err, "a rewrite that cannot be verified: exit 2, nothing on stdout")
    changed = changed_model(models, work)
    code, out, err = run("prune", "-", "-o", "-", data=read(changed), env={"MACHOFIX_LIEF_PLUGIN": "/nonexistent/reader.so"})
    expect(code == 2 and out == b"", f"the same for a .pte ({os.path.basename(changed)})")


def check_refusals(sample, work):
    cases = [
        (("prune", "-", "--in-place"), "cannot be replaced in place"),
        (("inspect", "-", "-"), "only once"),
        (("prune", "-", sample, "-o", os.path.join(work, "mirror")), "no name to give it"),
        (("prune", sample, sample, "-o", "-"), "standard output takes one file"),
        (("prune", work, "-o", "-"), "standard output takes one file"),
        (("prune", "-", "-o", "-", "--json", "-"), "both want standard output"),
    ]
    for args, message in cases:
        code, out, err = run(*args, data=read(sample))
        # Other inputs are still processed and reported; -o - writes nothing at all.
        to_stdout = "-o" in args and args[args.index("-o") + 1] == "-"
        expect(code == 2 and message in err and (out == b"" or not to_stdout),
               f"refused: machofix {' '.join(args).replace(work, 'WORK')} ({message})")
    # A terminal: -o - will not write binary to it; - will not wait for typing.
    primary, secondary = pty.openpty()
    try:
        result = subprocess.run([MACHOFIX, "prune", sample, "-o", "-"], stdout=secondary, stderr=subprocess.PIPE,
                                env={**os.environ, "TMPDIR": TMPDIR}, timeout=60)
        expect(result.returncode == 2 and b"terminal" in result.stderr, "-o - to a terminal: refused")
        result = subprocess.run([MACHOFIX, "inspect", "-"], stdin=secondary, capture_output=True,
                                env={**os.environ, "TMPDIR": TMPDIR}, timeout=60)
        expect(result.returncode == 2 and b"standard input is a terminal" in result.stderr, "- with a terminal on stdin: exit 2, no wait")
    finally:
        os.close(primary)
        os.close(secondary)


def unsigned_executable(work):
    """An arm64 executable without a signature or an install name, linked here."""
    source, obj, executable = (os.path.join(work, n) for n in ("main.c", "main.o", "unsigned_tool"))
    with open(source, "w") as handle:
        handle.write("int main(void) { return 0; }\n")
    subprocess.run(["clang-16", "-target", "arm64-apple-macos11", "-c", source, "-o", obj], check=True)
    subprocess.run(["ld64.lld-16", "-arch", "arm64", "-platform_version", "macos", "11.0", "11.0", "-no_adhoc_codesign", obj,
                    os.path.join(ROOT, "samples", "aoti_metal", "stubs", "libSystem.tbd"), "-o", executable], check=True)
    return executable


def check_identifier(fixtures, work):
    # A new signature is named after the install name, else the file name: stdin has none.
    unsigned = os.path.join(fixtures, "aoti_metal_arm64_dyldinfo_unsigned.in")
    code, out, err = run("sign", "-", "-o", "-", data=read(unsigned))
    expect(code == 0 and len(out) > 0 and 'identifier "aoti_metal' in err,
           "sign - -o - of an unsigned dylib: the new signature is named after its install name")
    executable = unsigned_executable(work)
    code, out, err = run("sign", "-", "-o", "-", data=read(executable))
    expect(code == 2 and out == b"" and "--identifier" in err, "an executable from stdin has no name to sign it with: exit 2")
    code, out, err = run("sign", "-", "-o", "-", "--identifier", "tool", data=read(executable))
    expect(code == 0 and 'identifier "tool"' in err and b"tool\0" in out, "with --identifier ID: signed under that name")


def main():
    global MACHOFIX, TMPDIR
    MACHOFIX, pte_writer, fixtures, work = [os.path.abspath(a) for a in sys.argv[1:5]]
    samples = os.path.abspath(sys.argv[5]) if len(sys.argv) > 5 else ""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    TMPDIR = os.path.join(work, "tmp")
    os.makedirs(TMPDIR)
    models = pte_models(pte_writer, work, samples)
    machos = [os.path.join(fixtures, name) for name in ("many_dylibs_arm64_chained.in", "aoti_metal_x86_64_dyldinfo.in",
                                                        "universal_fat64_chained.in", "reexport_used_arm64_chained.in")]
    check_pipes(machos, models, work)
    check_reports(models[:2] + machos[:2])
    check_archive(models, work)
    check_failures(models, fixtures, work)
    check_refusals(models[0], work)
    check_identifier(fixtures, work)
    left = os.listdir(TMPDIR)
    expect(not left, f"nothing is left in $TMPDIR ({left})")
    print(f"{len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
