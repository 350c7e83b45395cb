#include "core/base/progress.h"

#include <algorithm>

namespace machofix {

namespace {

// Often enough for a line redrawn ten times a second, rarely enough to cost nothing.
constexpr uint64_t kReportStep = 4ull << 20;

thread_local ProgressMeter* current_meter = nullptr;

}  // namespace

ProgressMeter::ProgressMeter(ByteProgress report, uint64_t total)
    : report_(std::move(report)), total_(total), step_(std::min(kReportStep, std::max<uint64_t>(total / 100, 1))),
      next_report_(step_) {}

void ProgressMeter::add(uint64_t bytes) {
  if (!report_) return;
  uint64_t done = done_ += bytes;
  uint64_t next = next_report_.load();
  // One thread per step reports; the others only count.
  if (done < next || !next_report_.compare_exchange_strong(next, done + step_)) return;
  report_(std::min(done, total_), total_);
}

void ProgressMeter::reach(uint64_t done) {
  uint64_t now = done_.load();
  if (now < done) add(done - now);
}

ProgressScope::ProgressScope(ProgressMeter* meter) : previous_(current_meter) { current_meter = meter; }

ProgressScope::~ProgressScope() { current_meter = previous_; }

ProgressMeter* ProgressScope::current() { return current_meter; }

}  // namespace machofix
