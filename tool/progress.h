// A one-line progress bar on a terminal (stderr), nothing in pipes or logs.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "core/job.h"

namespace machofix::cli {

class ProgressBar {
 public:
  explicit ProgressBar(bool wanted) : active_(wanted && isatty(STDERR_FILENO)) {}

  void update(size_t done, size_t total, const FileReport& latest) {
    if (!active_) return;
    failed_ += latest.status == "failed";
    changed_ += latest.status == "changed" || latest.status == "would change";
    auto now = std::chrono::steady_clock::now();
    // Redrawing on every file of a large tree would cost more than the files.
    if (done != total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    std::string name = latest.path.size() > 40 ? "..." + latest.path.substr(latest.path.size() - 37) : latest.path;
    std::fprintf(stderr, "\r\033[K[%zu/%zu] %zu changed, %zu failed  %s", done, total, changed_, failed_, name.c_str());
    drawn_ = true;
  }

  void finish() {
    if (drawn_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  bool active_;
  bool drawn_ = false;
  size_t failed_ = 0;
  size_t changed_ = 0;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace machofix::cli
