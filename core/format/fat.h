// Universal ("fat") containers, 32- and 64-bit headers.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/bytes.h"

namespace machofix {

struct FatSlice {
  uint32_t cputype = 0;
  uint32_t cpusubtype = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t align = 0;  // log2
};

struct Universal {
  bool fat64 = false;
  std::vector<FatSlice> slices;
};

// Validates the header: slices inside the file, not overlapping the header or each
// other, sane alignment, no architecture twice.
Universal parse_universal(const Bytes& file);

uint64_t fat_header_size(const Universal& universal);

// The size of one fat_arch (20 bytes) or fat_arch_64 (32) entry.
uint64_t fat_arch_size(bool fat64);
// The fat_arch or fat_arch_64 entry at `at`; bounds-checked, not validated.
FatSlice read_fat_arch(const Bytes& file, uint64_t at, bool fat64);

// Lays slices of new sizes out again (order kept, each at its alignment, and at least
// on a page of its architecture, as dyld requires) and writes
// the header into `out`'s first bytes; returns each slice's new offset. Used only
// when a slice changes size; otherwise slices are patched where they are.
std::vector<uint64_t> layout_universal(Universal& universal, const std::vector<uint64_t>& new_sizes);
std::vector<uint8_t> universal_header_bytes(const Universal& universal);

}  // namespace machofix
