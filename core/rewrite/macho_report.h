// What a Mach-O job reports: per slice its dylibs, rpaths, signature before and after,
// loader rules and edits; typed values, turned into text and JSON by tool/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/format/codesign.h"
#include "core/format/loader_rules.h"
#include "core/rewrite/edit.h"
#include "core/rewrite/prune.h"

namespace machofix {

struct DylibReport {
  int ordinal = 0;  // before any removal
  std::string install_name;
  DylibKind kind = DylibKind::Load;
  std::vector<std::string> symbols;  // every symbol it supplies, sorted
  std::vector<std::string> sources;  // symtab, bind, lazy-bind, chained-fixups, reexport
  std::optional<DylibDecision> decision;  // prune's plan (inspect and dry runs report it); none for `sign`
  bool removed = false;                   // removed from the rewritten file
  uint64_t command_offset = 0;  // file offset of its load command (in the input)
  bool removable() const { return decision && decision->remove(); }  // prune's plan removes it
};

struct RpathReport {
  std::string path;
  uint64_t command_offset = 0;  // file offset of the LC_RPATH (in the input)
};

// A slice's signature: Unsigned, Valid or Invalid on input; after a rewrite also
// what was done to it. The reports spell it in tool/report_text.cc.
enum class SignatureStatus {
  Unsigned,
  Valid,
  Invalid,
  Added,          // an ad hoc signature where there was none
  Renewed,        // the same kind of signature, its hashes made anew
  ReplacedAdHoc,  // an identity or unreadable signature replaced by an ad hoc one
};

struct SignatureReport {
  SignatureStatus status = SignatureStatus::Unsigned;
  std::string style;  // "linker-signed (lld)", "codesign ad hoc", "Developer ID or other identity", ...
  std::string identifier;
  std::vector<std::string> hash_types;  // "sha256", "sha1"
  uint32_t page_size = 0;
  SignatureCheck findings;  // why it is invalid (which page, which slot); what cannot be checked here
};

struct SliceReport {
  std::string arch;
  uint32_t cputype = 0;
  // false: a 32-bit slice of a universal file, left as it is: nothing in it was read
  // (no filetype, no dylibs, no signature) nor judged.
  bool handled = true;
  std::string filetype;  // dylib, bundle, executable; empty when not handled
  uint64_t offset = 0;   // in the file (universal slices)
  uint64_t size = 0;
  std::vector<std::string> flags;  // two-level, flat-namespace, chained-fixups, dyld-info, lazy-load-dylib
  std::string install_name;        // LC_ID_DYLIB, if any
  std::vector<DylibReport> dylibs;
  std::vector<RpathReport> rpaths;  // LC_RPATH in load-command order, duplicates kept
  std::vector<BoundImport> imports;  // what dyld binds at load, per library ordinal (check --app)
  std::vector<BuildTarget> build_targets;  // LC_BUILD_VERSION / LC_VERSION_MIN_*
  size_t flat_lookup_imports = 0;
  std::vector<std::string> warnings;
  LeftAsIs left_as_is = LeftAsIs::No;
  SignatureReport signature;        // of the input
  SignatureReport signature_after;  // of the output, when it changed
  std::vector<RuleViolation> loader_rules;  // of the input (core/format/loader_rules.h)
  std::vector<EditRecord> edits;            // `edit`: each edit as applied, in order
  bool changed = false;
};

struct MachOReport {
  bool universal = false;
  bool fat64 = false;
  std::vector<SliceReport> slices;
  std::vector<RuleViolation> loader_rules;  // the universal header's (slices carry their own)
  bool changed = false;
  size_t removed_count() const;
  size_t removable_count() const;
};

// What `verify` fails on, one line per problem, naming the slice: an invalid
// signature (which page, which slot), or an unsigned arm64 slice, which cannot run.
std::vector<std::string> signature_failures(const MachOReport& report);
// One slice's, without the arch prefix (none for a slice not handled).
std::vector<std::string> slice_signature_failures(const SliceReport& slice);

}  // namespace machofix
