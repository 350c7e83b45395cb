#!/usr/bin/env python3
"""A repeated LC_RPATH, on each side of dyld's policy (docs/loader-rules.md,
rpath-duplicate):

    test_duplicate_rpath.py MACHOFIX PTE_WRITER TBD_DIR WORK

dyld (mach_o::Header::validSemanticsRPath) refuses an image whose LC_RPATHs repeat
byte for byte once its SDK is of the spring 2025 epoch (macOS 15.4) or later
(mach_o::Policy::enforceNoDuplicateRPaths). Dylibs linked here by ld64.lld-16, which
still writes `-rpath X -rpath X` twice (llvm-objdump-16 counts the copies):
- SDK 15.4: `verify` fails it (rpath-duplicate), `check` and `check --app` fail it
  with a loader-rule finding whose repair is `fix`; that command, run as printed, is
  accepted although the input breaks the rule, and its output passes verify and check
  (one copy left, llvm-objdump-16 says) and equals `edit --delete-duplicate-rpaths`'s;
  run again it has nothing to do; `prune` still refuses the input;
- rpaths A, B, A: the later A goes, the first stays before B (the search order kept);
- the same inside a .pte, repaired there too;
- SDK 15.0: dyld loads it: `verify` passes, and only a declared contract reports it
  (duplicate-rpath);
- SDK 15.4 with `X` and `X/`: two paths for dyld's strcmp: no finding at all;
- an application's library with the repeat: dyld passes over it, and the model
  that needs it gets library-not-loaded with dyld's reason.
"""
import json
import os
import shlex
import shutil
import subprocess
import sys

failures = []


def expect(what, condition, detail=""):
    print(f"{'ok' if condition else 'FAILED'}: {what}{'' if condition or not detail else ': ' + str(detail)[:600]}")
    if not condition:
        failures.append(what)


def run(*arguments, cwd=None):
    return subprocess.run([str(a) for a in arguments], capture_output=True, text=True, cwd=cwd)


def link(work, tbd, name, sdk, rpaths, extra=()):
    obj = os.path.join(work, "f.o")
    if not os.path.exists(obj):
        with open(os.path.join(work, "f.c"), "w") as handle:
            handle.write("int f(void) { return 1; }\n")
        subprocess.run(["clang-16", "-target", "arm64-apple-macos11", "-c", os.path.join(work, "f.c"), "-o", obj], check=True)
    out = os.path.join(work, name)
    flags = [x for path in rpaths for x in ("-rpath", path)]
    subprocess.run(["ld64.lld-16", "-arch", "arm64", "-platform_version", "macos", "11.0", sdk, "-dylib", "-install_name",
                    "@rpath/" + name, obj, os.path.join(tbd, "libSystem.tbd"), *extra, *flags, "-o", out], check=True)
    return out


def rpath_count(path, rpath):
    listing = run("llvm-objdump-16", "--macho", "--all-headers", path).stdout.splitlines()
    return sum(1 for line in listing if line.strip().startswith(f"path {rpath} (offset"))


def findings(machofix, path, *options):
    done = run(machofix, "check", "--json=-", *options, path)
    return done.returncode, json.loads(done.stdout)["findings"] if done.stdout.strip() else []


def main(argv):
    machofix, pte_writer, tbd, work = [os.path.abspath(a) for a in argv[1:5]]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rpath = "@loader_path/../lib"
    new = link(work, tbd, "libnew.dylib", "15.4", [rpath, rpath])
    expect("ld64.lld-16 writes the repeat (llvm-objdump-16 counts 2)", rpath_count(new, rpath) == 2)

    done = run(machofix, "verify", new)
    expect("SDK 15.4: verify fails it, naming rpath-duplicate and dyld's message",
           done.returncode == 1 and "rpath-duplicate" in done.stdout + done.stderr
           and f"duplicate LC_RPATH '{rpath}'" in done.stdout + done.stderr, done.stdout + done.stderr)
    status, found = findings(machofix, new, "--no-contract")
    loader = [f for f in found if f["rule"] == "loader-rule" and f["loader_rule"] == "rpath-duplicate"]
    expect("SDK 15.4: check fails it with a loader-rule finding, even without a contract",
           status == 1 and len(loader) == 1 and loader[0]["rpath"] == rpath, found)
    status, declared = findings(machofix, new, "--provided", "@rpath/*")
    expect("SDK 15.4 with a contract: the loader rule alone, not also duplicate-rpath",
           not [f for f in declared if f["rule"] == "duplicate-rpath"] and
           [f["rule"] for f in declared if f["rule"] == "loader-rule"] == ["loader-rule"], declared)
    repair = loader[0]["repair"] if loader else ""
    expect("the repair is fix, with check's options",
           repair == f"machofix fix {new} --in-place --no-contract", repair)
    done = run(machofix, "prune", new, "-o", os.path.join(work, "pruned.dylib"))
    expect("prune still refuses the input (it repairs nothing of it)", done.returncode == 2 and
           "rpath-duplicate" in done.stderr and not os.path.exists(os.path.join(work, "pruned.dylib")), done.stderr)
    if repair:
        fixed = os.path.join(work, "fixed.dylib")
        shutil.copyfile(new, fixed)
        command = shlex.split(repair.replace(new, fixed))
        done = run(machofix, *command[1:])
        expect("the fix, run as printed, is accepted though the input breaks the rule", done.returncode == 0, done.stderr)
        expect("its output: one copy (llvm-objdump-16), verify passes, check has nothing to say",
               rpath_count(fixed, rpath) == 1 and run(machofix, "verify", fixed).returncode == 0
               and findings(machofix, fixed, "--no-contract") == (0, []), findings(machofix, fixed, "--no-contract"))
        before = open(fixed, "rb").read()
        done = run(machofix, *command[1:], "--json=-")
        outcome = [f["fix"]["status"] for f in json.loads(done.stdout)["files"]] if done.returncode == 0 else done.stderr
        expect("run again: nothing to fix, the file unchanged",
               done.returncode == 0 and outcome == ["nothing-to-fix"] and open(fixed, "rb").read() == before, outcome)
        done = run(machofix, "edit", new, "-o", os.path.join(work, "edited.dylib"), "--delete-duplicate-rpaths")
        expect("edit --delete-duplicate-rpaths, the edit by hand: the same bytes as fix's",
               done.returncode == 0 and open(os.path.join(work, "edited.dylib"), "rb").read() == before, done.stderr)
        done = run(machofix, "edit", os.path.join(work, "edited.dylib"), "--in-place", "--delete-duplicate-rpaths", "--json=-")
        kinds = [(e["kind"], e["status"]) for f in json.loads(done.stdout)["files"] for s in f["macho"]["slices"]
                 for e in s["edits"]] if done.returncode == 0 else done.stderr
        expect("the edit run again: nothing to do (already so)", kinds == [("delete-duplicate-rpath", "already")], kinds)

    other = "@loader_path/other"
    aba = link(work, tbd, "libaba.dylib", "15.4", [rpath, other, rpath])
    kept = os.path.join(work, "aba_fixed.dylib")
    done = run(machofix, "edit", aba, "-o", kept, "--delete-duplicate-rpaths")
    listing = [line.split()[1] for line in run("llvm-objdump-16", "--macho", "--all-headers", kept).stdout.splitlines()
               if line.strip().startswith("path @loader_path")] if done.returncode == 0 else done.stderr
    expect("rpaths A, B, A: the later A deleted, the first kept before B (llvm-objdump-16)",
           listing == [rpath, other], listing)
    done = run(machofix, "edit", new, "-o", os.path.join(work, "other.dylib"), "--add-rpath", "@loader_path/other")
    expect("an edit that does not remove the repeat is refused, nothing written",
           done.returncode == 2 and not os.path.exists(os.path.join(work, "other.dylib")), done.stderr)

    model = os.path.join(work, "model.pte")
    subprocess.run([pte_writer, "wrap", new, model, "hash"], check=True)
    status, found = findings(machofix, model, "--no-contract")
    expect("inside a .pte: the same loader-rule finding",
           status == 1 and [f["loader_rule"] for f in found if f["rule"] == "loader-rule"] == ["rpath-duplicate"], found)
    repaired = os.path.join(work, "repaired.pte")
    done = run(machofix, "edit", model, "-o", repaired, "--delete-duplicate-rpaths")
    expect("inside a .pte: repaired by the same edit; the output verifies and checks clean",
           done.returncode == 0 and run(machofix, "verify", repaired).returncode == 0
           and findings(machofix, repaired, "--no-contract")[0] == 0, done.stderr)

    old = link(work, tbd, "libold.dylib", "15.0", [rpath, rpath])
    expect("SDK 15.0: verify passes (dyld loads it)", run(machofix, "verify", old).returncode == 0)
    status, found = findings(machofix, old, "--no-contract")
    expect("SDK 15.0, no contract: no finding", status == 0 and found == [], found)
    status, found = findings(machofix, old, "--provided", "@rpath/*")
    expect("SDK 15.0 with a contract: duplicate-rpath, repaired by fix under the same declaration",
           status == 1 and [f["rule"] for f in found] == ["duplicate-rpath"]
           and found[0]["repair"] == f"machofix fix {old} --in-place --provided '@rpath/*'", found)

    slash = link(work, tbd, "libslash.dylib", "15.4", [rpath, rpath + "/"])
    expect("SDK 15.4, 'X' and 'X/': two paths for dyld, verify passes", run(machofix, "verify", slash).returncode == 0)
    status, found = findings(machofix, slash, "--provided", "@rpath/*")
    expect("'X' and 'X/': no duplicate finding", not [f for f in found if "duplicate" in f["rule"] or
                                                        f.get("loader_rule") == "rpath-duplicate"], found)

    app = os.path.join(work, "app")
    os.makedirs(app)
    shutil.copyfile(new, os.path.join(app, "libnew.dylib"))
    user = link(work, tbd, "libuser.dylib", "15.0", [], [os.path.join(app, "libnew.dylib")])
    status, found = findings(machofix, user, "--no-contract", "--app", app)
    missing = [f for f in found if f["rule"] == "library-not-loaded" and f["dylib"] == "@rpath/libnew.dylib"]
    reasons = [t["reason"] for f in missing for t in f["tried"]]
    expect("--app: the application's library with the repeat is passed over with dyld's reason",
           status == 1 and any(r.startswith("dyld refuses it (rpath-duplicate): duplicate LC_RPATH") for r in reasons), found)

    print(f"test_duplicate_rpath: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
