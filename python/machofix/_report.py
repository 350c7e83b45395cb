"""machofix's JSON report (schema version 1, docs/json-report.md) as typed Python
objects: one frozen dataclass per JSON object, one field per key, same names.

Keys this version does not know (a later machofix may add some to schema 1) are
ignored; optional keys that are absent take their field's default (None, [], False).
"""
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional, Type, TypeVar, Union, get_args, get_origin, get_type_hints

FileKind = Literal["mach-o", "mach-o universal", "pte", "ptd", "archive", "elf", "other"]
FileStatus = Literal["changed", "unchanged", "would change", "inspected", "skipped", "failed"]
# Why a file failed: bad input, a refusal, an edit that does not apply, a rewrite that
# failed its proof, the system, or an internal error.
ErrorKind = Literal["malformed", "refused", "inapplicable", "proof-failed", "system", "internal"]
SignatureStatus = Literal["unsigned", "valid", "invalid", "renewed", "added", "replaced (ad hoc)"]
DylibKind = Literal["load", "weak", "reexport", "upward"]
BlobKind = Literal["mach-o", "mach-o universal", "elf", "other"]
EditKind = Literal["change", "id", "add-rpath", "delete-rpath", "rpath", "weak-link"]
EditStatus = Literal["applied", "already", "no match"]
Command = Literal["inspect", "prune", "sign", "edit", "verify", "check", "fix"]


@dataclass(frozen=True)
class SignatureReport:
    status: SignatureStatus
    style: str
    identifier: str
    hash_types: List[str]
    page_size: int
    problems: List[str]
    first_problem_offset: Optional[int]  # file offset of problems[0]
    notes: List[str]


@dataclass(frozen=True)
class DylibReport:
    ordinal: int
    install_name: str
    kind: DylibKind
    symbol_count: int
    symbols: List[str]  # the first 16
    sources: List[str]  # where the symbols were found
    removable: bool  # prune removes it (with the same --keep/--only)
    removed: bool  # removed from the file written (never in inspect, check, verify or a dry run)
    reason: str
    command_offset: int = 0  # file offset of its load command in the input


@dataclass(frozen=True)
class RpathReport:
    path: str
    command_offset: int  # file offset of the LC_RPATH in the input


@dataclass(frozen=True)
class BuildTarget:
    """An LC_BUILD_VERSION or LC_VERSION_MIN_*: what the image was built for."""
    platform: str  # "macOS", "iOS", "Mac Catalyst", ...
    min_os: str  # the minimum OS it declares, "11.0"
    sdk: Optional[str]  # the SDK it was linked against; None when none is recorded
    command_offset: int  # of its load command, from the start of the slice


@dataclass(frozen=True)
class LoaderRuleViolation:
    rule: str  # the rule's id, docs/loader-rules.md
    offset: int  # file offset of the offending bytes
    message: str


@dataclass(frozen=True)
class EditRecord:
    """One edit of `machofix edit` on a slice (the JSON's slices[].edits)."""
    kind: EditKind
    old: str
    new: str
    status: EditStatus


@dataclass(frozen=True)
class SliceReport:
    arch: str
    filetype: str
    offset: int
    size: int
    install_name: str
    flags: List[str]
    dylibs: List[DylibReport]
    flat_lookup_imports: int
    warnings: List[str]
    left_unchanged_because: str
    signature: SignatureReport
    changed: bool
    signature_after: Optional[SignatureReport]
    loader_rules: List[LoaderRuleViolation] = field(default_factory=list)  # the loader rules it breaks
    edits: List[EditRecord] = field(default_factory=list)  # `machofix edit` only; empty for the other commands
    rpaths: List[RpathReport] = field(default_factory=list)  # LC_RPATH in load-command order
    build_targets: List[BuildTarget] = field(default_factory=list)  # platform, minimum OS, SDK


@dataclass(frozen=True)
class MachOReport:
    universal: bool
    fat64: bool
    changed: bool
    slices: List[SliceReport]
    loader_rules: List[LoaderRuleViolation] = field(default_factory=list)  # universal header's, offsets in the file


@dataclass(frozen=True)
class AotiKeys:
    """The blob keys an AOTI backend (MetalBackend, CudaBackend) looks up, as
    ExecuTorch's runtime resolves them."""
    so_key: str
    weights_key: str
    weights_found: bool  # the backend goes without weights it cannot find


@dataclass(frozen=True)
class DelegateReport:
    method: str
    id: str
    location: Literal["inline", "segment"]
    index: int
    size: int
    keys: List[str]
    aoti: Optional[AotiKeys] = None  # AOTI backends only


@dataclass(frozen=True)
class NamedDataReport:
    key: str
    segment_index: int
    offset: int
    size: int
    kind: BlobKind
    content_hash_key: bool


@dataclass(frozen=True)
class KeyRenewal:
    old_key: str
    new_key: str
    renewed_in: List[str]


@dataclass(frozen=True)
class BlobReport:
    keys: List[str]
    segment_index: int
    offset: int
    size: int
    new_size: int
    sha256: str
    new_sha256: str
    changed: bool
    key_renewals: List[KeyRenewal]
    macho: MachOReport
    error: Optional[str] = None


@dataclass(frozen=True)
class PteReport:
    container: Literal["pte", "ptd"]
    file_size: int
    output_size: int
    methods: List[str]
    delegates: List[DelegateReport]
    named_data: List[NamedDataReport]
    blobs: List[BlobReport]
    warnings: List[str]
    changed: bool
    bytes_shared: int = 0  # copied bytes proven by the file system's extent map (a reflink clone), not compared


@dataclass(frozen=True)
class FixEdit:
    """One edit of `fix` (docs/commands/fix.md), with the finding's rule it removes."""

    edit: Literal["remove-dependency", "change", "delete-rpath", "delete-duplicate-rpaths"]
    old: str  # the install name, or the rpath
    new: str  # "change": the new install name
    removes: str  # the rule id of the finding it removes
    blob: str
    member: str
    arch: str


@dataclass(frozen=True)
class FixRefusal:
    """A finding `fix` has no safe edit for, and why (what to do)."""

    rule: str
    subject: str  # the dependency's install name or the rpath
    reason: str
    blob: str
    member: str
    arch: str


@dataclass(frozen=True)
class FixOutcome:
    status: Literal["nothing-to-fix", "fixed", "would-fix", "not-written", "failed"]
    edits: List[FixEdit]  # made, or (not-written, would-fix) that would be made
    refusals: List[FixRefusal]
    remaining: List["Finding"]  # check's findings of the output (of the input when nothing was written)


@dataclass(frozen=True)
class FileReport:
    path: str  # as given ("-" for standard input), or as found in a directory or archive
    kind: FileKind
    status: FileStatus
    notes: List[str]
    dylibs_removed: int  # from the file written
    dylibs_removable: int  # what prune removes (or removed)
    bytes_written: int
    seconds: float
    error: Optional[str] = None  # status "failed": file, part, byte offset and problem
    skipped_because: Optional[str] = None  # status "skipped": a Mach-O file of another type, e.g. an object file
    refused: bool = False  # "failed" by a decision (an invalid input signature, an identity one), not bad input
    error_kind: Optional[ErrorKind] = None  # status "failed": what kind of failure
    macho: Optional[MachOReport] = None  # Mach-O files
    pte: Optional[PteReport] = None  # .pte and .ptd files
    members: List["FileReport"] = field(default_factory=list)  # archives: the members that are models
    fix: Optional[FixOutcome] = None  # `fix`: its edits and the findings left


@dataclass(frozen=True)
class Summary:
    files: int
    changed: int
    unchanged: int
    skipped: int
    failed: int
    dylibs_removed: int
    dylibs_removable: int
    bytes_written: int


@dataclass(frozen=True)
class TriedPath:
    path: str
    reason: str  # dyld's: "no such file", "mach-o file, but is an incompatible architecture ..."


@dataclass(frozen=True)
class Finding:
    file: str
    blob: str
    arch: str
    dylib: str
    # "unused-dependency", "absolute-install-name", "forbidden-dependency" (always);
    # "absolute-rpath", "duplicate-rpath", "unprovided-dependency",
    # "weak-required-dependency" (once a contract declares what the application ships);
    # "min-macos", "arch-missing" (min_macos, arch); "library-not-loaded",
    # "symbol-not-found" (app: loaded in the application, docs/app-check.md);
    # "invalid-signature", "loader-rule" (always: what `verify` fails);
    # "missing-weights" (a .pte's AOTI delegate, with the .ptd files of `ptd`)
    rule: str
    message: str
    level: str = "error"  # "error" fails the gate; "warning", "note" do not (docs/commands/check.md)
    used: bool = False  # the dylib supplies symbols to the slice: removing it is not the repair
    symbols: List[str] = field(default_factory=list)  # which
    rpath: str = ""  # the LC_RPATH's path (rpath rules)
    reason: str = ""  # the rule's one-line reason
    repair: str = ""  # the machofix command that repairs it, "" when none does
    offset: Optional[int] = None  # file offset of the load command, where known
    member: str = ""  # in an archive: the member the finding is in
    member_offset: Optional[int] = None  # in an archive: the load command's offset in the member's bytes
    symbol: str = ""  # symbol-not-found: the import
    expected_in: str = ""  # symbol-not-found: the path of the library searched ("" for a flat lookup)
    lazy: bool = False  # symbol-not-found: bound lazily (dlopen succeeds, the first call aborts)
    needed_by: str = ""  # the library whose dependency or import it is ("" for the model itself)
    tried: List[TriedPath] = field(default_factory=list)  # library-not-loaded: every path dyld tried, in order
    min_macos: Optional[str] = None  # min-macos: the slice's minimum macOS
    required: Optional[str] = None  # min-macos: the application's minimum (min_macos=)
    problem: str = ""  # invalid-signature, loader-rule: what `verify` says is wrong
    loader_rule: str = ""  # loader-rule: the id of the rule broken (docs/loader-rules.md)
    method: str = ""  # missing-weights: the delegate's method
    backend: str = ""  # missing-weights: the delegate's backend ("MetalBackend")
    weights_key: str = ""  # missing-weights: the key it looks up (may be empty)
    looked_in: List[str] = field(default_factory=list)  # missing-weights: the .ptd files given
    at_launch: bool = False  # app: of the application itself (needed_by names its image): it cannot launch
    # One cause, one finding: the rules the same dependency of the slice also breaks
    # (on the finding that reports the cause), and that finding's rule (on the others)
    also: List[str] = field(default_factory=list)
    reported_with: Optional[str] = None


@dataclass(frozen=True)
class DependencyOutcome:
    dylib: str
    ordinal: int
    kind: DylibKind
    resolved: Optional[str]  # the path dyld finds it at; None when not found
    system: bool  # a system library taken as present (no sysroot)
    tried: List[TriedPath]


@dataclass(frozen=True)
class BindingOutcome:
    symbol: str
    ordinal: int
    dylib: str  # install name, or "flat namespace", "self", "main executable"
    weak: bool
    lazy: bool
    verdict: Literal["bound", "missing", "weak-missing", "library-not-loaded", "unchecked"]
    expected_in: Optional[str]
    found_in: Optional[str]  # the image that exports it
    importer: Optional[str]  # None: the model itself


@dataclass(frozen=True)
class AppCheck:
    """One model slice loaded in the application (check with app=...)."""

    file: str
    blob: str
    member: str
    arch: str
    loaded: bool  # False: the application has no process of this architecture
    dependencies: List[DependencyOutcome]
    bindings: List[BindingOutcome]


@dataclass(frozen=True)
class Report:
    """One run of machofix: the document `--json` writes, plus the exit status."""

    schema: str
    schema_version: int
    machofix_version: str
    command: Command
    files: List[FileReport]
    summary: Summary
    findings: List[Finding] = field(default_factory=list)  # check; fix: those that remain
    contracts: List[str] = field(default_factory=list)  # check and fix: the contract files read
    app_checks: List[AppCheck] = field(default_factory=list)  # check with an application: each slice's load
    # Not in the JSON: 1 when `check` found something, `verify` an invalid slice, or
    # `fix` left a file unwritten because its repaired form would still fail check.
    exit_status: int = 0

    @property
    def ok(self) -> bool:
        """No finding (check), every slice valid (verify), every file passing check after
        fix; always true otherwise."""
        return self.exit_status == 0


T = TypeVar("T")
_HINTS: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def _convert(kind: Any, value: Any) -> Any:
    if value is None:
        return None
    if dataclasses.is_dataclass(kind):
        return from_json(kind, value)
    origin = get_origin(kind)
    if origin is list:
        (item,) = get_args(kind)
        return [_convert(item, element) for element in value]
    if origin is Union:  # Optional[X]
        (present,) = [option for option in get_args(kind) if option is not type(None)]
        return _convert(present, value)
    return value  # str, int, float, bool, Literal[...]


def from_json(cls: Type[T], document: Dict[str, Any], **extra: Any) -> T:
    """`document` (a parsed JSON object) as a `cls`; unknown keys are left out."""
    hints = _hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values = {name: _convert(hints[name], value) for name, value in document.items() if name in names}
    return cls(**values, **extra)
