#!/usr/bin/env python3
"""BENCHMARKS.md keeps the .pte part of the last other CPU beside this CPU's
(bench/run_benchmarks.py, kept_other_cpu): measured on another CPU, the table it
replaces moves there with where it was measured; measured again on the same CPU,
what is kept there stays.
Usage: test_other_cpu.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import run_benchmarks as bench  # noqa: E402

FAILURES = []
INTEL = "Intel(R) Xeon(R) Processor, 2 cores, 23 GiB RAM, Linux 6.18.44-fc-v1045"
AMD = "AMD EPYC, 2 cores, 23 GiB RAM, Linux 6.18.44-fc-v1294"
TABLE = "| file | cp s |\n|---|---|\n| 1 MB | 0.002 |"


def expect(what, ok, detail=""):
    print(("ok    " if ok else "FAIL  ") + what + ("" if ok else f"\n      {detail}"))
    if not ok:
        FAILURES.append(what)


def document(pte, other, machine=INTEL):
    return {"pte": pte, "pte_other_cpu": other, "command": "`bench/run_benchmarks.py --write BENCHMARKS.md`",
            "date": "2026-12-02", "machine": machine, "filesystem": "ext4", "load": "2.1 at the start, 1.3 at the end"}


def main():
    written_whole = document(TABLE, bench.OTHER_CPU)
    moved = bench.kept_other_cpu("pte", written_whole, AMD)
    expect("a table the whole run wrote on Intel, measured now on AMD: moved, with the header's provenance",
           moved.startswith(TABLE) and f"on {INTEL}; files on ext4" in moved and "2026-12-02" in moved, moved)
    updated = document(TABLE + f"\n\nThis part: `x --update`, 2026-12-05, on {AMD}; files on ext4; load 1.", "old")
    expect("a table an --update run made on AMD, measured again on AMD: the other CPU's table stays",
           bench.kept_other_cpu("pte", updated, AMD.replace("v1294", "v1300")) == "old")
    back = bench.kept_other_cpu("pte", updated, INTEL)
    expect("that AMD table, measured now on Intel: moved with its own provenance, not the header's",
           back == updated["pte"], back)
    expect("a part not measured before: nothing to move",
           bench.kept_other_cpu("pte", document(bench.NOT_MEASURED, "kept"), AMD) == "kept")
    print(f"{len(FAILURES)} failed" if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
