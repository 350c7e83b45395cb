#include "tool/progress.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace machofix::cli {

namespace {

constexpr auto kRedraw = std::chrono::milliseconds(100);
constexpr size_t kShownName = 40;  // characters of the file name, the end kept

// The unit that shows `total` with a few digits, and its size.
std::pair<const char*, double> byte_unit(uint64_t total) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double scale = 1;
  size_t unit = 0;
  while (unit + 1 < std::size(units) && total >= scale * 1024 * 10) {
    scale *= 1024;
    ++unit;
  }
  return {units[unit], scale};
}

std::string shortened_path(const std::string& path) {
  return path.size() > kShownName ? "..." + path.substr(path.size() - (kShownName - 3)) : path;
}

}  // namespace

ProgressMode progress_mode(const char* setting) {
  std::string value = setting ? setting : "";
  if (value == "always") return ProgressMode::Always;
  if (value == "never") return ProgressMode::Never;
  if (!value.empty() && value != "auto")
    spdlog::warn("MACHOFIX_PROGRESS={} is none of auto, always and never: auto", value);
  return ProgressMode::Auto;
}

std::string progress_line(const ProgressCounts& counts) {
  auto [unit, scale] = byte_unit(counts.bytes_total);
  char head[96];
  std::snprintf(head, sizeof head, "[%zu/%zu files, %.1f/%.1f %s] %zu changed, %zu failed", counts.files_done,
                counts.files_total, counts.bytes_done / scale, counts.bytes_total / scale, unit, counts.changed, counts.failed);
  return std::string(head) + (counts.current.empty() ? "" : "  " + shortened_path(counts.current));
}

ProgressBar::ProgressBar(bool wanted, ProgressMode mode, size_t files, uint64_t bytes)
    : mode_(mode), files_total_(files), bytes_total_(bytes) {
  if (wanted && mode != ProgressMode::Never && isatty(STDERR_FILENO)) thread_ = std::thread([this] { run(); });
}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::file_started(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  current_ = path;
}

void ProgressBar::file_done(const FileReport& latest) {
  failed_ += latest.status == FileStatus::Failed;
  changed_ += latest.status == FileStatus::Changed || latest.status == FileStatus::WouldChange;
  ++files_done_;
  std::lock_guard<std::mutex> lock(mutex_);
  current_ = latest.path;
}

void ProgressBar::add_bytes(uint64_t bytes) { bytes_done_ += bytes; }

void ProgressBar::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  if (drawn_) std::fprintf(stderr, "\r\033[K");
  drawn_ = false;
}

ProgressCounts ProgressBar::snapshot() {
  ProgressCounts counts{files_done_, files_total_, bytes_done_, bytes_total_, changed_, failed_, ""};
  std::lock_guard<std::mutex> lock(mutex_);
  counts.current = current_;
  return counts;
}

void ProgressBar::run() {
  bool shown = mode_ == ProgressMode::Always;
  for (bool first = true;; first = false) {
    if (!(first && shown)) {  // MACHOFIX_PROGRESS=always: the first line at once
      std::unique_lock<std::mutex> lock(mutex_);
      if (wake_.wait_for(lock, kRedraw, [this] { return stopping_; })) return;
    }
    ProgressCounts counts = snapshot();
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    double fraction = counts.bytes_total ? static_cast<double>(counts.bytes_done) / counts.bytes_total : 0;
    if (counts.files_total) fraction = std::max(fraction, static_cast<double>(counts.files_done) / counts.files_total);
    shown = shown || expected_to_take_long(elapsed, fraction);
    if (!shown) continue;
    std::fprintf(stderr, "\r\033[K%s", progress_line(counts).c_str());
    std::fflush(stderr);
    drawn_ = true;
  }
}

}  // namespace machofix::cli
