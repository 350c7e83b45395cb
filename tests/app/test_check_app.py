#!/usr/bin/env python3
"""`machofix check --app`: every case of make_app_fixtures.py's manifest, and the
ExecuTorch samples, against what dyld would do; the linker as a witness of each
binding machofix reports.

For every case (a model, or the .pte around one, against an application, with or
without --sysroot / --min-macos / --arch):
  - `check MODEL --app APP ... --json -`: the findings, as (rule, dylib, symbol,
    needed_by's basename, arch), are exactly the manifest's (the rules that always run
    included); the other fields the manifest pins (expected_in, needed_by, min_macos,
    required) hold; the exit status is 1 with findings, else 0; the slices judged, the
    pinned bindings (verdict, found_in) and the paths tried (in dyld's order) are the
    manifest's, each path folded as dyld prints it (no "..");
  - the text report names each missing library's install name, every path tried for
    it, and each missing symbol;
  - the contract-file form (machofix.toml beside a copy of the model: app=, sysroot=,
    min_macos=, arch=) gives the same findings, plus the unprovided-dependency findings
    a contract adds (the manifest's contract_extra_findings), and the exit status.
The witness: for each judged slice, each library file found_in names and the symbols
"bound" there, ld64.lld-16 links an object referencing exactly those symbols against
that file (an executable through -bundle_loader; the v5 stub through its v4 twin); for
each symbol "missing" (or "weak-missing") from a library that was found, the same link
against that library fails with "undefined symbol: SYMBOL" (a flat lookup: against the
main executable and every resolved dependency).
The samples (../shared/samples or $MACHOFIX_SAMPLES; skipped with a message when
absent): against AOTIRunner.app (libomp by install name) they load, against
AOTIRunnerNoOMP.app they do not (library-not-loaded /opt/llvm-openmp/lib/libomp.dylib);
after `machofix prune` they load against both.

Usage: test_check_app.py MACHOFIX PTE_WRITER FIXTURE_DIR WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CC, LD, OBJDUMP = "clang-16", "ld64.lld-16", "llvm-objdump-16"
MACOS = "11.0"
APP_RULES = ("library-not-loaded", "symbol-not-found", "min-macos", "arch-missing")
KEY_FIELDS = ("rule", "dylib", "symbol", "needed_by", "arch")
SAMPLE_DIRS = [os.environ.get("MACHOFIX_SAMPLES"), os.path.join(ROOT, "..", "shared", "samples")]

failures = []


def expect(condition, what, detail=""):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what + (f"\n    {detail}" if detail else ""))
        if detail:
            print("     " + detail.replace("\n", "\n     "), flush=True)
    return condition


def run(args, cwd=None, timeout=120):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=timeout)


def real(path):
    return os.path.realpath(path) if path else path


class Context:
    def __init__(self, machofix, pte_writer, fixtures, work):
        self.machofix, self.pte_writer = machofix, pte_writer
        self.fixtures, self.work = os.path.abspath(fixtures), os.path.abspath(work)
        with open(os.path.join(self.fixtures, "manifest.json")) as handle:
            self.manifest = json.load(handle)
        self.witness = Witness(self)

    def fx(self, rel):
        """A manifest path (relative to the fixtures) as an absolute path."""
        return os.path.join(self.fixtures, rel)


# --------------------------------------------------------------------------- reading reports

def app_checks(document):
    """The "app_checks" entries, wherever the report carries them (top level or per file)."""
    found = list(document.get("app_checks", []))
    for entry in document.get("files", []):
        found += entry.get("app_checks", [])
    return found


def key(f):
    return tuple(os.path.basename(f.get(k) or "") if k == "needed_by" else (f.get(k) or "") for k in KEY_FIELDS)


def show(keys):
    return "\n".join("  " + " | ".join(k) for k in sorted(keys)) or "  (none)"


def check_json(ctx, target, app, sysroot=None, min_macos=None, archs=(), json_output=True, cwd=None):
    args = [ctx.machofix, "check", target]
    if app:
        args += ["--app", app]
    if sysroot:
        args += ["--sysroot", sysroot]
    if min_macos:
        args += ["--min-macos", min_macos]
    for arch in archs:
        args += ["--arch", arch]
    if json_output:
        args += ["--json", "-"]
    result = run(args, cwd=cwd)
    document = None
    if json_output:
        try:
            document = json.loads(result.stdout)
        except ValueError:
            document = None
    return result, document


def path_matches(actual, expected, ctx):
    """expected: a path relative to the fixtures, an absolute path, "*" (any non-empty),
    "" (empty) or "@loader_path/NAME" (NAME in a directory outside the fixtures: the
    temporary directory the model is written to)."""
    if isinstance(expected, list):
        return any(path_matches(actual, alternative, ctx) for alternative in expected)
    if expected == "*":
        return bool(actual)
    if not expected:
        return not actual
    if not actual:
        return False
    if expected.startswith("@loader_path/"):
        leaf = expected.split("/", 1)[1]
        return os.path.basename(actual) == leaf and not real(actual).startswith(ctx.fixtures + os.sep)
    if os.path.isabs(expected):
        return os.path.normpath(actual) == expected
    return real(actual) == real(ctx.fx(expected))


def tried_matches(tried, patterns, ctx):
    """patterns occur in tried in this order (other candidates may come between)."""
    index = 0
    for entry in tried:
        if index < len(patterns):
            want = patterns[index]
            if path_matches(entry.get("path"), want["path"], ctx) and \
                    ("reason" not in want or entry.get("reason") == want["reason"]):
                index += 1
    return index == len(patterns)


def verify_document(ctx, name, result, document, expected, expected_exit, is_pte=False,
                    app_check_archs=None, bindings=None, tried=None, not_tried=None):
    """The assertions every form of a case shares. Returns the app_checks for the witness."""
    if not expect(document is not None, f"{name}: --json gives a report",
                  f"exit {result.returncode}; stdout {result.stdout[:300]!r}; stderr {result.stderr[:600]!r}"):
        return []
    found = document.get("findings", [])
    actual = {key(f) for f in found}
    wanted = {tuple(f[k] for k in KEY_FIELDS) for f in expected}
    expect(actual == wanted and len(found) == len(expected),
           f"{name}: findings are exactly the {len(expected)} expected",
           f"expected:\n{show(wanted)}\nreported:\n{show(key(f) for f in found)}\nstderr: {result.stderr.strip()[:400]}")
    expect(result.returncode == expected_exit, f"{name}: exit {expected_exit}",
           f"exit {result.returncode}; stderr {result.stderr.strip()[:400]}")
    for want in expected:
        for field, value in want.get("fields", {}).items():
            got = [f for f in found if key(f) == tuple(want[k] for k in KEY_FIELDS)]
            if not got:
                continue
            actual_value = got[0].get("needed_by" if field == "needed_by_path" else field)
            ok = (path_matches(actual_value, value, ctx) if field in ("expected_in", "needed_by_path")
                  else actual_value == value)
            expect(ok, f"{name}: {want['rule']} {want['symbol'] or want['dylib']}: {field} is {value!r}",
                   f"reported {actual_value!r}")
    if is_pte:
        expect(all(f.get("blob") for f in found if f.get("rule") in APP_RULES),
               f"{name}: every app finding names the blob in the .pte")
    checks = [c for c in app_checks(document) if c.get("loaded", True)]
    if app_check_archs is not None:
        archs = sorted(c.get("arch") for c in checks)
        expect(archs == sorted(app_check_archs), f"{name}: slices judged against the app: {app_check_archs}",
               f"app_checks for {archs}")
    if is_pte and checks:
        expect(all(c.get("blob") for c in checks), f"{name}: each app_check names the blob")
    for arch, symbols in (bindings or {}).items():
        by_symbol = {}
        for check in checks:
            if check.get("arch") == arch:
                for binding in check.get("bindings", []):
                    by_symbol[binding.get("symbol")] = binding
        for symbol, want in symbols.items():
            got = by_symbol.get(symbol)
            ok = got is not None and got.get("verdict") == want["verdict"] and (
                path_matches(got.get("found_in"), want["found_in"], ctx) if want["found_in"]
                else got.get("found_in") is None)
            expect(ok, f"{name}: [{arch}] {symbol}: {want['verdict']}"
                   + (f" in {want['found_in']}" if want["found_in"] not in (None, "*") else ""),
                   f"reported {got}")
    for dylib, patterns in (tried or {}).items():
        got = [f for f in found if f.get("rule") == "library-not-loaded" and f.get("dylib") == dylib]
        entries = got[0].get("tried", []) if got else []
        expect(bool(got) and tried_matches(entries, patterns, ctx),
               f"{name}: {dylib}: tried {[p['path'] for p in patterns]} in this order",
               f"tried {entries}")
    for f in found:
        if f.get("rule") != "library-not-loaded":
            continue
        unfolded = [t.get("path") for t in f.get("tried", []) if t.get("path") != os.path.normpath(t.get("path") or ".")]
        expect(not unfolded, f"{name}: {f.get('dylib')}: the paths tried are folded as dyld prints them "
               "(expandAndNormalizeAtExecutablePath: no '..')", f"tried {unfolded}")
    for dylib, paths in (not_tried or {}).items():
        got = [f for f in found if f.get("rule") == "library-not-loaded" and f.get("dylib") == dylib]
        entries = got[0].get("tried", []) if got else []
        wrong = [e.get("path") for e in entries if any(path_matches(e.get("path"), p, ctx) for p in paths)]
        expect(bool(got) and not wrong, f"{name}: {dylib}: none of {paths} tried", f"tried {entries}")
    return checks


def verify_text(ctx, name, args, document):
    """The text report names each missing library, every path tried for it, each missing symbol."""
    result, _ = check_json(ctx, *args, json_output=False)
    text = result.stdout + result.stderr
    for f in document.get("findings", []):
        if f.get("rule") == "library-not-loaded":
            paths = [t.get("path", "") for t in f.get("tried", [])]
            missing = [p for p in [f.get("dylib", "")] + paths if p not in text]
            expect(not missing and "[library-not-loaded]" in text,
                   f"{name}: the text names {f.get('dylib')} and the {len(paths)} paths tried",
                   f"not in the text: {missing}\n{text[:1200]}")
        elif f.get("rule") == "symbol-not-found":
            expect(f.get("symbol", "") in text and "[symbol-not-found]" in text,
                   f"{name}: the text names {f.get('symbol')}", text[:1200])


def contract_form(ctx, name, target, app, sysroot, min_macos, archs, expected, extra, is_pte):
    """machofix.toml beside a copy of the model, found by check itself: the same findings,
    and those of unprovided-dependency that a contract (a declaration) adds."""
    directory = os.path.join(ctx.work, "contract", name)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    copy = shutil.copyfile(target, os.path.join(directory, os.path.basename(target)))
    lines = [f'app = "{os.path.relpath(app, directory)}"']
    if sysroot:
        lines.append(f'sysroot = "{os.path.relpath(sysroot, directory)}"')
    if min_macos:
        lines.append(f'min_macos = "{min_macos}"')
    if archs:
        lines.append("arch = [" + ", ".join(f'"{a}"' for a in archs) + "]")
    with open(os.path.join(directory, "machofix.toml"), "w") as handle:
        handle.write("\n".join(lines) + "\n")
    result, document = check_json(ctx, copy, None)
    expected = expected + extra
    verify_document(ctx, f"{name} (machofix.toml)", result, document, expected, 1 if expected else 0, is_pte)


# --------------------------------------------------------------------------- the linker as witness

class Witness:
    def __init__(self, ctx):
        self.ctx = ctx
        self.directory = os.path.join(ctx.work, "witness")
        shutil.rmtree(self.directory, ignore_errors=True)
        os.makedirs(self.directory)
        self.cache = {}
        self.bindings = 0           # bindings witnessed (each judged binding counts once per case)
        self.skipped = []

    def library_file(self, path):
        """A found_in / expected_in / resolved path as a file ld64.lld-16 can read."""
        if not path:
            return None
        manifest = self.ctx.manifest["sysroot"]
        if not os.path.exists(path) and path in manifest["install_names"]:
            path = self.ctx.fx(manifest["install_names"][path])
        if not os.path.isfile(path):
            return None
        rel = os.path.relpath(real(path), real(self.ctx.fixtures))
        if rel in manifest["twins"]:
            return self.ctx.fx(manifest["twins"][rel])
        return real(path)

    def is_executable(self, path, arch):
        if path.endswith(".tbd"):
            return False
        out = run([OBJDUMP, "--macho", "--private-header", f"--arch={arch}", path]).stdout
        return " EXECUTE " in out

    def link(self, arch, symbols, libraries):
        """(ok, linker output) for an object referencing symbols, linked against libraries."""
        cache_key = (arch, tuple(sorted(symbols)), tuple(libraries))
        if cache_key in self.cache:
            return self.cache[cache_key]
        tag = f"w{len(self.cache):04d}"
        source = os.path.join(self.directory, f"{tag}.c")
        with open(source, "w") as handle:
            for i, symbol in enumerate(sorted(symbols)):
                handle.write(f'extern char s{i} __asm__("{symbol}");\n')
            handle.write("void *witness_refs[] = {" + ", ".join(f"&s{i}" for i in range(len(symbols))) + "};\n")
        obj = source[:-2] + ".o"
        compiled = run([CC, "-target", f"{arch}-apple-macos{MACOS}", "-c", source, "-o", obj])
        if compiled.returncode:
            raise RuntimeError(f"clang-16 failed on {source}: {compiled.stderr}")
        args = [LD, "-arch", arch, "-platform_version", "macos", MACOS, MACOS]
        executables = [lib for lib in libraries if self.is_executable(lib, arch)]
        if executables:
            args += ["-bundle", "-bundle_loader", executables[0]]
        else:
            args += ["-dylib"]
        args += [obj] + [lib for lib in libraries if lib not in executables[:1]]
        linked = run(args + ["-o", source[:-2] + ".out"])
        self.cache[cache_key] = (linked.returncode == 0, linked.stderr)
        return self.cache[cache_key]

    def judge(self, name, checks, findings, app_executable):
        """Witness every binding of every judged slice of one case."""
        for check in checks:
            arch = check.get("arch")
            deps = {d.get("ordinal"): d for d in check.get("dependencies", [])}
            bound = {}
            for binding in check.get("bindings", []):
                if binding.get("verdict") == "bound":
                    bound.setdefault(binding.get("found_in"), []).append(binding.get("symbol"))
            for found_in, symbols in sorted(bound.items(), key=lambda item: str(item[0])):
                library = self.library_file(found_in)
                if library is None:
                    expect(False, f"{name}: [{arch}] {len(symbols)} bound symbols: found_in {found_in!r} is a "
                           "library file the linker can read")
                    continue
                ok, output = self.link(arch, symbols, [library])
                if expect(ok, f"{name}: [{arch}] ld64.lld-16 binds {', '.join(sorted(symbols))} "
                              f"in {os.path.relpath(library, self.ctx.fixtures)}", output.strip()[:600]):
                    self.bindings += len(symbols)
            for binding in check.get("bindings", []):
                if binding.get("verdict") not in ("missing", "weak-missing"):
                    continue
                symbol = binding.get("symbol")
                if binding.get("dylib") == "flat namespace":
                    libraries = [app_executable] if app_executable else []
                    libraries += [self.library_file(d.get("resolved")) for d in deps.values()]
                else:
                    dependency = deps.get(binding.get("ordinal"), {})
                    libraries = [self.library_file(dependency.get("resolved"))]
                libraries = [lib for lib in dict.fromkeys(libraries) if lib]
                if not libraries or (binding.get("dylib") != "flat namespace" and len(libraries) != 1):
                    self.skipped.append(f"{name}: [{arch}] {symbol}: its library was not found, nothing to link against")
                    continue
                ok, output = self.link(arch, [symbol], libraries)
                if expect(not ok and f"undefined symbol: {symbol}" in output,
                          f"{name}: [{arch}] ld64.lld-16 does not find {symbol} in "
                          + ", ".join(os.path.relpath(lib, self.ctx.fixtures) for lib in libraries),
                          output.strip()[:600] or "the link succeeded"):
                    self.bindings += 1
        # A library's own missing symbols (needed_by a library) appear only as findings.
        for f in findings:
            if f.get("rule") == "symbol-not-found" and f.get("needed_by") and f.get("expected_in"):
                library = self.library_file(f["expected_in"])
                if library is None:
                    continue
                ok, output = self.link(f.get("arch"), [f["symbol"]], [library])
                if expect(not ok and f"undefined symbol: {f['symbol']}" in output,
                          f"{name}: [{f.get('arch')}] ld64.lld-16 does not find {f['symbol']} (needed by "
                          f"{os.path.basename(f['needed_by'])}) in {os.path.relpath(library, self.ctx.fixtures)}",
                          output.strip()[:600] or "the link succeeded"):
                    self.bindings += 1


# --------------------------------------------------------------------------- cases

def build_ptes(ctx):
    ptes = {}
    os.makedirs(os.path.join(ctx.work, "pte"), exist_ok=True)
    for spec in ctx.manifest["ptes"].values():
        out = os.path.join(ctx.work, "pte", spec["file"])
        args = [a.replace("{model}", ctx.fx(spec["model"])).replace("{out}", out) for a in spec["args"]]
        result = run([ctx.pte_writer, *args])
        expect(result.returncode == 0 and os.path.isfile(out), f"pte_writer wraps {spec['model']} into {spec['file']}",
               result.stderr)
        ptes[spec["file"]] = out
    return ptes


def run_case(ctx, case, ptes):
    name = case["name"]
    target = ptes[case["pte"]] if case["pte"] else ctx.fx(case["model"])
    app = ctx.fx(case["app"])
    sysroot = ctx.fx(case["sysroot"]) if case["sysroot"] else None
    args = (target, app, sysroot, case["min_macos"], case["arch"])
    result, document = check_json(ctx, *args)
    checks = verify_document(ctx, name, result, document, case["expected_findings"], case["expected_exit"],
                             is_pte=bool(case["pte"]), app_check_archs=case["expected_app_checks"],
                             bindings=case["expected_bindings"], tried=case["expected_tried"],
                             not_tried=case["expected_not_tried"])
    if document is None:
        return
    if any(f["rule"] in ("library-not-loaded", "symbol-not-found") for f in case["expected_findings"]):
        verify_text(ctx, name, args, document)
    contract_form(ctx, name, target, app, sysroot, case["min_macos"], case["arch"],
                  case["expected_findings"], case["contract_extra_findings"], bool(case["pte"]))
    executable = ctx.manifest["apps"][case["app_name"]]["executable"]
    ctx.witness.judge(name, checks, document.get("findings", []), ctx.fx(executable) if executable else None)


def find_samples(files):
    for directory in filter(None, SAMPLE_DIRS):
        if all(os.path.isfile(os.path.join(directory, f)) for f in files):
            return os.path.abspath(directory)
    return None


def run_samples(ctx):
    samples = ctx.manifest["samples"]
    directory = find_samples(samples["files"])
    if directory is None:
        print("SKIP samples: the ExecuTorch sample .pte files were not found in "
              + " or ".join(os.path.abspath(d) for d in filter(None, SAMPLE_DIRS)) + " (set MACHOFIX_SAMPLES)")
        return
    pruned = {}
    os.makedirs(os.path.join(ctx.work, "pruned"), exist_ok=True)
    for sample in samples["files"]:
        out = os.path.join(ctx.work, "pruned", sample)
        if os.path.exists(out):
            os.unlink(out)
        result = run([ctx.machofix, "prune", os.path.join(directory, sample), "-o", out])
        expect(result.returncode == 0 and os.path.isfile(out), f"machofix prune {sample}", result.stderr[:400])
        pruned[sample] = out
    for sample in samples["files"]:
        for case in samples["cases"]:
            name = f"{sample}: {case['name']}"
            target = pruned[sample] if case["prune"] else os.path.join(directory, sample)
            app = ctx.fx(case["app"])
            sysroot = ctx.fx(case["sysroot"]) if case["sysroot"] else None
            result, document = check_json(ctx, target, app, sysroot)
            checks = verify_document(ctx, name, result, document, case["findings"], case["exit"], is_pte=True,
                                     app_check_archs=["arm64"], bindings=case["bindings"])
            if document is not None:
                executable = ctx.manifest["apps"][os.path.basename(case["app"])]["executable"]
                ctx.witness.judge(name, checks, document.get("findings", []), ctx.fx(executable))


def main(argv):
    if len(argv) != 5:
        print(__doc__.split("Usage: ")[1], file=sys.stderr)
        return 2
    ctx = Context(*argv[1:])
    os.makedirs(ctx.work, exist_ok=True)
    ptes = build_ptes(ctx)
    cases = ctx.manifest["cases"]
    for case in cases:
        run_case(ctx, case, ptes)
    run_samples(ctx)
    witness = ctx.witness
    print(f"linker witness: {witness.bindings} bindings witnessed by ld64.lld-16 in {len(witness.cache)} links"
          + (f"; {len(witness.skipped)} missing symbols without a library to link against" if witness.skipped else ""))
    for note in witness.skipped:
        print("  (no witness) " + note)
    expect(witness.bindings > 0, "the linker witnessed at least one binding")
    print(f"{len(cases)} cases; {len(failures)} failures")
    for failure in failures:
        print("FAILED: " + failure.splitlines()[0])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
