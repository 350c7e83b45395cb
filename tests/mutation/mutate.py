#!/usr/bin/env python3
"""Mutation testing: does the suite fail when the product is wrong?

Each entry of mutations.toml is one small, deliberate break of the product: an exact
snippet of a source file and what replaces it. For each, this script puts the
replacement in, builds, runs the test suite (ctest, stopping at the first failure)
and puts the original back. A mutation is
  killed       some test failed (the name of the test is printed),
  survived     every test passed: a test is missing, unless the entry says why no
               test can see it (`survives = "..."`),
  not viable   it does not compile: the entry is to be fixed,
  stale        its original snippet does not occur exactly once in its file any more:
               the entry is to be brought up to date with the code.
The last line printed is "N/M mutations killed".

The checkout is never modified. The tracked (and untracked, not ignored) files of the
working tree are copied to SCRATCH/tree/machofix (SCRATCH is build/mutation unless
--scratch says otherwise), only those that differ, so the one build directory
SCRATCH/build, configured once, builds incrementally. The suite finds the ExecuTorch
samples at ../shared/samples beside the repository: SCRATCH/tree/shared is a link to
that directory. Whatever ends the run (an error, Ctrl-C, SIGTERM, SIGHUP), the
mutated file is restored first; a run killed outright (SIGKILL) leaves a mutated copy,
which the next run's copy step puts right since it compares every file.

  mutate.py [ID...] [-j N] [--scratch DIR] [--no-baseline] [--list]
  mutate.py --check [--source DIR]    the list only: fields, unique ids, every
                                      original snippet exactly once (a ctest test)
"""
import argparse
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
LIST = HERE / "mutations.toml"
REQUIRED = ("id", "file", "feature", "breaks", "original", "replacement")
OPTIONAL = ("tests", "survives")
MINIMUM_ENTRIES = 25
# Tests that read the source rather than run the product: a mutation changes the
# source by definition, so these would "kill" every one of them.
NOT_JUDGES = ["mutation_list"]
# The Mach-O fixtures are linked by clang-16 and ld64.lld-16 from the test sources
# alone, so no mutation of the product can change them: they are made once per run,
# not once per ctest call (which cost 40 s a call, twice for a confirmed kill). A
# digest taken after making them is checked after each mutation, since a broken
# product writing into them would otherwise change what every later mutation meets.
FIXTURES_SETUP = "fixtures_generate"
FIXTURES_NAME = "macho_fixtures"


# ---- The list --------------------------------------------------------------------

def load_list(path=LIST):
    """The entries, and the problems of the list itself (not of the source)."""
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    entries = data.get("mutation", [])
    problems = []
    seen = set()
    for number, entry in enumerate(entries, 1):
        name = entry.get("id", f"entry {number}")
        # An empty replacement deletes the original; every other field says something.
        missing = [key for key in REQUIRED
                   if not isinstance(entry.get(key), str) or (key != "replacement" and not entry[key].strip())]
        unknown = [key for key in entry if key not in REQUIRED + OPTIONAL]
        if missing:
            problems.append(f"{name}: missing or empty: {', '.join(missing)}")
        if unknown:
            problems.append(f"{name}: unknown field(s): {', '.join(unknown)}")
        if name in seen:
            problems.append(f"{name}: the id is used twice")
        seen.add(name)
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", str(name)):
            problems.append(f"{name}: ids are lower-case words joined by '-'")
        if entry.get("original") == entry.get("replacement"):
            problems.append(f"{name}: the replacement is the original")
        tests = entry.get("tests", [])
        if not isinstance(tests, list) or not all(isinstance(test, str) for test in tests):
            problems.append(f"{name}: tests is a list of ctest test names")
        if "survives" in entry and not str(entry["survives"]).strip():
            problems.append(f"{name}: survives must say why no test can see the mutation")
    if len(entries) < MINIMUM_ENTRIES:
        problems.append(f"the list has {len(entries)} mutations; it must have at least {MINIMUM_ENTRIES}")
    return entries, problems


def occurrences(source_root, entry):
    path = Path(source_root) / entry["file"]
    if not path.is_file():
        return None
    return path.read_text(encoding="utf-8").count(entry["original"])


def stale_problem(source_root, entry):
    """Why the entry cannot be applied to the source at source_root, or None."""
    count = occurrences(source_root, entry)
    if count is None:
        return f"{entry['file']} does not exist"
    if count != 1:
        return f"its original snippet occurs {count} times in {entry['file']} (exactly once is needed)"
    return None


def check(source_root):
    entries, problems = load_list()
    for entry in entries:
        if all(isinstance(entry.get(key), str) for key in ("file", "original")):
            problem = stale_problem(source_root, entry)
            if problem:
                problems.append(f"{entry.get('id')}: stale: {problem}")
    for problem in problems:
        print("FAIL " + problem)
    print(f"{len(entries)} mutations listed; {len(problems)} problem(s)")
    return 1 if problems else 0


# ---- Child processes, interruption -----------------------------------------------

class Interrupted(Exception):
    pass


def on_signal(number, _frame):
    raise Interrupted(signal.Signals(number).name)


def run_logged(command, log, cwd=None):
    """Runs command with its output appended to log; returns its exit status. The
    child runs in a session of its own, so an interruption here ends it (and its
    children) by its process group, started by this script."""
    with open(log, "ab") as out:
        out.write(("$ " + " ".join(str(part) for part in command) + "\n").encode())
        out.flush()
        child = subprocess.Popen([str(part) for part in command], stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                 start_new_session=True)
        try:
            return child.wait()
        except BaseException:
            try:
                os.killpg(child.pid, signal.SIGTERM)
                child.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(child.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                child.wait()
            raise


# ---- The scratch tree ------------------------------------------------------------

def working_tree_files():
    listing = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             check=True, capture_output=True).stdout.decode()
    return sorted({name for name in listing.split("\0") if name and os.path.lexists(REPO / name)})


def same_file(source, target):
    if source.is_symlink() or target.is_symlink():
        return source.is_symlink() and target.is_symlink() and os.readlink(source) == os.readlink(target)
    if not target.is_file() or source.stat().st_size != target.stat().st_size:
        return False
    return source.read_bytes() == target.read_bytes()


def sync_tree(tree):
    """Copies the working tree's files that differ into tree; removes the others.
    Unchanged files keep their times, so the build stays incremental."""
    wanted = set(working_tree_files())
    copied = 0
    for name in wanted:
        source, target = REPO / name, tree / name
        if same_file(source, target):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            target.unlink()
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        else:
            shutil.copyfile(source, target)
            shutil.copymode(source, target)
        copied += 1
    removed = 0
    for directory, subdirectories, files in os.walk(tree):
        for file in files:
            path = Path(directory) / file
            if str(path.relative_to(tree)) not in wanted:
                path.unlink()
                removed += 1
    return copied, removed


def prepare_scratch(scratch, jobs):
    tree = scratch / "tree" / "machofix"
    build = scratch / "build"
    tree.mkdir(parents=True, exist_ok=True)
    (scratch / "logs").mkdir(exist_ok=True)
    shared = (REPO / ".." / "shared").resolve()
    link = scratch / "tree" / "shared"
    if shared.is_dir() and not link.is_symlink():
        os.symlink(shared, link)
    copied, removed = sync_tree(tree)
    print(f"scratch tree {tree}: {copied} file(s) copied, {removed} removed", flush=True)
    if not (build / "CMakeCache.txt").exists():
        status = run_logged(["cmake", "-S", tree, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
                            scratch / "logs" / "configure.log")
        if status != 0:
            sys.exit(f"configuring the scratch build failed: see {scratch / 'logs' / 'configure.log'}")
    return tree, build


# ---- One run of the suite ---------------------------------------------------------

def test_names(build):
    listing = subprocess.run(["ctest", "--test-dir", str(build), "-N"], check=True, capture_output=True, text=True).stdout
    return re.findall(r"Test\s+#\d+: (\S+)", listing)


def failed_tests(build):
    log = build / "Testing" / "Temporary" / "LastTestsFailed.log"
    if not log.exists():
        return []
    return [line.split(":", 1)[1].strip() for line in log.read_text().splitlines() if ":" in line]


def fixtures_digest(build):
    root = build / "fixtures"
    if not root.is_dir():
        return None
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


class Fixtures:
    """The fixtures made once for the run, and whether they are still as made."""
    def __init__(self, build, jobs, log):
        self.build, self.jobs, self.log = build, jobs, log
        self.digest = None

    def ensure(self):
        if self.digest is not None and fixtures_digest(self.build) == self.digest:
            return
        self.digest = None
        command = ["ctest", "--test-dir", self.build, "--output-on-failure", "-R", f"^{FIXTURES_SETUP}$"]
        if run_logged(command, self.log) != 0:
            sys.exit(f"making the fixtures failed: see {self.log}")
        self.digest = fixtures_digest(self.build)

    def exclude_setup(self):
        return ["-FS", f"^{FIXTURES_NAME}$"] if self.digest is not None else []


FIXTURES = None  # set by main() once the scratch build exists


def run_suite(build, jobs, log, only=None, exclude=None):
    """Runs ctest, stopping at the first failure; the names of the failed tests
    (["ctest"] when it failed without naming one), or [] when all passed."""
    (build / "Testing" / "Temporary" / "LastTestsFailed.log").unlink(missing_ok=True)
    command = ["ctest", "--test-dir", build, "--output-on-failure", "--stop-on-failure", "-j", str(jobs)]
    command += FIXTURES.exclude_setup() if FIXTURES else []
    if only:
        command += ["-R", "^(" + "|".join(map(re.escape, only)) + ")$"]
    exclude = NOT_JUDGES + (exclude or [])
    command += ["-E", "^(" + "|".join(map(re.escape, exclude)) + ")$"]
    status = run_logged(command, log)
    if status == 0:
        return []
    return failed_tests(build) or ["ctest (see the log)"]


def build_all(build, jobs, log):
    return run_logged(["cmake", "--build", build, "-j", str(jobs)], log) == 0


# ---- One mutation ------------------------------------------------------------------

class Mutation:
    def __init__(self, tree, entry):
        self.path = tree / entry["file"]
        self.original_text = self.path.read_text(encoding="utf-8")
        self.mutated_text = self.original_text.replace(entry["original"], entry["replacement"], 1)
        self.applied = False

    def apply(self):
        self.applied = True
        self.path.write_text(self.mutated_text, encoding="utf-8")

    def restore(self):
        if self.applied:
            self.path.write_text(self.original_text, encoding="utf-8")  # a new time: the next build recompiles it
            self.applied = False


def judge(entry, tree, build, jobs, logs, known_tests):
    """(outcome, detail, build seconds, test seconds) for one entry."""
    problem = stale_problem(tree, entry)
    if problem:
        return "stale", problem, 0.0, 0.0
    mutation = Mutation(tree, entry)
    build_log, test_log = logs / f"{entry['id']}.build.log", logs / f"{entry['id']}.test.log"
    build_log.unlink(missing_ok=True)
    test_log.unlink(missing_ok=True)
    try:
        mutation.apply()
        started = time.monotonic()
        built = build_all(build, jobs, build_log)
        build_seconds = time.monotonic() - started
        if not built:
            return "not viable", f"does not compile: see {build_log}", build_seconds, 0.0
        started = time.monotonic()
        first = [test for test in entry.get("tests", []) if test in known_tests and test not in NOT_JUDGES]
        killers, flaky = run_judges(build, jobs, test_log, first)
        test_seconds = time.monotonic() - started
    finally:
        mutation.restore()
    flaky_note = f" ({', '.join(flaky)} failed once and passed when run again: flaky)" if flaky else ""
    if killers:
        return "killed", "by " + ", ".join(killers) + flaky_note, build_seconds, test_seconds
    return "survived", "every test passed" + flaky_note, build_seconds, test_seconds


def run_judges(build, jobs, log, first):
    """The tests that fail with the mutation in place, and those that failed once but
    passed when run again. The `first` tests run first; the rest of the suite only if
    they all pass. A failure counts only if the test fails again when run alone: a
    test that fails by chance (timing, load) must not hide a surviving mutation."""
    passed, flaky = [], []
    for only in ([first] if first else []) + [None]:
        while True:
            selection = [test for test in only if test not in passed] if only is not None else None
            if selection == []:
                break
            failed = run_suite(build, jobs, log, only=selection, exclude=passed)
            if not failed:
                passed += only or []
                break
            if not set(failed) <= set(test_names(build)):
                return failed, flaky  # ctest failed without naming a test: nothing to run again
            again = run_suite(build, jobs, log, only=failed)
            confirmed = [test for test in failed if test in again]
            if confirmed:
                return confirmed, flaky
            flaky += failed
            passed += failed  # and the run is repeated without them: it stopped at their failure
        if only is None:
            break
    return [], flaky


# ---- The run -----------------------------------------------------------------------

def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="*", help="run only these mutations")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="parallel jobs for the build and ctest (default 2)")
    parser.add_argument("--scratch", type=Path, default=REPO / "build" / "mutation",
                        help="where the copy of the tree and its build live (default build/mutation)")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the run of the unmutated suite (it must pass, or every mutation looks killed)")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--check", action="store_true", help="check the list against the source and exit")
    parser.add_argument("--source", type=Path, default=REPO, help="with --check: the source tree (default: this one)")
    return parser.parse_args()


def main():
    arguments = parse_arguments()
    if arguments.check:
        return check(arguments.source)
    entries, problems = load_list()
    if problems:
        for problem in problems:
            print("the list: " + problem)
        return 2
    if arguments.list:
        for entry in entries:
            print(f"{entry['id']:32} {entry['feature']}: {entry['breaks']}")
        return 0
    unknown = [name for name in arguments.ids if name not in {entry["id"] for entry in entries}]
    if unknown:
        print("unknown mutation id(s): " + ", ".join(unknown))
        return 2
    selected = [entry for entry in entries if not arguments.ids or entry["id"] in arguments.ids]

    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, on_signal)
    scratch = arguments.scratch.resolve()
    logs = scratch / "logs"
    try:
        tree, build = prepare_scratch(scratch, arguments.jobs)
        if not build_all(build, arguments.jobs, logs / "baseline.build.log"):
            print(f"the unmutated tree does not build: see {logs / 'baseline.build.log'}")
            return 2
        global FIXTURES
        FIXTURES = Fixtures(build, arguments.jobs, logs / "fixtures.log")
        FIXTURES.ensure()
        known_tests = set(test_names(build))
        for entry in selected:
            for test in entry.get("tests", []):
                if test not in known_tests:
                    print(f"note: {entry['id']}: no ctest test is named {test}")
        if not arguments.no_baseline:
            started = time.monotonic()
            failed = run_suite(build, arguments.jobs, logs / "baseline.test.log")
            if failed:
                print(f"the suite fails without any mutation ({', '.join(failed)}): see {logs / 'baseline.test.log'}")
                return 2
            print(f"baseline: the suite passes unmutated ({time.monotonic() - started:.0f} s)", flush=True)
        return run_mutations(selected, tree, build, arguments.jobs, logs)
    except (KeyboardInterrupt, Interrupted) as interruption:
        print(f"\ninterrupted ({interruption or 'SIGINT'}): the mutated file was restored")
        return 130


def run_mutations(selected, tree, build, jobs, logs):
    known_tests = set(test_names(build))
    results = []
    started = time.monotonic()
    for number, entry in enumerate(selected, 1):
        FIXTURES.ensure()
        print(f"[{number}/{len(selected)}] {entry['id']} ({entry['feature']}) ... ", end="", flush=True)
        outcome, detail, build_seconds, test_seconds = judge(entry, tree, build, jobs, logs, known_tests)
        if outcome == "survived" and entry.get("survives"):
            detail = "as expected: " + " ".join(entry["survives"].split()).split(": ")[0].split(". ")[0]
        elif outcome == "killed" and entry.get("survives"):
            detail += " (the list says it survives: update the entry)"
        print(f"{outcome} {detail} (build {build_seconds:.0f} s, tests {test_seconds:.0f} s)", flush=True)
        results.append((entry, outcome, detail))
    total = time.monotonic() - started
    killed = [entry for entry, outcome, _ in results if outcome == "killed"]
    print(f"\n{len(selected)} mutation(s) in {total / 60:.1f} min")
    for label in ("survived", "not viable", "stale"):
        for entry, outcome, detail in results:
            if outcome == label:
                print(f"  {label}: {entry['id']} ({entry['file']}): {entry['breaks']}: {detail}")
    print(f"{len(killed)}/{len(selected)} mutations killed")
    unexpected = [entry for entry, outcome, _ in results if outcome != "killed" and not
                  (outcome == "survived" and entry.get("survives"))]
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
