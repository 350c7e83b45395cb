// A slice of a Mach-O job between its judgement and its rewrite, and the steps the
// files of the job share: the input signature read once, the new signature, the
// universal layout. Internal to core/rewrite (macho_repair.h is the interface).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/bytes.h"
#include "core/base/copied_range.h"
#include "core/base/output_image.h"
#include "core/format/codesign.h"
#include "core/format/fat.h"
#include "core/format/imports.h"
#include "core/format/macho.h"
#include "core/rewrite/edit.h"
#include "core/rewrite/macho_repair.h"
#include "core/rewrite/prune.h"

namespace machofix {

// A slice's input signature, read and verified once: prune and sign decide from it
// and report it.
struct InputSignature {
  SignatureReport report;
  std::optional<CodeSignature> signature;  // unset: unsigned, or unreadable
  std::optional<Error> read_error;         // set: present but too malformed to read
};

struct SliceJob {
  SliceReport report;
  OutputImage bytes;  // the new slice
};

// The stages a slice's rewrite runs, in this order; each is proven before the next
// reads its output. None: the slice is copied as it is.
struct RewriteSteps {
  bool prune = false;      // dylib commands are removed (JudgedSlice::plan)
  bool edit = false;       // load commands are changed, added or removed (JudgedSlice::edit)
  bool weak_link = false;  // dylibs become weak or their imports are marked weak
  bool sign = false;       // the signature is renewed, added or replaced: after any of the others
  bool rereads() const { return prune || edit || weak_link; }  // a stage that rewrites load commands
  bool none() const { return !rereads() && !sign; }
};

// One slice of the input, read and judged (MachORewrite's first step).
struct JudgedSlice {
  Bytes bytes;
  std::optional<MachO> image;  // unset: not 64-bit, left as it is and not read
  ImportScan scan;
  PrunePlan plan;
  InputSignature input;
  SliceReport report;
  std::optional<EditPlan> edit;  // `edit`: the planned load commands
  // `fix`: the slice as the prune stage leaves it, which the edit is planned on (its
  // load commands, and the header padding the removals freed). Unset: the edit is
  // planned on `image`. Shared: `edit` may view its bytes, and JudgedSlices move.
  std::shared_ptr<const OutputImage> pruned;
  std::shared_ptr<const MachO> pruned_image;
  std::vector<int> weak_link;    // `edit --weak-link`: the dylibs (of the edited slice) to weak-link
  RewriteSteps steps;
};

// What re-signing a slice did: the new signature as its check read it (unset when the
// slice was left unsigned), and what the report should warn of.
struct SignatureOutcome {
  std::optional<SignatureReport> after;
  std::vector<std::string> warnings;
};

// ---- The input signature and the new one (slice_signature.cc) ----

InputSignature check_input_signature(const MachO& image, const KnownPageHashes* known = nullptr);
SignatureReport signature_report(const MachO& image, const KnownPageHashes* known = nullptr);
// The identifier a new signature gets: --identifier, else the install name's or the
// file's name (empty for standard input).
std::string signature_identifier(const MachO& image, const RepairOptions& options);
// What a new signature may add to the slice (a renewal keeps its size).
uint64_t signature_room(const JudgedSlice& judged, const RepairOptions& options);
[[noreturn]] void refuse_invalid_signature(const InputSignature& input);
[[noreturn]] void refuse_identity();
// Brings the signature of a rewritten (or, for `sign`, unchanged) slice up to date in
// `bytes`, which grow only when a signature is added, and checks it.
// `rewritten`: the slice as the rewrite's proof read it (its bytes are `bytes`'),
// unset when it was not rewritten.
SignatureOutcome update_signature(const JudgedSlice& judged, OutputImage& bytes, const std::optional<MachO>& rewritten,
                                  const RepairOptions& options);

// ---- Universal files (universal_layout.cc) ----

// Slices that keep their size are put back where they were, otherwise the slices are
// laid out again; a changed file is held to dyld's rules for universal files.
MachORepair assemble_universal(const Bytes& file, Universal universal, std::vector<SliceJob> jobs);
// Each slice of `before`, where `after` puts it, in output order; adjoining slices
// that keep their distance make one range.
std::vector<CopiedRange> slice_placement(const Universal& before, const Universal& after);

}  // namespace machofix
