#!/usr/bin/env python3
"""One cause, one finding (docs/commands/check.md): the rules one dependency breaks are
printed once in the text, and stay countable per rule in the JSON and SARIF.

    test_one_cause.py MACHOFIX PTE_WRITER MACHO_FIXTURES APP_FIXTURES WORK

- PyTorch's unused libomp at its absolute path, in a .pte, against an application
  without libomp and with --forbid '*omp*': one line in the text, reported by
  unused-dependency and naming absolute-install-name, forbidden-dependency and
  library-not-loaded, one repair; the summary says 1 finding and 4 rule violations;
- the JSON keeps the four findings, tied by `also` and `reported_with`; SARIF keeps four
  results, tied by alsoBreaks and reportedWith;
- a used libomp the application lacks: library-not-loaded reports it, naming
  absolute-install-name, with its tried paths;
- --level unused-dependency=off: library-not-loaded reports what is left;
- two slices with the same dependency stay two findings (a cause is one slice's);
- under GitHub Actions one annotation per printed finding.
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


def run(*arguments, env=None):
    return subprocess.run([str(a) for a in arguments], capture_output=True, text=True, env=env, timeout=300)


def finding_lines(text):
    return [line for line in text.splitlines() if ": error: " in line or ": warning: " in line or ": note: " in line]


def main(argv):
    machofix, pte_writer, macho_fixtures, fixtures, work = argv[1:6]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    app = os.path.join(fixtures, "apps", "Plain.app")  # ships no libomp
    unused_model = os.path.join(work, "model.pte")
    subprocess.run([pte_writer, "wrap", os.path.join(macho_fixtures, "aoti_metal_arm64_chained.in"), unused_model, "hash"],
                   check=True, capture_output=True)
    options = ["--app", app, "--forbid", "*omp*"]

    done = run(machofix, "check", unused_model, *options)
    lines = finding_lines(done.stdout)
    omp = [line for line in lines if "libomp" in line]
    expect("the unused libomp: one line in the text", len(omp) == 1, done.stdout)
    if omp:
        expect("reported by unused-dependency, naming the three other rules it breaks",
               "[unused-dependency] (also: " in omp[0] and all(rule in omp[0].split("(also: ")[1] for rule in
                                                                ("absolute-install-name", "forbidden-dependency",
                                                                 "library-not-loaded")), omp[0])
    expect("the summary counts 1 finding and 4 rule violations, exit 1",
           done.returncode == 1 and "1 file checked, 1 finding (4 rule violations)" in done.stdout, done.stdout)
    repairs = [line.split("repair: ", 1)[1] for line in done.stdout.splitlines() if "repair: " in line]
    expect("one repair line for it: fix, with check's options",
           len(repairs) == 1 and repairs[0].startswith(f"machofix fix {unused_model} --in-place")
           and "--forbid '*omp*'" in repairs[0] and f"--app {app}" in repairs[0], done.stdout)
    if len(repairs) == 1:  # on a copy: the model is checked again below
        copy = os.path.join(work, "repaired", "model.pte")
        os.makedirs(os.path.dirname(copy))
        shutil.copyfile(unused_model, copy)
        fixed = shlex.split(repairs[0].replace(unused_model, copy))
        done = run(machofix, *fixed[1:])
        again = run(machofix, "check", copy, *options)
        expect("the repair, run as printed, removes the cause: check passes", done.returncode == 0 and
               again.returncode == 0, done.stdout + done.stderr + again.stdout)

    done = run(machofix, "check", unused_model, *options, "--json=-")
    findings = json.loads(done.stdout)["findings"] if done.returncode in (0, 1) else []
    rules = sorted(f["rule"] for f in findings)
    expect("JSON: a finding per rule", rules == ["absolute-install-name", "forbidden-dependency", "library-not-loaded",
                                                 "unused-dependency"], rules)
    lead = [f for f in findings if f["reported_with"] is None]
    expect("JSON: one reports the cause, listing the others in also",
           len(lead) == 1 and lead[0]["rule"] == "unused-dependency"
           and sorted(lead[0]["also"]) == ["absolute-install-name", "forbidden-dependency", "library-not-loaded"], lead)
    expect("JSON: each other one names it in reported_with",
           all(f["reported_with"] == "unused-dependency" and f["also"] == [] for f in findings if f not in lead), findings)

    sarif_path = os.path.join(work, "out.sarif")
    run(machofix, "check", unused_model, *options, "--sarif", sarif_path)
    with open(sarif_path) as handle:
        results = json.load(handle)["runs"][0]["results"]
    expect("SARIF: a result per rule", sorted(r["ruleId"] for r in results) == rules, [r["ruleId"] for r in results])
    expect("SARIF: alsoBreaks on the reporting result, reportedWith on the others",
           sum(1 for r in results if "alsoBreaks" in r["properties"]) == 1
           and all(r["properties"].get("reportedWith") == "unused-dependency" for r in results
                   if "alsoBreaks" not in r["properties"]), [r["properties"] for r in results])

    done = run(machofix, "check", unused_model, *options, "--level", "unused-dependency=off")
    omp = [line for line in finding_lines(done.stdout) if "libomp" in line]
    expect("a rule turned off takes no part: forbidden-dependency reports what is left",
           len(omp) == 1 and "[forbidden-dependency] (also: " in omp[0] and "unused-dependency" not in omp[0], done.stdout)

    used_model = os.path.join(fixtures, "models", "m_optomp.dylib")  # uses libomp at /opt/llvm-openmp
    done = run(machofix, "check", used_model, "--app", app)
    lines = finding_lines(done.stdout)
    expect("a used libomp the application lacks: library-not-loaded reports it, naming absolute-install-name, "
           "with the paths tried", len(lines) == 1 and "[library-not-loaded] (also: absolute-install-name)" in lines[0]
           and "tried: " in lines[0], done.stdout)

    done = run(machofix, "check", os.path.join(macho_fixtures, "universal_fat64_chained.in"))
    omp = [line for line in finding_lines(done.stdout) if "libomp" in line]
    expect("two slices with the same dependency: two findings, each naming its other rule",
           len(omp) == 2 and all("(also: absolute-install-name)" in line for line in omp)
           and "2 findings (4 rule violations)" in done.stdout, done.stdout)

    env = dict(os.environ, GITHUB_ACTIONS="true")
    done = run(machofix, "check", unused_model, *options, env=env)
    annotations = [line for line in done.stdout.splitlines() if line.startswith("::error")]
    expect("GitHub Actions: one annotation per printed finding",
           len(annotations) == len(finding_lines(done.stdout)), done.stdout)

    print(f"test_one_cause: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
