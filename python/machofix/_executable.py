"""Finding the machofix executable: the one this package's wheel installed, or another one named."""
import os
from importlib import metadata
from typing import Optional, Union

from ._error import MachofixError

EXECUTABLE = "machofix"


def installed_executable() -> Optional[str]:
    """The executable the wheel installed as its script (bin/machofix of the same
    prefix: a venv's, ~/.local's, /usr/local's), found through the RECORD of the
    distribution, so that it is this package's own and not another `machofix` on the
    PATH; else, for `pip install --target DIR` (which moves the package but not the
    RECORD's relative paths), DIR/bin/machofix."""
    package = os.path.dirname(os.path.abspath(__file__))
    try:
        distribution = metadata.distribution("machofix")
        files = distribution.files or []
    except metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name == EXECUTABLE and len(file.parts) >= 2 and file.parts[-2] == "bin":
            path = os.path.abspath(os.fspath(distribution.locate_file(file)))
            if os.path.isfile(path):
                return path
    beside = os.path.join(os.path.dirname(package), "bin", EXECUTABLE)
    return beside if os.path.isfile(beside) else None


def find_executable(named: "Optional[Union[str, os.PathLike[str]]]" = None) -> str:
    """`named`, else $MACHOFIX_EXECUTABLE, else the executable the wheel installed.

    That executable finds its LIEF reader in ../lib/machofix/, where the wheel put it.
    There is no search of the PATH: the `machofix` found there may be another install's.
    """
    for candidate in (named, os.environ.get("MACHOFIX_EXECUTABLE")):
        if candidate:
            return os.fspath(candidate)
    installed = installed_executable()
    if installed:
        return installed
    raise MachofixError(
        "this machofix package has no executable installed beside it (the wheel installs bin/machofix; "
        "installed from the sources without building a wheel?); set MACHOFIX_EXECUTABLE to a machofix executable",
        127)
