#include "core/io/copy_ahead.h"

#include <algorithm>

#include "core/base/bytes.h"

namespace machofix {

CopyAhead::CopyAhead(const MappedFile& input, AtomicOutput& output, CopyChecker& checker, std::vector<CopiedRange> plan)
    : input_(input), output_(output), checker_(checker), plan_(std::move(plan)) {
  if (input.size() >= kThreadedCopyMinimum) thread_ = std::thread([this] { run(); });
  else run();  // small: copied here and now (kThreadedCopyMinimum)
}

std::vector<CopiedRange> CopyAhead::finish() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(error_);
  for (size_t i = 0; i < plan_.size(); ++i) {
    uint64_t due = limit_ <= plan_[i].out_at ? 0 : std::min(plan_[i].length, limit_ - plan_[i].out_at);
    if (i >= copied_.size() || copied_[i].length < due)
      fail_as(ErrorKind::Internal, "internal error: the early copy stopped short of " + hex(plan_[i].out_at + due));
  }
  return copied_;
}

void CopyAhead::stop() {
  limit_ = 0;
  if (thread_.joinable()) thread_.join();
}

void CopyAhead::run() {
  try {
    for (const CopiedRange& part : plan_) {
      CopiedRange& done = copied_.emplace_back(CopiedRange{part.in_at, part.out_at, 0});
      for (uint64_t length = 0; done.length < part.length && done.out_end() < limit_; done.length += length) {
        length = copy_chunk_at(done.out_end(), part.out_end());
        output_.copy_from(input_.fd(), done.in_at + done.length, done.out_end(), length);
        hand_to_checker(output_, checker_, done.out_end(), done.in_at + done.length, length);
      }
    }
  } catch (...) {
    error_ = std::current_exception();
  }
  checker_.close_submissions();
}

namespace {

uint64_t planned_size(const MappedFile& input, const std::vector<CopiedRange>& plan) {
  uint64_t size = input.size();
  for (const CopiedRange& part : plan) size = std::max(size, part.out_end());
  return size;
}

}  // namespace

CopiedOutput::CopiedOutput(const MappedFile& input, const std::string& target, bool durable, ByteProgress compared,
                           std::vector<CopiedRange> plan) {
  if (plan.empty()) plan = in_place_plan(input.size());
  output_.emplace(target, input.mode(), durable);
  bool cloned = output_->clone_from(input.fd());
  // Not sized up front: the copy grows the file. ext4 copies into a hole below the
  // end of a file about half as fast as it appends (a 4 GB .pte: 4.8 s against 2.1 s);
  // the checker reads only what has been copied.
  checker_.emplace(input, output_->temp_path(), planned_size(input, plan), std::move(compared));
  if (cloned) checker_->prove_shared_extents();
  if (output_->durable()) checker_->start_writeback_of_copies();
  ahead_.emplace(input, *output_, *checker_, std::move(plan));
}

std::vector<CopiedRange> CopiedOutput::keep_copy(uint64_t limit, uint64_t size) {
  ahead_->stop_at(limit);
  checker_->help();  // returns once the copy is done and compared
  std::vector<CopiedRange> copied = ahead_->finish();
  if (output_->size() > size) output_->truncate(size);
  for (CopiedRange& range : copied) range.length = range.out_at >= size ? 0 : std::min(range.length, size - range.out_at);
  return copied;
}

uint64_t first_unheld(const std::vector<CopiedRange>& plan, const std::vector<CopiedRange>& wanted) {
  for (const CopiedRange& range : wanted) {
    uint64_t held = held_by(plan, range.in_at, range.out_at, range.length);
    if (held < range.length) return range.out_at + held;
  }
  return UINT64_MAX;
}

}  // namespace machofix
