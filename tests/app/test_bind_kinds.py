#!/usr/bin/env python3
"""`check --app`: a symbol-not-found finding says whether the bind is lazy or eager.

The difference is what the user meets: an eager bind that does not bind fails the
dlopen (ExecuTorch's backend init fails); a lazy one lets dlopen succeed under
RTLD_LAZY and aborts the process at the first call. tests/app's manifest pins the
findings but not this, so here two of its cases, the same libomp import missing from
Partial.app's libomp:
 - omp_vs_partial: m_omp, chained fixups, every bind made at load (eager);
 - omp_lazy_vs_partial: m_omp_lazy, dyld info, the libomp calls lazy binds.
First llvm-objdump-16 witnesses each model's kind of bind (the symbol in the
lazy-bind table of m_omp_lazy, in no lazy-bind table of m_omp); then `check --app
--json`'s finding and the app check's binding must say lazy exactly for the lazy
model, and the text must say "bound lazily" exactly there.

Usage: test_bind_kinds.py MACHOFIX APP_FIXTURES
"""
import json
import os
import subprocess
import sys

SYMBOL = "___kmpc_barrier"
CASES = {"omp_vs_partial": False, "omp_lazy_vs_partial": True}  # case: lazy


def run(*command):
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=120)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    machofix, fixtures = sys.argv[1:]
    with open(os.path.join(fixtures, "manifest.json")) as handle:
        cases = {case["name"]: case for case in json.load(handle)["cases"]}
    problems = []
    for name, lazy in CASES.items():
        case = cases[name]
        model, app = os.path.join(fixtures, case["model"]), os.path.join(fixtures, case["app"])
        # The witness: the linker's own tables, as llvm-objdump-16 reads them.
        lazy_table = run("llvm-objdump-16", "--macho", "--lazy-bind", model).stdout
        if (SYMBOL in lazy_table) != lazy:
            problems.append(f"{name}: the fixture should {'' if lazy else 'not '}bind {SYMBOL} lazily; "
                            f"llvm-objdump-16 --lazy-bind: {lazy_table.strip()[-400:]}")
            continue
        result = run(machofix, "check", "--no-contract", "--app", app, model, "--json", "-")
        report = json.loads(result.stdout)
        findings = [f for f in report["findings"] if f["rule"] == "symbol-not-found" and f["symbol"] == SYMBOL]
        bindings = [b for check in report.get("app_checks") or [] for b in check.get("bindings", []) if b.get("symbol") == SYMBOL]
        if [f["lazy"] for f in findings] != [lazy]:
            problems.append(f"{name}: one symbol-not-found finding for {SYMBOL} with lazy {lazy}: {findings}")
        if not bindings or any(b.get("lazy") is not lazy for b in bindings):
            problems.append(f"{name}: the app check's binding of {SYMBOL} should say lazy {lazy}: {bindings}")
        text = run(machofix, "check", "--no-contract", "--app", app, model)
        lines = [line for line in text.stdout.splitlines() if SYMBOL in line and "[symbol-not-found]" in line]
        if len(lines) != 1 or ("bound lazily" in lines[0]) != lazy:
            problems.append(f"{name}: the text's finding should {'' if lazy else 'not '}say 'bound lazily': {lines}")
    for problem in problems:
        print("FAIL " + problem)
    print(f"{len(problems)} problem(s) in {len(CASES)} cases")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
