#include "core/io/copy_check.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "core/base/error.h"
#include "core/base/proof_seam.h"
#include "core/base/util.h"
#include "core/io/shared_extents.h"

namespace machofix {

namespace {

// Ranges are read back from both files into a small buffer, reused for every range,
// and compared there, rather than in place through mappings of the input and the
// output. On the AMD EPYC VM (BENCHMARKS.md) a page fault costs tens of
// microseconds, and comparing a 1 GiB copy through two mappings took 0.92 s (21,653
// faults), against 0.14 s through 256 KiB buffers. A read copies every byte once
// more, but into a buffer the CPU's cache holds, and no mapping is set up, faulted in
// or torn down (each munmap also interrupts every other CPU of the process to flush
// its TLB). On the Intel VM, where faults cost little, an earlier trial of reading
// had made a 1 GiB .pte slower (1.2x to 1.5x `cp`).
constexpr uint64_t kReadBlock = 256ull << 10;
// The read size for an output under kThreadedCopyMinimum: the first write to each
// page of a buffer costs a fault (on that VM about as much as reading 16 pages), and
// a small output is compared once, so a buffer that is smaller but reused more often
// costs less (a 1 MB .pte, 31 runs: 9 ms against 11 with kReadBlock; at 105 MB and
// 1 GiB kReadBlock was 10% faster).
constexpr uint64_t kSmallReadBlock = 64ull << 10;

// Ranges are compared in parts of at most this, so that the checker and a helping
// thread can share one range.
constexpr uint64_t kCompareUnit = 1ull << 20;

// The buffers a comparison reads into: two of `block` bytes in one anonymous mapping,
// lent to each comparing thread and kept for the next range and the next file. Its
// pages are filled in by the mapping call (MAP_POPULATE), not faulted in one by one:
// on the AMD EPYC VM (BENCHMARKS.md) a page's first touch costs 2.7 us, populating it
// 1.5 (512 KiB: 1.4 ms against 0.8), and a 105 MB .pte's prune took 10% longer with
// its buffers faulted in. Only what `block` needs is mapped: a small output's 64 KiB
// reads would pay for pages they never use. (Not thread_local: a thread_local with a
// destructor needs glibc's __cxa_thread_atexit_impl, which the Linux releases' glibc
// 2.17 lacks.)
class ReadBuffers {
 public:
  explicit ReadBuffers(uint64_t block) : block_(block) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto fits = std::find_if(kept_.begin(), kept_.end(), [&](const Mapping& kept) { return kept.size >= 2 * block; });
    if (fits == kept_.end()) {
      mapping_ = Mapping::of(2 * block);
      return;
    }
    mapping_ = std::move(*fits);
    kept_.erase(fits);
  }
  ~ReadBuffers() {
    std::lock_guard<std::mutex> lock(mutex_);
    kept_.push_back(std::move(mapping_));
  }
  ReadBuffers(const ReadBuffers&) = delete;
  ReadBuffers& operator=(const ReadBuffers&) = delete;
  uint8_t* expected() { return mapping_.data; }
  uint8_t* written() { return mapping_.data + block_; }

 private:
  struct Mapping {
    uint8_t* data = nullptr;
    uint64_t size = 0;
    static Mapping of(uint64_t size) {
#ifdef MAP_POPULATE
      constexpr int kPopulated = MAP_POPULATE;
#else
      constexpr int kPopulated = 0;  // macOS: faulted in as they are first written
#endif
      void* mapped = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON | kPopulated, -1, 0);
      if (mapped == MAP_FAILED) fail_system("cannot map memory to compare the output in");
      return {static_cast<uint8_t*>(mapped), size};
    }
    Mapping() = default;
    Mapping(uint8_t* data_in, uint64_t size_in) : data(data_in), size(size_in) {}
    Mapping(Mapping&& other) noexcept : data(std::exchange(other.data, nullptr)), size(std::exchange(other.size, 0)) {}
    Mapping& operator=(Mapping&& other) noexcept {
      std::swap(data, other.data);
      std::swap(size, other.size);
      return *this;
    }
    ~Mapping() {
      if (data) munmap(data, size);
    }
  };
  uint64_t block_;
  Mapping mapping_;
  // As many as threads ever compared at once; unmapped at exit.
  static inline std::mutex mutex_;
  static inline std::vector<Mapping> kept_;
};

// Reads `length` bytes of `fd` from `at` into `into`. An error names the file
// (`what`) and, when it is shorter, says `too_short`, at the output offset that was
// being compared (`out_at`, plus what was read).
void read_block(int fd, uint8_t* into, uint64_t at, uint64_t length, uint64_t out_at, const char* what,
                const char* too_short) {
  int64_t got = read_fully_at(fd, into, length, at);
  if (got < 0) fail_as(ErrorKind::System, std::string("cannot read back ") + what + ": " + std::strerror(errno), out_at);
  if (static_cast<uint64_t>(got) < length) fail_as(ErrorKind::ProofFailed, too_short, out_at + static_cast<uint64_t>(got));
}

// Compares the output's bytes of `range` (in `output_fd`) with the input's, `block`
// bytes (at most kReadBlock) at a time.
void compare_range(int input_fd, int output_fd, const CopiedRange& range, uint64_t block) {
  ReadBuffers buffers(block);
  uint8_t* expected = buffers.expected();
  uint8_t* written = buffers.written();
  for (uint64_t done = 0, length = 0; done < range.length; done += length) {
    length = std::min(block, range.length - done);
    uint64_t out_at = range.out_at + done;
    read_block(input_fd, expected, range.in_at + done, length, out_at, "the input",
               "the input is shorter than when it was copied (it changed while machofix ran)");
    read_block(output_fd, written, out_at, length, out_at, "the temporary output",
               "the temporary output ends before the copy it should hold");
    if (std::memcmp(expected, written, length) == 0) continue;
    uint64_t at = 0;
    while (expected[at] == written[at]) ++at;
    fail_as(ErrorKind::ProofFailed, "the output differs from input offset " + hex(range.in_at + done + at) + ", which it copies",
            out_at + at);
  }
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

CopyChecker::CopyChecker(const MappedFile& input, const std::string& temp_path, uint64_t output_size, ByteProgress progress)
    : input_fd_(input.fd()), fd_(open_output(temp_path)),
      read_block_(output_size < kThreadedCopyMinimum ? kSmallReadBlock : kReadBlock),
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
  work_.notify_all();  // the checker's thread, and a thread in help()
}

void CopyChecker::close_submissions() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  work_.notify_all();
}

// At once, not only once the writer is done: comparing a range (two reads and a
// memcmp) costs about as much CPU time as copying it, so a checker alone falls
// behind the writer, and the rewrite then waited for it after the copy (a 105 MB .pte
// on the AMD EPYC VM: 15 ms of a 57 ms prune). With a helper both CPUs share the
// comparing while the copy runs.
void CopyChecker::help() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_.wait(lock, [this] { return closed_ || !queue_.empty(); });
    if (queue_.empty()) break;  // closed, and nothing left to take
    compare_next(lock);
  }
  idle_wake_.wait(lock, [this] { return busy_ == 0; });
  if (error_) std::rethrow_exception(error_);
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
    compare_range(input_fd_, fd_.get(), range, read_block_);
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
  if (--busy_ == 0) idle_wake_.notify_all();
}

uint64_t copy_chunk_at(uint64_t at, uint64_t end) {
  uint64_t page = system_page_size();
  uint64_t start = at - at % page;
  uint64_t half_left = end > start ? (end - start) / 2 : 0;
  uint64_t chunk = std::clamp<uint64_t>(std::bit_floor(std::min({start, half_left, end / kChunksAtLeast})), kCopyChunk,
                                        kLargestCopyChunk);
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
