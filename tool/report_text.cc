#include "tool/report_text.h"

namespace machofix::cli {

// After each switch: unreachable for a valid value (the switch covers them all).

const char* to_text(FileKind kind) {
  switch (kind) {
    case FileKind::MachO: return "mach-o";
    case FileKind::Universal: return "mach-o universal";
    case FileKind::Pte: return "pte";
    case FileKind::Ptd: return "ptd";
    case FileKind::Archive: return "archive";
    case FileKind::Elf: return "elf";
    case FileKind::Other: return "other";
  }
  return "?";
}

const char* to_text(FileStatus status) {
  switch (status) {
    case FileStatus::Changed: return "changed";
    case FileStatus::Unchanged: return "unchanged";
    case FileStatus::WouldChange: return "would change";
    case FileStatus::Inspected: return "inspected";
    case FileStatus::Skipped: return "skipped";
    case FileStatus::Failed: return "failed";
  }
  return "?";
}

const char* to_text(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Malformed: return "malformed";
    case ErrorKind::Refused: return "refused";
    case ErrorKind::Inapplicable: return "inapplicable";
    case ErrorKind::ProofFailed: return "proof-failed";
    case ErrorKind::System: return "system";
    case ErrorKind::Internal: return "internal";
  }
  return "?";
}

const char* to_text(SignatureStatus status) {
  switch (status) {
    case SignatureStatus::Unsigned: return "unsigned";
    case SignatureStatus::Valid: return "valid";
    case SignatureStatus::Invalid: return "invalid";
    case SignatureStatus::Added: return "added";
    case SignatureStatus::Renewed: return "renewed";
    case SignatureStatus::ReplacedAdHoc: return "replaced (ad hoc)";
  }
  return "?";
}

// The word core's own messages use too (core/format/macho.h).
const char* to_text(DylibKind kind) { return dylib_kind_name(kind); }

const char* to_text(ContainerKind kind) {
  switch (kind) {
    case ContainerKind::Pte: return "pte";
    case ContainerKind::Ptd: return "ptd";
  }
  return "?";
}

// A named-data blob is described as a file of that kind would be.
const char* to_text(BlobKind kind) {
  switch (kind) {
    case BlobKind::MachO: return to_text(FileKind::MachO);
    case BlobKind::Universal: return to_text(FileKind::Universal);
    case BlobKind::Elf: return to_text(FileKind::Elf);
    case BlobKind::Other: return to_text(FileKind::Other);
  }
  return "?";
}

const char* to_text(EditKind kind) {
  switch (kind) {
    case EditKind::DeleteDuplicateRpaths: return "delete-duplicate-rpath";
    case EditKind::DeleteRpath: return "delete-rpath";
    case EditKind::Rpath: return "rpath";
    case EditKind::Id: return "id";
    case EditKind::Change: return "change";
    case EditKind::AddRpath: return "add-rpath";
    case EditKind::WeakLink: return "weak-link";
  }
  return "?";
}

const char* to_text(EditStatus status) {
  switch (status) {
    case EditStatus::Applied: return "applied";
    case EditStatus::Already: return "already";
    case EditStatus::NoMatch: return "no match";
  }
  return "?";
}

const char* to_text(LeftAsIs reason) {
  switch (reason) {
    case LeftAsIs::No: return "";
    case LeftAsIs::FlatNamespace:
      return "flat namespace (MH_TWOLEVEL clear): imports name no library, so none can be proven unused";
    case LeftAsIs::LazyLoadDylib: return "LC_LAZY_LOAD_DYLIB present: tools disagree on how it counts in ordinals";
    case LeftAsIs::Not64Bit: return "only 64-bit slices are handled; this one is left as it is";
  }
  return "?";
}

std::string to_text(const DylibDecision& decision) {
  switch (decision.verdict) {
    case DylibVerdict::Supplies:
      return "supplies " + std::to_string(decision.symbols) + (decision.symbols == 1 ? " symbol" : " symbols");
    case DylibVerdict::SliceLeftAsIs: return "supplies no symbol, but the file is left unchanged";
    case DylibVerdict::Reexported: return "re-exported: its symbols are part of this library's interface";
    case DylibVerdict::Upward: return "upward dependency: kept";
    case DylibVerdict::NamedWithoutSymbol: return "named by a bind opcode that binds no symbol: kept";
    case DylibVerdict::KeptByGlob: return "kept by --keep '" + decision.glob + "'";
    case DylibVerdict::NotSelected: return "unused, but not selected by --only";
    case DylibVerdict::LastDependency: return "supplies no symbol, but it is the last dependency: kept";
    case DylibVerdict::Unused: return "supplies no symbol: prune removes it";
  }
  return "?";
}

std::string skipped_because(uint32_t filetype) {
  return "a " + filetype_description(filetype) + ", not a dylib, bundle or executable";
}

}  // namespace machofix::cli
