#!/usr/bin/env python3
"""The step to run in, or right after, an ExecuTorch export: gate, repair, gate again.

Best, inside the export (docs/export-step.md): the Metal backend's .so is checked and
repaired before ExecuTorch keys and signs it, so the .pte is born correct:

    import machofix.executorch
    with machofix.executorch.export_step(forbid=["*omp*"]):
        program = to_edge_transform_and_lower(exported, partitioner=[...]).to_executorch()
    program.write_to_file(f)

After the export, with the machofix package installed (pip install machofix-*.whl):

    import machofix
    program = edge.to_executorch()
    with open("model.pte", "wb") as f:
        f.write(machofix.repair_bytes(program.buffer, only="*libomp*"))

or, for files already written, this file's function:

    repair_exported_models(["model.pte"])

or from a shell / CI job:

    python3 samples/export_step.py exports/ [--machofix build/machofix] [--forbid '*omp*']
        [--contract machofix.toml] [--provided '@rpath/libomp.dylib']
        [--app MyApp.app [--sysroot MacOSX.sdk]] [--min-macos 13.0] [--arch arm64]

What it does: `machofix check` on the files. Clean: done. Findings: `machofix prune
--in-place` (every unused dependency removed, signatures renewed, content-hash keys
renewed), then `check` again: what remains cannot be repaired by removing libraries
(a library that is really used but lives at an absolute path outside the system,
say) and fails the step. `--forbid GLOB` makes any dependency on a matching library
a finding, used or not, under any install name (`--forbid '*omp*'`: no OpenMP
runtime at all); an unused one is removed by the repair, a used one fails the step.
A contract (`--contract FILE`, else a machofix.toml beside the models; docs/contract.md) and `--provided GLOB` declare what the application ships, so that
@rpath libraries it does not ship, build-machine rpaths and weak links to required
libraries fail the step too. `--app APP` loads every model in the application as
dyld would (docs/app-check.md): a library it does not find or a symbol no library
exports fails the step, exactly as the model would fail in the app; `--sysroot`
says where the system's libraries are, `--min-macos` and `--arch` the targets.
Errors fail it at once. Nothing here knows about Mach-O or
.pte: machofix does the work.

Without the package installed, the package's sources beside this file (../python)
are used with a machofix executable on the PATH (or --machofix).
"""
import argparse
import os
import shutil
import sys

try:
    import machofix
except ImportError:  # not installed: the sources in this repository, run with an executable found below
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import machofix


class ExportStepError(RuntimeError):
    """The exported models are not fit to ship; the message says why."""


def _tool(executable):
    """The machofix to run: `executable`, else the package's own, else one on the PATH."""
    if executable is None:
        try:
            machofix.find_executable()
            return machofix.Machofix()
        except machofix.MachofixError:
            executable = shutil.which("machofix")
    if executable is None:
        raise ExportStepError("no machofix executable: install the machofix wheel, or build it and pass its path")
    return machofix.Machofix(executable)


def _findings(report):
    return "".join(f"{finding.file}: {finding.message} [{finding.rule}]\n" for finding in report.findings)


def repair_exported_models(paths, machofix_executable=None, allow_prefixes=(), keep=(), only=("*libomp*",),
                           forbid=(), provided=(), contract=None, app=None, sysroot=None, min_macos=None, arch=()):
    """Checks and repairs the given .pte/.ptd files or directories in place.

    `only` limits removals to libraries known to be spurious (PyTorch's libomp by
    default); pass () to remove every unused library. `forbid`: globs no dependency
    may match, used or not. `provided`: install names the application ships;
    `contract`: a contract file (default: a machofix.toml found beside the models).
    `app`: the application the models must load in (`sysroot`: where the system's
    libraries are); `min_macos`, `arch`: the targets. Returns a summary of what was done; raises
    ExportStepError when the models are not fit to ship.
    """
    tool = _tool(machofix_executable)
    policy = {"keep": list(keep), "only": list(only)}
    gate = {"allow_prefix": list(allow_prefixes), "forbid": list(forbid), "provided": list(provided),
            "contract": contract, "app": app, "sysroot": sysroot, "min_macos": min_macos, "arch": list(arch), **policy}
    try:
        first = tool.check(paths, **gate)
        if first.ok:
            return f"machofix check: {first.summary.files} files, no finding\n"
        repair = tool.prune(paths, in_place=True, **policy)
        second = tool.check(paths, **gate)
    except machofix.MachofixError as error:
        raise ExportStepError(f"machofix failed (exit status {error.status}):\n{error.message}") from None
    if not second.ok:
        raise ExportStepError(f"still not fit to ship after the repair:\n{_findings(second)}")
    return (f"{_findings(first)}machofix prune: {repair.summary.changed} files changed, "
            f"{repair.summary.dylibs_removed} dylibs removed; check clean\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help=".pte/.ptd files or directories written by the export")
    parser.add_argument("--machofix", help="a machofix executable (default: the package's, else one on the PATH)")
    parser.add_argument("--allow-prefix", action="append", default=[], help="absolute install-name prefix to accept")
    parser.add_argument("--keep", action="append", default=[], help="never remove libraries matching GLOB")
    parser.add_argument("--only", action="append", default=None,
                        help="remove only unused libraries matching GLOB (default: *libomp*); --only '*' for all")
    parser.add_argument("--forbid", action="append", default=[],
                        help="no dependency may match GLOB, used or not (e.g. '*omp*'); repeatable")
    parser.add_argument("--provided", action="append", default=[],
                        help="the application ships libraries with install names matching GLOB; repeatable")
    parser.add_argument("--contract", help="the contract file (default: a machofix.toml beside the models)")
    parser.add_argument("--app", help="the application the models must load in (.app bundle, executable or directory)")
    parser.add_argument("--sysroot", help="with --app: where the system's libraries are (an SDK or a copy of a Mac's)")
    parser.add_argument("--min-macos", help="the oldest macOS the application supports")
    parser.add_argument("--arch", action="append", default=[], help="an architecture every model must have")
    arguments = parser.parse_args()
    try:
        print(repair_exported_models(arguments.paths, arguments.machofix, arguments.allow_prefix, arguments.keep,
                                     arguments.only if arguments.only is not None else ("*libomp*",),
                                     arguments.forbid, arguments.provided, arguments.contract, arguments.app,
                                     arguments.sysroot, arguments.min_macos, arguments.arch), end="")
    except ExportStepError as error:
        print(f"export step: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
