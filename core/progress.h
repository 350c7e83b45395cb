// Progress of the work on one file, for front ends that show it (tool/progress.h):
// the copy and comparison loops of a .pte rewrite and the writing of a Mach-O file
// report the bytes they have done, a few MiB at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

namespace machofix {

// `done` of `total` units of work on one file. Called from whichever thread does
// the work, so it must be thread-safe and quick; `done` may arrive out of order.
using ByteProgress = std::function<void(uint64_t done, uint64_t total)>;

// Counts the bytes several threads do and passes the sum on every few MiB. Does
// nothing without a callback.
class ProgressMeter {
 public:
  ProgressMeter(ByteProgress report, uint64_t total);
  void add(uint64_t bytes);

 private:
  ByteProgress report_;
  uint64_t total_;
  uint64_t step_;
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> next_report_;
};

}  // namespace machofix
