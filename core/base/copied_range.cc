#include "core/base/copied_range.h"

#include <algorithm>

namespace machofix {

std::vector<CopiedRange> in_place_plan(uint64_t size) { return {CopiedRange{0, 0, size}}; }

void append_joined(std::vector<CopiedRange>& ranges, const CopiedRange& range) {
  CopiedRange* last = ranges.empty() ? nullptr : &ranges.back();
  if (last && last->in_at + last->length == range.in_at && last->out_end() == range.out_at) last->length += range.length;
  else ranges.push_back(range);
}

uint64_t held_by(const std::vector<CopiedRange>& ranges, uint64_t in_at, uint64_t out_at, uint64_t length) {
  for (const CopiedRange& range : ranges) {
    if (out_at < range.out_at || out_at >= range.out_end()) continue;
    // The same bytes only if the range puts in_at at out_at too.
    if (in_at < range.in_at || in_at - range.in_at != out_at - range.out_at) return 0;
    return std::min(range.out_end() - out_at, length);
  }
  return 0;
}

}  // namespace machofix
