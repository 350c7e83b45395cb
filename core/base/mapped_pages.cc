#include "core/base/mapped_pages.h"

#include "core/base/util.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace machofix {

namespace {

struct Mapping {
  const uint8_t* start;
  uint64_t size;
  int fd;
  uint64_t file_offset;
  bool holds(const uint8_t* data, uint64_t length) const {
    return data >= start && length <= size && static_cast<uint64_t>(data - start) <= size - length;
  }
};

struct Mappings {
  std::mutex mutex;
  std::vector<Mapping> ranges;
};

Mappings& mappings() {
  static Mappings registered;
  return registered;
}

std::optional<Mapping> mapping_holding(const uint8_t* data, uint64_t length) {
  Mappings& all = mappings();
  std::lock_guard<std::mutex> lock(all.mutex);
  for (const Mapping& mapping : all.ranges)
    if (mapping.holds(data, length)) return mapping;
  return std::nullopt;
}

}  // namespace

void register_read_only_mapping(const uint8_t* data, uint64_t size, int fd, uint64_t file_offset) {
  Mappings& all = mappings();
  std::lock_guard<std::mutex> lock(all.mutex);
  all.ranges.push_back({data, size, fd, file_offset});
}

void unregister_read_only_mapping(const uint8_t* data) {
  Mappings& all = mappings();
  std::lock_guard<std::mutex> lock(all.mutex);
  all.ranges.erase(std::remove_if(all.ranges.begin(), all.ranges.end(), [&](const Mapping& range) { return range.start == data; }),
                   all.ranges.end());
}

void release_mapped_pages(const uint8_t* data, uint64_t length) {
  // In whole 2 MiB blocks, within the mapping: the kernel maps a file's large folios
  // with huge page entries, and letting go of part of one splits it, with a TLB flush
  // on every CPU the process runs on (on a VM that cost more than hashing the pages).
  // Only the blocks a pass has moved past: a block it is still in, or a short pass
  // inside one block, is kept. Rounding the end outwards instead let go of the block
  // around every short comparison, which the next one faulted in again (a prune of a
  // 105 MB .pte compares its blob's unchanged ranges one by one: 15 releases of the
  // same block, and 10% of the run). A page let go that a pass still reads comes back
  // from the page cache. A small mapping is kept whole: its pages cost less memory
  // than the flushes of letting them go cost time (a batch of many small models,
  // several jobs at once).
  constexpr uint64_t kBlock = uint64_t(2) << 20;
  constexpr uint64_t kKeptWhole = uint64_t(16) << 20;
  std::optional<Mapping> mapping = mapping_holding(data, length);
  if (!mapping || length == 0 || mapping->size <= kKeptWhole) return;
  uint64_t page = system_page_size();
  uint64_t first = reinterpret_cast<uint64_t>(mapping->start), last = first + mapping->size / page * page;
  uint64_t address = reinterpret_cast<uint64_t>(data);
  uint64_t start = std::max(first, address / kBlock * kBlock);
  uint64_t reached = address + length;
  uint64_t end = reached >= last ? last : reached / kBlock * kBlock;  // a pass to the mapping's end lets go of it all
  if (end > start) madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED);
}

uint64_t mapping_uniform_extent(const uint8_t* data, uint64_t limit) {
  Mappings& all = mappings();
  std::lock_guard<std::mutex> lock(all.mutex);
  uint64_t extent = limit;
  for (const Mapping& mapping : all.ranges) {
    if (mapping.holds(data, 1)) return std::min(limit, mapping.size - static_cast<uint64_t>(data - mapping.start));
    if (mapping.start > data) extent = std::min(extent, static_cast<uint64_t>(mapping.start - data));
  }
  return extent;
}

std::optional<FileBehind> file_behind(const uint8_t* data, uint64_t length) {
  std::optional<Mapping> mapping = mapping_holding(data, length);
  if (!mapping || mapping->fd < 0) return std::nullopt;
  return FileBehind{mapping->fd, mapping->file_offset + static_cast<uint64_t>(data - mapping->start)};
}

const uint8_t* bytes_to_read(const uint8_t* data, uint64_t length, std::vector<uint8_t>& buffer) {
  std::optional<FileBehind> file = file_behind(data, length);
  if (!file) return data;
  if (buffer.size() < length) buffer.resize(length);
  bool whole = read_fully_at(file->fd, buffer.data(), length, file->offset) == static_cast<int64_t>(length);
  return whole ? buffer.data() : nullptr;
}

bool same_file_bytes(const uint8_t* a, const uint8_t* b, uint64_t length) {
  std::optional<FileBehind> first = file_behind(a, length), second = file_behind(b, length);
  return first && second && first->fd == second->fd && first->offset == second->offset;
}

}  // namespace machofix
