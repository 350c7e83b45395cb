#include "core/format/fat.h"

#include <algorithm>

#include "core/format/macho.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"
#include "core/base/util.h"

namespace machofix {

using macho::FatArch;
using macho::FatArch64;
using macho::FatHeader;

uint64_t fat_arch_size(bool fat64) { return fat64 ? sizeof(FatArch64) : sizeof(FatArch); }

FatSlice read_fat_arch(const Bytes& file, uint64_t at, bool fat64) {
  FatSlice slice;
  if (fat64) {
    FatArch64 arch = file.get<FatArch64>(at, "fat_arch_64");
    slice = {arch.cputype, arch.cpusubtype, arch.offset, arch.size, arch.align};
  } else {
    FatArch arch = file.get<FatArch>(at, "fat_arch");
    slice = {arch.cputype, arch.cpusubtype, arch.offset, arch.size, arch.align};
  }
  return slice;
}

uint64_t fat_header_size(const Universal& universal) {
  return sizeof(FatHeader) + universal.slices.size() * fat_arch_size(universal.fat64);
}

Universal parse_universal(const Bytes& file) {
  Universal universal;
  uint32_t magic = file.be32(offsetof(FatHeader, magic), "fat magic");
  if (magic != macho::FAT_MAGIC && magic != macho::FAT_MAGIC_64) file.fail_here(0, "not a universal file");
  universal.fat64 = magic == macho::FAT_MAGIC_64;
  uint32_t count = file.be32(offsetof(FatHeader, nfat_arch), "nfat_arch");
  if (count == 0 || count > 64) file.fail_here(offsetof(FatHeader, nfat_arch), "nfat_arch " + std::to_string(count) + " is not a plausible slice count");
  uint64_t entry_size = fat_arch_size(universal.fat64);
  file.require(sizeof(FatHeader), count * entry_size, "fat_arch table");
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t at = sizeof(FatHeader) + i * entry_size;
    FatSlice slice = read_fat_arch(file, at, universal.fat64);
    // The offset field is at the same place in both entry formats.
    uint64_t offset_at = at + offsetof(FatArch, offset);
    std::string arch = cpu_name(slice.cputype, slice.cpusubtype);
    if (slice.align > 15) file.fail_here(at, "slice " + arch + ": alignment 2^" + std::to_string(slice.align) + " is too large");
    if (!fits(slice.offset, slice.size, file.size()))
      file.fail_here(offset_at, "slice " + arch + " (offset " + hex(slice.offset) + ", size " + hex(slice.size) +
                                 ") runs past the end of the file");
    if (slice.offset < sizeof(FatHeader) + count * entry_size)
      file.fail_here(offset_at, "slice " + arch + " overlaps the fat header");
    universal.slices.push_back(slice);
  }
  std::vector<FatSlice> by_offset = universal.slices;
  std::sort(by_offset.begin(), by_offset.end(), [](auto& a, auto& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1].offset + by_offset[i - 1].size > by_offset[i].offset)
      file.fail_here(by_offset[i].offset, "slices " + cpu_name(by_offset[i - 1].cputype, by_offset[i - 1].cpusubtype) +
                                               " and " + cpu_name(by_offset[i].cputype, by_offset[i].cpusubtype) + " overlap");
  for (size_t i = 0; i < universal.slices.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (universal.slices[i].cputype == universal.slices[j].cputype &&
          (universal.slices[i].cpusubtype & 0xffffff) == (universal.slices[j].cpusubtype & 0xffffff))
        file.fail_here(sizeof(FatHeader) + i * entry_size, "architecture " +
                                               cpu_name(universal.slices[i].cputype, universal.slices[i].cpusubtype) +
                                               " appears twice");
  return universal;
}

std::vector<uint64_t> layout_universal(Universal& universal, const std::vector<uint64_t>& new_sizes) {
  std::vector<size_t> order(universal.slices.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Keep the slices in the order they had in the file.
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return universal.slices[a].offset < universal.slices[b].offset; });
  uint64_t position = fat_header_size(universal);
  for (size_t index : order) {
    FatSlice& slice = universal.slices[index];
    // Whatever the header's align field says, dyld wants every slice on a page of its
    // architecture (loader rule fat-slice-aligned).
    uint64_t page = slice.cputype == macho::CPU_TYPE_ARM64 || slice.cputype == macho::CPU_TYPE_ARM64_32 ? 0x4000 : 0x1000;
    uint64_t alignment = std::max(uint64_t(1) << slice.align, page);
    uint64_t aligned = align_up(position, alignment);
    // The first slice stays where it was when possible (lipo puts it on a page).
    if (index == order.front()) aligned = std::max(aligned, slice.offset);
    slice.offset = aligned;
    slice.size = new_sizes[index];
    if (!universal.fat64 && (slice.offset > UINT32_MAX || slice.size > UINT32_MAX || slice.offset + slice.size > UINT32_MAX))
      fail("a slice would lie beyond 4 GiB, which a 32-bit fat header cannot describe");
    position = slice.offset + slice.size;
  }
  std::vector<uint64_t> offsets;
  for (const FatSlice& slice : universal.slices) offsets.push_back(slice.offset);
  return offsets;
}

std::vector<uint8_t> universal_header_bytes(const Universal& universal) {
  std::vector<uint8_t> header(fat_header_size(universal), 0);
  FatHeader fat_header;
  fat_header.magic = universal.fat64 ? macho::FAT_MAGIC_64 : macho::FAT_MAGIC;
  fat_header.nfat_arch = static_cast<uint32_t>(universal.slices.size());
  put(header, 0, fat_header);
  uint64_t entry_size = fat_arch_size(universal.fat64);
  for (size_t i = 0; i < universal.slices.size(); ++i) {
    const FatSlice& slice = universal.slices[i];
    uint64_t at = sizeof(FatHeader) + i * entry_size;
    if (universal.fat64) {
      FatArch64 arch{};
      arch.cputype = slice.cputype;
      arch.cpusubtype = slice.cpusubtype;
      arch.offset = slice.offset;
      arch.size = slice.size;
      arch.align = slice.align;
      arch.reserved = 0;
      put(header, at, arch);
    } else {
      FatArch arch;
      arch.cputype = slice.cputype;
      arch.cpusubtype = slice.cpusubtype;
      arch.offset = static_cast<uint32_t>(slice.offset);
      arch.size = static_cast<uint32_t>(slice.size);
      arch.align = slice.align;
      put(header, at, arch);
    }
  }
  return header;
}

}  // namespace machofix
