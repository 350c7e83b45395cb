"""`python -m machofix ARGS...`: runs the executable the wheel installed (the `machofix`
command itself, which starts without Python) with the same arguments, streams and exit
status."""
import os
import subprocess
import sys

from ._error import MachofixError
from ._executable import find_executable


def main() -> None:
    try:
        executable = find_executable()
    except MachofixError as error:
        print(f"machofix: error: {error.message}", file=sys.stderr)
        sys.exit(2)
    arguments = ["machofix", *sys.argv[1:]]  # argv[0] as the help text should show it
    if os.name == "posix":
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            os.execv(executable, arguments)  # the same process: status and signals are machofix's own
        except OSError as error:
            print(f"machofix: error: cannot run {executable}: {error.strerror}", file=sys.stderr)
            sys.exit(2)
    sys.exit(subprocess.call([executable, *sys.argv[1:]]))


if __name__ == "__main__":
    main()
