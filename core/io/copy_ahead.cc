#include "core/io/copy_ahead.h"

#include <algorithm>

#include "core/base/bytes.h"

namespace machofix {

CopyAhead::CopyAhead(const MappedFile& input, AtomicOutput& output, CopyChecker& checker)
    : input_(input), output_(output), checker_(checker) {
  if (input.size() >= kThreadedCopyMinimum) thread_ = std::thread([this] { run(); });
  else run();  // small: copied here and now (kThreadedCopyMinimum)
}

uint64_t CopyAhead::finish() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(error_);
  if (copied_ < std::min<uint64_t>(limit_, input_.size())) fail("internal error: the early copy stopped at " + hex(copied_));
  return copied_;
}

void CopyAhead::stop() {
  limit_ = 0;
  if (thread_.joinable()) thread_.join();
}

void CopyAhead::run() {
  try {
    for (uint64_t length = 0; copied_ < input_.size() && copied_ < limit_; copied_ += length) {
      length = copy_chunk_at(copied_, input_.size());
      output_.copy_from(input_.fd(), copied_, copied_, length);
      hand_to_checker(output_, checker_, copied_, copied_, length);
    }
  } catch (...) {
    error_ = std::current_exception();
  }
  checker_.close_submissions();
}

CopiedOutput::CopiedOutput(const MappedFile& input, const std::string& target, bool durable, ByteProgress compared) {
  output_.emplace(target, input.mode(), durable);
  bool cloned = output_->clone_from(input.fd());
  // Not sized up front: the copy grows the file. ext4 copies into a hole below the
  // end of a file about half as fast as it appends (a 4 GB .pte: 4.8 s against 2.1 s);
  // the checker maps the whole size but reads only what has been copied.
  checker_.emplace(input, output_->temp_path(), input.size(), std::move(compared));
  if (cloned) checker_->prove_shared_extents();
  if (output_->durable()) checker_->start_writeback_of_copies();
  ahead_.emplace(input, *output_, *checker_);
}

uint64_t CopiedOutput::keep_copy(uint64_t limit, uint64_t size) {
  ahead_->stop_at(limit);
  checker_->help();  // returns once the copy is done and compared
  uint64_t copied = ahead_->finish();
  if (output_->size() > size) output_->truncate(size);
  checker_->resize_output(size);
  return std::min(copied, size);
}

uint64_t held_by_early_copy(uint64_t in_at, uint64_t out_at, uint64_t length, uint64_t kept) {
  if (in_at != out_at || kept <= out_at) return 0;
  return std::min(kept - out_at, length);
}

}  // namespace machofix
