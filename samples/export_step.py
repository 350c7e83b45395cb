#!/usr/bin/env python3
"""The step to run right after an ExecuTorch export: gate, repair, gate again.

In an export script, after the program is written:

    from executorch.exir import to_edge_transform_and_lower
    ...
    with open("model.pte", "wb") as f:
        executorch_program.write_to_file(f)
    repair_exported_models(["model.pte"])          # this file's function

or from a shell / CI job:

    python3 samples/export_step.py exports/ --machofix build/machofix

What it does: `machofix check` on the files. Clean (exit 0): done. Findings
(exit 1): `machofix prune --in-place` (every unused dependency removed, signatures
renewed, content-hash keys renewed), then `check` again: what remains cannot be
repaired by removing libraries (a library that is really used but lives at an
absolute path outside the system, say) and fails the step. Errors (exit 2) fail
it at once. Nothing here knows about Mach-O or .pte: machofix does the work.
"""
import argparse
import shutil
import subprocess
import sys


class ExportStepError(RuntimeError):
    """The exported models are not fit to ship; the message says why."""


def _machofix(machofix, *arguments):
    return subprocess.run([machofix, *arguments], capture_output=True, text=True)


def repair_exported_models(paths, machofix="machofix", allow_prefixes=(), keep=(), only=("*libomp*",)):
    """Checks and repairs the given .pte/.ptd files or directories in place.

    `only` limits removals to libraries known to be spurious (PyTorch's libomp by
    default); pass () to remove every unused library. Returns the check output of
    the final, clean run; raises ExportStepError otherwise.
    """
    if shutil.which(machofix) is None:
        raise ExportStepError(f"machofix not found ({machofix}); build it or pass its path")
    gate = [*paths]
    for prefix in allow_prefixes:
        gate += ["--allow-prefix", prefix]
    policy = [argument for glob in keep for argument in ("--keep", glob)]
    policy += [argument for glob in only for argument in ("--only", glob)]
    first = _machofix(machofix, "check", *gate, *policy)
    if first.returncode == 0:
        return first.stdout
    if first.returncode != 1:
        raise ExportStepError(f"machofix check failed:\n{first.stderr}")
    repair = _machofix(machofix, "prune", "--in-place", *paths, *policy)
    if repair.returncode != 0:
        raise ExportStepError(f"machofix prune failed:\n{repair.stdout}{repair.stderr}")
    second = _machofix(machofix, "check", *gate, *policy)
    if second.returncode != 0:
        raise ExportStepError(f"still not fit to ship after the repair:\n{second.stdout}{second.stderr}")
    return first.stdout + repair.stdout + second.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help=".pte/.ptd files or directories written by the export")
    parser.add_argument("--machofix", default="machofix", help="the machofix executable")
    parser.add_argument("--allow-prefix", action="append", default=[], help="absolute install-name prefix to accept")
    parser.add_argument("--keep", action="append", default=[], help="never remove libraries matching GLOB")
    parser.add_argument("--only", action="append", default=None,
                        help="remove only unused libraries matching GLOB (default: *libomp*); --only '*' for all")
    arguments = parser.parse_args()
    try:
        print(repair_exported_models(arguments.paths, arguments.machofix, arguments.allow_prefix, arguments.keep,
                                     arguments.only if arguments.only is not None else ("*libomp*",)), end="")
    except ExportStepError as error:
        print(f"export step: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
