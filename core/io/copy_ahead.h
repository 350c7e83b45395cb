// An output that starts as a copy of its input, made while the rewrite is still
// being worked out.
//
// Rewrites usually keep the file's layout (every unchanged byte where it was, the same
// size: a prune, an edit, a renewed signature, a .pte whose blobs keep their size),
// so the output is the input with a few byte ranges replaced and copying the input is
// most of the work. CopyAhead copies the input to the temporary output, chunk by
// chunk, on a thread of its own (a small input: at once, in the constructor;
// kThreadedCopyMinimum) and hands each chunk to the CopyChecker as it goes; it takes
// the rewrite (pruning, signing, the re-reads, loading LIEF) off the critical path. A
// Mach-O output's copy starts once the input is judged (a refusal comes before
// anything is copied); a new .pte output's, before its blobs are judged
// (pte_repair.cc). It follows a plan, the placement the rewrite expects
// (MachORewrite::expected_placement): the whole input where it is, or, for a universal
// file whose slice grows by a new signature, every slice where the new layout puts
// it. What the rewrite then writes keeps the copy as far as the copy put the input's
// bytes where the output has them; from the first byte it did not (a layout the plan
// did not foresee: a .pte's segments after a blob that grew), the copy stops and the
// rest is copied again where it goes.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <thread>

#include "core/base/copied_range.h"
#include "core/base/progress.h"
#include "core/io/copy_check.h"
#include "core/io/file_io.h"

namespace machofix {

class CopyAhead {
 public:
  // `plan`: the ranges to copy, in output order, not overlapping.
  CopyAhead(const MappedFile& input, AtomicOutput& output, CopyChecker& checker, std::vector<CopiedRange> plan);
  ~CopyAhead() { stop(); }
  CopyAhead(const CopyAhead&) = delete;
  CopyAhead& operator=(const CopyAhead&) = delete;

  // The copy goes no further than the chunk that reaches output offset `limit`;
  // call before finish().
  void stop_at(uint64_t limit) { limit_ = limit; }
  // Waits until the plan is copied up to the limit (all of it by default); throws
  // what made the copy fail. Returns what was copied: the plan's ranges, each cut to
  // what was copied of it, at least up to the limit.
  std::vector<CopiedRange> finish();
  const std::vector<CopiedRange>& plan() const { return plan_; }

 private:
  // Stops copying and waits for the thread: a rewrite that failed or writes nothing.
  void stop();
  void run();

  const MappedFile& input_;
  AtomicOutput& output_;
  CopyChecker& checker_;
  std::thread thread_;
  std::vector<CopiedRange> plan_;
  std::atomic<uint64_t> limit_{UINT64_MAX};
  std::vector<CopiedRange> copied_;  // written by the thread, read after join
  std::exception_ptr error_;  // likewise
};

// The temporary output of a rewrite of `input`, its checker and its early copy,
// started together. Where the file system shares blocks, the output starts as a
// clone of the input and the copies are proven by its extent map (shared_extents.h);
// elsewhere that map is never asked (it would write back every copied page first).
class CopiedOutput {
 public:
  // `durable`: as for AtomicOutput (replacing the input must survive a power loss; a
  // new file beside it need not). `compared` hears of the bytes compared. `plan`:
  // where the early copy puts the input (CopyAhead); empty: the whole input in place.
  CopiedOutput(const MappedFile& input, const std::string& target, bool durable, ByteProgress compared = {},
               std::vector<CopiedRange> plan = {});

  AtomicOutput& output() { return *output_; }
  CopyChecker& checker() { return *checker_; }
  const std::vector<CopiedRange>& plan() const { return ahead_->plan(); }

  // The early copy is of use to the output's first `limit` bytes at most (see
  // first_unheld): it goes on that far, and is waited for and compared (this thread
  // helps), so that the bytes written next are seen by neither. The output, `size`
  // bytes long once written, is cut to `size` if the copy went past it. Returns what
  // the output now holds of the input, proven: the ranges copied, cut at `size`.
  std::vector<CopiedRange> keep_copy(uint64_t limit, uint64_t size);

 private:
  // Destroyed in reverse: the copy stops, then the checker, then the temporary file
  // goes unless committed.
  std::optional<AtomicOutput> output_;
  std::optional<CopyChecker> checker_;
  std::optional<CopyAhead> ahead_;
};

// Where an output that is to hold `wanted` (input ranges, in output order) first
// differs from what `plan` copies: the output offset of the first wanted byte the
// plan does not put there, or UINT64_MAX. The early copy is of no use past it.
uint64_t first_unheld(const std::vector<CopiedRange>& plan, const std::vector<CopiedRange>& wanted);

}  // namespace machofix
