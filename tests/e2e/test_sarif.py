#!/usr/bin/env python3
"""`check --sarif FILE`: SARIF 2.1.0 that validates against the format's JSON schema and
says what `check --json` says.

The schema is the SARIF 2.1.0 JSON schema as published (sarif-2.1.0-rtm.5.json),
carried by the npm package @microsoft/jest-sarif (pinned with its integrity), fetched
with `npm pack` into a cache outside the repository ($MACHOFIX_CACHE/../sarif-schema,
else ~/.cache/machofix/sarif-schema) and validated with Debian's python3-jsonschema.
Exit 77 (skipped) only when the registry cannot be reached and nothing is cached.

For fixtures with every rule's finding (unused and absolute libomp, a forbidden one,
absolute and repeated rpaths, an unprovided @rpath library, a weak link to a required
one), thin, universal and inside a .pte: the document validates; the driver lists every
rule with its reason and repair; each result equals a --json finding (rule, message,
file relative to the current directory, byte offset of the load command, blob and
slice, repair); no finding, no result; --sarif - on stdout; a file it cannot write: exit 2.
URIs are relative to the root (--sarif-root; by default the top of the git work tree,
absolute inputs and runs from a subdirectory included); an input that cannot be
checked makes the run unsuccessful, with a notification naming it (and an ::error
annotation under GitHub Actions); fingerprints do not change when a model is exported
again (its content-hash key does). Microsoft's SARIF multitool, with GitHub's
ingestion rules, validates every log written here: no error, no warning.
Usage: test_sarif.py MACHOFIX PTE_WRITER FIXTURE_DIR WORK_DIR
"""
import hashlib
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse

try:
    import jsonschema
except ImportError:  # pyenv's Python: Debian's has python3-jsonschema
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])
    raise

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "corpus"))
from fetch_corpus import classify_npm_failure  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "support"))
from relative_name import dylib_with_relative_dependency  # noqa: E402
from tamper import tamper_text, with_i386_slice, writable_text  # noqa: E402
import sarif_multitool  # noqa: E402

SCHEMA_PACKAGE = "@microsoft/jest-sarif@1.0.0-beta.0"
SCHEMA_INTEGRITY = ("sha512-A1fOhPd6Ic5iDk4F9YPw1qNB4XF+7+IviR7xl8r2F6QzQkx5cpY9LsGk2rExiFIEcBbjpVnSmwWGBukASkiQ9A==")
SCHEMA_MEMBER = "package/lib/schemas/sarif-2.1.0-rtm.5.json"
SKIP = 77

failures = []


def expect(condition, what, detail=""):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what + (f"\n    {detail}" if detail else ""))


def cache_dir():
    corpus = os.environ.get("MACHOFIX_CACHE")
    base = os.path.dirname(os.path.abspath(corpus)) if corpus else os.path.join(os.path.expanduser("~"), ".cache",
                                                                                "machofix")
    return os.path.join(base, "sarif-schema")


def sri_sha512(data):
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def schema():
    """The SARIF 2.1.0 schema, from the cache or fetched; None if the registry is unreachable."""
    cache = cache_dir()
    cached = os.path.join(cache, "sarif-2.1.0-rtm.5.json")
    if os.path.exists(cached):
        with open(cached) as handle:
            return json.load(handle)
    os.makedirs(cache, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        result = subprocess.run(["npm", "pack", SCHEMA_PACKAGE, "--pack-destination", scratch, "--ignore-scripts",
                                 "--loglevel=error", "--fetch-retries=1"], capture_output=True, text=True,
                                timeout=300, cwd=scratch)
        if result.returncode != 0:
            kind, reason = classify_npm_failure(result.stdout + result.stderr)
            if kind == "unreachable":
                print(f"SKIP: npm registry unreachable: {reason}")
                return None
            raise SystemExit(f"npm pack {SCHEMA_PACKAGE} failed: {reason}")
        [tarball] = [name for name in os.listdir(scratch) if name.endswith(".tgz")]
        with open(os.path.join(scratch, tarball), "rb") as handle:
            data = handle.read()
        if sri_sha512(data) != SCHEMA_INTEGRITY:
            raise SystemExit(f"{SCHEMA_PACKAGE}: integrity {sri_sha512(data)}, pinned {SCHEMA_INTEGRITY}")
        with tarfile.open(os.path.join(scratch, tarball)) as archive:
            text = archive.extractfile(SCHEMA_MEMBER).read()
        with open(os.path.join(scratch, "schema.json"), "wb") as handle:
            handle.write(text)
        os.replace(os.path.join(scratch, "schema.json"), cached)
    return json.loads(text)


def run(*args, cwd=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120, cwd=cwd)


LOGS = []  # every SARIF file written, for the multitool


def keep_log(path):
    kept = os.path.join(os.path.dirname(path), f"log-{len(LOGS)}.sarif")
    shutil.copyfile(path, kept)
    LOGS.append(kept)


def keep_text(work, text):
    path = write(os.path.join(work, "logs", f"stdout-{len(LOGS)}.sarif"), text)
    LOGS.append(path)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)
    return path


def both_reports(machofix, work, inputs, *options):
    """(exit status, SARIF document, --json findings) of one check run, from `work`."""
    sarif = os.path.join(work, "out.sarif")
    result = run(machofix, "check", "--json", "-", "--sarif", sarif, "--sarif-root", work, *options, "--", *inputs, cwd=work)
    keep_log(sarif)
    with open(sarif) as handle:
        document = json.load(handle)
    return result.returncode, document, json.loads(result.stdout)["findings"]


def as_result(finding):
    """What the SARIF result for a --json finding must say."""
    location = {"physicalLocation": {"artifactLocation": {"uri": finding["file"], "uriBaseId": "%SRCROOT%"}},
                "logicalLocations": [{"name": finding["arch"],
                                      "fullyQualifiedName": (finding["blob"] + "/" if finding["blob"] else "")
                                      + finding["arch"], "kind": "module"}]}
    # A delegate's weights belong to its method; a finding of the whole file, to no slice.
    if finding["rule"] == "missing-weights":
        location["logicalLocations"] = [{"name": finding["method"], "kind": "function",
                                         "fullyQualifiedName": finding["method"] + "/" + finding["backend"]}]
    elif not finding["arch"]:
        del location["logicalLocations"]
    if finding["offset"] is not None:
        location["physicalLocation"]["region"] = {"byteOffset": finding["offset"]}
    message = finding["message"] + (f". Repair: {finding['repair']}" if finding["repair"] else "")
    return {"ruleId": finding["rule"], "level": finding["level"], "message": {"text": message}, "locations": [location],
            "repair": finding["repair"], "dylib": finding["dylib"], "rpath": finding["rpath"],
            "symbols": finding["symbols"], "symbol": finding["symbol"] or None,
            "expectedIn": finding["expected_in"] or None, "neededBy": finding["needed_by"] or None,
            "tried": finding["tried"] or None}


def result_view(result):
    properties = result.get("properties", {})
    return {"ruleId": result["ruleId"], "level": result["level"], "message": result["message"],
            "locations": result["locations"], "repair": properties.get("repair"), "dylib": properties.get("dylib"),
            "rpath": properties.get("rpath"), "symbols": properties.get("symbols"), "symbol": properties.get("symbol"),
            "expectedIn": properties.get("expectedIn"), "neededBy": properties.get("neededBy"),
            "tried": properties.get("tried")}


URI_CHARACTERS = re.compile(r"^[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*$")


def resolved(uri, base):
    """The file a SARIF artifact location names: the percent-decoded URI, against
    the base URI when it is relative."""
    absolute = urllib.parse.urljoin(base, uri) if base else uri
    parsed = urllib.parse.urlparse(absolute)
    return urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else None


def odd_names(machofix, fixtures, work, validator):
    """Paths with spaces, '#', '%' and non-ASCII characters, below the current directory
    (in a directory with such a name too) and outside it: each artifact location is a
    valid URI (percent-encoded, no fragment or stray '%') that maps back to the file."""
    directory = os.path.join(work, "odd dir #1 %41 é")
    os.makedirs(directory)
    names = ["a b.dylib", "x#y.dylib", "100%.dylib", "ünïcode-模型.dylib", "%20literal.dylib"]
    for name in names:
        shutil.copyfile(os.path.join(fixtures, "aoti_metal_arm64_chained.in"), os.path.join(directory, name))
    for cwd, label in ((directory, "below the current directory"), ("/", "outside it (absolute file: URIs)")):
        result = run(machofix, "check", "--sarif", "-", "--no-contract", *[os.path.join(directory, n) for n in names],
                     cwd=cwd)
        document = json.loads(result.stdout) if result.stdout.startswith("{") else {}
        run_ = document.get("runs", [{}])[0]
        base = run_.get("originalUriBaseIds", {}).get("%SRCROOT%", {}).get("uri", "")
        locations = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in run_.get("results", [])]
        files = {resolved(loc["uri"], base if loc.get("uriBaseId") else None) for loc in locations}
        expect(result.returncode == 1 and not list(validator.iter_errors(document))
               and files == {os.path.join(directory, n) for n in names},
               f"odd file names {label}: every artifact location resolves to its file", json.dumps(locations)[:400])
        expect(all(URI_CHARACTERS.match(loc["uri"]) and "#" not in loc["uri"] and " " not in loc["uri"]
                   and re.fullmatch(r"([^%]|%[0-9A-F]{2})*", loc["uri"]) for loc in locations + [{"uri": base}]),
               f"odd file names {label}: the URIs are RFC 3986 (no space, no '#', every '%' an escape)",
               json.dumps(locations)[:400])


def repository_root(machofix, fixtures, work, validator):
    """By default URIs are relative to the top of the git work tree: from a
    subdirectory, and for absolute inputs, as CI scripts pass them."""
    repo = os.path.join(work, "repo")
    sub = os.path.join(repo, "models", "sub")
    os.makedirs(sub)
    subprocess.run(["git", "init", "-q", repo], check=True)
    model = os.path.join(sub, "model.dylib")
    shutil.copyfile(os.path.join(fixtures, "aoti_metal_arm64_chained.in"), model)
    for cwd, given, label in ((sub, "model.dylib", "from a subdirectory"), (sub, model, "an absolute input"),
                              (repo, model, "an absolute input from the top")):
        result = run(machofix, "check", "--no-contract", "--sarif", "-", given, cwd=cwd)
        document = json.loads(result.stdout) if result.stdout.startswith("{") else {}
        run_ = document.get("runs", [{}])[0]
        base = run_.get("originalUriBaseIds", {}).get("%SRCROOT%", {}).get("uri")
        uris = {r["locations"][0]["physicalLocation"]["artifactLocation"].get("uri") for r in run_.get("results", [])}
        expect(base == f"file://{repo}/" and uris == {"models/sub/model.dylib"},
               f"the git work tree's top is the root, {label}", f"{base} {uris}")
        keep_text(work, result.stdout)


def unchecked_inputs(machofix, fixtures, work, validator):
    """An input check could not judge is in the log: the run failed, a notification
    names it; under GitHub Actions an ::error annotation too."""
    directory = os.path.join(work, "unchecked")
    os.makedirs(directory)
    good = os.path.join(directory, "good.dylib")
    shutil.copyfile(os.path.join(fixtures, "contract_clean_arm64_chained.in"), good)
    write(os.path.join(directory, "empty.pte"), "")
    sarif = os.path.join(directory, "out.sarif")
    env = dict(os.environ, GITHUB_ACTIONS="true")
    result = subprocess.run([machofix, "check", "--no-contract", "--sarif", sarif, "--sarif-root", directory,
                             good, os.path.join(directory, "empty.pte"), os.path.join(directory, "nosuch.dylib")],
                            capture_output=True, text=True, env=env, cwd=directory)
    document = json.load(open(sarif)) if os.path.exists(sarif) else {}
    invocation = document.get("runs", [{}])[0].get("invocations", [{}])[0]
    named = sorted(n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                   for n in invocation.get("toolExecutionNotifications", []))
    expect(result.returncode == 2 and invocation.get("executionSuccessful") is False
           and named == ["empty.pte", "nosuch.dylib"] and not list(validator.iter_errors(document)),
           "inputs not checked: executionSuccessful false, a notification naming each", json.dumps(invocation)[:500])
    expect("::error file=" + os.path.join(directory, "empty.pte") in result.stdout
           and "::error file=" + os.path.join(directory, "nosuch.dylib") in result.stdout,
           "inputs not checked: an ::error annotation for each under GitHub Actions", result.stdout[-500:])
    keep_log(sarif)
    nothing = os.path.join(directory, "nothing.sarif")
    result = run(machofix, "check", "--sarif", nothing, os.path.join(directory, "nosuchdir"), cwd=directory)
    document = json.load(open(nothing)) if os.path.exists(nothing) else {}
    invocation = document.get("runs", [{}])[0].get("invocations", [{}])[0]
    expect(result.returncode == 2 and invocation.get("executionSuccessful") is False
           and invocation.get("toolExecutionNotifications"), "a run that checked nothing: not successful",
           json.dumps(document)[:300])
    bad_contract = write(os.path.join(directory, "bad.toml"), "providd = 1\n")
    contract_log = os.path.join(directory, "contract.sarif")
    result = run(machofix, "check", "--sarif", contract_log, "--contract", bad_contract, good, cwd=directory)
    document = json.load(open(contract_log)) if os.path.exists(contract_log) else {}
    invocation = document.get("runs", [{}])[0].get("invocations", [{}])[0]
    expect(result.returncode == 2 and invocation.get("executionSuccessful") is False and
           "providd" in json.dumps(invocation.get("toolExecutionNotifications")),
           "a malformed contract: a log that says so, not none", json.dumps(document)[:300])
    for path in (nothing, contract_log):
        if os.path.exists(path):
            keep_log(path)


def fingerprints_across_exports(machofix, pte_writer, fixtures, work):
    """The same .so exported twice with other bytes (so another content-hash key): its
    findings keep their fingerprints."""
    directory = os.path.join(work, "exports")
    os.makedirs(directory)
    so = os.path.join(fixtures, "aoti_metal_arm64_chained.in")
    other = os.path.join(directory, "other.so")
    subprocess.run([machofix, "edit", so, "-o", other, "--add-rpath", "@loader_path/x"], check=True, capture_output=True)
    prints = []
    for index, source in enumerate((so, other)):
        model = os.path.join(directory, "model.pte")
        subprocess.run([pte_writer, "wrap", source, model, "hash"], check=True)
        result = run(machofix, "check", "--no-contract", "--sarif", "-", model, cwd=directory)
        document = json.loads(result.stdout) if result.stdout.startswith("{") else {}
        results = document.get("runs", [{}])[0].get("results", [])
        prints.append(sorted((r["ruleId"], r["partialFingerprints"]["machofixFinding/v2"]) for r in results))
        keys = {r["properties"]["blob"] for r in results}
        expect(all(k.endswith("_so_blob") and len(k) == 64 + 8 for k in keys), f"export {index}: the blob is a content-hash key",
               keys)
    expect(prints[0] and prints[0] == prints[1], "fingerprints stay when the model is exported again", prints)
    expect(all("|forward/so_blob|" in p and not re.search(r"[0-9a-f]{64}", p) for _, p in prints[0]),
           "fingerprints name the blob's role (method/so_blob), not its key", prints[0])


def multitool(work):
    os.makedirs(os.path.join(work, "logs"), exist_ok=True)
    found = sarif_multitool.validate(LOGS, os.path.join(work, "logs"))
    if found is None:
        return
    serious = [f for f in found if f[0] in ("error", "warning")]
    expect(LOGS and not serious, f"Microsoft's SARIF multitool (GitHub's rules too): no error or warning in {len(LOGS)} logs",
           "\n".join(f"{level} {rule} {os.path.basename(path)}: {text}" for level, rule, path, text in serious[:10]))


def main(argv):
    machofix, pte_writer, fixtures, work = [os.path.abspath(a) for a in argv[1:5]]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    work = os.path.realpath(work)
    sarif_schema = schema()
    if sarif_schema is None:
        return SKIP
    validator_class = jsonschema.validators.validator_for(sarif_schema)  # the schema says draft-04
    validator_class.check_schema(sarif_schema)
    validator = validator_class(sarif_schema)

    models = os.path.join(work, "models")
    os.makedirs(models)
    for name in ("aoti_metal_arm64_chained.in", "contract_rpaths_arm64_chained.in", "contract_weak_x86_64_dyldinfo.in",
                 "universal_fat_dyldinfo.in", "all_used_arm64_chained.in", "contract_clean_arm64_chained.in"):
        shutil.copyfile(os.path.join(fixtures, name), os.path.join(models, name))
    subprocess.run([pte_writer, "wrap", os.path.join(fixtures, "contract_rpaths_arm64_chained.in"),
                    os.path.join(models, "model.pte"), "hash"], check=True)
    # missing-weights: a delegate whose weights key is empty.
    subprocess.run([pte_writer, "weights-case", "empty-key", os.path.join(fixtures, "contract_clean_arm64_chained.in"),
                    os.path.join(models, "no_weights.pte")], check=True)
    # What verify fails: a flipped byte of code (invalid-signature), __TEXT writable (loader-rule).
    for name, spoil in (("flipped.dylib", tamper_text), ("writable_text.dylib", writable_text)):
        with open(os.path.join(fixtures, "contract_clean_arm64_chained.in"), "rb") as handle:
            data = bytearray(handle.read())
        spoil(data, "arm64")
        with open(os.path.join(models, name), "wb") as handle:
            handle.write(data)
    with open(os.path.join(fixtures, "contract_clean_arm64_chained.in"), "rb") as handle:
        data = handle.read()
    with open(os.path.join(models, "with_i386.dylib"), "wb") as handle:  # unchecked-slice
        handle.write(with_i386_slice(data))
    shutil.move(dylib_with_relative_dependency(os.path.join(work, "relative")),
                os.path.join(models, "relative_dependency.dylib"))  # relative-install-name
    write(os.path.join(models, "machofix.toml"), 'provided = "@rpath/libomp.dylib"\nrequired = "libomp.dylib"\n'
          'forbid = "*omp*"\n')
    # The application's rules, by a contract of their own: an application (a directory
    # of libraries whose libomp.dylib is another library, exporting none of libomp's
    # symbols) and the targets.
    app = os.path.join(work, "app")
    os.makedirs(app)
    shutil.copyfile(os.path.join(fixtures, "contract_clean_arm64_chained.in"), os.path.join(app, "libomp.dylib"))
    in_app = os.path.join(models, "in_app")
    os.makedirs(in_app)
    for name in ("aoti_metal_arm64_chained.in", "contract_rpaths_arm64_chained.in"):
        shutil.copyfile(os.path.join(fixtures, name), os.path.join(in_app, name))
    write(os.path.join(in_app, "machofix.toml"), 'app = "../../app"\nmin_macos = "10.15"\narch = "x86_64"\n')
    inputs = sorted(os.path.join("models", name) for name in os.listdir(models) if not name.endswith(".toml"))
    # (models/in_app is a directory: check walks it)

    status, document, findings = both_reports(machofix, work, inputs)
    errors = sorted(validator.iter_errors(document), key=lambda error: list(error.path))
    expect(not errors, "the SARIF document validates against the SARIF 2.1.0 schema",
           "; ".join(f"{list(e.path)}: {e.message}" for e in errors[:5]))
    expect(document.get("version") == "2.1.0" and len(document.get("runs", [])) == 1, "version 2.1.0, one run")
    spoiled = json.loads(json.dumps(document))
    spoiled["runs"][0]["results"][0]["level"] = "fatal"
    del spoiled["runs"][0]["tool"]["driver"]["name"]
    expect(len(list(validator.iter_errors(spoiled))) == 2,
           "the validator refuses a document with an unknown level and a driver without a name")
    run_ = document["runs"][0]
    driver = run_["tool"]["driver"]
    ids = [rule["id"] for rule in driver["rules"]]
    expect(ids == ["unused-dependency", "absolute-install-name", "absolute-rpath", "duplicate-rpath",
                   "unprovided-dependency", "weak-required-dependency", "forbidden-dependency", "min-macos",
                   "arch-missing", "library-not-loaded", "symbol-not-found", "invalid-signature", "loader-rule", "unchecked-slice",
                   "relative-install-name", "missing-weights"]
           and all(rule["shortDescription"]["text"] and rule["help"]["text"] for rule in driver["rules"]),
           "the driver lists the sixteen rules, each with its reason and help", str(ids))
    expect(driver["name"] == "machofix" and run_["originalUriBaseIds"]["%SRCROOT%"]["uri"] == f"file://{work}/",
           "the driver is machofix; %SRCROOT% is the current directory")
    rules_found = {finding["rule"] for finding in findings}
    expect(status == 1 and rules_found == set(ids), "every rule has a finding in this set of models",
           str(sorted(rules_found)))
    results = run_["results"]
    expect([result_view(r) for r in results] == [as_result(f) for f in findings] and len(results) == len(findings),
           f"the {len(results)} results are the --json findings: rule, message, repair, file, offset, blob and slice",
           json.dumps([result_view(r) for r in results][:2])[:600] + " vs " +
           json.dumps([as_result(f) for f in findings][:2])[:600])
    expect(all(driver["rules"][r["ruleIndex"]]["id"] == r["ruleId"] for r in results), "each ruleIndex names its rule")
    forbidden = [r for r in results if r["ruleId"] == "forbidden-dependency"]
    expect(forbidden and any(r["properties"]["used"] for r in forbidden)
           and any(not r["properties"]["used"] for r in forbidden),
           "forbidden-dependency is in the SARIF too, used and unused")
    in_pte = [r for r in results if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "models/model.pte"]
    expect(in_pte and all(r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"].endswith("_so_blob/arm64")
                          for r in in_pte), "inside a .pte: the logical location names the blob key and the slice")
    universal = [r for r in results if "universal" in r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]]
    expect({r["locations"][0]["logicalLocations"][0]["name"] for r in universal} == {"arm64", "x86_64"},
           "a universal file: one logical location per slice")

    status, document, findings = both_reports(machofix, work,
                                              [os.path.join("models", "contract_clean_arm64_chained.in")], "--no-contract")
    expect(status == 0 and findings == [] and document["runs"][0]["results"] == []
           and not list(validator.iter_errors(document)), "no finding: a valid document with no result")

    outside = run(machofix, "check", "--sarif", "-", "--contract", os.path.join(models, "machofix.toml"),
                  os.path.join(models, "contract_rpaths_arm64_chained.in"), cwd="/")
    document = json.loads(outside.stdout) if outside.stdout.startswith("{") else {}
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in document.get("runs", [{}])[0].get(
        "results", [])]
    expect(outside.returncode == 1 and uris and all(u.get("uriBaseId") == "%SRCROOT%" and not u["uri"].startswith("/")
                                                    for u in uris) and not list(validator.iter_errors(document)),
           "--sarif - writes the document to stdout (no text report mixed in)", outside.stdout[:300])
    keep_text(work, outside.stdout)
    elsewhere = run(machofix, "check", "--sarif", "-", "--sarif-root", fixtures, "--contract",
                    os.path.join(models, "machofix.toml"), os.path.join(models, "contract_rpaths_arm64_chained.in"),
                    cwd=fixtures)
    document = json.loads(elsewhere.stdout) if elsewhere.stdout.startswith("{") else {}
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in document.get("runs", [{}])[0].get(
        "results", [])]
    expect(uris and all(u["uri"] == "file://" + os.path.join(models, "contract_rpaths_arm64_chained.in")
                        and "uriBaseId" not in u for u in uris),
           "a file outside the root: an absolute file: URI", json.dumps(uris)[:300])
    keep_text(work, elsewhere.stdout)
    odd_names(machofix, fixtures, work, validator)
    repository_root(machofix, fixtures, work, validator)
    unchecked_inputs(machofix, fixtures, work, validator)
    fingerprints_across_exports(machofix, pte_writer, fixtures, work)
    multitool(work)
    both = run(machofix, "check", "--sarif", "-", "--json", "-", os.path.join(models, "all_used_arm64_chained.in"))
    expect(both.returncode == 2 and both.stdout == "", "--sarif - with --json -: refused, exit 2", both.stderr)
    unwritable = run(machofix, "check", "--sarif", os.path.join(work, "no", "such", "dir", "out.sarif"),
                     os.path.join(models, "all_used_arm64_chained.in"), "--no-contract")
    expect(unwritable.returncode == 2 and "cannot write the SARIF report" in unwritable.stderr,
           "a SARIF file that cannot be written: exit 2", unwritable.stderr)
    print(f"{len(failures)} failures")
    for failure in failures:
        print("FAIL " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
