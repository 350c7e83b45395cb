#include "core/io/shared_extents.h"

#ifdef __linux__
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#endif

#include <algorithm>
#include <vector>

namespace machofix {

#ifdef __linux__

namespace {

// Extent flags that leave the data's location or contents in doubt.
constexpr uint32_t kDoubtful = FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC | FIEMAP_EXTENT_ENCODED |
                               FIEMAP_EXTENT_DATA_ENCRYPTED | FIEMAP_EXTENT_NOT_ALIGNED | FIEMAP_EXTENT_DATA_INLINE |
                               FIEMAP_EXTENT_DATA_TAIL | FIEMAP_EXTENT_UNWRITTEN;

struct Extent {
  uint64_t logical, physical, length;
  uint32_t flags;
};

// The extents of [start, start + length) of `fd`, in file order; false on failure.
bool extent_map(int fd, uint64_t start, uint64_t length, std::vector<Extent>& extents) {
  constexpr uint32_t kBatch = 256;
  std::vector<uint8_t> buffer(sizeof(fiemap) + kBatch * sizeof(fiemap_extent));
  for (uint64_t position = start, end = start + length; position < end;) {
    std::fill(buffer.begin(), buffer.end(), 0);
    auto* map = reinterpret_cast<fiemap*>(buffer.data());
    map->fm_start = position;
    map->fm_length = end - position;
    map->fm_flags = FIEMAP_FLAG_SYNC;
    map->fm_extent_count = kBatch;
    if (ioctl(fd, FS_IOC_FIEMAP, map) != 0 || map->fm_mapped_extents == 0) return false;
    for (uint32_t i = 0; i < map->fm_mapped_extents; ++i) {
      const fiemap_extent& found = map->fm_extents[i];
      extents.push_back({found.fe_logical, found.fe_physical, found.fe_length, found.fe_flags});
    }
    const Extent& last = extents.back();
    if (last.flags & FIEMAP_EXTENT_LAST || last.logical + last.length <= position) break;
    position = last.logical + last.length;
  }
  return true;
}

// The extent holding byte `at`, from index `from` on; null in a hole.
const Extent* holding(const std::vector<Extent>& extents, size_t& from, uint64_t at) {
  while (from < extents.size() && extents[from].logical + extents[from].length <= at) ++from;
  if (from == extents.size() || extents[from].logical > at) return nullptr;
  return &extents[from];
}

}  // namespace

bool proven_shared(int in_fd, uint64_t in_at, int out_fd, uint64_t out_at, uint64_t length) {
  if (length == 0) return true;
  std::vector<Extent> input, output;
  if (!extent_map(in_fd, in_at, length, input) || !extent_map(out_fd, out_at, length, output)) return false;
  size_t in_index = 0, out_index = 0;
  for (uint64_t done = 0; done < length;) {
    const Extent* in = holding(input, in_index, in_at + done);
    const Extent* out = holding(output, out_index, out_at + done);
    if (!in || !out || (in->flags | out->flags) & kDoubtful || !(out->flags & FIEMAP_EXTENT_SHARED)) return false;
    uint64_t in_offset = in_at + done - in->logical, out_offset = out_at + done - out->logical;
    if (in->physical + in_offset != out->physical + out_offset) return false;
    done += std::min(in->length - in_offset, out->length - out_offset);
  }
  return true;
}

#else

bool proven_shared(int, uint64_t, int, uint64_t, uint64_t) { return false; }

#endif

}  // namespace machofix
