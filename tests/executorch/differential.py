#!/usr/bin/env python3
"""machofix against ExecuTorch's own runtime, on mutations of every .pte and .ptd the
tests have (the writer's matrix, ExecuTorch's samples when present).

Each variant is judged by tests/executorch/runtime_loader (ExecuTorch's runtime) and
by machofix: `check` (the CI gate) and `prune -o` on every variant, `inspect`, `edit`
and `sign -o` on every fourth. Counted, and each required to be zero:
- false rejections: the runtime loads the file, a machofix command fails on it (exit
  2) for a reason other than one of machofix's own (OWN_REASONS: a blob whose Mach-O
  signature or structure machofix refuses to rewrite);
- gate passes: the runtime refuses the file, `check` exits 0 or 1; or the runtime
  loads it but an AOTI delegate gets no weights (an empty key, or an entry it cannot
  read: check must fail it; a key the file lacks: check must name it, a warning with
  no .ptd given). Judged on every variant and again on every output prune writes;
- bad outputs: a file that prune, edit or sign wrote does not load in the runtime, or
  its delegates no longer find their .so;
- key readings: machofix's reading of an AOTI delegate's blob keys (`inspect --json`)
  differs from the runtime's (the keys, and whether the weights are found);
- crashes and hangs of machofix.
Every variant that disagreed once is kept in tests/executorch/regressions.jsonl (the
base file and the exact edits) and replayed first on every run.

New variants are drawn from a new seed on every run (printed; --seed replays it, and
--variant I judges only the I-th variant of that seed), for at most --seconds.

Usage: differential.py MACHOFIX RUNTIME_LOADER PTE_WRITER WORKDIR [--variants N] [--seconds S] [--seed N]
                       [--variant I] [--regressions N] [--record]
Exit 77 (skipped) when RUNTIME_LOADER is empty: the runtime's sources were not found.
"""
import argparse
import concurrent.futures
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from pte_models import pte_models  # noqa: E402
import flatbuffer_fields  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
REGRESSIONS = os.path.join(HERE, "regressions.jsonl")
SAMPLES = os.environ.get("MACHOFIX_SAMPLES") or os.path.join(ROOT, "..", "shared", "samples")
TIMEOUT = 60
# Refusals of machofix's own: the runtime never looks inside a blob (signatures, load
# commands, an edit that matches nothing), and a rewrite machofix cannot prove (a key
# it cannot renew, segments it does not move, an output its proof refuses) is not
# written. The message says what machofix will not do and why. A blob whose filetype
# is not one dyld loads (a dSYM, an object file: dlopen() refuses it, a step this
# runtime loader stops before) is refused as not handled, as is a 32-bit Mach-O (a
# 64-bit process's dlopen() refuses it too: seed 2652710170 turned a blob's magic
# 0xfeedfacf into 0xfeedface), a universal blob whose fat_arch table does not fit in
# it (dyld finds no slice in it: seed 1524959235 cut a universal blob's segment to its
# 8-byte fat header), and a signature that sign
# cannot add or replace without overwriting bytes it does not own (header padding
# that is not zero, data after __LINKEDIT). Anything else on a file that loads is a
# false rejection.
OWN_REASONS = re.compile(
    r"the input signature is invalid|signed with an identity|\(loader rule [a-z0-9-]+\)|"
    r"slice \S+ \(offset 0x[0-9a-f]+, size 0x[0-9a-f]+\) runs past the end of the file|"
    r"overlaps segment \d+|also the Program's|also the payload of|cannot be patched in place|"
    r"machofix cannot renew|by a name machofix cannot renew|shares bytes with a key machofix renews|"
    r"machofix does not move segments|no dependent dylib's install name matches|"
    r"verifying the output before committing it|the input breaks the loader rule [a-z0-9-]+|"
    r"Mach-O header \(\d+ bytes\) runs past the end of its container|"
    r"fat_arch table \(\d+ bytes\) runs past the end of its container|"
    r"is not supported \(only dylibs, bundles and executables\)|32-bit Mach-O is not supported|"
    r"cannot add a signature: |cannot replace the unreadable signature: ")
INTERESTING_32 = [0, 1, 2, 7, 8, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE]
INTERESTING_64 = [0, 1, 8, 24, 32, 63, 64, 4096, 1 << 31, 1 << 32, (1 << 63), (1 << 64) - 1, (1 << 64) - 8]


# --- the base files and what is where in them -----------------------------------------

def describe_base(path, data):
    """Offsets worth mutating: header fields, keys, payload newlines, segments."""
    info = {"size": len(data), "fb_end": len(data), "header": [], "keys": [], "newlines": [], "segments": [],
            "fields": flatbuffer_fields.fields(data)}
    if data[4:8] == b"FT01" and data[8:12] == b"FH01":
        info["header"] = [(12, 4)] + [(16 + 8 * i, 8) for i in range(4)]
        offset, size = struct.unpack_from("<QQ", data, 16)
        info["fb_end"] = min(len(data), offset + size)
    elif data[8:12] == b"eh00":
        info["header"] = [(12, 4), (16, 8), (24, 8)] + ([(32, 8)] if struct.unpack_from("<I", data, 12)[0] >= 32 else [])
        info["fb_end"] = min(len(data), struct.unpack_from("<Q", data, 16)[0])
    loaded = json.loads(subprocess.run([ARGS.loader, path], capture_output=True, text=True).stdout)
    keys = set()
    for method in loaded.get("methods", []):
        for delegate in method["delegates"]:
            for which in ("so", "weights"):
                if "aoti" in delegate:
                    keys.add(bytes.fromhex(delegate["aoti"][which]["key_hex"]))
    for entry in loaded.get("named_data", []):
        keys.add((entry["key"] if isinstance(entry, dict) else entry).encode())
    # Sorted: a set's order follows Python's per-process hash seed, and the mutations
    # pick from this list, so an unsorted one made every run try other variants.
    for key in sorted(filter(None, keys)):
        info["keys"] += [(m.start(), len(key)) for m in re.finditer(re.escape(key), data)]
    for start, length in info["keys"]:
        if data[start + length:start + length + 1] == b"\n":
            info["newlines"].append(start + length)
    inspected = subprocess.run([ARGS.machofix, "inspect", "--json", "-", path], capture_output=True, text=True)
    for entry in json.loads(inspected.stdout)["files"][0].get("pte", {}).get("named_data", []):
        info["segments"].append((entry["offset"], entry["size"]))
    return info


# --- mutations: each returns a list of edits ------------------------------------------
# An edit is ["write", offset, hex] or ["truncate", length] or ["append", hex].

def pick_interesting(rng, width):
    values = INTERESTING_32 if width == 4 else INTERESTING_64
    return rng.choice(values)


def m_flip(rng, info, data):
    at = rng.randrange(8, max(9, info["fb_end"]))
    return [["write", at, bytes([rng.randrange(256)]).hex()]]


def m_field(rng, info, data):
    at = rng.randrange(8, max(9, info["fb_end"] - 4)) & ~3
    if rng.random() < 0.5:
        value = pick_interesting(rng, 4)
    else:
        value = (struct.unpack_from("<I", data, at)[0] + rng.choice([-8, -4, -1, 1, 4, 8])) & 0xFFFFFFFF
    return [["write", at, struct.pack("<I", value).hex()]]


def m_short(rng, info, data):
    at = rng.randrange(8, max(9, info["fb_end"] - 2)) & ~1
    return [["write", at, struct.pack("<H", rng.choice([0, 2, 4, 6, 8, 0xFFFF, 0x8000]) & 0xFFFF).hex()]]


def m_header(rng, info, data):
    if not info["header"]:
        return m_field(rng, info, data)
    at, width = rng.choice(info["header"])
    old = int.from_bytes(data[at:at + width], "little")
    choices = [pick_interesting(rng, width), old + 1, old - 1, old + 8, old - 8, len(data), len(data) + 1, 0]
    value = rng.choice(choices) % (1 << (8 * width))
    return [["write", at, value.to_bytes(width, "little").hex()]]


def m_magic(rng, info, data):
    at = rng.choice([4, 8])
    return [["write", at + rng.randrange(4), bytes([rng.randrange(256)]).hex()]]


def m_no_header(rng, info, data):
    return [["write", 8, "00000000"]]


def m_truncate(rng, info, data):
    points = [rng.randrange(len(data)), len(data) - 1, 63, info["fb_end"], info["fb_end"] - 1]
    points += [start + size - 1 for start, size in info["segments"]] + [start for start, _ in info["segments"]]
    return [["truncate", max(0, min(len(data) - 1, rng.choice(points)))]]


def m_append(rng, info, data):
    return [["append", bytes(rng.choice([1, 7, 128, 4096])).hex()]]


def m_key(rng, info, data):
    if not info["keys"]:
        return m_flip(rng, info, data)
    start, length = rng.choice(info["keys"])
    at = start + rng.choice([0, length - 1, rng.randrange(length)])
    return [["write", at, bytes([rng.choice([0, ord("0"), ord("a"), ord("\n"), rng.randrange(256)])]).hex()]]


def m_payload(rng, info, data):
    if not info["newlines"]:
        return m_key(rng, info, data)
    newline = rng.choice(info["newlines"])
    at = rng.choice([newline, newline + 1, newline + rng.randrange(1, 70), newline - 1])
    return [["write", min(at, len(data) - 1), bytes([rng.choice([0, ord("x"), ord("\n"), rng.randrange(256)])]).hex()]]


def m_table(rng, info, data):
    """A field of a table the runtime reads at load or at backend init (the Program's
    or FlatTensor's tables, flatbuffer_fields.py): its vtable, scalars, offsets,
    vector and string lengths, a union's type."""
    if not info["fields"]:
        return m_field(rng, info, data)
    at, width, kind = rng.choice(info["fields"])
    old = int.from_bytes(data[at:at + width], "little")
    if kind == "offset":
        targets = [a + int.from_bytes(data[a:a + 4], "little") - at for a, w, k in info["fields"] if k == "offset"]
        choices = [old + 4, old - 4, old + 8, old - 8, 0, rng.choice(targets), len(data) - at, 0x7FFFFFFF]
    elif kind in ("vtable entry", "vtable size", "table size"):
        choices = [0, old + 2, old - 2, old + 4, old - 4, 0xFFFF, 4]
    elif kind in ("vector length", "string length"):
        choices = [0, old + 1, old - 1, old * 2, 0x7FFFFFFF, 0xFFFFFFFF]
    elif kind == "union type":
        choices = [0, rng.randrange(16), old + 1, 0xFF]
    elif kind == "vtable offset":
        choices = [old + 2, old - 2, old + 4, old - 4, 0, -old]
    else:  # a scalar or an element: an index, an offset, a size, a location
        choices = [pick_interesting(rng, 8 if width == 8 else 4), old + 1, old - 1, old + 8, old - 8, 0,
                   len(data), len(data) - 1]
    value = rng.choice(choices) % (1 << (8 * width))
    return [["write", at, value.to_bytes(width, "little").hex()]]


def m_segment_bytes(rng, info, data):
    if not info["segments"]:
        return m_flip(rng, info, data)
    start, size = rng.choice(info["segments"])
    if size == 0:
        return m_flip(rng, info, data)
    at = start + rng.choice([0, 4, 16, rng.randrange(size)])
    return [["write", min(at, len(data) - 1), bytes([rng.randrange(256)]).hex()]]


MUTATORS = [(m_flip, 6), (m_field, 6), (m_short, 3), (m_header, 4), (m_magic, 1), (m_no_header, 1),
            (m_truncate, 2), (m_append, 1), (m_key, 3), (m_payload, 3), (m_segment_bytes, 1), (m_table, 8)]


def mutate(rng, info, data):
    mutators = [m for m, weight in MUTATORS for _ in range(weight)]
    edits = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        edits += rng.choice(mutators)(rng, info, data)
    return edits


def apply(data, edits):
    data = bytearray(data)
    for edit in edits:
        if edit[0] == "write":
            at, patch = edit[1], bytes.fromhex(edit[2])
            if at < len(data):
                data[at:at + len(patch)] = patch[:len(data) - at]
        elif edit[0] == "truncate":
            del data[edit[1]:]
        elif edit[0] == "append":
            data += bytes.fromhex(edit[1])
    return bytes(data)


# --- judging ---------------------------------------------------------------------------

def run(command):
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, errors="replace")
        return done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired:
        return "hang", "", ""


def runtime_loads(path):
    code, out, _ = run([ARGS.loader, path])
    if code == 0:
        return True, json.loads(out)
    return False, (json.loads(out) if code == 1 and out.strip() else {"refused": {"stage": "crash", "reason": str(code)}})


def machofix_problem(code, err):
    if code == "hang":
        return "hang"
    if not isinstance(code, int) or code < 0 or code > 2:
        return "crash"
    return None


def compare_keys(loaded, inspected):
    """machofix's reading of each AOTI delegate's keys against the runtime's."""
    runtime = [(bytes.fromhex(d["aoti"]["so"]["key_hex"]), bytes.fromhex(d["aoti"]["weights"]["key_hex"]),
                d["aoti"]["weights"]["found"]) for m in loaded.get("methods", []) for d in m["delegates"] if "aoti" in d]
    delegates = inspected["files"][0]["pte"]["delegates"] if "pte" in inspected["files"][0] else []
    ours = [(d["aoti"]["so_key"].encode("latin-1"), d["aoti"]["weights_key"].encode("latin-1"), d["aoti"]["weights_found"])
            for d in delegates if d.get("aoti")]
    if runtime != ours:
        return [f"key resolution differs: runtime {runtime}, machofix {ours}"]
    return []


NOT_FOUND = "0x20"  # Error::NotFound; any other error of get_data is an entry that cannot be read


def weights_gate(loaded, check_code, check_stdout, what="check"):
    """The weights each AOTI delegate gets, as the runtime finds them, against check's
    missing-weights findings: an empty key or an unreadable entry must fail the gate,
    a key the file lacks must at least be named (no .ptd is given here)."""
    missing = [d["aoti"]["weights"] for m in loaded.get("methods", []) for d in m["delegates"]
               if "aoti" in d and not d["aoti"]["weights"]["found"]]
    if not missing or check_code == 2:
        return []
    try:
        findings = [f for f in json.loads(check_stdout)["findings"] if f["rule"] == "missing-weights"]
    except (ValueError, KeyError):
        return [f"gate pass: {what}'s JSON cannot be read"]
    problems = []
    for weights in missing:
        named = [f for f in findings if f["weights_key"].encode("latin-1") == bytes.fromhex(weights["key_hex"])]
        fatal = not weights["key_hex"] or weights.get("error") != NOT_FOUND
        if not named:
            problems.append(f"gate pass: {what} names no missing weights '{weights['key']}' ({weights.get('error')})")
        elif fatal and not any(f["level"] == "error" for f in named):
            problems.append(f"gate pass: {what} passes weights the runtime cannot read ({weights.get('error')})")
    return problems


def check_gate(path, loads, loaded, what):
    """check on one file, judged against the runtime's verdict on it."""
    code, stdout, err = run([ARGS.machofix, "check", "--no-contract", "--json", "-", path])
    problem = machofix_problem(code, err)
    if problem:
        return [f"{what}: {problem} ({code})"], code, err
    if not loads and code != 2:
        return [f"gate pass: {what} exit {code}, runtime refuses ({loaded['refused']})"], code, err
    return (weights_gate(loaded, code, stdout, what) if loads else []), code, err


def judge(variant):
    """Runs every judge on one variant; returns its findings (empty when all agree)."""
    name, path, edits, full = variant
    loads, loaded = runtime_loads(path)
    findings, own = [], []
    gate_findings, code, err = check_gate(path, loads, loaded, "check")
    findings += gate_findings
    if loads and code == 2 and not gate_findings:
        reason = OWN_REASONS.search(err)
        if reason:
            own.append(f"check: {reason.group(0)}")
        else:
            findings.append(f"false rejection: check: {err.strip()[:300]}")
    commands = []
    out = path + ".out"
    commands.append(("prune", [ARGS.machofix, "prune", path, "-o", out], out))
    if full:
        commands.append(("inspect", [ARGS.machofix, "inspect", "--json", "-", path], None))
        commands.append(("edit", [ARGS.machofix, "edit", "--change", "/opt/llvm-openmp/lib/libomp.dylib",
                                  "@rpath/libomp.dylib", path, "-o", out + "e"], out + "e"))
        commands.append(("sign", [ARGS.machofix, "sign", path, "-o", out + "s"], out + "s"))
    for what, command, output in commands:
        code, stdout, err = run(command)
        problem = machofix_problem(code, err)
        if problem:
            findings.append(f"{what}: {problem} ({code})")
            continue
        if what == "inspect" and loads and code == 0:
            findings += compare_keys(loaded, json.loads(stdout))
        if loads and code == 2:
            reason = OWN_REASONS.search(err)
            if reason:
                own.append(f"{what}: {reason.group(0)}")
            else:
                findings.append(f"false rejection: {what}: {err.strip()[:300]}")
        if output and os.path.exists(output):
            out_loads, out_report = runtime_loads(output)
            if not loads:
                findings.append(f"bad output: {what} wrote a file from an input the runtime refuses")
            elif not out_loads:
                findings.append(f"bad output: {what}'s output is refused: {out_report['refused']}")
            # The gate where users meet it: on what prune wrote, too.
            if what == "prune":
                findings += check_gate(output, out_loads, out_report, "check of prune's output")[0]
            os.remove(output)
    return name, edits, loads, loaded.get("refused", {}).get("stage") if not loads else None, findings, own


def write_variant(by_name, work, index, label, base, edits):
    path = os.path.join(work, f"v{index}" + os.path.splitext(base)[1])
    with open(path, "wb") as handle:
        handle.write(apply(by_name[base][1], edits))
    return (f"{label} of {base}", path, edits, index % 4 == 0 or not edits)


def fixed_cases(bases):
    """The regression cases, then every base file unmutated."""
    items = []
    by_name = {name: (path, data, info) for name, path, data, info in bases}
    if os.path.exists(REGRESSIONS):
        lines = open(REGRESSIONS).read().splitlines()
        step = max(1, -(-len(lines) // ARGS.regressions)) if ARGS.regressions else 1
        for number, line in list(enumerate(lines))[::step]:
            case = json.loads(line)
            if case["base"] in by_name:
                items.append((f"regression {number}", case["base"], case["edits"]))
    for name, _, _, _ in bases:  # every file as it is: each command, each output loaded
        items.append(("unmutated", name, []))
    return items


def new_variants(bases, seed, count):
    """The seed's variants, in order: (label, base, edits). Each draw depends on the
    ones before it, so variant I is replayed by drawing 0..I again."""
    rng = random.Random(seed)
    for i in range(count):
        name, path, data, info = bases[i % len(bases)]
        yield (f"variant {i} (seed {seed})", name, mutate(rng, info, data))


def judge_all(bases, work, deadline):
    """Judges the fixed cases, then new variants until the count or the deadline;
    yields judge()'s results and counts the new variants judged in JUDGED."""
    by_name = {name: (path, data, info) for name, path, data, info in bases}
    fixed = [] if ARGS.variant is not None else fixed_cases(bases)
    fresh = new_variants(bases, ARGS.seed, ARGS.variants if ARGS.variant is None else ARGS.variant + 1)
    if ARGS.variant is not None:
        fresh = [item for i, item in enumerate(fresh) if i == ARGS.variant]
    workers = os.cpu_count() or 2
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        pending = [pool.submit(judge, write_variant(by_name, work, i, *item)) for i, item in enumerate(fixed)]
        for future in pending:
            yield future.result()
        index = len(fixed)
        in_flight = []
        for item in fresh:
            if time.monotonic() > deadline:
                break
            in_flight.append(pool.submit(judge, write_variant(by_name, work, index, *item)))
            index += 1
            JUDGED[0] += 1
            if len(in_flight) >= 2 * workers:
                yield in_flight.pop(0).result()
        for future in in_flight:
            yield future.result()


JUDGED = [0]


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("machofix")
    parser.add_argument("loader")
    parser.add_argument("pte_writer")
    parser.add_argument("work")
    parser.add_argument("--variants", type=int, default=2400, help="at most this many new variants")
    parser.add_argument("--seconds", type=float, default=0,
                        help="stop drawing new variants after this long (0: no limit); the fixed cases always run")
    parser.add_argument("--seed", type=int, default=None, help="the seed of the new variants (default: a new one)")
    parser.add_argument("--variant", type=int, default=None, help="judge only this variant of --seed")
    parser.add_argument("--regressions", type=int, default=0,
                        help="replay at most this many regression cases, evenly spread (default: all)")
    parser.add_argument("--record", action="store_true", help="append new disagreements to the regression list")
    ARGS = parser.parse_args()
    if ARGS.seed is None:
        ARGS.seed = int.from_bytes(os.urandom(4), "little")
    if ARGS.variant is not None and ARGS.variant >= ARGS.variants:
        ARGS.variants = ARGS.variant + 1
    started = time.monotonic()
    print(f"differential: seed {ARGS.seed} (replay a variant: --seed {ARGS.seed} --variant I)", flush=True)
    if not ARGS.loader:
        print("SKIP: ExecuTorch's runtime sources were not found (see tests/executorch/CMakeLists.txt)")
        return 77
    shutil.rmtree(ARGS.work, ignore_errors=True)
    os.makedirs(ARGS.work)
    bases = []
    models = pte_models(ARGS.pte_writer, os.path.join(ARGS.work, "models"), SAMPLES)
    # Models whose delegates get no weights (all load: the backend goes without), so
    # that the weights gate is judged on every run, and their mutations too.
    for case in ("empty-key", "absent", "unreadable"):
        path = os.path.join(ARGS.work, "models", "matrix", f"weights_{case}.pte")
        subprocess.run([ARGS.pte_writer, "weights-case", case, os.path.join(ARGS.work, "models", "blobs", "clean.so"), path],
                       check=True)
        models.append(path)
    for path in models:
        name = ("samples/" if os.path.dirname(path) != os.path.join(ARGS.work, "models", "matrix") else "matrix/") + \
            os.path.basename(path)
        data = open(path, "rb").read()
        loads, loaded = runtime_loads(path)
        if not loads:
            print(f"FAIL: base file {name} does not load in the runtime: {loaded['refused']}")
            return 1
        bases.append((name, path, data, describe_base(path, data)))
    work = os.path.join(ARGS.work, "variants")
    os.makedirs(work)
    deadline = started + ARGS.seconds if ARGS.seconds else float("inf")
    counts = {"loads": 0, "refused": 0, "false rejections": 0, "gate passes": 0, "bad outputs": 0, "key readings": 0,
              "crashes": 0, "hangs": 0}
    disagreeing = []
    stages, own_refusals = {}, {}
    judged = 0
    for name, edits, loads, stage, findings, own in judge_all(bases, work, deadline):
        judged += 1
        for refusal in own:
            key = re.sub(r"0x[0-9a-f]+|\d+", "N", refusal)
            own_refusals[key] = own_refusals.get(key, 0) + 1
        counts["loads" if loads else "refused"] += 1
        if stage:
            stages[stage] = stages.get(stage, 0) + 1
        for finding in findings:
            key = ("false rejections" if finding.startswith("false") else "gate passes" if finding.startswith("gate")
                   else "bad outputs" if finding.startswith("bad") else "key readings" if finding.startswith("key")
                   else "hangs" if "hang" in finding else "crashes")
            counts[key] += 1
        if findings:
            disagreeing.append((name, edits))
            print(f"DISAGREE {name}: edits {json.dumps(edits)}")
            for finding in findings:
                print(f"    {finding}")
    print(f"differential: {judged} variants of {len(bases)} files ({JUDGED[0]} new of seed {ARGS.seed}, "
          f"{time.monotonic() - started:.0f} s); the runtime loads {counts['loads']}, refuses {counts['refused']}")
    print("  refused at: " + ", ".join(f"{stage} {n}" for stage, n in sorted(stages.items())))
    print(f"  machofix's own refusals of files the runtime loads: {sum(own_refusals.values())} ("
          + ", ".join(f"{key} {n}" for key, n in sorted(own_refusals.items(), key=lambda item: -item[1])) + ")")
    print("  " + ", ".join(f"{key} {counts[key]}" for key in
                           ("false rejections", "gate passes", "bad outputs", "key readings", "crashes", "hangs")))
    if ARGS.record and disagreeing:
        known = open(REGRESSIONS).read().splitlines() if os.path.exists(REGRESSIONS) else []
        with open(REGRESSIONS, "a") as handle:
            for name, edits in disagreeing:
                base = name.split(" of ", 1)[1]
                line = json.dumps({"base": base, "edits": edits})
                if line not in known:
                    handle.write(line + "\n")
    failed = len(disagreeing)
    if failed:
        print(f"replay: --seed {ARGS.seed} --variant I (I from the DISAGREE lines); --record keeps them as regressions")
    print(f"{judged - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
