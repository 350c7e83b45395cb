"""The commands of machofix as Python functions returning its JSON report as objects.

Each call runs the executable once with `--json -` and the same options the command
line takes (docs/commands/); results are what `machofix COMMAND --json` prints.
"""
import json
import os
import subprocess
import tempfile
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ._error import MachofixError
from ._executable import find_executable
from ._report import Report, from_json

PathLike = Union[str, "os.PathLike[str]"]
Paths = Union[PathLike, Iterable[PathLike]]
Globs = Union[str, Iterable[str]]
# OLD -> NEW pairs: a mapping or (old, new) tuples, applied in their order.
Renames = Union[Mapping[str, str], Iterable[Tuple[str, str]]]

_ERROR_PREFIX = "machofix: error: "


def _paths(paths: Paths) -> List[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    listed = [os.fspath(path) for path in paths]
    if not listed:
        raise MachofixError("no paths given", 2)
    return listed


# Options are written --name=VALUE: a value is never taken for a path or an option,
# and a path is never taken for one more value of a repeatable option.
def _repeated(option: str, values: Optional[Globs]) -> List[str]:
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    return [f"{option}={value}" for value in values]


def _repeated_paths(option: str, values: "Optional[Union[PathLike, Sequence[PathLike]]]") -> List[str]:
    if values is None:
        return []
    if isinstance(values, (str, os.PathLike)):
        values = [values]
    return [f"{option}={os.fspath(value)}" for value in values]


def _flag(option: str, wanted: bool) -> List[str]:
    return [option] if wanted else []


def _valued(option: str, value: "Optional[Union[PathLike, int]]") -> List[str]:
    return [] if value is None else [f"{option}={value if isinstance(value, int) else os.fspath(value)}"]


def _pairs(option: str, values: Optional[Renames]) -> List[str]:
    """OLD NEW options (--change, --rpath): the NEW word follows --option=OLD."""
    if values is None:
        return []
    pairs = values.items() if isinstance(values, Mapping) else values
    return [word for old, new in pairs for word in (f"{option}={old}", new)]


def _check_options(*, provided: Optional[Globs] = None, allow_prefix: Optional[Globs] = None,
                   forbid: Optional[Globs] = None, allowed_rpath: Optional[Globs] = None, required: Optional[Globs] = None,
                   contract: Optional[PathLike] = None, no_contract: bool = False, sarif: Optional[PathLike] = None,
                   keep: Optional[Globs] = None, only: Optional[Globs] = None, app: Optional[PathLike] = None,
                   sysroot: Optional[PathLike] = None, min_macos: Optional[str] = None, arch: Optional[Globs] = None,
                   ptd: "Optional[Union[PathLike, Sequence[PathLike]]]" = None, levels: Optional[Dict[str, str]] = None,
                   warnings_as_errors: bool = False, load_as: Optional[str] = None) -> List[str]:
    """What a file is held to: the options `check` and `fix` share."""
    return (_repeated("--provided", provided) + _repeated("--allow-prefix", allow_prefix) +
            _repeated("--forbid", forbid) + _repeated("--allowed-rpath", allowed_rpath) +
            _repeated("--required", required) + _valued("--contract", contract) +
            _flag("--no-contract", no_contract) + _valued("--sarif", sarif) + _repeated("--keep", keep) +
            _repeated("--only", only) + _valued("--app", app) + _valued("--sysroot", sysroot) +
            _valued("--min-macos", min_macos) + _repeated("--arch", arch) + _repeated_paths("--ptd", ptd) +
            _repeated("--level", [f"{rule}={level}" for rule, level in (levels or {}).items()]) +
            _flag("--warnings-as-errors", warnings_as_errors) + _valued("--load-as", load_as))


def _message(stderr: str) -> str:
    """machofix's error lines, without their prefix; all of stderr if none is marked."""
    errors = [line[len(_ERROR_PREFIX):] for line in stderr.splitlines() if line.startswith(_ERROR_PREFIX)]
    return "\n".join(errors) if errors else stderr.strip()


def _failure(result: "subprocess.CompletedProcess[bytes]", report: Optional[Report]) -> MachofixError:
    stderr = result.stderr.decode(errors="replace")
    if result.returncode < 0:
        return MachofixError(f"machofix was ended by signal {-result.returncode}\n{stderr}".strip(), result.returncode, report)
    return MachofixError(_message(stderr) or f"machofix exited with status {result.returncode}", result.returncode, report)


class Machofix:
    """machofix's commands, run with one executable.

    `executable`: a machofix executable to run instead of the one this package
    carries (also: $MACHOFIX_EXECUTABLE). The module-level functions use the default.
    """

    def __init__(self, executable: Optional[PathLike] = None) -> None:
        self._named = os.fspath(executable) if executable is not None else None

    @property
    def executable(self) -> str:
        return find_executable(self._named)

    def run(self, arguments: Sequence[str], data: Optional[bytes] = None) -> "subprocess.CompletedProcess[bytes]":
        """machofix ARGUMENTS, `data` on its standard input (else none), output captured."""
        command = [self.executable, *arguments]
        try:
            if data is None:
                return subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True)
            return subprocess.run(command, input=data, capture_output=True)
        except OSError as error:
            raise MachofixError(f"cannot run {command[0]}: {error.strerror}", 127) from None

    def _report(self, command: str, options: List[str], paths: Paths, accepted: Sequence[int]) -> Report:
        # "--": a path that starts with "-" stays a path.
        result = self.run([command, "--json=-", *options, "--", *_paths(paths)])
        report = None
        if result.stdout.strip():
            try:
                report = from_json(Report, json.loads(result.stdout), exit_status=result.returncode)
            except (ValueError, TypeError, KeyError) as error:
                raise MachofixError(f"machofix wrote a report this package cannot read: {error}", 2) from None
        if result.returncode not in accepted or report is None:
            raise _failure(result, report)
        return report

    def inspect(self, paths: Paths, *, keep: Optional[Globs] = None, only: Optional[Globs] = None,
                jobs: Optional[int] = None) -> Report:
        """What `machofix inspect` shows: every slice's dylibs, what each supplies, which
        ones prune would remove, the signature; for .pte/.ptd files their contents."""
        options = _repeated("--keep", keep) + _repeated("--only", only) + _valued("--jobs", jobs)
        return self._report("inspect", options, paths, (0,))

    def check(self, paths: Paths, *, provided: Optional[Globs] = None, allow_prefix: Optional[Globs] = None,
              forbid: Optional[Globs] = None, allowed_rpath: Optional[Globs] = None, required: Optional[Globs] = None,
              contract: Optional[PathLike] = None, no_contract: bool = False, sarif: Optional[PathLike] = None,
              keep: Optional[Globs] = None, only: Optional[Globs] = None, jobs: Optional[int] = None,
              app: Optional[PathLike] = None, sysroot: Optional[PathLike] = None, min_macos: Optional[str] = None,
              arch: Optional[Globs] = None, ptd: Optional[Union[PathLike, Sequence[PathLike]]] = None,
              levels: Optional[Dict[str, str]] = None, warnings_as_errors: bool = False,
              no_app: bool = False, load_as: Optional[str] = None) -> Report:
        """The CI gate. Findings are a result (`report.findings`, `report.ok` false),
        not an error: only machofix's errors (exit 2, a malformed contract file
        included) raise. `forbid`: globs no dependency may match (install name or its
        last component), used or not. `provided`: install names the application
        ships; `allowed_rpath`: LC_RPATH values it accepts; `required`: libraries that
        must not be weak-linked. `contract`: a contract file (TOML) instead of the
        machofix.toml found beside the models; `no_contract`: read none. `sarif`:
        also write the findings as SARIF 2.1.0 to that file. `app`: load every model
        in this application (an .app bundle, an executable, or a directory of its
        libraries) as dyld would: library-not-loaded, symbol-not-found, and each
        slice's load in `report.app_checks`; `sysroot`: where the system's libraries
        are (an SDK's stubs or a copy of a Mac's). `min_macos`, `arch`: the targets
        (min-macos, arch-missing). `ptd`: the .ptd files the application passes
        with the models (their weights). `levels`: {rule id: "error" | "warning" |
        "note" | "off"}; `warnings_as_errors`: every warning fails the gate. An .app
        bundle among `paths` is checked as that application (as `app`) unless
        `no_app`. `load_as`: "file" (a plain Mach-O is dlopen()ed from where it
        lies, the default) or "blob" (written to a temporary directory first, as
        ExecuTorch loads a .pte's .so)."""
        options = _check_options(provided=provided, allow_prefix=allow_prefix, forbid=forbid,
                                 allowed_rpath=allowed_rpath, required=required, contract=contract,
                                 no_contract=no_contract, sarif=sarif, keep=keep, only=only, app=app, sysroot=sysroot,
                                 min_macos=min_macos, arch=arch, ptd=ptd, levels=levels,
                                 warnings_as_errors=warnings_as_errors, load_as=load_as) + _flag("--no-app", no_app)
        return self._report("check", options + _valued("--jobs", jobs), paths, (0, 1))

    def verify(self, paths: Paths, *, jobs: Optional[int] = None) -> Report:
        """Every slice's signature checked; `report.ok` is false if one is invalid (or an
        arm64 slice unsigned), each slice's `signature.problems` says why."""
        return self._report("verify", _valued("--jobs", jobs), paths, (0, 1))

    def prune(self, paths: Paths, *, in_place: bool = False, output: Optional[PathLike] = None, dry_run: bool = False,
              only: Optional[Globs] = None, keep: Optional[Globs] = None, backup: Optional[str] = None,
              sign: bool = False, adhoc: bool = False, resign_invalid: bool = False,
              jobs: Optional[int] = None) -> Report:
        """Removes the dylibs that supply no symbol: `in_place=True`, or into `output` (a
        file for one input file, else a directory mirroring the inputs), or `dry_run`."""
        options = (_flag("--in-place", in_place) + _valued("--output", output) + _flag("--dry-run", dry_run) +
                   _repeated("--only", only) + _repeated("--keep", keep) + _valued("--backup", backup) +
                   _flag("--sign", sign) + _flag("--adhoc", adhoc) + _flag("--resign-invalid", resign_invalid) +
                   _valued("--jobs", jobs))
        return self._report("prune", options, paths, (0,))

    def edit(self, paths: Paths, *, in_place: bool = False, output: Optional[PathLike] = None, dry_run: bool = False,
             change: Optional[Renames] = None, id: Optional[str] = None, add_rpath: Optional[Globs] = None,
             delete_rpath: Optional[Globs] = None, rpath: Optional[Renames] = None, weak_link: Optional[Globs] = None,
             backup: Optional[str] = None, adhoc: bool = False, resign_invalid: bool = False,
             jobs: Optional[int] = None, delete_duplicate_rpaths: bool = False) -> Report:
        """install_name_tool's edits in every container (thin, universal, the .so inside a
        .pte/.ptd, archives), re-signed, keys renewed: `change` {OLD glob: NEW install
        name}, `id` (a dylib's own name), `add_rpath`, `delete_rpath` (globs), `rpath`
        {OLD: NEW}, `weak_link` (globs: the dependency becomes LC_LOAD_WEAK_DYLIB and its
        imports weak), `delete_duplicate_rpaths` (every LC_RPATH repeating an earlier
        one). Each slice's edits are in `slice.edits`."""
        options = (_flag("--in-place", in_place) + _valued("--output", output) + _flag("--dry-run", dry_run) +
                   _pairs("--change", change) + _valued("--id", id) + _repeated("--add-rpath", add_rpath) +
                   _repeated("--delete-rpath", delete_rpath) + _pairs("--rpath", rpath) +
                   _repeated("--weak-link", weak_link) + _valued("--backup", backup) + _flag("--adhoc", adhoc) +
                   _flag("--resign-invalid", resign_invalid) + _valued("--jobs", jobs) +
                   _flag("--delete-duplicate-rpaths", delete_duplicate_rpaths))
        return self._report("edit", options, paths, (0,))

    def sign(self, paths: Paths, *, in_place: bool = False, output: Optional[PathLike] = None,
             identifier: Optional[str] = None, adhoc: bool = False, resign_invalid: bool = False,
             jobs: Optional[int] = None) -> Report:
        """Re-signs ad hoc (keeping the signature's structure); signs unsigned slices."""
        options = (_flag("--in-place", in_place) + _valued("--output", output) + _valued("--identifier", identifier) +
                   _flag("--adhoc", adhoc) + _flag("--resign-invalid", resign_invalid) + _valued("--jobs", jobs))
        return self._report("sign", options, paths, (0,))

    def repair_bytes(self, data: bytes, *, only: Optional[Globs] = None, keep: Optional[Globs] = None,
                     sign: bool = False, adhoc: bool = False, resign_invalid: bool = False) -> bytes:
        """`prune` of a .pte, .ptd or Mach-O image held in memory (`program.buffer`, or the
        .so bytes a backend is about to store): the repaired bytes, verified, or the
        same bytes when nothing needs to change."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"repair_bytes takes bytes, not {type(data).__name__}")
        options = (_repeated("--only", only) + _repeated("--keep", keep) + _flag("--sign", sign) +
                   _flag("--adhoc", adhoc) + _flag("--resign-invalid", resign_invalid))
        result = self.run(["-q", "prune", *options, "--output=-", "--", "-"], data=bytes(data))
        if result.returncode != 0:
            raise _failure(result, None)
        return result.stdout


    def fix(self, paths: Paths, *, in_place: bool = False, output: Optional[PathLike] = None, dry_run: bool = False,
            backup: Optional[str] = None, sign: bool = False, adhoc: bool = False, jobs: Optional[int] = None,
            **held_to: Any) -> Report:
        """`machofix fix` (docs/commands/fix.md): for every error `check` reports with the
        same options (`held_to`: check's keywords, app=, sysroot=, provided=, contract=,
        levels=, ...), the least edit that removes it; a file is written (`in_place`, into
        `output`, or not at all with `dry_run`) only if its repaired form passes check.
        `report.ok` is false when some file was left unwritten; each file's `fix` lists
        its edits (each with the rule it removes), refusals and the findings left."""
        options = (_flag("--in-place", in_place) + _valued("--output", output) + _flag("--dry-run", dry_run) +
                   _valued("--backup", backup) + _flag("--sign", sign) + _flag("--adhoc", adhoc) +
                   _valued("--jobs", jobs) + _check_options(**held_to))
        return self._report("fix", options, paths, (0, 1))

    def fix_bytes(self, data: bytes, *, sign: bool = False, adhoc: bool = False, **held_to: Any) -> bytes:
        """`fix` of a .pte, .ptd or Mach-O image held in memory, checked as a blob (as
        ExecuTorch loads a .pte's .so): the repaired bytes, which pass check with the same
        options, or the same bytes when nothing needs to change. Raises MachofixError
        (status 1, with the report) when the repaired form would still fail check."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"fix_bytes takes bytes, not {type(data).__name__}")
        options = _flag("--sign", sign) + _flag("--adhoc", adhoc) + _check_options(**held_to)
        with tempfile.TemporaryDirectory(prefix="machofix-") as directory:
            report_path = os.path.join(directory, "report.json")
            result = self.run(["-q", "fix", *options, f"--json={report_path}", "--output=-", "--", "-"],
                              data=bytes(data))
            report = None
            try:
                with open(report_path) as handle:
                    report = from_json(Report, json.load(handle), exit_status=result.returncode)
            except (OSError, ValueError, TypeError, KeyError):
                pass
        if result.returncode == 1 and report is not None:
            left = [f"{f.message} [{f.rule}]" for f in report.findings if f.level == "error" and not f.reported_with]
            refused = [f"cannot fix {r.rule} {r.subject}: {r.reason}" for file in report.files if file.fix
                       for r in file.fix.refusals]
            raise MachofixError("\n".join(["the repaired bytes would still fail check:", *refused, *left]), 1, report)
        if result.returncode != 0:
            raise _failure(result, report)
        return result.stdout


_default = Machofix()


def inspect(paths: Paths, *, keep: Optional[Globs] = None, only: Optional[Globs] = None,
            jobs: Optional[int] = None) -> Report:
    return _default.inspect(paths, keep=keep, only=only, jobs=jobs)


def check(paths: Paths, *, provided: Optional[Globs] = None, allow_prefix: Optional[Globs] = None,
          forbid: Optional[Globs] = None, allowed_rpath: Optional[Globs] = None, required: Optional[Globs] = None,
          contract: Optional[PathLike] = None, no_contract: bool = False, sarif: Optional[PathLike] = None,
          keep: Optional[Globs] = None, only: Optional[Globs] = None, jobs: Optional[int] = None,
          app: Optional[PathLike] = None, sysroot: Optional[PathLike] = None, min_macos: Optional[str] = None,
          arch: Optional[Globs] = None, ptd: Optional[Union[PathLike, Sequence[PathLike]]] = None,
          levels: Optional[Dict[str, str]] = None, warnings_as_errors: bool = False, no_app: bool = False,
          load_as: Optional[str] = None) -> Report:
    return _default.check(paths, provided=provided, allow_prefix=allow_prefix, forbid=forbid,
                          allowed_rpath=allowed_rpath, required=required, contract=contract, no_contract=no_contract,
                          sarif=sarif, keep=keep, only=only, jobs=jobs, app=app, sysroot=sysroot, min_macos=min_macos,
                          arch=arch, ptd=ptd, levels=levels, warnings_as_errors=warnings_as_errors, no_app=no_app,
                          load_as=load_as)


def verify(paths: Paths, *, jobs: Optional[int] = None) -> Report:
    return _default.verify(paths, jobs=jobs)


def prune(paths: Paths, *, in_place: bool = False, output: Optional[PathLike] = None, dry_run: bool = False,
          only: Optional[Globs] = None, keep: Optional[Globs] = None, backup: Optional[str] = None,
          sign: bool = False, adhoc: bool = False, resign_invalid: bool = False, jobs: Optional[int] = None) -> Report:
    return _default.prune(paths, in_place=in_place, output=output, dry_run=dry_run, only=only, keep=keep,
                          backup=backup, sign=sign, adhoc=adhoc, resign_invalid=resign_invalid, jobs=jobs)


def edit(paths: Paths, *, in_place: bool = False, output: Optional[PathLike] = None, dry_run: bool = False,
         change: Optional[Renames] = None, id: Optional[str] = None, add_rpath: Optional[Globs] = None,
         delete_rpath: Optional[Globs] = None, rpath: Optional[Renames] = None, weak_link: Optional[Globs] = None,
         backup: Optional[str] = None, adhoc: bool = False, resign_invalid: bool = False,
         jobs: Optional[int] = None, delete_duplicate_rpaths: bool = False) -> Report:
    return _default.edit(paths, in_place=in_place, output=output, dry_run=dry_run, change=change, id=id,
                         add_rpath=add_rpath, delete_rpath=delete_rpath, rpath=rpath, weak_link=weak_link, backup=backup,
                         adhoc=adhoc, resign_invalid=resign_invalid, jobs=jobs,
                         delete_duplicate_rpaths=delete_duplicate_rpaths)


def sign(paths: Paths, *, in_place: bool = False, output: Optional[PathLike] = None, identifier: Optional[str] = None,
         adhoc: bool = False, resign_invalid: bool = False, jobs: Optional[int] = None) -> Report:
    return _default.sign(paths, in_place=in_place, output=output, identifier=identifier, adhoc=adhoc,
                         resign_invalid=resign_invalid, jobs=jobs)


def fix(paths: Paths, *, in_place: bool = False, output: Optional[PathLike] = None, dry_run: bool = False,
        backup: Optional[str] = None, sign: bool = False, adhoc: bool = False, jobs: Optional[int] = None,
        **held_to: Any) -> Report:
    return _default.fix(paths, in_place=in_place, output=output, dry_run=dry_run, backup=backup, sign=sign, adhoc=adhoc,
                        jobs=jobs, **held_to)


def fix_bytes(data: bytes, *, sign: bool = False, adhoc: bool = False, **held_to: Any) -> bytes:
    return _default.fix_bytes(data, sign=sign, adhoc=adhoc, **held_to)


def repair_bytes(data: bytes, *, only: Optional[Globs] = None, keep: Optional[Globs] = None, sign: bool = False,
                 adhoc: bool = False, resign_invalid: bool = False) -> bytes:
    return _default.repair_bytes(data, only=only, keep=keep, sign=sign, adhoc=adhoc, resign_invalid=resign_invalid)


for _function in (inspect, check, verify, prune, edit, sign, repair_bytes, fix, fix_bytes):
    _function.__doc__ = getattr(Machofix, _function.__name__).__doc__
