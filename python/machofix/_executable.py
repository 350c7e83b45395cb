"""Finding the machofix executable: the one this package carries, or another one named."""
import os
from typing import Optional, Union

from ._error import MachofixError

BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "machofix")


def find_executable(named: "Optional[Union[str, os.PathLike[str]]]" = None) -> str:
    """`named`, else $MACHOFIX_EXECUTABLE, else the executable in the wheel (machofix/_bin/).

    The wheel's executable finds its LIEF reader beside itself. There is no search
    of the PATH: the `machofix` found there may be this package's own entry point.
    """
    for candidate in (named, os.environ.get("MACHOFIX_EXECUTABLE")):
        if candidate:
            return os.fspath(candidate)
    if os.path.isfile(BUNDLED):
        return BUNDLED
    raise MachofixError(
        f"this machofix package carries no executable ({BUNDLED} is missing: installed from the sources without "
        "building a wheel?); set MACHOFIX_EXECUTABLE to a machofix executable", 127)
