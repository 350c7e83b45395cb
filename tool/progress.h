// A one-line progress report on stderr when it is a terminal, nothing in pipes or
// logs: files and bytes done, for a run expected to take more than about a second
// (a single large file included: core reports the bytes it copies, compares and
// writes, core/base/progress.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "core/jobs/job.h"

namespace machofix::cli {

// MACHOFIX_PROGRESS: auto (the default: runs expected to take long), always (from
// the start), never. Either way only on a terminal.
enum class ProgressMode { Auto, Always, Never };
ProgressMode progress_mode(const char* setting);

// Whether a run that has lasted `elapsed` seconds and done `fraction` (0 to 1) of
// its work is expected to last more than about a second in all. Until 0.2 s the
// rate says too little; a run that has done nothing by then will take long.
inline bool expected_to_take_long(double elapsed, double fraction) {
  constexpr double kLong = 1.0;
  constexpr double kObserve = 0.2;
  if (elapsed >= kLong) return true;
  if (elapsed < kObserve) return false;
  return fraction <= 0 || elapsed / fraction >= kLong;
}

struct ProgressCounts {
  size_t files_done = 0, files_total = 0;
  uint64_t bytes_done = 0, bytes_total = 0;
  size_t changed = 0, failed = 0;
  std::string current;  // the file last started or finished
};

// "[1/3 files, 12.5/512.0 MiB] 1 changed, 0 failed  exports/model.pte"
std::string progress_line(const ProgressCounts& counts);

class ProgressBar {
 public:
  // `wanted`: not --quiet. Draws from a thread of its own, ten times a second.
  ProgressBar(bool wanted, ProgressMode mode, size_t files, uint64_t bytes);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void file_started(const std::string& path);
  void file_done(const FileReport& latest);
  void add_bytes(uint64_t bytes);  // from any thread
  // Stops drawing and clears the line: before anything else is printed.
  void finish();

 private:
  void run();
  ProgressCounts snapshot();

  ProgressMode mode_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  size_t files_total_;
  uint64_t bytes_total_;
  std::atomic<size_t> files_done_{0}, changed_{0}, failed_{0};
  std::atomic<uint64_t> bytes_done_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string current_;  // under mutex_
  bool stopping_ = false;  // under mutex_
  bool drawn_ = false;     // only the drawing thread, then finish()
  std::thread thread_;
};

}  // namespace machofix::cli
