#include "core/base/mapped_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace machofix {

namespace {

struct Mappings {
  std::mutex mutex;
  std::vector<std::pair<const uint8_t*, uint64_t>> ranges;  // start, size
};

Mappings& mappings() {
  static Mappings registered;
  return registered;
}

bool inside_a_mapping(const uint8_t* data, uint64_t length) {
  Mappings& all = mappings();
  std::lock_guard<std::mutex> lock(all.mutex);
  return std::any_of(all.ranges.begin(), all.ranges.end(), [&](const auto& range) {
    return data >= range.first && length <= range.second && static_cast<uint64_t>(data - range.first) <= range.second - length;
  });
}

}  // namespace

void register_read_only_mapping(const uint8_t* data, uint64_t size) {
  Mappings& all = mappings();
  std::lock_guard<std::mutex> lock(all.mutex);
  all.ranges.emplace_back(data, size);
}

void unregister_read_only_mapping(const uint8_t* data) {
  Mappings& all = mappings();
  std::lock_guard<std::mutex> lock(all.mutex);
  all.ranges.erase(std::remove_if(all.ranges.begin(), all.ranges.end(), [&](const auto& range) { return range.first == data; }),
                   all.ranges.end());
}

void release_mapped_pages(const uint8_t* data, uint64_t length) {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  // Whole pages only: the pages at either end may hold bytes another pass still reads.
  uint64_t address = reinterpret_cast<uint64_t>(data);
  uint64_t start = (address + page - 1) / page * page, end = (address + length) / page * page;
  if (end <= start || !inside_a_mapping(data, length)) return;
  madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED);
}

}  // namespace machofix
