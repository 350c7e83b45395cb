#!/usr/bin/env python3
"""The GitHub Action (action.yml) run for real, outside GitHub.

    test_action.py REPOSITORY MACHOFIX LIEF_PLUGIN PTE_WRITER WORKDIR

GitHub cannot be reached from this project's CI, so the action runs here as a runner
runs a composite action: each step of action.yml in order, `shell: bash` as GitHub
spells it (bash --noprofile --norc -eo pipefail), its `env:` and `${{ }}` expressions
evaluated (inputs, steps' outputs, github.action_path: any other expression fails
the test), GITHUB_OUTPUT and GITHUB_PATH read back between the steps, a failing step
ending the action. Its download comes from a release served on loopback, built as
the release is: this build's machofix and LIEF reader in the archive of this
machine's runner (machofix-VERSION-linux-x86_64/{bin,lib/machofix} on Debian), packed
by scripts/release/package.sh's own reproducible_tar_gz, summed by its write_checksums. The models are the bundled
sample (samples/aoti_metal/build.sh), broken as exported and repaired by prune.

Checked: action.yml against action-validator's schema of actions (the pinned npm
package of ctest release_workflows), and a copy with a step lacking `shell` refused;
the workflow in docs/ci.md against the schema of workflows. A clean model passes,
the archive installed is the release's bytes and finds its own LIEF reader, SARIF
written and named by the `sarif` output; a broken one fails the action (exit 1) with
its findings in the SARIF and as ::error annotations; a file that cannot be checked
fails it (exit 2), SARIF written still; contract, app, sysroot and args reach check;
run.sh alone, outside GitHub, installs and checks the same way;
an archive whose sum does not match SHA256SUMS, or is not listed there, is refused
and nothing installed or checked; each runner OS and architecture asks for its
archive. Exit 77 (skipped) only when the npm registry cannot be reached for the
validator, after everything else has passed.
"""

import hashlib
import http.server
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
from functools import partial
from pathlib import Path


def load_yaml(text):
    """PyYAML (Debian: python3-yaml); on a Mac without it, the Ruby macOS ships with."""
    try:
        import yaml
        return yaml.safe_load(text)
    except ImportError:
        ruby = subprocess.run(["ruby", "-ryaml", "-rjson", "-e", "print JSON.dump(YAML.safe_load(STDIN.read))"],
                              input=text, capture_output=True, text=True, check=True, timeout=60)
        return json.loads(ruby.stdout)

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


class Runner:
    """A composite action run as GitHub's runner runs one (the subset action.yml uses)."""

    def __init__(self, repo, scratch):
        self.repo = repo
        self.scratch = scratch
        self.action = load_yaml((repo / "action.yml").read_text())
        self.runs = 0
        self.host_os, self.host_arch, _ = host_runner()

    def run(self, workspace, inputs=None, runner_os=None, runner_arch=None):
        self.runs += 1
        run_dir = self.scratch / f"run{self.runs}"
        temp = run_dir / "runner_temp"
        temp.mkdir(parents=True)
        declared = self.action["inputs"]
        for name in inputs or {}:
            assert name in declared, f"no input {name} in action.yml"
        values = {name: str(spec.get("default", "")) for name, spec in declared.items()}
        values.update(inputs or {})
        github_path = run_dir / "github_path"
        github_path.write_text("")
        steps, results, path_added = {}, [], []
        for index, step in enumerate(self.action["runs"]["steps"]):
            assert step.get("shell") == "bash" and "if" not in step and "uses" not in step, step

            def evaluate(text):
                def one(match):
                    words = match.group(1).split(".")
                    if words[0] == "inputs" and len(words) == 2:
                        return values[words[1]]
                    if words[0] == "steps" and len(words) == 4 and words[2] == "outputs":
                        return steps.get(words[1], {}).get(words[3], "")
                    if words == ["github", "action_path"]:
                        return str(self.repo)
                    raise AssertionError(f"an expression this runner does not know: {match.group(0)}")
                return EXPRESSION.sub(one, str(text))

            output_file = run_dir / f"output{index}"
            output_file.write_text("")
            script = run_dir / f"step{index}.sh"
            script.write_text(evaluate(step["run"]))
            environment = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_", "MACHOFIX"))}
            environment.update({
                "GITHUB_ACTIONS": "true", "GITHUB_ACTION_PATH": str(self.repo), "GITHUB_WORKSPACE": str(workspace),
                "GITHUB_OUTPUT": str(output_file), "GITHUB_PATH": str(github_path),
                "RUNNER_OS": runner_os or self.host_os, "RUNNER_ARCH": runner_arch or self.host_arch,
                "RUNNER_TEMP": str(temp),
                "PATH": os.pathsep.join(path_added[::-1] + [environment.get("PATH", "/usr/bin:/bin")]),
            })
            environment.update({name: evaluate(value) for name, value in (step.get("env") or {}).items()})
            done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=workspace,
                                  env=environment, capture_output=True, text=True, timeout=300)
            steps[step.get("id", f"step{index}")] = read_outputs(output_file)
            path_added = [line for line in github_path.read_text().splitlines() if line]
            results.append(done)
            if done.returncode != 0:
                break
        outputs = {}
        for name, spec in self.action["outputs"].items():
            outputs[name] = EXPRESSION.sub(
                lambda m: steps.get(m.group(1).split(".")[1], {}).get(m.group(1).split(".")[3], ""), spec["value"])
        return {"steps": results, "outputs": outputs, "path": path_added, "temp": temp,
                "failed": any(r.returncode != 0 for r in results),
                "log": "".join(r.stdout + r.stderr for r in results)}


def read_outputs(path):
    """GITHUB_OUTPUT's two forms: NAME=VALUE and NAME<<DELIMITER ... DELIMITER."""
    outputs, lines = {}, path.read_text().splitlines()
    while lines:
        line = lines.pop(0)
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body = []
            while lines and lines[0] != delimiter:
                body.append(lines.pop(0))
            lines.pop(0)
            outputs[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
    return outputs


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(root):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def host_runner():
    """This machine as GitHub names a runner (RUNNER_OS, RUNNER_ARCH) and the release names its archive."""
    machine = {"x86_64": "X64", "amd64": "X64", "aarch64": "ARM64", "arm64": "ARM64"}.get(platform.machine().lower())
    if sys.platform == "darwin" and machine:
        return "macOS", machine, "macos"
    if sys.platform.startswith("linux") and machine:
        return "Linux", machine, {"X64": "linux-x86_64", "ARM64": "linux-aarch64"}[machine]
    raise SystemExit(f"no machofix release is made for this machine ({sys.platform}, {platform.machine()})")


def make_release(repo, machofix, plugin, version, archive_platform, outdir, scratch):
    """The release's archive for this machine, of this build, as package.sh packs and sums it."""
    name = f"machofix-{version}-{archive_platform}"
    stage = scratch / "stage" / name
    (stage / "bin").mkdir(parents=True)
    (stage / "lib" / "machofix").mkdir(parents=True)
    shutil.copy(machofix, stage / "bin" / "machofix")
    shutil.copy(plugin, stage / "lib" / "machofix" / "machofix-lief.so")
    shutil.copy(repo / "README.md", stage)
    shutil.copy(repo / "LICENSE", stage)
    shutil.copytree(repo / "docs", stage / "docs")
    (stage / "licences").mkdir()
    shutil.copy(repo / "LICENSE", stage / "licences" / "machofix.txt")
    # A second archive in SHA256SUMS, as a release has: the source archive's name.
    source = scratch / "stage" / f"machofix-{version}"
    source.mkdir()
    shutil.copy(repo / "README.md", source)
    outdir.mkdir(parents=True)
    gnu = "GNU tar" in subprocess.run(["tar", "--version"], capture_output=True, text=True).stdout
    if gnu and shutil.which("sha256sum"):
        # package.sh's own functions (GNU tar and find, as on Debian, where releases are made).
        subprocess.run(["bash", "-c", 'set -euo pipefail; source "$1/scripts/release/package.sh"; '
                        'reproducible_tar_gz "$2" "$3" "$outdir/$3.tar.gz"; '
                        'reproducible_tar_gz "$2" "$4" "$outdir/$4.tar.gz"; write_checksums',
                        "pack", str(repo), str(scratch / "stage"), name, f"machofix-{version}"],
                       env={**os.environ, "outdir": str(outdir)}, check=True, timeout=120)
    else:
        # A Mac: package.sh needs GNU tar; the same layout and SHA256SUMS format.
        print("note: no GNU tar here; the archives packed by Python's tarfile in package.sh's layout")
        for directory in (name, f"machofix-{version}"):
            with tarfile.open(outdir / f"{directory}.tar.gz", "w:gz") as packed:
                packed.add(scratch / "stage" / directory, arcname=directory)
        (outdir / "SHA256SUMS").write_text("".join(
            f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n" for path in sorted(outdir.glob("*.tar.gz"))))
    return name


def sarif_of(path):
    document = json.loads(Path(path).read_text())
    assert document["version"] == "2.1.0", document.get("version")
    return document


def rule_ids(document):
    return sorted({result["ruleId"] for run in document["runs"] for result in run["results"]})


def main(argv):
    repo, machofix, plugin, pte_writer, workdir = (Path(a).resolve() for a in argv[1:6])
    version = re.search(r"^project\(machofix VERSION ([0-9.]+)", (repo / "CMakeLists.txt").read_text(), re.M).group(1)
    failures = []

    def expect(what, condition, detail=""):
        print(f"{'ok' if condition else 'FAILED'}: {what}")
        if not condition:
            failures.append(what)
            print("  | " + str(detail).strip()[-4000:].replace("\n", "\n  | "))
        return condition

    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    scratch = Path(tempfile.mkdtemp(prefix="ci-action-", dir=workdir))

    # The sample model: broken as exported, and repaired.
    sample = scratch / "sample"
    subprocess.run([str(repo / "samples" / "aoti_metal" / "build.sh"), str(sample), str(pte_writer)],
                   check=True, capture_output=True, timeout=300)
    fixed = scratch / "fixed.pte"
    subprocess.run([str(machofix), "prune", str(sample / "metal_model.pte"), "-o", str(fixed)],
                   check=True, capture_output=True, timeout=120)

    def workspace(name, models):
        """A checkout: each (relative path, source) copied in; a source of None is an empty file."""
        root = scratch / name
        for relative, source in models.items():
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            if source is None:
                (root / relative).write_bytes(b"")
            else:
                shutil.copy(source, root / relative)
        return root

    www = scratch / "www"
    release = www / "download" / f"v{version}"
    _, _, archive_platform = host_runner()
    archive = make_release(repo, machofix, plugin, version, archive_platform, release, scratch)
    server = serve(www)
    url = f"http://127.0.0.1:{server.server_address[1]}/download/v{{version}}"
    runner = Runner(repo, scratch)
    sums = (release / "SHA256SUMS").read_text()
    expect("SHA256SUMS lists the archive and the source archive, as write_checksums writes them",
           f"  {archive}.tar.gz\n" in sums and f"  machofix-{version}.tar.gz\n" in sums, sums)

    # 1. A clean model: installed from the release, checked, passes.
    clean = workspace("clean", {"exports/metal_model.pte": fixed, "exports/machofix.toml": sample / "machofix.toml"})
    result = runner.run(clean, {"download-url": url})
    installed = Path(result["outputs"]["machofix"])
    expect("a clean model: the action passes", not result["failed"], result["log"])
    expect("installed from the archive into RUNNER_TEMP, bin/ on GITHUB_PATH",
           installed == result["temp"] / f"machofix-{version}" / archive / "bin" / "machofix"
           and result["path"] == [str(installed.parent)], f"{installed}, {result['path']}")
    expect("the installed executable is the release's, byte for byte",
           installed.is_file() and installed.read_bytes() == machofix.read_bytes())
    reader = re.search(r"^LIEF reader: (.*)$", result["log"], re.M)
    expect("the version the action's CMakeLists.txt names was installed, reading its own LIEF reader",
           f"machofix {version}\n" in result["log"] and reader
           and Path(reader.group(1)).resolve() == installed.parent.parent / "lib" / "machofix" / "machofix-lief.so",
           result["log"])
    expect("the archive's sum was checked", "matches SHA256SUMS" in result["log"], result["log"])
    sarif = clean / result["outputs"]["sarif"]
    expect("the sarif output names the SARIF written (machofix.sarif by default), no results",
           result["outputs"]["sarif"] == "machofix.sarif" and sarif.is_file() and rule_ids(sarif_of(sarif)) == [],
           result["outputs"])
    expect("the exit-code output is 0", result["outputs"]["exit-code"] == "0", result["outputs"])

    # 2. The model as exported: the action fails, the SARIF holds the findings.
    broken = workspace("broken", {"exports/metal_model.pte": sample / "metal_model.pte",
                                  "exports/machofix.toml": sample / "machofix.toml"})
    result = runner.run(broken, {"download-url": url, "paths": "exports", "sarif": "reports/check.sarif"})
    expect("a broken model: the action fails at the check step, exit status 1",
           result["failed"] and len(result["steps"]) == 2 and result["steps"][1].returncode == 1, result["log"])
    sarif = broken / "reports" / "check.sarif"
    expect("the SARIF is written still, where the sarif input says, and named by the output",
           result["outputs"]["sarif"] == "reports/check.sarif" and sarif.is_file(), result["outputs"])
    expect("the SARIF holds the findings, the contract beside the model read",
           sarif.is_file() and rule_ids(sarif_of(sarif)) == ["absolute-install-name", "forbidden-dependency",
                                                             "unused-dependency"],
           sarif.is_file() and rule_ids(sarif_of(sarif)))
    expect("each finding is an ::error annotation, and the action says why it failed",
           "::error file=exports/metal_model.pte" in result["log"]
           and "found errors (exit status 1)" in result["log"], result["log"])
    expect("the exit-code output is 1", result["outputs"]["exit-code"] == "1", result["outputs"])

    # 3. A file that cannot be checked: exit 2, SARIF still written.
    unreadable = workspace("unreadable", {"exports/metal_model.pte": fixed, "exports/empty.pte": None})
    result = runner.run(unreadable, {"download-url": url, "paths": "  exports/metal_model.pte\n  exports/empty.pte\n"})
    sarif = unreadable / "machofix.sarif"
    expect("an unreadable file among the paths (one a line): the action fails, exit status 2",
           result["failed"] and result["steps"][-1].returncode == 2 and result["outputs"]["exit-code"] == "2"
           and "could not check a file (exit status 2)" in result["log"], result["log"])
    expect("its SARIF is written still", sarif.is_file() and sarif_of(sarif) is not None)

    # 4. contract, args, app and sysroot reach check.
    inputs = workspace("inputs", {"exports/metal_model.pte": sample / "metal_model.pte",
                                  "contracts/app.toml": sample / "machofix.toml"})
    (inputs / "MyApp").mkdir()
    (inputs / "sdk").mkdir()
    result = runner.run(inputs, {"download-url": url, "paths": "exports", "contract": "contracts/app.toml",
                                 "args": "--level unused-dependency=off\n--level absolute-install-name=off"})
    found = rule_ids(sarif_of(inputs / "machofix.sarif"))
    expect("contract: its forbid is applied; args: the levels it sets are",
           result["failed"] and found == ["forbidden-dependency"], f"{found}\n{result['log']}")
    result = runner.run(inputs, {"download-url": url, "paths": "exports", "app": "MyApp", "sysroot": "sdk",
                                 "args": "--no-contract --level unused-dependency=off"})
    document = sarif_of(inputs / "machofix.sarif")
    messages = "\n".join(r["message"]["text"] for run in document["runs"] for r in run["results"])
    expect("app: the model is loaded in the (empty) application; sysroot: the system's libraries looked up in it",
           result["failed"] and "/opt/llvm-openmp/lib/libomp.dylib, which dyld does not find" in messages
           and "/usr/lib/libSystem.B.dylib, which dyld does not find" in messages
           and "forbidden-dependency" not in rule_ids(document), f"{messages}\n{result['log']}")
    result = runner.run(inputs, {"download-url": url, "paths": "exports", "args": "--no-such-option"})
    sarif = inputs / "machofix.sarif"
    expect("an argument check refuses: exit 2, a SARIF saying so written for upload-sarif",
           result["failed"] and result["outputs"]["exit-code"] == "2" and sarif.is_file()
           and sarif_of(sarif)["runs"][0]["invocations"][0]["executionSuccessful"] is False, result["log"])

    # 4b. Outside GitHub (another CI): run.sh alone, no GITHUB_* or RUNNER_* variables.
    tmpdir = scratch / "tmpdir"
    tmpdir.mkdir()
    plain = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_", "MACHOFIX"))}
    plain.update({"TMPDIR": str(tmpdir), "MACHOFIX_DOWNLOAD_URL": url})
    script = repo / "scripts" / "action" / "run.sh"
    done = subprocess.run([str(script), "install"], env=plain, capture_output=True, text=True, timeout=300)
    installed = re.search(r"^machofix-action: installed (.*)$", done.stdout, re.M)
    expect("outside GitHub: run.sh install picks the archive by uname, installs under TMPDIR",
           done.returncode == 0 and installed
           and Path(installed.group(1)) == tmpdir / f"machofix-{version}" / archive / "bin" / "machofix",
           done.stdout + done.stderr)
    if installed:
        done = subprocess.run([str(script), "check"], cwd=broken, capture_output=True, text=True, timeout=300,
                              env={**plain, "MACHOFIX": installed.group(1), "MACHOFIX_PATHS": "exports",
                                   "MACHOFIX_SARIF": "plain.sarif"})
        expect("outside GitHub: run.sh check exits 1 on the broken model, SARIF written, no annotations",
               done.returncode == 1 and rule_ids(sarif_of(broken / "plain.sarif")) == [
                   "absolute-install-name", "forbidden-dependency", "unused-dependency"]
               and "::error" not in done.stdout, done.stdout + done.stderr)

    # 5. The checksum: a changed archive, an unlisted one. Nothing installed, nothing checked.
    def refused(result, message):
        return (result["failed"] and len(result["steps"]) == 1 and message in result["log"]
                and result["path"] == [] and not (result["temp"] / f"machofix-{version}").exists())

    tampered = www / "tampered" / f"v{version}"
    shutil.copytree(release, tampered)
    with open(tampered / f"{archive}.tar.gz", "ab") as handle:
        handle.write(b"\0")
    result = runner.run(clean, {"download-url": url.replace("/download/", "/tampered/"), "version": version})
    digest = hashlib.sha256((tampered / f"{archive}.tar.gz").read_bytes()).hexdigest()
    expect("an archive whose sum does not match SHA256SUMS: refused, saying so, nothing installed or checked",
           refused(result, f"checksum mismatch: {archive}.tar.gz has sha256 {digest}")
           and "::error title=machofix::checksum mismatch" in result["log"], result["log"])
    unlisted = www / "unlisted" / f"v{version}"
    shutil.copytree(release, unlisted)
    (unlisted / "SHA256SUMS").write_text("".join(line + "\n" for line in sums.splitlines() if archive not in line))
    result = runner.run(clean, {"download-url": url.replace("/download/", "/unlisted/")})
    expect("an archive SHA256SUMS does not list: refused", refused(result, f"{archive}.tar.gz is not listed in"),
           result["log"])
    result = runner.run(clean, {"download-url": url, "version": "9.9.9"})
    expect("a version the release site does not have: refused, naming the URL",
           refused(result, "could not download http://127.0.0.1") and "/download/v9.9.9/SHA256SUMS" in result["log"],
           result["log"])

    # 6. Each runner asks for its archive (this release has only this machine's).
    for other_os, other_arch, wanted in (("macOS", "ARM64", "macos"), ("macOS", "X64", "macos"),
                                         ("Linux", "ARM64", "linux-aarch64"), ("Linux", "X64", "linux-x86_64")):
        if wanted == archive_platform:
            continue
        result = runner.run(clean, {"download-url": url}, runner_os=other_os, runner_arch=other_arch)
        expect(f"a {other_os} {other_arch} runner asks for machofix-{version}-{wanted}.tar.gz",
               refused(result, f"could not download {url.replace('{version}', version)}/machofix-{version}-{wanted}.tar.gz"),
               result["log"])
    result = runner.run(clean, {"download-url": url}, runner_os="Windows", runner_arch="X64")
    expect("a Windows runner: refused, saying which runners have a release",
           refused(result, "no machofix release for a Windows runner on X64"), result["log"])
    server.shutdown()

    # 7. action.yml and docs/ci.md's workflow against action-validator.
    skipped = validate(repo, scratch, expect)
    if failures:
        print(f"kept for a look: {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{runner.runs} runs of the action; {len(failures)} failed")
    if failures:
        return 1
    if skipped:
        print(f"SKIP: {skipped}")
        return 77
    return 0


def validate(repo, scratch, expect):
    """Returns why the validator could not run, or None."""
    sys.path.insert(0, str(repo / "tests" / "release"))
    import test_workflows  # the pinned validator, fetched and cached as ctest release_workflows does

    packages = test_workflows.pins(repo)
    tool = test_workflows.cache_dir(packages)
    validator = tool / "node_modules" / ".bin" / "action-validator"
    if not validator.exists():
        try:
            test_workflows.install(packages, tool)
        except OSError as error:
            return f"the npm registry cannot be reached to fetch action-validator: {error}"
    checked = scratch / "validate"
    checked.mkdir()
    text = (repo / "action.yml").read_text()
    result = test_workflows.validate(validator, text, checked, "action.yml")
    expect("action.yml: a valid GitHub Action (action-validator's schema of actions)", result.returncode == 0,
           result.stdout + result.stderr)
    broken = re.sub(r"^\s+shell: bash\n", "", text, count=1, flags=re.M)
    (checked / "broken").mkdir()
    result = test_workflows.validate(validator, broken, checked / "broken", "action.yml")
    expect("a composite step without shell is refused", broken != text and result.returncode != 0, result.stdout)
    blocks = re.findall(r"```yaml\n(.*?)```", (repo / "docs" / "ci.md").read_text(), re.S)
    workflows = [block for block in blocks if re.search(r"^jobs:", block, re.M)]
    expect("docs/ci.md has a workflow", bool(workflows))
    for index, block in enumerate(workflows):
        uses = re.findall(r"uses: (\S+)", block)
        result = test_workflows.validate(validator, block, checked, f"ci{index}.yml")
        expect(f"docs/ci.md's workflow {index + 1}: a valid GitHub workflow, using {', '.join(uses)}",
               result.returncode == 0 and any(u.startswith("machofix/machofix@") for u in uses)
               and "github/codeql-action/upload-sarif@v3" in uses, result.stdout + result.stderr)
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv))
