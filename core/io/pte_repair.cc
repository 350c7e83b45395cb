// repair_pte: prune (or edit, or sign) every Mach-O blob of a .pte/.ptd and patch the
// file around it.
//
// Every blob is judged before anything is written (MachORewrite: a refusal comes
// before any new byte). A new output's early copy of the input starts before the
// judging, which it overlaps; a refusal stops it and removes the temporary file. The
// plan (core/io/pte_plan.cc) then describes the output as pieces: ranges copied from
// the input, and new bytes. The same pieces drive the writing (core/io/pte_write.cc:
// copy_file_range for the copies) and the verification (core/io/pte_verify.cc: every
// output byte compared with what its piece says it must be).
#include <exception>
#include <memory>
#include <optional>

#include "core/io/pte_repair_internal.h"

namespace machofix {

using namespace pte_internal;

BlobRewriter macho_rewriter(RewriteKind kind) {
  return [kind](const Bytes& blob, const RepairOptions& options) -> BlobRewrite {
    auto rewrite = std::make_shared<MachORewrite>(blob, options, kind);
    return [rewrite] { return rewrite->run(); };
  };
}

PteReport repair_pte(const MappedFile& input, const std::string& output_path, const RepairOptions& options, bool dry_run,
                     const BlobRewriter& rewrite) {
  Container container = read_container(input.bytes());
  PteReport report = describe(container);
  bool writes = !dry_run && !output_path.empty();
  bool in_place = writes && same_file(input, output_path);
  // Replacing the input must survive a power loss; a new file beside it need not.
  // A new output's copy starts at once: the judging (parsing and hashing every blob)
  // runs beside it instead of before it (a 105 MB .pte: 0.7 ms, 2.5% of the run). A
  // refusal still comes first: an output that cannot be created is reported only
  // once the input is judged. In place, the copy waits for the judging: that
  // output's copy starts writing to disk as it goes, which a refusal should not cost.
  std::optional<CopiedOutput> copied;
  std::exception_ptr cannot_copy;
  if (writes && !in_place) {
    try {
      copied.emplace(input, output_path, /*durable=*/false, options.progress);
    } catch (...) {
      cannot_copy = std::current_exception();
    }
  }
  std::vector<JudgedBlob> judged = judge_blobs(container, options, rewrite);
  if (cannot_copy) std::rethrow_exception(cannot_copy);
  if (writes && in_place) copied.emplace(input, output_path, /*durable=*/true, options.progress);
  Plan plan = make_plan(container, judged, report);
  // Unchanged: an identical copy for another path, nothing at all in place.
  if (!writes || (!plan.changed && in_place)) return report;
  write_pieces(input, plan, *copied);
  verify_output(container, plan, copied->output().temp_path(), copied->checker());
  copied->output().commit();
  report.written = true;
  report.bytes_shared = copied->checker().proven_shared_bytes();
  return report;
}

}  // namespace machofix
