// The words the reports use for core's typed results (tool/report_text.h): schema 1's
// values (docs/json-report.md), which the Python package's Literal types repeat.
#include <doctest/doctest.h>

#include <string>

#include "tool/report_text.h"

using namespace machofix;
using machofix::cli::to_text;

TEST_CASE("report words: statuses") {
  CHECK(std::string(to_text(FileStatus::Changed)) == "changed");
  CHECK(std::string(to_text(FileStatus::Unchanged)) == "unchanged");
  CHECK(std::string(to_text(FileStatus::WouldChange)) == "would change");
  CHECK(std::string(to_text(FileStatus::Inspected)) == "inspected");
  CHECK(std::string(to_text(FileStatus::Skipped)) == "skipped");
  CHECK(std::string(to_text(FileStatus::Failed)) == "failed");
  CHECK(std::string(to_text(ErrorKind::Malformed)) == "malformed");
  CHECK(std::string(to_text(ErrorKind::Refused)) == "refused");
  CHECK(std::string(to_text(ErrorKind::Inapplicable)) == "inapplicable");
  CHECK(std::string(to_text(ErrorKind::ProofFailed)) == "proof-failed");
  CHECK(std::string(to_text(ErrorKind::System)) == "system");
  CHECK(std::string(to_text(ErrorKind::Internal)) == "internal");
  CHECK(std::string(to_text(SignatureStatus::Unsigned)) == "unsigned");
  CHECK(std::string(to_text(SignatureStatus::Valid)) == "valid");
  CHECK(std::string(to_text(SignatureStatus::Invalid)) == "invalid");
  CHECK(std::string(to_text(SignatureStatus::Added)) == "added");
  CHECK(std::string(to_text(SignatureStatus::Renewed)) == "renewed");
  CHECK(std::string(to_text(SignatureStatus::ReplacedAdHoc)) == "replaced (ad hoc)");
  CHECK(std::string(to_text(EditStatus::Applied)) == "applied");
  CHECK(std::string(to_text(EditStatus::Already)) == "already");
  CHECK(std::string(to_text(EditStatus::NoMatch)) == "no match");
}

TEST_CASE("report words: kinds") {
  CHECK(std::string(to_text(FileKind::MachO)) == "mach-o");
  CHECK(std::string(to_text(FileKind::Universal)) == "mach-o universal");
  CHECK(std::string(to_text(FileKind::Pte)) == "pte");
  CHECK(std::string(to_text(FileKind::Ptd)) == "ptd");
  CHECK(std::string(to_text(FileKind::Archive)) == "archive");
  CHECK(std::string(to_text(FileKind::Elf)) == "elf");
  CHECK(std::string(to_text(FileKind::Other)) == "other");
  CHECK(std::string(to_text(ContainerKind::Pte)) == "pte");
  CHECK(std::string(to_text(ContainerKind::Ptd)) == "ptd");
  CHECK(std::string(to_text(BlobKind::MachO)) == "mach-o");
  CHECK(std::string(to_text(BlobKind::Universal)) == "mach-o universal");
  CHECK(std::string(to_text(BlobKind::Elf)) == "elf");
  CHECK(std::string(to_text(BlobKind::Other)) == "other");
  CHECK(std::string(to_text(DylibKind::Load)) == "load");
  CHECK(std::string(to_text(DylibKind::Weak)) == "weak");
  CHECK(std::string(to_text(DylibKind::Reexport)) == "reexport");
  CHECK(std::string(to_text(DylibKind::Upward)) == "upward");
  CHECK(std::string(to_text(EditKind::DeleteRpath)) == "delete-rpath");
  CHECK(std::string(to_text(EditKind::Rpath)) == "rpath");
  CHECK(std::string(to_text(EditKind::Id)) == "id");
  CHECK(std::string(to_text(EditKind::Change)) == "change");
  CHECK(std::string(to_text(EditKind::AddRpath)) == "add-rpath");
  CHECK(std::string(to_text(EditKind::WeakLink)) == "weak-link");
}

TEST_CASE("report words: prune's reasons, as `reason` and `left_unchanged_because` give them") {
  CHECK(to_text(DylibDecision(1, DylibVerdict::Supplies, 1)) == "supplies 1 symbol");
  CHECK(to_text(DylibDecision(1, DylibVerdict::Supplies, 2)) == "supplies 2 symbols");
  CHECK(to_text(DylibDecision(1, DylibVerdict::SliceLeftAsIs)) == "supplies no symbol, but the file is left unchanged");
  CHECK(to_text(DylibDecision(1, DylibVerdict::Reexported)) ==
        "re-exported: its symbols are part of this library's interface");
  CHECK(to_text(DylibDecision(1, DylibVerdict::Upward)) == "upward dependency: kept");
  CHECK(to_text(DylibDecision(1, DylibVerdict::NamedWithoutSymbol)) ==
        "named by a bind opcode that binds no symbol: kept");
  CHECK(to_text(DylibDecision(1, DylibVerdict::KeptByGlob, 0, "*libomp*")) == "kept by --keep '*libomp*'");
  CHECK(to_text(DylibDecision(1, DylibVerdict::NotSelected)) == "unused, but not selected by --only");
  CHECK(to_text(DylibDecision(1, DylibVerdict::LastDependency)) ==
        "supplies no symbol, but it is the last dependency: kept");
  CHECK(to_text(DylibDecision(1, DylibVerdict::Unused)) == "supplies no symbol: prune removes it");
  CHECK(std::string(to_text(LeftAsIs::No)).empty());
  CHECK(std::string(to_text(LeftAsIs::FlatNamespace)) ==
        "flat namespace (MH_TWOLEVEL clear): imports name no library, so none can be proven unused");
  CHECK(std::string(to_text(LeftAsIs::LazyLoadDylib)) ==
        "LC_LAZY_LOAD_DYLIB present: tools disagree on how it counts in ordinals");
  CHECK(std::string(to_text(LeftAsIs::Not64Bit)) == "only 64-bit slices are handled; this one is left as it is");
}

TEST_CASE("report words: a file passed over for its type") {
  CHECK(machofix::cli::skipped_because(1) ==
        "a Mach-O object file (MH_OBJECT), not a dylib, bundle or executable");
}
