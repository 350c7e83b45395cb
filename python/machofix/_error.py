"""The one exception machofix's Python API raises."""
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from ._report import Report


class MachofixError(Exception):
    """machofix failed: bad or refused input, an I/O error, a wrong combination of options.

    `message` is machofix's own (it names the file, the part and the byte offset),
    `status` its exit status (2; 127 when the executable cannot be run, negative
    when a signal ended it), `report` what it reported about the files it could
    process, when it got that far (with several files, one failing does not stop
    the others).
    """

    def __init__(self, message: str, status: int, report: "Optional[Report]" = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.report = report

    def __str__(self) -> str:
        return f"{self.message} (exit status {self.status})"
