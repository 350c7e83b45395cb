// Where a .pte/.ptd's segments go when a blob changes size (core/io/pte_layout.cc).
// Internal to core/pte*.cc and the unit tests.
#pragma once

#include <cstdint>
#include <vector>

namespace machofix {

// Where segments go when some change size.
//
// Segments keep their order and the gaps between them. Everything after a resized
// segment moves by one shift, a multiple of the largest alignment among the
// segments that move, so each of them keeps at least its original alignment: the
// alignment of a segment is the largest power of two dividing its offset, both in
// the file and from segment_base_offset (ExecuTorch aligns offsets from the base
// to lcm(segment_alignment, entry alignment): 128 by default, often 4096), capped
// at kMaxKeptAlignment. The gap right after a resized segment absorbs the
// difference (the shift is the smallest such multiple that keeps the next segment
// after the new end; a shrinking segment may leave a larger gap) and is zero-filled.
// The price is at most kMaxKeptAlignment - 1 bytes of padding per resized segment.
constexpr uint64_t kMaxKeptAlignment = 65536;

struct SegmentMove {
  uint64_t old_offset = 0;
  uint64_t old_size = 0;
  uint64_t new_offset = 0;
  uint64_t new_size = 0;
};

struct Relocation {
  std::vector<SegmentMove> segments;  // parallel to the input
  // One step per resized segment, in file order: from `resume` on, the input is
  // copied `shift` bytes further (negative: earlier) than it was.
  struct Step {
    uint64_t resized_start = 0;  // the resized segment's old offset
    uint64_t resized_old_end = 0;
    uint64_t new_end = 0;  // where its new bytes end in the output
    uint64_t resume = 0;   // input offset where copying resumes (next segment, or old end)
    int64_t shift = 0;     // output offset - input offset from resume on
  };
  std::vector<Step> steps;
  int64_t final_shift() const { return steps.empty() ? 0 : steps.back().shift; }
};

// `offsets` are absolute, `base` is segment_base_offset, `new_sizes` the size each
// segment will have. Fails (Error) if a resized segment overlaps another one.
Relocation relocate_segments(uint64_t base, const std::vector<uint64_t>& offsets, const std::vector<uint64_t>& sizes,
                             const std::vector<uint64_t>& new_sizes);

}  // namespace machofix
