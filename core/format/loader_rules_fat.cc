// Loader rules on a universal file's header and slice placement
// (dyld mach_o::Universal::valid / validSlice, dyld3 FatFile::forEachSlice), and
// the whole-image entry point that also checks each 64-bit slice.
#include <vector>

#include "core/base/error.h"
#include "core/format/fat.h"
#include "core/format/loader_rules.h"
#include "core/format/macho.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"

namespace machofix {

namespace {

using macho::FatArch;
using macho::FatHeader;
using macho::MachHeader64;

// FatFile::forEachSlice: the header fits in a page.
constexpr uint32_t kMaxFatArchs = (4096 - sizeof(FatHeader)) / sizeof(FatArch);
// Where findings about a slice's placement point: its offset field, at the same place
// in fat_arch and fat_arch_64.
constexpr uint64_t kOffsetField = offsetof(FatArch, offset);

struct Entry {
  uint32_t cputype, cpusubtype;
  uint64_t offset, size;
  uint64_t at;  // the fat_arch(_64) in the file
};

std::string arch_name(uint32_t cputype, uint32_t cpusubtype) { return cpu_name(cputype, cpusubtype); }
std::string arch_detail(uint32_t cputype, uint32_t cpusubtype) {
  return cpu_name(cputype, cpusubtype) + ", cpusubtype " + hex(cpusubtype);
}

// Architecture equality as mach_o::Architecture defines it: arm64 subtypes compare
// with their capability bits, others without. Universal::forEachSlice takes an arm64e
// fat_arch without them (libtool leaves the ABI bits out) for arm64e with them.
bool same_arch(uint32_t type_a, uint32_t sub_a, uint32_t type_b, uint32_t sub_b) {
  if (type_a != type_b || ((sub_a ^ sub_b) & 0x00ffffff)) return false;
  bool libtool_arm64e = (sub_a & 0x00ffffff) == 2 && (!(sub_a & 0xff000000) || !(sub_b & 0xff000000));
  return type_a != macho::CPU_TYPE_ARM64 || sub_a == sub_b || libtool_arm64e;
}

std::vector<Entry> read_entries(const Bytes& file, bool fat64, uint32_t count) {
  std::vector<Entry> entries;
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t at = sizeof(FatHeader) + i * fat_arch_size(fat64);
    FatSlice slice = read_fat_arch(file, at, fat64);
    entries.push_back({slice.cputype, slice.cpusubtype, slice.offset, slice.size, at});
  }
  return entries;
}

void check_slice_header(const Bytes& file, const Entry& entry, std::vector<RuleViolation>& found) {
  Bytes slice = file.sub(entry.offset, entry.size, "universal slice");
  // Not a Mach-O (dyld reads the header up to its flags): nothing dyld checks here.
  if (slice.size() < offsetof(MachHeader64, reserved) || !looks_like_thin_macho(slice)) return;
  uint32_t cputype = slice.u32(offsetof(MachHeader64, cputype)), cpusubtype = slice.u32(offsetof(MachHeader64, cpusubtype));
  bool pages16k = cputype == macho::CPU_TYPE_ARM64 || cputype == macho::CPU_TYPE_ARM64_32;
  uint64_t page = pages16k ? 0x4000 : 0x1000;
  if (entry.offset % page)
    found.push_back({"fat-slice-aligned", file.base() + entry.at + kOffsetField, arch_name(entry.cputype, entry.cpusubtype) + " slice at " + hex(entry.offset) +
                                                             " is not page aligned (" + hex(page) + ")"});
  if (!same_arch(cputype, cpusubtype, entry.cputype, entry.cpusubtype))
    found.push_back({"fat-slice-arch", file.base() + entry.at, "cpu type/subtype in slice (" + arch_detail(cputype, cpusubtype) +
                                                                    ") does not match fat header (" + arch_detail(entry.cputype, entry.cpusubtype) + ")"});
}

void check_entries(const Bytes& file, const std::vector<Entry>& entries, std::vector<RuleViolation>& found) {
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& entry = entries[i];
    std::string name = arch_name(entry.cputype, entry.cpusubtype);
    if (!fits(entry.offset, entry.size, file.size())) {
      found.push_back({"fat-slice-in-file", file.base() + entry.at + kOffsetField, name + " slice extends beyond end of file"});
      continue;
    }
    for (size_t j = 0; j < i; ++j) {
      const Entry& other = entries[j];
      if (same_arch(entry.cputype, entry.cpusubtype, other.cputype, other.cpusubtype))
        found.push_back({"fat-duplicate-arch", file.base() + entry.at, "duplicate " + name + " slices"});
      if (entry.size && other.size && entry.offset < other.offset + other.size && other.offset < entry.offset + entry.size)
        found.push_back({"fat-overlap", file.base() + entry.at + kOffsetField, "overlapping slices (" + name + " and " + arch_name(other.cputype, other.cpusubtype) + ")"});
    }
    check_slice_header(file, entry, found);
  }
}

}  // namespace

std::vector<RuleViolation> check_universal_rules(const Bytes& file) {
  std::vector<RuleViolation> found;
  bool fat64 = file.size() >= sizeof(uint32_t) && file.be32(offsetof(FatHeader, magic)) == macho::FAT_MAGIC_64;
  uint64_t entry_size = fat_arch_size(fat64);
  if (file.size() < sizeof(FatHeader) + entry_size) return {{"fat-header", file.base(), "fat file too short"}};
  uint64_t count_at = offsetof(FatHeader, nfat_arch);
  uint32_t count = file.be32(count_at);
  if (count > kMaxFatArchs) return {{"fat-header", file.base() + count_at, "fat header too large: " + std::to_string(count) + " entries"}};
  // A 32-bit header must have room for one more entry: dyld looks there for a hidden arm64 slice.
  uint64_t headers = sizeof(FatHeader) + (fat64 ? count : count + 1) * entry_size;
  if (headers > file.size()) return {{"fat-header", file.base() + count_at, "slice headers extend beyond end of file"}};
  check_entries(file, read_entries(file, fat64, count), found);
  return found;
}

std::vector<RuleViolation> check_image_rules(const Bytes& file) {
  if (!looks_like_universal(file)) return check_loader_rules(file);
  std::vector<RuleViolation> found = check_universal_rules(file);
  if (!found.empty()) return found;  // slices cannot be located reliably
  FatHeader header = file.get<FatHeader>(0, "fat header");  // check_universal_rules found it whole
  for (const Entry& entry : read_entries(file, header.magic == macho::FAT_MAGIC_64, header.nfat_arch)) {
    if (!(entry.cputype & macho::CPU_ARCH_ABI64)) continue;  // machofix leaves 32-bit slices alone
    std::vector<RuleViolation> slice = check_loader_rules(Bytes(file.data() + entry.offset, entry.size, file.base() + entry.offset));
    found.insert(found.end(), slice.begin(), slice.end());
  }
  return found;
}

}  // namespace machofix
