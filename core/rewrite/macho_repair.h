// The Mach-O job, thin or universal: analyze, judge the input signature, prune,
// re-sign, verify.
//
// This is what every front end calls: `inspect`/`prune` on a plain file, and the
// .pte/.ptd rewriter for each embedded blob. Input is a read-only view of the whole
// file (or blob); output is the complete new file as an Image (core/base/output_image.h):
// what changed (load commands, __LINKEDIT, the signature) in memory, the code and
// data between borrowed from the input file, so a rewrite costs memory for what it
// changes, not for the size of the file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/bytes.h"
#include "core/base/copied_range.h"
#include "core/base/output_image.h"
#include "core/rewrite/edit.h"
#include "core/format/loader_rules.h"
#include "core/base/progress.h"
#include "core/rewrite/macho_report.h"
#include "core/rewrite/prune.h"

namespace machofix {

struct RepairOptions {
  PruneOptions prune;
  EditOptions edit;  // `machofix edit`
  bool sign_unsigned = false;   // --sign: add an ad hoc signature to unsigned slices
  bool replace_identity = false;  // --adhoc: replace a Developer ID signature with an ad hoc one
  // --resign-invalid: re-sign a slice whose input signature is invalid (a hash
  // mismatch, a malformed signature) instead of refusing the file.
  bool resign_invalid = false;
  std::string identifier;         // --identifier for `sign`; empty: keep / derive
  std::string file_name;          // names a new signature when the file has no install name
  ByteProgress progress;          // the bytes copied, compared or written, for a progress line
  // Re-reads every rewritten slice besides machofix (core/rewrite/second_reader.h): a rewrite
  // without one fails. core/jobs/job.cc gives LIEF (core/lief/lief_check.h).
  SecondReader second_reader;
};

struct MachORepair {
  MachOReport report;
  OutputImage output;  // the new file; equal to the input when nothing changed
};

// What inspect shows: analysis and plan per slice, signature checked; nothing rewritten.
MachOReport inspect_macho(const Bytes& file, const RepairOptions& options = {});

// Fix: `machofix fix`'s rewrite: the dependencies options.prune.only names are pruned
// (none when it is empty), then options.edit is planned and applied on the pruned
// slice, so an edit may use the header padding the removals freed.
enum class RewriteKind { Prune, Sign, Edit, Fix };

// A Mach-O file (thin or universal) read and judged, ready to be rewritten.
//
// The constructor takes every decision that refuses the file, for all slices before
// any slice is rewritten, at about the cost of `machofix verify`: each 64-bit slice
// is parsed, its input signature verified (once: the reports use that result), its
// imports analyzed and, for prune, the removals planned. It throws an Error marked
// as a refusal (Error::refusal()), naming the slice, when a slice
//  - has an invalid signature (a page or special-slot hash mismatch, a malformed
//    signature; the message names the first wrong page or slot and the Error
//    carries its file offset), unless options.resign_invalid: re-signing would make
//    a changed or corrupt file look valid;
//  - is signed with an identity and would be re-signed, unless options.replace_identity.
//  - (edit) has an edit that matches nothing or would duplicate an rpath (unless
//    options.edit.unmatched_is_note), or load commands that no longer fit in the
//    header padding.
// run() then does the work: prune or edit, re-sign, re-read and verify every changed slice.
class MachORewrite {
 public:
  MachORewrite(const Bytes& file, const RepairOptions& options, RewriteKind kind);
  ~MachORewrite();
  MachORewrite(MachORewrite&&) noexcept;
  MachORewrite& operator=(MachORewrite&&) noexcept;

  MachORepair run();  // once
  // Whether run() will prune, edit or weak-link a slice: what the second reader
  // re-reads (a caller may load it meanwhile).
  bool rereads() const;
  // Whether run() will rewrite a slice (prune, edit, weak-link or sign it); the output
  // may still come out byte for byte the input (a signature renewed as it was).
  bool rewrites() const;
  // Where run()'s output is expected to hold the input's bytes, in output order: the
  // whole file in place, or, when a universal file's slice grows by a new signature
  // (`sign` of an unsigned slice), each slice where the new layout puts it. The
  // early copy follows it (core/io/copy_ahead.h); a wrong guess costs time, never
  // bytes. Before run().
  std::vector<CopiedRange> expected_placement() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// prune + re-sign every slice; every rewrite is re-read and verified before returning.
// MachORewrite in one go.
MachORepair prune_macho(const Bytes& file, const RepairOptions& options);

// `machofix edit`: install names and rpaths (options.edit), re-signed and verified.
MachORepair edit_macho(const Bytes& file, const RepairOptions& options);

// `machofix fix`'s rewrite (RewriteKind::Fix), re-signed and verified.
MachORepair fix_macho(const Bytes& file, const RepairOptions& options);

// `machofix sign`: re-sign every slice (or add a signature), no pruning.
MachORepair sign_macho(const Bytes& file, const RepairOptions& options);

}  // namespace machofix
