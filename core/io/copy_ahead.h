// An output that starts as a copy of its input, made while the rewrite is still
// being worked out.
//
// Rewrites usually keep the file's layout (every unchanged byte where it was, the same
// size: a prune, an edit, a renewed signature, a .pte whose blobs keep their size),
// so the output is the input with a few byte ranges replaced and copying the input is
// most of the work. CopyAhead copies the whole input to the temporary output, chunk
// by chunk, on a thread of its own (a small input: at once, in the constructor;
// kThreadedCopyMinimum) and hands each chunk to the CopyChecker as it goes; started
// once the input is judged (a refusal comes before anything is copied), it takes the
// rewrite (pruning, signing, the re-reads, loading LIEF) off the critical path. When
// the rewrite keeps the layout, its new bytes are written once all of the copy is
// done and compared; when it moves part of the file (a universal file's slice after
// one that grew, a .pte's segments after a blob that did), the copy is kept as far
// as the input stays in place and what moved is copied again where it goes.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <thread>

#include "core/base/progress.h"
#include "core/io/copy_check.h"
#include "core/io/file_io.h"

namespace machofix {

class CopyAhead {
 public:
  CopyAhead(const MappedFile& input, AtomicOutput& output, CopyChecker& checker);
  ~CopyAhead() { stop(); }
  CopyAhead(const CopyAhead&) = delete;
  CopyAhead& operator=(const CopyAhead&) = delete;

  // The copy goes no further than the chunk that reaches `limit` (input offset);
  // call before finish().
  void stop_at(uint64_t limit) { limit_ = limit; }
  // Waits until the input is copied up to the limit (the whole of it by default);
  // throws what made the copy fail. Returns how many bytes from the input's start
  // were copied: at least the limit, or the input's size.
  uint64_t finish();

 private:
  // Stops copying and waits for the thread: a rewrite that failed or writes nothing.
  void stop();
  void run();

  const MappedFile& input_;
  AtomicOutput& output_;
  CopyChecker& checker_;
  std::thread thread_;
  std::atomic<uint64_t> limit_{UINT64_MAX};
  uint64_t copied_ = 0;        // written by the thread, read after join
  std::exception_ptr error_;  // likewise
};

// The temporary output of a rewrite of `input`, its checker and its early copy,
// started together. Where the file system shares blocks, the output starts as a
// clone of the input and the copies are proven by its extent map (shared_extents.h);
// elsewhere that map is never asked (it would write back every copied page first).
class CopiedOutput {
 public:
  // `durable`: as for AtomicOutput (replacing the input must survive a power loss; a
  // new file beside it need not). `compared` hears of the bytes compared.
  CopiedOutput(const MappedFile& input, const std::string& target, bool durable, ByteProgress compared = {});

  AtomicOutput& output() { return *output_; }
  CopyChecker& checker() { return *checker_; }

  // What the rewrite keeps in place is the input's first `limit` bytes at most: the
  // copy goes on that far, and is waited for and compared (this thread helps), so
  // that the bytes written next are seen by neither. The output, `size` bytes long
  // once written, is cut to `size` if the copy went past it. Returns how many bytes
  // from the start the output now holds of the input, at their own offsets, proven.
  uint64_t keep_copy(uint64_t limit, uint64_t size);

 private:
  // Destroyed in reverse: the copy stops, then the checker, then the temporary file
  // goes unless committed.
  std::optional<AtomicOutput> output_;
  std::optional<CopyChecker> checker_;
  std::optional<CopyAhead> ahead_;
};

// How many bytes at the start of a range copied from input offset `in_at` to output
// offset `out_at` the kept early copy already holds where they belong (`kept`, as
// CopiedOutput::keep_copy returned it): none for a range that moves.
uint64_t held_by_early_copy(uint64_t in_at, uint64_t out_at, uint64_t length, uint64_t kept);

}  // namespace machofix
