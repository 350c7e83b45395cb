"""machofix on a Dask cluster: whole model stores, one task per model or archive.

    from distributed import Client
    import machofix.dask
    on_cluster = machofix.dask.Machofix(Client("tcp://scheduler:8786"))
    report = on_cluster.prune("/shared/models", output="/shared/repaired", only="*libomp*")

`Machofix(client)` has the methods of `machofix.Machofix` (inspect, check, verify, prune,
edit, sign, fix) with the same keywords, and returns the same Report: the per-task JSON
reports merged into one, of the schema of a local run, files in a local run's order.
Each task runs the machofix executable installed on its worker (the wheel's, or
$MACHOFIX_EXECUTABLE there) on one file, or on the names of one file (hard links),
found in a directory given as a path: `--from-tree DIR` makes it handle that file as a
run over DIR would (a file that is no model skipped, -o mirroring DIR, a link
recreated), so the tasks add up to the local run, byte for byte. The paths and the
output must lie on storage every worker sees at the same path.

Outputs are written as a local run writes them: to a temporary file beside the target,
renamed into place. A worker that dies mid-file takes its machofix process with it
(Linux: MACHOFIX_DIE_WITH_PARENT makes the process set PR_SET_PDEATHSIG=SIGKILL on
itself, and end at once if the worker is already gone), so the scheduler's retry of the task elsewhere never races a
survivor; the file is reported once, from the task that finished. A second run over
the same store in place writes nothing and reports every repaired file unchanged.

The command line: `python3 -m machofix.dask --scheduler ADDRESS COMMAND OPTIONS PATH...`
(`python3 -m machofix.dask --help`).
"""
import json
import os
import stat
import subprocess
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from .. import _api
from .._error import MachofixError
from .._executable import find_executable
from .._report import Report, from_json

# Summary counts a merged report adds up (every field of a local run's summary).
_SUMMED = ("files", "changed", "unchanged", "skipped", "failed", "dylibs_removed", "dylibs_removable", "bytes_written")


class Task(NamedTuple):
    """One task: machofix on `paths` (one file, or the names of one file), each a file of
    the tree `tree` (a directory given as a path) or, without one, a path given itself;
    its output (the -o value for this task), and where it sorts in a local run."""
    paths: Tuple[str, ...]
    tree: Optional[str]
    output: Optional[str]
    input_index: int


# --- on the worker ---------------------------------------------------------------------

def run_task(command: str, options: Sequence[str], task: Task, executable: Optional[str] = None) -> Tuple[int, str, str]:
    """Runs on a worker: machofix COMMAND on the task's paths; (exit status, JSON report,
    stderr). `executable`: the one the client named, else the worker's own."""
    arguments = [find_executable(executable), command, "--json=-", *options, "--jobs=1"]
    if task.tree is not None:
        arguments.append(f"--from-tree={task.tree}")
    if task.output is not None:
        arguments.append(f"--output={task.output}")
    # The machofix process dies with this worker (it sets PR_SET_PDEATHSIG itself, and
    # ends at once if the worker is already gone): a task the scheduler retries
    # elsewhere never races it for its output.
    environment = dict(os.environ, MACHOFIX_DIE_WITH_PARENT=str(os.getpid()))
    result = subprocess.run([*arguments, "--", *task.paths], stdin=subprocess.DEVNULL, capture_output=True,
                            env=environment)
    return result.returncode, result.stdout.decode(), result.stderr.decode(errors="replace")


# --- on the client ---------------------------------------------------------------------

def _tree_entries(root: str) -> List[Tuple[bool, Tuple[str, ...], str]]:
    """What a local run's walk of `root` finds: every entry but directories (a link to
    one included), as (is a link, path parts relative to root, path as the walk spells
    it); sockets, fifos and devices are passed over, as the walk passes over them."""
    entries = []
    for directory, subdirectories, files in os.walk(root, onerror=lambda error: None):
        for name in files + [d for d in subdirectories if os.path.islink(os.path.join(directory, d))]:
            path = os.path.join(directory, name)
            try:
                status = os.lstat(path)
            except OSError:
                continue
            if not (stat.S_ISREG(status.st_mode) or stat.S_ISLNK(status.st_mode)):
                continue
            relative = os.path.relpath(path, root)
            entries.append((stat.S_ISLNK(status.st_mode), tuple(relative.split(os.sep)), path))
    return entries


def plan(paths: Sequence[str], output: Optional[str]) -> List[Task]:
    """One task per file (all the names of a hard-linked file or a link's target in one),
    with the output a local run gives it: -o OUT mirrors one directory right under OUT,
    several inputs each under OUT/NAME; one file given alone is written to OUT itself."""
    tasks: List[Task] = []
    single = len(paths) == 1
    for index, path in enumerate(paths):
        if path == "-":
            raise MachofixError("a run on Dask reads files, not standard input", 2)
        if not os.path.isdir(path):
            named_output = output if output is None or single else os.path.join(output, os.path.basename(path))
            tasks.append(Task((path,), None, named_output, index))
            continue
        top = os.path.basename(os.path.normpath(path)) or "root"
        tree_output = None if output is None else (output if single else os.path.join(output, top))
        groups: Dict[Any, List[str]] = {}
        for _, _, entry in sorted(_tree_entries(path), key=lambda entry: (entry[0], entry[1])):
            try:
                status = os.stat(entry)
                key: Any = (status.st_dev, status.st_ino)
            except OSError:
                key = entry  # a dangling link: its own task, which reports it
            groups.setdefault(key, []).append(entry)
        tasks += [Task(tuple(names), path, tree_output, index) for names in groups.values()]
        if not groups:
            tasks.append(Task((), path, tree_output, index))  # reported as a store with no models
    return tasks


def _model_found(file: Dict[str, Any]) -> bool:
    """core/jobs/batch.cc's is_model: a file that is a model or holds one."""
    if file.get("status") == "skipped":
        return False
    return file.get("kind") != "archive" or bool(file.get("members")) or file.get("status") == "failed"


# Top-level lists of a check or fix report, one entry per finding or loaded slice,
# each naming its file; and the contract files read, each once.
_PER_FILE_LISTS = ("findings", "app_checks")


def merge(tasks: Sequence[Task], results: Sequence[Tuple[int, str, str]], paths: Sequence[str]) -> Tuple[Dict[str, Any], int, List[str]]:
    """The tasks' reports as one: files in a local run's order (inputs in order; in a
    tree, its files before its links, each by path), the findings and loaded slices in
    their files' order, each contract once, the summary added up. Returns the report,
    the exit status a local run would have, and machofix's messages."""
    merged: Optional[Dict[str, Any]] = None
    files: List[Tuple[Any, Dict[str, Any]]] = []
    listed: Dict[str, List[Tuple[str, int, Dict[str, Any]]]] = {name: [] for name in _PER_FILE_LISTS}
    contracts: List[Tuple[str, str]] = []
    status, messages = 0, []
    summary = {name: 0 for name in _SUMMED}
    for task, (exit_status, stdout, stderr) in zip(tasks, results):
        messages += [line for line in stderr.splitlines() if line.strip()]
        if not task.paths:
            continue
        try:
            report = json.loads(stdout)
        except ValueError:
            raise MachofixError(f"{task.paths[0]}: machofix exited with status {exit_status} and no report\n{stderr}",
                                2) from None
        if merged is None:
            merged = {key: value for key, value in report.items() if key not in ("files", "summary")}
        for file in report.get("files", []):
            path = file.get("path", "")
            relative = os.path.relpath(path, task.tree) if task.tree else ""
            files.append(((task.input_index, os.path.islink(path), tuple(relative.split(os.sep))), file))
        for name in _PER_FILE_LISTS:
            listed[name] += [(item.get("file", ""), order, item) for order, item in enumerate(report.get(name, []))]
        contracts += [(report["files"][0]["path"] if report.get("files") else "", contract)
                      for contract in report.get("contracts", [])]
        for name in _SUMMED:
            summary[name] += report.get("summary", {}).get(name, 0)
        status = max(status, exit_status if exit_status in (0, 1, 2) else 2)
    for index, path in enumerate(paths):
        if os.path.isdir(path) and not any(key[0] == index and _model_found(file) for key, file in files):
            messages.append(f"machofix: error: no models found under {path}")
            status = 2
    files.sort(key=lambda item: item[0])
    position = {file.get("path"): index for index, (_, file) in enumerate(files)}
    merged = merged or {}
    merged["files"] = [file for _, file in files]
    merged["summary"] = summary
    for name in _PER_FILE_LISTS:
        if name in merged:
            merged[name] = [item for _, _, item in sorted(listed[name], key=lambda e: (position.get(e[0], -1), e[1]))]
    if "contracts" in merged:
        ordered = sorted(contracts, key=lambda entry: position.get(entry[0], -1))
        merged["contracts"] = list(dict.fromkeys(contract for _, contract in ordered))
    return merged, status, messages


def _option_value(options: Sequence[str], name: str) -> Optional[str]:
    values = [option.split("=", 1)[1] for option in options if option.startswith(name + "=")]
    return values[-1] if values else None


class Machofix(_api.Machofix):
    """machofix's commands run on a Dask cluster (`client`: a distributed.Client), one
    task per file; the same methods, keywords and Report as machofix.Machofix.

    `executable`: the machofix each worker runs (default: the one installed beside the
    package on that worker, or its $MACHOFIX_EXECUTABLE). `progress`: distributed's
    progress bar while the tasks run. `retries`: how many times a task that fails
    (not one whose worker dies: the scheduler retries those) is tried again."""

    def __init__(self, client: Any, executable: Optional[_api.PathLike] = None, progress: bool = False,
                 retries: int = 0) -> None:
        super().__init__(executable)
        self.client, self.progress, self.retries = client, progress, retries
        self.messages: List[str] = []  # machofix's messages (stderr lines) of the last run

    def run_report(self, command: str, options: Sequence[str], paths: Sequence[str]) -> Tuple[Dict[str, Any], int]:
        """The merged JSON report of COMMAND on the cluster, and the exit status."""
        if _option_value(options, "--sarif") is not None:
            raise MachofixError("--sarif is not merged on Dask: take the JSON report", 2)
        output = _option_value(options, "--output")
        if output == "-":
            raise MachofixError("a run on Dask writes files, not standard output", 2)
        kept = [option for option in options if not option.startswith(("--output=", "--jobs=", "--json="))]
        tasks = plan([os.fspath(path) for path in paths], output)
        if output is not None and (len(paths) > 1 or os.path.isdir(paths[0])):
            os.makedirs(output, exist_ok=True)
        futures = self.client.map(run_task, [command] * len(tasks), [kept] * len(tasks), tasks,
                                  [self._named] * len(tasks), pure=False, retries=self.retries)
        if self.progress:
            from distributed import progress
            progress(futures)
        results = self.client.gather(futures)
        report, status, self.messages = merge(tasks, results, [os.fspath(path) for path in paths])
        return report, status

    def _report(self, command: str, options: List[str], paths: _api.Paths, accepted: Sequence[int]) -> Report:
        report, status = self.run_report(command, options, _api._paths(paths))
        typed = from_json(Report, report, exit_status=status)
        if status not in accepted:
            errors = [line[len("machofix: error: "):] for line in self.messages if line.startswith("machofix: error: ")]
            raise MachofixError("\n".join(errors) or f"machofix exited with status {status}", status, typed)
        return typed

