// CopyChecker: reads back what was copied into a temporary output and compares it
// byte for byte with the input, while later ranges are still being copied.
//
// A writer copies a range (copy_file_range) and submits it; a thread of the
// checker's own reads it back from both files (pread into a small buffer reused for
// every range, copy_check.cc says why not through mappings) and compares it. A
// thread that would otherwise wait can help(), from then on. The mismatch at the
// lowest output offset is thrown, with that offset, by help() or finish().
// A range the file system shows stored in the input's own blocks (a reflink clone:
// core/io/shared_extents.h) is proven by that map, without a read of either side.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "core/base/copied_range.h"
#include "core/base/descriptor.h"
#include "core/base/progress.h"
#include "core/io/file_io.h"

namespace machofix {

class CopyChecker {
 public:
  // `input` must stay open while the checker lives; the output at `temp_path` must
  // hold every range submitted (it may be shorter while a copy still grows it: only
  // submitted ranges are read). `output_size`: how much is to be compared, for
  // `progress`, which hears of the bytes compared.
  CopyChecker(const MappedFile& input, const std::string& temp_path, uint64_t output_size, ByteProgress progress = {});
  ~CopyChecker();  // abandons what is still queued
  CopyChecker(const CopyChecker&) = delete;
  CopyChecker& operator=(const CopyChecker&) = delete;

  // Queues a range already copied, unless its blocks are proven shared with the input.
  void submit(const CopiedRange& range);
  // From now on, a submitted range is first offered to the extent-map proof: only
  // for an output that shares blocks with the input (a clone), since the proof
  // writes back the output's dirty pages before it reads the map.
  void prove_shared_extents() { prove_shared_ = true; }
  // From now on, the checker starts writing each submitted range to disk before it
  // compares it (for an output that commit() flushes: its fsync then has little left
  // to wait for). The checker, not the writer: started in the writer's thread, the
  // writeback (ext4 allocates the blocks there) held up the next copy (a 53 MB dylib
  // --in-place: 8.7 ms of the copy thread's 27).
  void start_writeback_of_copies() { write_back_ = true; }
  // How many submitted bytes were proven by the file system's extent map.
  uint64_t proven_shared_bytes() const { return shared_bytes_; }
  // The writer submits nothing more until help() has returned.
  void close_submissions();
  // Compares queued ranges in the calling thread too, until submissions are closed
  // and every range is compared; throws the mismatch found.
  void help();
  // Waits for every submitted range (compares them here if the checker has no
  // thread of its own); throws the mismatch found.
  void finish();

 private:
  void stop();
  void run();
  void compare_next(std::unique_lock<std::mutex>& lock);

  int input_fd_;
  Descriptor fd_;
  uint64_t read_block_;  // bytes read from each file at a time
  std::atomic<uint64_t> shared_bytes_{0};
  bool prove_shared_ = false;  // set before the first submit
  bool write_back_ = false;    // likewise
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable work_;         // a range came, or submissions closed, or the thread is to end
  std::condition_variable idle_wake_;    // for help(): busy_ back to 0
  // A part of a submitted range, to compare; the first part of each also starts the
  // writeback of the whole range (write_back bytes), when write_back_ is set.
  struct QueuedPart {
    CopiedRange range;
    uint64_t write_back = 0;
  };
  std::deque<QueuedPart> queue_;
  int busy_ = 0;          // ranges being compared
  bool closed_ = false;   // see close_submissions()
  bool closing_ = false;  // the thread ends once the queue is empty
  std::exception_ptr error_;
  uint64_t error_at_ = 0;  // output offset of error_
  ProgressMeter progress_;
};

// Copies go a chunk at a time, so that the comparison of one chunk, and for an
// in-place rewrite the start of its writeback, run while the next is copied.
// Chunks grow with the offset, from kCopyChunk at the start of the file to
// kLargestCopyChunk from 64 MiB on, and shrink again towards the copy's end
// (copy_chunk_at). 2 MiB first: a 10 MB dylib's comparison then overlaps nearly all
// of its copy (with 8 MiB chunks, one chunk of 8 and one of 2, it mostly followed
// it). Larger further on: each copy_file_range call costs more than its bytes on
// this kernel (a 4 GB .pte, 5 runs: 4.8 s in 2 MiB calls, 3.0 s in 64 MiB calls,
// `cp`, which copies 2 GiB a call, 2.6 s). Smaller at the end: the comparison of the
// last chunk starts only when the copy is done, and is what the rewrite then waits
// for (a 105 MB .pte ended in a 36 MiB chunk: 4 ms of comparing after the copy).
constexpr uint64_t kCopyChunk = 2ull << 20;
constexpr uint64_t kLargestCopyChunk = 64ull << 20;
// No chunk is larger than 1/kChunksAtLeast of the offset the copy ends at, so that a
// mid-sized copy's comparison follows it closely, reading what the copy has just read
// and written: a 105 MB .pte copied in 2 MiB chunks (up to 32 MiB before) ended its
// comparison 0.4 ms after the copy instead of 2-3 ms, and took 5% less time.
constexpr uint64_t kChunksAtLeast = 32;

// Below this output size (two chunks) the checker compares in the thread that calls
// help() or finish(), and a .pte's early copy runs in the caller: with less to copy
// there is no overlap worth a thread, whose start and end (its stack let go, which
// interrupts every other CPU of the process for a TLB flush) cost more; a batch of many
// small models with --jobs 2 ran slower than with --jobs 1.
constexpr uint64_t kThreadedCopyMinimum = 2 * kCopyChunk;

// How much to copy from output offset `at` of a copy that ends at output offset
// `end`: up to the next multiple of the chunk size there (the largest power of two not
// above `at`, nor above half of what is left from there, nor above end /
// kChunksAtLeast; at least kCopyChunk and at most kLargestCopyChunk), counted in whole
// pages, so a chunk that starts inside a page ends at the same place in another page.
// Chunks end on 2 MiB boundaries, and the page cache builds each 2 MiB block of the
// output from a single copy_file_range call, in large folios; chunks that cut the
// blocks elsewhere (a segment at 58352, say) made a 1 GiB .pte copy 25% slower. The
// last chunk is cut at `end`.
uint64_t copy_chunk_at(uint64_t at, uint64_t end);

// Hands a chunk just copied from in_at to out_at to `checker`.
void hand_to_checker(AtomicOutput& output, CopyChecker& checker, uint64_t out_at, uint64_t in_at, uint64_t length);

// Copies [in_at, in_at + length) of the input (`in_fd`, the file the checker compares
// with) to out_at, a chunk at a time, each handed to the checker as it is written.
void copy_and_check(int in_fd, AtomicOutput& output, CopyChecker& checker, uint64_t in_at, uint64_t out_at, uint64_t length,
                    ProgressMeter* progress = nullptr);

}  // namespace machofix
