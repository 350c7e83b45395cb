#!/usr/bin/env python3
"""`check --forbid GLOB`: the export gate "no OpenMP dependency under any install name".

On linker-made fixtures where the forbidden library is unused, used, weak and
re-exported, inside a .pte, and on copies whose libomp install name is rewritten to
@rpath/libomp.dylib, /usr/local/lib/libiomp5.dylib and /opt/gcc/lib/libgomp.1.dylib:
the finding (rule forbidden-dependency) in text and JSON, whether the library is used
and by which symbols, exit statuses; samples/export_step.py --forbid and the Python
API's check(forbid=...).
Usage: test_forbid.py MACHOFIX PTE_WRITER FIXTURE_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RULE = "forbidden-dependency"
LIBOMP = b"/opt/llvm-openmp/lib/libomp.dylib"

failures = []


def expect(condition, what, result=None):
    if not condition and result is not None:
        what += f"\n    exit {result.returncode}; stdout: {result.stdout.strip()[:500]}; stderr: {result.stderr.strip()[:300]}"
    print(("ok   " if condition else "FAIL ") + what.splitlines()[0])
    if not condition:
        failures.append(what)


def run(*args, **kwargs):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120, **kwargs)


def findings(machofix, path, *options):
    """The findings of `check --json -` and its exit status."""
    result = run(machofix, "check", path, "--json", "-", *options)
    document = json.loads(result.stdout) if result.stdout.startswith("{") else {"findings": []}
    return result, document.get("findings", [])


def forbidden(found):
    return [f for f in found if f["rule"] == RULE]


def renamed_libomp(fixtures, work, name, install_name):
    """An unsigned fixture whose libomp load command names `install_name` instead."""
    with open(os.path.join(fixtures, "aoti_metal_arm64_dyldinfo_unsigned.in"), "rb") as handle:
        data = handle.read()
    assert data.count(LIBOMP) == 1 and len(install_name) <= len(LIBOMP)
    data = data.replace(LIBOMP, install_name + b"\0" * (len(LIBOMP) - len(install_name)))
    path = os.path.join(work, name)
    with open(path, "wb") as handle:
        handle.write(data)
    return path


def unused_and_used(machofix, fixtures):
    unused = os.path.join(fixtures, "aoti_metal_arm64_chained.in")
    result, found = findings(machofix, unused, "--forbid", "*omp*")
    [finding] = forbidden(found) or [None]
    expect(result.returncode == 1 and finding and not finding["used"] and finding["symbols"] == []
           and "supplies no symbol, and `machofix prune` removes it" in finding["message"],
           "unused libomp, --forbid '*omp*': a finding, not used, prune removes it", result)
    text = run(machofix, "check", unused, "--forbid", "*omp*")
    expect("[unused-dependency] (also: absolute-install-name, forbidden-dependency)" in text.stdout,
           "the text report: one cause, one finding, naming forbidden-dependency among the rules it also breaks", text)
    expect(bool(finding) and finding["reported_with"] == "unused-dependency"
           and "which the forbid glob '*omp*' matches (--forbid or the contract)" in finding["message"],
           "the JSON keeps the forbidden-dependency finding with its glob, tied to the unused-dependency one", found)

    used = os.path.join(fixtures, "all_used_arm64_chained.in")
    result, found = findings(machofix, used, "--forbid", "*omp*")
    [finding] = forbidden(found) or [None]
    expect(result.returncode == 1 and finding and finding["used"] and finding["symbols"] == ["_omp_get_max_threads"]
           and "removing it is not the repair" in finding["message"] and "_omp_get_max_threads" in finding["message"],
           "used libomp: a finding saying it is used, by _omp_get_max_threads, and that removal is not the repair", result)
    expect(not [f for f in found if f["rule"] == "unused-dependency"], "used libomp: no unused-dependency finding")
    result, found = findings(machofix, used, "--forbid", "*omp*", "--allow-prefix", "/opt/llvm-openmp/")
    expect(result.returncode == 1 and len(forbidden(found)) == 1,
           "--allow-prefix does not excuse a forbidden library (the forbid is about the library, not its path)", result)
    result, found = findings(machofix, used, "--forbid", "*tbb*", "--allow-prefix", "/opt/llvm-openmp/")
    expect(result.returncode == 0 and not found, "a glob matching nothing: no finding, exit 0", result)


def kinds(machofix, fixtures):
    weak = os.path.join(fixtures, "weak_dylibs_arm64_dyldinfo.in")
    result, found = findings(machofix, weak, "--forbid", "libweak*")
    by_name = {os.path.basename(f["dylib"]): f for f in forbidden(found)}
    used, unused = (next((f for n, f in by_name.items() if n.startswith(prefix)), None)
                    for prefix in ("libweakused", "libweakunused"))
    expect(used and used["used"] and "_weakused_fn" in used["symbols"] and "weakly depends on" in used["message"],
           "a weak dependency that is used: found, weak, with its symbol", result)
    expect(unused and not unused["used"] and "weakly depends on" in unused["message"],
           "a weak dependency that is unused: found too", result)

    reexport = os.path.join(fixtures, "reexport_used_arm64_chained.in")
    report = json.loads(run(machofix, "inspect", reexport, "--json", "-").stdout)
    reexported = [d for d in report["files"][0]["macho"]["slices"][0]["dylibs"] if d["kind"] == "reexport"]
    expect(bool(reexported), "the re-export fixture has an LC_REEXPORT_DYLIB")
    for dylib in reexported:
        leaf = os.path.basename(dylib["install_name"])
        result, found = findings(machofix, reexport, "--forbid", leaf)
        # The fixture both loads and re-exports it: one finding per load command.
        finding = next((f for f in forbidden(found) if f["message"].startswith("re-exports ")), None)
        expect(finding and finding["dylib"] == dylib["install_name"] and "prune keeps it (re-exported" in finding["message"],
               f"a re-exported dylib ({leaf}) is found by its last component, named as re-exported and kept", result)


def install_names(machofix, fixtures, work):
    for name, install_name in (("rpath.dylib", b"@rpath/libomp.dylib"), ("iomp.dylib", b"/usr/local/lib/libiomp5.dylib"),
                               ("gomp.dylib", b"/opt/gcc/lib/libgomp.1.dylib")):
        path = renamed_libomp(fixtures, work, name, install_name)
        result, found = findings(machofix, path, "--forbid", "*omp*")
        expect(result.returncode == 1 and [f["dylib"] for f in forbidden(found)] == [install_name.decode()],
               f"--forbid '*omp*' finds {install_name.decode()}", result)
    path = os.path.join(work, "rpath.dylib")
    result, found = findings(machofix, path)
    expect(not forbidden(found), "without --forbid, @rpath/libomp.dylib is no forbidden-dependency finding", result)


def in_a_pte(machofix, pte_writer, fixtures, work):
    pte = os.path.join(work, "model.pte")
    subprocess.run([pte_writer, "wrap", os.path.join(fixtures, "all_used_arm64_chained.in"), pte, "hash"], check=True)
    result, found = findings(machofix, pte, "--forbid", "*omp*")
    [finding] = forbidden(found) or [None]
    expect(result.returncode == 1 and finding and finding["blob"].endswith("_so_blob") and finding["used"],
           "inside a .pte: the finding names the blob's key", result)
    annotations = run(machofix, "check", pte, "--forbid", "*omp*", env=dict(os.environ, GITHUB_ACTIONS="true"))
    expect(f"title=machofix {RULE}::" in annotations.stdout, "under GitHub Actions: an ::error annotation", annotations)


def export_step_and_python(machofix, pte_writer, fixtures, work):
    exports = os.path.join(work, "exports")
    os.makedirs(exports)
    for case, fixture in (("unused", "aoti_metal_arm64_chained.in"), ("used", "all_used_arm64_chained.in")):
        os.makedirs(os.path.join(exports, case))
        subprocess.run([pte_writer, "wrap", os.path.join(fixtures, fixture), os.path.join(exports, case, "model.pte"),
                        "hash"], check=True)
    step = os.path.join(ROOT, "samples", "export_step.py")
    result = run(sys.executable, step, os.path.join(exports, "unused"), "--machofix", machofix, "--forbid", "*omp*")
    expect(result.returncode == 0 and "dylibs removed" in result.stdout,
           "export_step.py --forbid '*omp*': an unused libomp is removed and the step passes", result)
    result = run(sys.executable, step, os.path.join(exports, "used"), "--machofix", machofix, "--forbid", "*omp*")
    expect(result.returncode == 1 and RULE in result.stderr and "_omp_get_max_threads" in result.stderr,
           "export_step.py --forbid '*omp*': a used libomp fails the step, naming the symbol", result)
    result = run(sys.executable, step, os.path.join(exports, "used"), "--machofix", machofix,
                 "--allow-prefix", "/opt/llvm-openmp/")
    expect(result.returncode == 0, "export_step.py without --forbid: the used libomp passes (what --forbid adds)", result)

    code = ("import sys, machofix\n"
            "report = machofix.Machofix(sys.argv[1]).check([sys.argv[2]], forbid=['*omp*'])\n"
            "[f] = [f for f in report.findings if f.rule == 'forbidden-dependency']\n"
            "print(report.ok, f.used, ','.join(f.symbols))\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    result = run(sys.executable, "-c", code, machofix, os.path.join(exports, "used", "model.pte"), env=env)
    expect(result.returncode == 0 and result.stdout.split() == ["False", "True", "_omp_get_max_threads"],
           "Python: check(forbid=['*omp*']) returns the finding, used, with its symbols", result)


def main():
    machofix, pte_writer, fixtures, work = [os.path.abspath(a) for a in sys.argv[1:5]]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    unused_and_used(machofix, fixtures)
    kinds(machofix, fixtures)
    install_names(machofix, fixtures, work)
    in_a_pte(machofix, pte_writer, fixtures, work)
    export_step_and_python(machofix, pte_writer, fixtures, work)
    for failure in failures:
        print("FAIL:", failure)
    print(f"check --forbid: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
