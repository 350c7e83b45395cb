// Deciding which dependent dylibs go, removing them in place, and proving the result.
//
// The stages are separate so that `inspect` can show the analysis, `prune --dry-run`
// the plan, and the verifier can re-run analysis on the output:
//   analyze()     which imports each dylib supplies
//   plan_prune()  the policy: what to remove and why everything else stays
//   apply_prune() the byte edits (same size; load commands shifted, ordinals renumbered)
//   verify_prune() re-reads the output and checks every import binds as before
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/format/imports.h"
#include "core/format/macho.h"
#include "core/rewrite/second_reader.h"

namespace machofix {

struct DylibUse {
  Dylib dylib;
  std::vector<std::string> symbols;  // distinct symbols it supplies, sorted
  std::vector<ImportSource> sources;  // where those imports were found
  // An ordinal names it, yet binds no symbol (an opcode overridden before any bind):
  // dyld accepts such streams, and the dylib is kept rather than guessed about.
  bool named_without_symbol = false;
};

struct SliceAnalysis {
  std::vector<DylibUse> uses;  // one per dependent dylib, in ordinal order
  // Imports of dlsym, objc_getClass, ...: the file looks symbols up by name at run
  // time, so a library that supplies no import might still be needed.
  std::vector<std::string> runtime_lookups;
  size_t flat_lookup_imports = 0;  // distinct symbols left to -undefined dynamic_lookup (ordinal -2)
};

SliceAnalysis analyze(const MachO& image, const ImportScan& scan);

struct PruneOptions {
  std::vector<std::string> keep;  // globs: never remove matching install names
  std::vector<std::string> only;  // globs: if any, remove only matching install names
};

// True if the glob matches the install name or its last path component.
bool install_name_matches(const std::string& glob, const std::string& install_name);

// Why a slice is left as it is whatever its dylibs say (No: it is not).
enum class LeftAsIs {
  No,
  FlatNamespace,  // MH_TWOLEVEL clear: imports name no library, so none can be proven unused
  LazyLoadDylib,  // LC_LAZY_LOAD_DYLIB: tools disagree on how it counts in ordinals
  Not64Bit,       // a 32-bit slice of a universal file: nothing in it is read
};

// What prune decides for one dependent dylib, and why.
enum class DylibVerdict {
  Supplies,            // it supplies `symbols` symbols: kept
  SliceLeftAsIs,       // supplies none, but the slice is left as it is
  Reexported,          // its symbols are part of this library's interface
  Upward,              // an upward dependency
  NamedWithoutSymbol,  // a bind opcode names it and binds no symbol
  KeptByGlob,          // --keep `glob`
  NotSelected,         // unused, but --only does not select it
  LastDependency,      // dyld rejects a modern binary without any LC_LOAD_DYLIB
  Unused,              // supplies no symbol: removed
};

struct DylibDecision {
  int ordinal = 0;
  DylibVerdict verdict = DylibVerdict::Supplies;
  size_t symbols = 0;  // Supplies
  std::string glob;    // KeptByGlob

  DylibDecision() = default;
  DylibDecision(int ordinal, DylibVerdict verdict, size_t symbols = 0, std::string glob = {})
      : ordinal(ordinal), verdict(verdict), symbols(symbols), glob(std::move(glob)) {}
  bool remove() const { return verdict == DylibVerdict::Unused; }
};

struct PrunePlan {
  std::vector<DylibDecision> decisions;  // one per dependent dylib
  LeftAsIs left_as_is = LeftAsIs::No;  // when set, no decision removes a dylib
  std::vector<std::string> warnings;
  size_t removal_count() const;
};

PrunePlan plan_prune(const MachO& image, const SliceAnalysis& analysis, const PruneOptions& options);

// The slice with the planned dylib commands removed and every ordinal renumbered.
// Same size as the input; only the load-command area and ordinal bytes differ.
// In place: `out` holds a copy of the slice (an OutputImage: core/base/output_image.h).
void apply_prune(const MachO& image, const ImportScan& scan, const PrunePlan& plan, MutableBytes out);
std::vector<uint8_t> apply_prune(const MachO& image, const ImportScan& scan, const PrunePlan& plan);  // on a copy

// Re-reads `after` and fails unless its dylibs are exactly the kept ones and every
// import binds to the same install name (or the same special ordinal) as before,
// and no byte outside the load commands and the ordinal sites changed; then `second`
// must read it as we do.
void verify_prune(const MachO& before, const ImportScan& before_scan, const PrunePlan& plan,
                  const Bytes& after, const SecondReader& second);
// The same with `after` already re-read (reread_output): the rewrite reads each state
// once, and the signature is renewed from that reading.
void verify_prune(const MachO& before, const ImportScan& before_scan, const PrunePlan& plan,
                  const Bytes& after, const MachO& reread, const SecondReader& second);

}  // namespace machofix
