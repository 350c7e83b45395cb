// A range of an input placed in an output: what a copy made (core/io/copy_check.h),
// and what a rewrite expects to keep of its input, and where (the plan its early
// copy follows: MachORewrite::expected_placement, core/io/copy_ahead.h).
#pragma once

#include <cstdint>
#include <vector>

namespace machofix {

// Output bytes [out_at, out_at + length) copy input bytes [in_at, in_at + length).
struct CopiedRange {
  uint64_t in_at = 0;
  uint64_t out_at = 0;
  uint64_t length = 0;
  uint64_t out_end() const { return out_at + length; }
  bool operator==(const CopiedRange&) const = default;
};

// The whole of an input of `size` bytes where it is: the early copy's plan for a
// rewrite that keeps the layout.
std::vector<CopiedRange> in_place_plan(uint64_t size);

// Appends `range` to `ranges`, joined to the last one when it continues it in both
// the input and the output.
void append_joined(std::vector<CopiedRange>& ranges, const CopiedRange& range);

// How many bytes at the start of output range [out_at, out_at + length), which is to
// hold input bytes from `in_at` on, `ranges` hold: the part of one range that covers
// out_at with the same offset between input and output, up to its end.
uint64_t held_by(const std::vector<CopiedRange>& ranges, uint64_t in_at, uint64_t out_at, uint64_t length);

}  // namespace machofix
