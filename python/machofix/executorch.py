"""machofix as a step of ExecuTorch's AOTI export: the model is born correct.

ExecuTorch's `AotiBackend.preprocess` compiles a method into a `.so`, then calls the
class method `codesign_so(so_path, compile_specs)`, and only then reads the `.so`,
keys it by its sha256 and stores it in the program. This module wraps that seam: the
`.so` is checked and repaired there, before ExecuTorch keys it, so the `.pte` needs
no key renewal afterwards; ExecuTorch's own `codesign_so` still runs last, so a
`codesign_identity` signature is made over the repaired file.

    import machofix.executorch
    with machofix.executorch.export_step(forbid=["*omp*"], app="MyApp.app"):
        program = to_edge_transform_and_lower(exported, partitioner=[...]).to_executorch()

or `step = machofix.executorch.install(...)` and later `step.uninstall()`. Where
ExecuTorch carries the hook of patches/executorch/ (`register_so_hook`, called by
`AotiBackend.validate_so` just before `codesign_so`), the step registers there
instead of wrapping anything.

What happens to each `.so` at the seam: a file that is not Mach-O (CudaBackend's ELF)
is passed over with a note. A Mach-O file goes through `machofix fix` with the step's
options (those of `machofix check`): for each error check reports, the least edit that
removes it (an unused dependency removed, a libomp the model uses renamed to the one
`app` ships), written in place only if the result passes the same check (signature
renewed). What no edit removes (a used library the contract forbids, a model that will
not load in `app`) stops the export with ExportStepError, which carries the report and
says why. A file that needs nothing is not touched.

The `.so` at the seam is a file in Inductor's output directory; the runtime loads it
from a temporary directory. Checked here as the file it is: `@loader_path` resolves
beside it.
"""
import functools
import importlib
import inspect as _inspect
import logging
import threading
from typing import Any, Dict, List, Optional

from ._api import Globs, Machofix, PathLike
from ._error import MachofixError
from ._report import Finding, Report

_log = logging.getLogger("machofix.executorch")
_SEAM_MODULE = "executorch.backends.aoti.aoti_backend"
# Mach-O's magic numbers as they appear in a file's first four bytes: thin 64- and
# 32-bit (little-endian) and universal (big-endian, 32- and 64-bit offsets).
_MACHO_MAGICS = (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe", b"\xca\xfe\xba\xbf")


class ExportStepError(MachofixError):
    """The compiled `.so` cannot be made fit to ship, or the step cannot be installed.
    `report` is the last `check` report when there is one."""

    def __init__(self, message: str, report: Optional[Report] = None) -> None:
        super().__init__(message, 1, report)

    def __str__(self) -> str:
        return self.message


def _finding_line(finding: Finding) -> str:
    where = ": ".join(part for part in (finding.file, finding.blob, finding.arch) if part)
    return f"{where}: {finding.message} [{finding.rule}]"


def _is_macho(path: str) -> bool:
    with open(path, "rb") as file:
        return file.read(4) in _MACHO_MAGICS


def _executorch_version() -> str:
    try:
        from importlib.metadata import version
        return f"ExecuTorch {version('executorch')}"
    except Exception:  # sources on sys.path, no package metadata
        return "this ExecuTorch (no package metadata gives its version)"


def _seam_module() -> Any:
    """ExecuTorch's aoti_backend module, once it is shown to have a seam this step uses."""
    advice = ("machofix.executorch needs AotiBackend.codesign_so, which preprocess calls before it "
              "keys the .so (as at ExecuTorch commit cff6f4d), or the hook of machofix's "
              "patches/executorch; with another version, repair the written program instead: "
              "machofix.repair_bytes(program.buffer)")
    try:
        module = importlib.import_module(_SEAM_MODULE)
    except ImportError as error:
        raise ExportStepError(f"cannot import {_SEAM_MODULE} ({error}): {advice}") from None
    backend = getattr(module, "AotiBackend", None)
    if callable(getattr(module, "register_so_hook", None)):
        return module
    if backend is None or not isinstance(backend.__dict__.get("codesign_so"), classmethod):
        raise ExportStepError(f"{_executorch_version()} has no AotiBackend.codesign_so: {advice}")
    try:
        calls_seam = "cls.codesign_so(" in _inspect.getsource(backend.preprocess)
    except (OSError, TypeError):  # no source to read: the method's presence has to do
        calls_seam = True
    if not calls_seam:
        raise ExportStepError(f"{_executorch_version()}: AotiBackend.preprocess does not call codesign_so: {advice}")
    return module


def _subclasses(cls: type) -> List[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


class ExportStep:
    """The installed step; `uninstall()` puts ExecuTorch's methods back. `seam`: where
    it runs ("register_so_hook" or "codesign_so"); `repaired`, `passed_over`: the `.so`
    paths the step rewrote, and the ones it did not read (not Mach-O), in order."""

    def __init__(self, machofix: Machofix, check_options: Dict[str, Any]) -> None:
        self._machofix = machofix
        self._check_options = check_options
        self._restore: List[Any] = []
        self._active = threading.local()
        self.seam = ""
        self.repaired: List[str] = []
        self.passed_over: List[str] = []

    def repair(self, backend: type, so_path: str) -> None:
        """Checks SO_PATH and repairs it in place, or raises ExportStepError."""
        if not _is_macho(so_path):
            _log.info("%s: %s's .so is not Mach-O: passed over", so_path, backend.__name__)
            self.passed_over.append(so_path)
            return
        # `fix` checks it, makes the least edits that remove its errors and writes it
        # only if the result passes the same check; a file that passes is not touched.
        report = self._machofix.fix(so_path, in_place=True, **self._check_options)
        outcome = report.files[0].fix if report.files else None
        if not report.ok:
            refusals = [f"cannot fix {r.rule} {r.subject}: {r.reason}" for r in (outcome.refusals if outcome else [])]
            lines = "\n".join(refusals + [_finding_line(finding) for finding in report.findings
                                          if finding.level == "error" and not finding.reported_with])
            raise ExportStepError(f"{backend.__name__}: the compiled .so cannot be made fit to ship "
                                  f"(machofix fix: no edit makes it pass check):\n{lines}", report)
        if outcome and outcome.status == "fixed":
            self.repaired.append(so_path)
            edits = ", ".join(f"{e.edit} {e.old}" + (f" -> {e.new}" if e.new else "") for e in outcome.edits)
            _log.info("%s: repaired (%s; signature renewed)", so_path, edits)

    def _wrap(self, cls: type) -> None:
        original = cls.__dict__["codesign_so"]
        if not isinstance(original, classmethod):
            raise ExportStepError(f"{cls.__module__}.{cls.__qualname__}.codesign_so is not a class method: "
                                  "machofix.executorch cannot wrap it")
        step = self

        @functools.wraps(original.__func__)
        def codesign_so(klass: type, so_path: str, compile_specs: Any) -> Any:
            # A backend's own codesign_so may call its base's: repair once per call.
            if getattr(step._active, "path", None) != so_path:
                step._active.path = so_path
                try:
                    step.repair(klass, so_path)
                    return original.__func__(klass, so_path, compile_specs)
                finally:
                    step._active.path = None
            return original.__func__(klass, so_path, compile_specs)

        cls.codesign_so = classmethod(codesign_so)
        self._restore.append((cls, "codesign_so", original))

    def _install(self, module: Any) -> None:
        if callable(getattr(module, "register_so_hook", None)):
            self.seam = "register_so_hook"
            unregister = module.register_so_hook(lambda backend, so_path, _specs: self.repair(backend, so_path))
            self._restore.append((None, unregister, None))
            return
        self.seam = "codesign_so"
        base = module.AotiBackend
        for cls in [base, *_subclasses(base)]:
            if "codesign_so" in cls.__dict__:
                self._wrap(cls)
        # A backend defined later (its module imported after install) is wrapped as it is made.
        previous = base.__dict__.get("__init_subclass__")
        step = self

        def __init_subclass__(cls: type, **kwargs: Any) -> None:
            if previous is not None:
                # A classmethod, or the plain function typing_extensions' @deprecated
                # (ExecuTorch's @experimental) sets on the class it marks.
                getattr(previous, "__func__", previous)(cls, **kwargs)
            else:
                super(base, cls).__init_subclass__(**kwargs)
            if "codesign_so" in cls.__dict__:
                step._wrap(cls)

        base.__init_subclass__ = classmethod(__init_subclass__)
        self._restore.append((base, "__init_subclass__", previous))

    def uninstall(self) -> None:
        global _installed
        for cls, name, original in reversed(self._restore):
            if cls is None:
                name()  # the hook's unregister
            elif original is None:
                delattr(cls, name)
            else:
                setattr(cls, name, original)
        self._restore.clear()
        if _installed is self:
            _installed = None

    def __enter__(self) -> "ExportStep":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.uninstall()


_installed: Optional[ExportStep] = None


def install(*, contract: Optional[PathLike] = None, no_contract: bool = False, forbid: Optional[Globs] = None,
            provided: Optional[Globs] = None, allow_prefix: Optional[Globs] = None,
            allowed_rpath: Optional[Globs] = None, required: Optional[Globs] = None,
            app: Optional[PathLike] = None, sysroot: Optional[PathLike] = None, min_macos: Optional[str] = None,
            arch: Optional[Globs] = None, only: Optional[Globs] = None, keep: Optional[Globs] = None,
            executable: Optional[PathLike] = None) -> ExportStep:
    """Turns the step on for every AOTI backend, until `uninstall()`. The options are
    `machofix.check`'s (`only`/`keep` also limit what is removed); `executable`: a
    machofix executable instead of the package's own. Raises ExportStepError when the
    installed ExecuTorch has no such seam, or a step is already installed."""
    global _installed
    if _installed is not None:
        raise ExportStepError("machofix.executorch: a step is already installed; uninstall it first")
    module = _seam_module()
    # The .so lies in Inductor's output directory, but the runtime writes it to a
    # temporary directory and dlopen()s it there: it is checked as that blob.
    check_options = dict(contract=contract, no_contract=no_contract, forbid=forbid, provided=provided,
                         allow_prefix=allow_prefix, allowed_rpath=allowed_rpath, required=required, app=app,
                         sysroot=sysroot, min_macos=min_macos, arch=arch, only=only, keep=keep, load_as="blob")
    step = ExportStep(Machofix(executable), check_options)
    step._install(module)
    _installed = step
    return step


def export_step(**options: Any) -> ExportStep:
    """`install(**options)` as a context manager: `with export_step(...): ...export...`."""
    return install(**options)
