#!/usr/bin/env python3
"""The benchmarks' timer (bench/run_timed.cc) through bench/run_benchmarks.py's run_once:
a known wall time, the peak RSS of a small and of a large process, exit statuses,
signals and a command that cannot start.

  test_run_timed.py RUN_TIMED
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import run_benchmarks  # noqa: E402

MIB = 1024  # ru_maxrss is in KiB


def refused(command, status=0):
    """The message run_once stops with, or None when it does not."""
    try:
        run_benchmarks.run_once(command, status=status)
    except SystemExit as stop:
        return str(stop)
    return None


def main():
    run_benchmarks.TIMER = sys.argv[1]
    problems = []
    seconds, _ = run_benchmarks.run_once(["sleep", "0.2"])
    if not 0.2 <= seconds < 1.0:
        problems.append(f"sleep 0.2 took {seconds:.3f} s by the timer")
    # A small process's peak is its own, not its caller's (a child spawned from this
    # Python process would report this process's 10-20 MiB).
    _, peak = run_benchmarks.run_once(["/bin/true"])
    if not 0 < peak < 8 * MIB:
        problems.append(f"/bin/true: peak {peak} KiB, not under 8 MiB")
    _, peak = run_benchmarks.run_once([sys.executable, "-c", "data = bytes(range(256)) * (1 << 18); print(len(data))"])
    if peak < 64 * MIB:
        problems.append(f"a process that holds 64 MiB: peak {peak} KiB")
    if refused(["sh", "-c", "exit 3"], status=3) is not None:
        problems.append("exit 3 where 3 was expected: refused")
    message = refused(["sh", "-c", "echo why >&2; exit 3"])
    if not message or "exit 3, not 0" not in message or "why" not in message:
        problems.append(f"exit 3 where 0 was expected: {message!r}")
    message = refused(["sh", "-c", "kill -TERM $$"])
    if not message or "exit 143, not 0" not in message:
        problems.append(f"killed by SIGTERM: {message!r}")
    message = refused(["/nonexistent/command"])
    if not message or "cannot run /nonexistent/command" not in message:
        problems.append(f"a command that cannot start: {message!r}")
    usage = subprocess.run([run_benchmarks.TIMER], capture_output=True, text=True)
    if usage.returncode != 2 or "usage" not in usage.stderr:
        problems.append(f"no command: exit {usage.returncode}, {usage.stderr!r}")
    for problem in problems:
        print(f"FAIL: {problem}")
    print(f"run_timed: {'ok' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
