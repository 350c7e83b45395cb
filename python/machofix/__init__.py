"""machofix for Python: removes the dylib dependencies a Mach-O file does not need, in
plain Mach-O files and in the .so that ExecuTorch's Metal backend stores in .pte
models, renumbering every library ordinal, re-signing, renewing content-hash keys.

    import machofix
    machofix.prune("model.pte", in_place=True, only="*libomp*")
    machofix.edit("cpu_model.pte", in_place=True, change={"/opt/llvm-openmp/lib/libomp.dylib": "@rpath/libomp.dylib"})
    if not machofix.check("model.pte").ok: ...
    machofix.fix("model.pte", in_place=True, app="MyApp.app")  # the least edits that make it load there

Each function runs the machofix executable this package carries and returns its JSON
report as typed objects (machofix._report); errors raise MachofixError.
"""
from ._api import (Globs, Machofix, Paths, Renames, check, edit, fix, fix_bytes, inspect, prune, repair_bytes, sign,
                   verify)
from ._error import MachofixError
from ._executable import find_executable
from ._report import (AotiKeys, BlobReport, BuildTarget, DelegateReport, DylibReport, FileReport, Finding, FixEdit,
                      FixOutcome, FixRefusal, KeyRenewal,
                      LoaderRuleViolation, MachOReport, NamedDataReport, PteReport, Report, RpathReport, SignatureReport,
                      SliceReport, Summary)

try:
    from importlib.metadata import version as _version

    __version__ = _version("machofix")
except Exception:  # the sources, not installed (or a build writing their egg-info right now)
    __version__ = "unknown"

__all__ = [
    "inspect", "check", "verify", "prune", "edit", "sign", "repair_bytes", "fix", "fix_bytes", "Machofix", "MachofixError", "find_executable",
    "Report", "FileReport", "MachOReport", "SliceReport", "DylibReport", "SignatureReport", "PteReport",
    "DelegateReport", "AotiKeys", "NamedDataReport", "BlobReport", "KeyRenewal", "Summary", "Finding", "Paths", "Globs",
    "Renames", "LoaderRuleViolation", "RpathReport", "BuildTarget", "FixEdit", "FixRefusal", "FixOutcome",
]
