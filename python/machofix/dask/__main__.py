"""`python3 -m machofix.dask`: a machofix command over model stores on a Dask cluster.

    python3 -m machofix.dask --scheduler tcp://HOST:8786 prune --only='*libomp*' -o /shared/out /shared/models
    python3 -m machofix.dask --scheduler-file scheduler.json check --json=report.json /shared/models

After the cluster's options, machofix's command and options as its command line takes
them (a value joined with "=", or after -o, --output, --json, -j, --jobs), then the
paths (or "--" and the paths). The tasks' reports are merged into one (--json), the
summary line and machofix's messages are printed, and the exit status is a local
run's. --sarif is not merged on Dask; standard input and output are refused.
"""
import argparse
import json
import sys
from typing import List, Tuple

from .._error import MachofixError
from . import Machofix

_VALUED = {"-o": "--output", "--output": "--output", "--json": "--json", "-j": "--jobs", "--jobs": "--jobs"}


def split_arguments(words: List[str]) -> Tuple[List[str], List[str]]:
    """machofix's options (each --name=VALUE or a flag) and the paths."""
    options: List[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--":
            return options, words[index + 1:]
        if word in _VALUED and index + 1 < len(words):
            options.append(f"{_VALUED[word]}={words[index + 1]}")
            index += 2
            continue
        if word == "--json":  # its value may be left out: standard output
            options.append("--json=-")
        elif word.startswith("-") and word != "-":
            options.append(word)
        else:
            return options, words[index:]
        index += 1
    return options, []


def summary_line(summary: dict) -> str:
    return (f"{summary['files']} files: {summary['changed']} changed, {summary['unchanged']} unchanged, "
            f"{summary['skipped']} skipped, {summary['failed']} failed; {summary['dylibs_removed']} dylibs removed; "
            f"{summary['bytes_written']} bytes written")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python3 -m machofix.dask", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--scheduler", metavar="ADDRESS", help="the scheduler's address, e.g. tcp://10.0.0.1:8786")
    where.add_argument("--scheduler-file", metavar="FILE", help="the file `dask scheduler --scheduler-file` wrote")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=sys.stderr.isatty(),
                        help="distributed's progress bar (default: when stderr is a terminal)")
    parser.add_argument("--dashboard", action="store_true", help="print the scheduler's dashboard address (it needs bokeh)")
    parser.add_argument("--retries", type=int, default=0, help="tries again of a task that fails (a dead worker's are retried anyway)")
    parser.add_argument("command", choices=["inspect", "check", "verify", "prune", "edit", "sign", "fix"])
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="machofix's options, then the paths")
    settings = parser.parse_args()
    options, paths = split_arguments(settings.arguments)
    if not paths:
        parser.error("no paths given")
    from distributed import Client
    client = Client(settings.scheduler) if settings.scheduler else Client(scheduler_file=settings.scheduler_file)
    try:
        if settings.dashboard:
            link = client.dashboard_link if client.scheduler_info().get("services", {}).get("dashboard") else None
            print(f"machofix.dask: dashboard: {link}" if link else
                  "machofix.dask: the scheduler serves no dashboard: it needs bokeh (Debian 12 does not package it; "
                  "pip install bokeh beside distributed, then start the scheduler again)", file=sys.stderr)
        json_target = next((o.split("=", 1)[1] for o in options if o.startswith("--json=")), None)
        cluster = Machofix(client, progress=settings.progress, retries=settings.retries)
        report, status = cluster.run_report(settings.command, options, paths)
    except MachofixError as error:
        print(f"machofix: error: {error.message}", file=sys.stderr)
        return error.status if error.status in (1, 2) else 2
    finally:
        client.close()
    for message in cluster.messages:
        print(message, file=sys.stderr)
    text = json.dumps(report, indent=2) + "\n"
    if json_target == "-":
        sys.stdout.write(text)
    else:
        if json_target:
            with open(json_target, "w") as handle:
                handle.write(text)
        print(summary_line(report["summary"]))
    return status


if __name__ == "__main__":
    sys.exit(main())
