#include "core/io/copy_check.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "core/base/error.h"
#include "core/base/mapped_pages.h"
#include "core/base/proof_seam.h"
#include "core/base/util.h"
#include "core/io/shared_extents.h"

namespace machofix {

namespace {

// Ranges are compared in place in the page cache. Reading them into buffers with
// pread copies every byte once more (it took a 1 GiB .pte from 1.2x to 1.5x
// `cp`); mapping and unmapping a window per range costs, at each munmap, a TLB
// flush on every CPU the process runs on (6% of the CPU time of a 10 MB .pte).
// Instead the pages compared are dropped from both mappings a batch at a time,
// which keeps memory bounded whatever the file size. (A small output is read with
// pread all the same: there the mapping costs more than the copy; OutputMapping.)
constexpr uint64_t kReleaseBatch = 8ull << 20;

// Ranges are compared in parts of at most this, so that the checker and a helping
// thread can share one range.
constexpr uint64_t kCompareUnit = 1ull << 20;

// `written`: the output's bytes of the range.
void compare_range(const uint8_t* input, const uint8_t* written, const CopiedRange& range) {
  const uint8_t* expected = input + range.in_at;
  if (std::memcmp(expected, written, range.length) == 0) return;
  uint64_t at = 0;
  while (expected[at] == written[at]) ++at;
  fail_as(ErrorKind::ProofFailed, "the output differs from input offset " + hex(range.in_at + at) + ", which it copies",
          range.out_at + at);
}

// Starts writing a copied range to disk now, so that commit()'s fsync has little
// left to wait for. Only a hint.
void start_writeback(int fd, uint64_t offset, uint64_t length) {
#ifdef __linux__
  sync_file_range(fd, static_cast<off_t>(offset), static_cast<off_t>(length), SYNC_FILE_RANGE_WRITE);
#else
  // macOS has no call that starts the writeback of a range without waiting for it
  // (F_FULLFSYNC at commit does the whole flush).
  (void)fd, (void)offset, (void)length;
#endif
}

Descriptor open_output(const std::string& temp_path) {
  Descriptor output(::open(temp_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!output.valid()) fail_system("cannot reopen the temporary output to verify it");
  return output;
}

}  // namespace

OutputMapping::OutputMapping(int fd, uint64_t size) : fd_(fd) { map(size); }

OutputMapping::~OutputMapping() { unmap(); }

void OutputMapping::resize(uint64_t size) {
  unmap();
  map(size);
}

const uint8_t* OutputMapping::range(uint64_t at, uint64_t length) {
  if (!fits(at, length, size_)) fail_as(ErrorKind::Internal, "internal error: a range past the end of the output is compared", at);
  if (!read_) return base_ + at;
  int64_t got = read_fully_at(fd_, read_.get() + at, length, at);
  if (got < 0) fail_as(ErrorKind::System, "cannot read back the temporary output: " + std::string(std::strerror(errno)), at);
  if (static_cast<uint64_t>(got) < length)
    fail_as(ErrorKind::ProofFailed, "the temporary output ends before the copy it should hold", at + static_cast<uint64_t>(got));
  return read_.get() + at;
}

void OutputMapping::map(uint64_t size) {
  size_ = size;
  if (size == 0) return;
  if (size < kReadNotMappedBelow) {
    read_.reset(new uint8_t[size]);  // not zeroed: only what range() read is ever read
    base_ = read_.get();
    return;
  }
  void* base = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd_, 0);
  if (base == MAP_FAILED) fail_system("cannot map the temporary output to verify it");
  base_ = static_cast<const uint8_t*>(base);
  register_read_only_mapping(base_, size_, fd_);  // so release_mapped_pages lets its pages go
}

void OutputMapping::unmap() {
  if (!base_) return;
  if (read_) {
    read_.reset();
    base_ = nullptr;
    return;
  }
  unregister_read_only_mapping(base_);
  munmap(const_cast<uint8_t*>(base_), size_);
  base_ = nullptr;
}

CopyChecker::CopyChecker(const MappedFile& input, const std::string& temp_path, uint64_t output_size, ByteProgress progress)
    : input_(input.bytes().data()), input_fd_(input.fd()), fd_(open_output(temp_path)), output_(fd_.get(), output_size),
      progress_(std::move(progress), output_size) {
  if (output_size >= kThreadedCopyMinimum) thread_ = std::thread([this] { run(); });
}

CopyChecker::~CopyChecker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.clear();  // unless finish() ran, the output is being abandoned
  }
  stop();
}

void CopyChecker::submit(const CopiedRange& range) {
  // Asked in the writer's thread: a clone's ranges are then never queued at all.
  if (prove_shared_ && proven_shared(input_fd_, range.in_at, fd_.get(), range.out_at, range.length)) {
    shared_bytes_ += range.length;
    progress_.add(range.length);
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (uint64_t done = 0; done < range.length; done += kCompareUnit)
    queue_.push_back({{range.in_at + done, range.out_at + done, std::min(kCompareUnit, range.length - done)},
                      done == 0 && write_back_ ? range.length : 0});
  work_.notify_one();
}

void CopyChecker::close_submissions() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  closed_wake_.notify_all();
}

// Not before the writer is done: the checker alone compares faster than the
// writer copies, and a third busy thread would only take CPU time from the copy.
void CopyChecker::help() {
  std::unique_lock<std::mutex> lock(mutex_);
  closed_wake_.wait(lock, [this] { return closed_; });
  while (!queue_.empty()) compare_next(lock);
  idle_wake_.wait(lock, [this] { return busy_ == 0; });
  if (error_) std::rethrow_exception(error_);
}

void CopyChecker::resize_output(uint64_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (size == output_.size()) return;  // the mapping already covers it
  compared_.clear();  // pages of the old mapping, gone with it
  compared_bytes_ = 0;
  output_.resize(size);
}

void CopyChecker::finish() {
  stop();
  std::unique_lock<std::mutex> lock(mutex_);
  while (!queue_.empty()) compare_next(lock);  // no thread of its own, or nothing left
  if (error_) std::rethrow_exception(error_);
}

void CopyChecker::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
    work_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void CopyChecker::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_.wait(lock, [this] { return closing_ || !queue_.empty(); });
    if (queue_.empty()) return;
    compare_next(lock);
  }
}

// Takes the first queued range and compares it with `lock` released. Ranges are
// queued in the order they were copied: once a mismatch is found, the ones still
// queued are only drained, and of the ranges being compared meanwhile the mismatch
// at the lowest offset is kept, the same whichever thread finds it first.
void CopyChecker::compare_next(std::unique_lock<std::mutex>& lock) {
  auto [range, write_back] = queue_.front();
  queue_.pop_front();
  if (error_) return;
  ++busy_;
  lock.unlock();
  std::exception_ptr error;
  uint64_t error_at = range.out_at;
  try {
    if (write_back) start_writeback(fd_.get(), range.out_at, write_back);
    compare_range(input_, output_.range(range.out_at, range.length), range);
  } catch (const Error& mismatch) {
    error = std::current_exception();
    error_at = mismatch.offset().value_or(range.out_at);
  } catch (...) {
    error = std::current_exception();
  }
  progress_.add(range.length);
  lock.lock();
  if (error && (!error_ || error_at < error_at_)) {
    error_ = error;
    error_at_ = error_at;
  }
  note_compared(range, lock);  // still busy: it may use the output mapping
  if (--busy_ == 0) idle_wake_.notify_all();
}

// Keeps the range for release, merged with the previous one when they follow each
// other, and releases what is kept once it makes a batch.
void CopyChecker::note_compared(const CopiedRange& range, std::unique_lock<std::mutex>& lock) {
  append_joined(compared_, range);
  compared_bytes_ += range.length;
  if (compared_bytes_ < kReleaseBatch) return;
  std::vector<CopiedRange> batch;
  batch.swap(compared_);
  compared_bytes_ = 0;
  lock.unlock();
  for (const CopiedRange& kept : batch) {
    release_mapped_pages(input_ + kept.in_at, kept.length);
    release_mapped_pages(output_.data() + kept.out_at, kept.length);
  }
  lock.lock();
}

uint64_t copy_chunk_at(uint64_t at, uint64_t end) {
  uint64_t page = system_page_size();
  uint64_t start = at - at % page;
  uint64_t half_left = end > start ? (end - start) / 2 : 0;
  uint64_t chunk = std::clamp<uint64_t>(std::bit_floor(std::min(start, half_left)), kCopyChunk, kLargestCopyChunk);
  return std::min(chunk - start % chunk, end > at ? end - at : 0);
}

void hand_to_checker(AtomicOutput& output, CopyChecker& checker, uint64_t out_at, uint64_t in_at, uint64_t length) {
  seam::offer_file(seam::ProofStep::Copy, output.temp_path(), out_at, length);  // tests only
  checker.submit({in_at, out_at, length});
}

void copy_and_check(int in_fd, AtomicOutput& output, CopyChecker& checker, uint64_t in_at, uint64_t out_at, uint64_t length,
                    ProgressMeter* progress) {
  for (uint64_t done = 0, part = 0; done < length; done += part) {
    part = copy_chunk_at(out_at + done, out_at + length);
    output.copy_from(in_fd, in_at + done, out_at + done, part);
    hand_to_checker(output, checker, out_at + done, in_at + done, part);
    if (progress) progress->add(part);
  }
}

}  // namespace machofix
