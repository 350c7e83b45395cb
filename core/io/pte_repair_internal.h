// The steps of repair_pte (core/io/pte_repair.cc), each in a file of its own: the plan
// (core/io/pte_plan.cc), the writing (core/io/pte_write.cc) and the verification of the
// output before it is committed (core/io/pte_verify.cc). Internal to core/pte*.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/io/copy_ahead.h"
#include "core/io/copy_check.h"
#include "core/io/file_io.h"
#include "core/io/pte.h"
#include "core/io/pte_container.h"
#include "core/io/pte_layout.h"

namespace machofix::pte_internal {

struct BlobJob {
  uint32_t segment_index = 0;
  Bytes old_bytes;
  MachORepair result;
  bool changed = false;
  std::string old_sha256, new_sha256;
};

// Same-length bytes to write over the input at `at` (absolute, input coordinates).
struct Patch {
  uint64_t at = 0;
  std::vector<uint8_t> bytes;
  std::string what;
};

struct Piece {
  uint64_t out_at = 0;
  uint64_t length = 0;
  std::optional<uint64_t> in_at;  // copied from the input; else `bytes`
  std::vector<uint8_t> bytes;
};

struct Plan {
  std::vector<BlobJob> blobs;
  std::vector<Patch> patches;
  Relocation relocation;
  std::vector<uint64_t> new_offsets;  // absolute, per segment
  std::vector<uint64_t> new_sizes;
  std::optional<uint64_t> new_segment_data_size;
  std::vector<std::string> new_keys;  // per named entry
  std::vector<Piece> pieces;
  uint64_t output_size = 0;
  bool changed = false;
};

// A Mach-O blob read and judged (the rewriter's first step), waiting for its rewrite.
struct JudgedBlob {
  uint32_t segment_index = 0;
  Bytes bytes;
  BlobRewrite rewrite;
};

// --- the plan (core/io/pte_plan.cc) -------------------------------------------------

// Every blob is judged before anything is written: a refusal costs no more than
// reading the blobs (and, for a new output, stopping its early copy).
std::vector<JudgedBlob> judge_blobs(const Container& container, const RepairOptions& options, const BlobRewriter& rewriter);

// Rewrites the judged blobs and plans the output around them; fills in the report.
Plan make_plan(const Container& container, std::vector<JudgedBlob>& judged, PteReport& report);

// --- the writing (core/io/pte_write.cc) ---------------------------------------------

// Writes the plan's pieces over the early copy of the input: the new bytes, and what
// the copy, kept as far as the plan leaves the input in place, does not hold, each
// copied chunk handed to the output's checker once it is written.
void write_pieces(const MappedFile& input, const Plan& plan, CopiedOutput& output);

// Whether `path` names the input's own file (standard output never does).
bool same_file(const MappedFile& input, const std::string& path);

// --- the verification (core/io/pte_verify.cc) -----------------------------------------

// Re-reads the temporary output as a new input: header, Verifier, every segment
// located again, then every byte compared with the plan (the copies by `checker`).
void verify_output(const Container& before, const Plan& plan, const std::string& temp_path, CopyChecker& checker);

}  // namespace machofix::pte_internal
