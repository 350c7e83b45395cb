// Where segments go when a blob changes size.
#include "core/io/pte_layout.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/base/error.h"

namespace machofix {

namespace {

// The largest power of two dividing `offset`, capped: 0 counts as the cap.
uint64_t alignment_of(uint64_t offset) {
  uint64_t lowest_bit = offset & (~offset + 1);
  return offset == 0 ? kMaxKeptAlignment : std::min(lowest_bit, kMaxKeptAlignment);
}

// The smallest multiple of `step` (a power of two) that is >= value; value may be negative.
int64_t round_up(int64_t value, uint64_t step) {
  int64_t s = static_cast<int64_t>(step);
  return value >= 0 ? (value + s - 1) / s * s : -((-value) / s * s);
}

std::vector<size_t> order_by_offset(const std::vector<uint64_t>& offsets, const std::vector<uint64_t>& sizes) {
  std::vector<size_t> order(offsets.size());
  std::iota(order.begin(), order.end(), 0);
  // Empty segments first at equal offsets: one at the start of a resized segment stays put.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return offsets[a] != offsets[b] ? offsets[a] < offsets[b] : sizes[a] < sizes[b];
  });
  return order;
}

// A resized segment must own its bytes: any other segment inside it (even an empty
// one, which would have no defined new place) makes the move ambiguous.
void require_alone(size_t resized, const std::vector<uint64_t>& offsets, const std::vector<uint64_t>& sizes) {
  uint64_t start = offsets[resized], end = start + sizes[resized];
  for (size_t other = 0; other < offsets.size(); ++other) {
    if (other == resized) continue;
    uint64_t other_end = offsets[other] + sizes[other];
    bool overlaps = sizes[other] == 0 ? offsets[other] > start && offsets[other] < end
                                      : offsets[other] < end && other_end > start;
    if (overlaps) {
      fail_at(start, "segment " + std::to_string(resized) + " [" + hex(start) + ", " + hex(end) +
                         ") changes size but overlaps segment " + std::to_string(other) + " [" + hex(offsets[other]) +
                         ", " + hex(other_end) + ")");
    }
  }
}

}  // namespace

namespace {

// The step for the resized segment at `position` in `order`, whose new offset is known.
Relocation::Step step_after(const SegmentMove& resized, size_t position, const std::vector<size_t>& order,
                            const std::vector<uint64_t>& offsets, uint64_t base) {
  Relocation::Step step;
  step.resized_start = resized.old_offset;
  step.resized_old_end = resized.old_offset + resized.old_size;
  step.new_end = resized.new_offset + resized.new_size;
  step.resume = step.resized_old_end;
  // Everything from the next segment on moves together, by a multiple of the
  // largest alignment among the segments that move.
  uint64_t alignment = 1;
  bool found_next = false;
  for (size_t later = position + 1; later < order.size(); ++later) {
    uint64_t offset = offsets[order[later]];
    if (!found_next) step.resume = offset, found_next = true;
    alignment = std::max({alignment, alignment_of(offset), alignment_of(offset - base)});
  }
  int64_t needed = static_cast<int64_t>(step.new_end) - static_cast<int64_t>(step.resume);
  // Rounded up, so the next segment starts at or after the new end.
  step.shift = found_next ? round_up(needed, alignment) : needed;
  return step;
}

}  // namespace

Relocation relocate_segments(uint64_t base, const std::vector<uint64_t>& offsets, const std::vector<uint64_t>& sizes,
                             const std::vector<uint64_t>& new_sizes) {
  Relocation relocation;
  for (size_t i = 0; i < offsets.size(); ++i) relocation.segments.push_back({offsets[i], sizes[i], offsets[i], new_sizes[i]});
  std::vector<size_t> order = order_by_offset(offsets, sizes);
  int64_t shift = 0;
  for (size_t position = 0; position < order.size(); ++position) {
    SegmentMove& segment = relocation.segments[order[position]];
    segment.new_offset = static_cast<uint64_t>(static_cast<int64_t>(segment.old_offset) + shift);
    if (segment.new_size == segment.old_size) continue;
    // Later segments all start at or after its end: require_alone rules out the rest.
    require_alone(order[position], offsets, sizes);
    relocation.steps.push_back(step_after(segment, position, order, offsets, base));
    shift = relocation.steps.back().shift;
  }
  return relocation;
}

}  // namespace machofix
