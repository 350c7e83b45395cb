// Progress of the work on one file, for front ends that show it (tool/progress.h):
// the copy and comparison loops of a .pte rewrite and the writing of a Mach-O file
// report the bytes they have done, a few MiB at a time, and so does the hashing of
// pages when a signature is checked or made.
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
  // Raises the count to at least `done`: a stage whose bytes were not all counted
  // is over. Not for several threads at once.
  void reach(uint64_t done);

 private:
  ByteProgress report_;
  uint64_t total_;
  uint64_t step_;
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> next_report_;
};

// The meter the calling thread's work counts towards, for the long loops deep
// below a job (hashing every page: core/base/sha.h) that would otherwise each need a
// parameter for it. A job sets it for its duration; nullptr when no one listens.
class ProgressScope {
 public:
  explicit ProgressScope(ProgressMeter* meter);
  ~ProgressScope();
  ProgressScope(const ProgressScope&) = delete;
  ProgressScope& operator=(const ProgressScope&) = delete;
  static ProgressMeter* current();

 private:
  ProgressMeter* previous_;
};

}  // namespace machofix
