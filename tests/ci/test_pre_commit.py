#!/usr/bin/env python3
"""The pre-commit hook (.pre-commit-hooks.yaml) run for real, by pre-commit, in git.

    test_pre_commit.py REPOSITORY MACHOFIX PTE_WRITER WORKDIR

A hooks repository like this one (a git repository holding this tree's
.pre-commit-hooks.yaml, tagged v + the version of CMakeLists.txt, as a release tag
is), and a project using it through the configuration docs/ci.md shows, its URL the
local path (pre-commit clones it offline). `pre-commit install`, then `git commit`
as a user runs it, with machofix (this build) on the PATH, as language: system wants:

- the hooks file and docs/ci.md's configuration pass pre-commit's own validation;
- a commit without models runs no check (the hook is skipped);
- the bundled sample as exported (samples/aoti_metal/build.sh), with its contract
  beside it, is refused, the findings in the output, nothing committed; after
  `machofix prune --in-place` the same commit is accepted, the repaired bytes committed;
- a broken Mach-O named .dylib, .so or .node, and a .ptd machofix cannot read, are
  each refused; the same bytes under a name the hook does not take are committed.
Exit 77 (skipped) only when pre-commit is not installed.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def main(argv):
    repo, machofix, pte_writer, workdir = (Path(a).resolve() for a in argv[1:5])
    pre_commit = shutil.which("pre-commit")
    if pre_commit is None:
        print("SKIP: pre-commit is not installed (Debian: apt-get install pre-commit; scripts/setup.sh installs it)")
        return 77
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
    scratch = Path(tempfile.mkdtemp(prefix="ci-pre-commit-", dir=workdir))
    bin_dir = scratch / "bin"
    bin_dir.mkdir()
    (bin_dir / "machofix").symlink_to(machofix)
    home = scratch / "home"
    home.mkdir()
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT", "GITHUB_"))}
    environment.update({
        "PATH": f"{bin_dir}{os.pathsep}{environment.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home), "PRE_COMMIT_HOME": str(scratch / "pre-commit-cache"),
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z", "NO_COLOR": "1", "TERM": "dumb",
    })

    def run(command, cwd, check=True):
        done = subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=300)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, command))}: exit {done.returncode}\n{done.stdout}{done.stderr}")
        return done

    for key, value in (("user.name", "machofix tests"), ("user.email", "tests@machofix.invalid"),
                       ("init.defaultBranch", "main"), ("commit.gpgsign", "false")):
        run(["git", "config", "--global", key, value], scratch)

    # The hooks repository: this tree's hooks file, at a release tag.
    hooks = scratch / "machofix"
    hooks.mkdir()
    run(["git", "init", "-q"], hooks)
    shutil.copy(repo / ".pre-commit-hooks.yaml", hooks)
    run(["git", "add", ".pre-commit-hooks.yaml"], hooks)
    run(["git", "commit", "-q", "-m", "hooks"], hooks)
    run(["git", "tag", f"v{version}"], hooks)
    validated = run([pre_commit, "validate-manifest", str(repo / ".pre-commit-hooks.yaml")], scratch, check=False)
    expect(".pre-commit-hooks.yaml: pre-commit's validate-manifest accepts it", validated.returncode == 0,
           validated.stdout + validated.stderr)

    # The project, configured as docs/ci.md says, the hooks' URL this local path.
    configurations = [block for block in re.findall(r"```yaml\n(.*?)```", (repo / "docs" / "ci.md").read_text(), re.S)
                      if re.search(r"^repos:", block, re.M)]
    if not expect("docs/ci.md has a pre-commit configuration", len(configurations) == 1, configurations):
        return 1
    configuration = configurations[0]
    expect(f"docs/ci.md's configuration names this repository at v{version}, hook machofix-check",
           "repo: https://github.com/machofix/machofix\n" in configuration and f"rev: v{version}\n" in configuration
           and "id: machofix-check" in configuration, configuration)
    project = scratch / "project"
    project.mkdir()
    run(["git", "init", "-q"], project)
    (project / ".pre-commit-config.yaml").write_text(
        configuration.replace("https://github.com/machofix/machofix", str(hooks)))
    validated = run([pre_commit, "validate-config", ".pre-commit-config.yaml"], project, check=False)
    expect("docs/ci.md's configuration: pre-commit's validate-config accepts it", validated.returncode == 0,
           validated.stdout + validated.stderr)
    run([pre_commit, "install"], project)

    def head():
        return run(["git", "rev-parse", "HEAD"], project, check=False).stdout.strip()

    def commit(paths, message):
        run(["git", "add", "--", *paths], project)
        before = head()
        done = run(["git", "commit", "-m", message], project, check=False)
        return done, done.stdout + done.stderr, head() != before

    (project / "README.md").write_text("models\n")
    done, log, committed = commit([".pre-commit-config.yaml", "README.md"], "configure pre-commit")
    expect("a commit without models: accepted, the hook skipped",
           committed and re.search(r"machofix check\.+\(no files to check\)Skipped", log), log)

    # The sample as exported, with the application's contract beside it.
    sample = scratch / "sample"
    run([str(repo / "samples" / "aoti_metal" / "build.sh"), str(sample), str(pte_writer)], scratch)
    (project / "exports").mkdir()
    shutil.copy(sample / "metal_model.pte", project / "exports")
    shutil.copy(sample / "machofix.toml", project / "exports")
    done, log, committed = commit(["exports"], "the model as exported")
    expect("the model as exported: the commit is refused, by the hook, with its findings",
           not committed and done.returncode != 0 and re.search(r"machofix check\.+Failed", log)
           and "exports/metal_model.pte" in log and "[unused-dependency] (also: " in log
           and "forbidden-dependency" in log, log)
    print("  | " + log.strip().replace("\n", "\n  | "))

    run([str(machofix), "prune", "--in-place", "exports/metal_model.pte"], project)
    done, log, committed = commit(["exports"], "the model repaired")
    expect("after machofix prune --in-place: the commit is accepted, the hook passed",
           committed and re.search(r"machofix check\.+Passed", log), log)
    stored = subprocess.run(["git", "show", "HEAD:exports/metal_model.pte"], cwd=project, env=environment,
                            capture_output=True, timeout=60).stdout
    expect("the repaired model is what was committed",
           stored == (project / "exports" / "metal_model.pte").read_bytes()
           and stored != (sample / "metal_model.pte").read_bytes())

    # Every kind of file the hook takes, and one it does not.
    (project / "lib").mkdir()
    (project / "weights.ptd").write_bytes(b"")
    for name in ("lib/model.dylib", "lib/model.so", "lib/addon.node", "weights.ptd"):
        if not name.endswith(".ptd"):
            shutil.copy(sample / "model.so", project / name)
        done, log, committed = commit([name], f"add {name}")
        expect(f"{name}: checked and refused", not committed and re.search(r"machofix check\.+Failed", log)
               and name in log, log)
        run(["git", "rm", "-q", "--cached", "--", name], project)
        (project / name).unlink()
    shutil.copy(sample / "model.so", project / "lib" / "model.bin")
    done, log, committed = commit(["lib/model.bin"], "not a name the hook takes")
    expect("the same bytes as lib/model.bin: not checked, committed",
           committed and re.search(r"machofix check\.+\(no files to check\)Skipped", log), log)
    shutil.copy(sample / "model.so", project / "lib" / "model.dylib")
    run([str(machofix), "prune", "--in-place", "lib/model.dylib"], project)
    done, log, committed = commit(["lib/model.dylib"], "a repaired dylib")
    expect("lib/model.dylib after prune: accepted", committed and re.search(r"machofix check\.+Passed", log), log)

    if failures:
        print(f"kept for a look: {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
