// repair_pte: prune (or edit, or sign) every Mach-O blob of a .pte/.ptd and patch the
// file around it.
//
// Every blob is judged first (MachORewrite: a refusal comes before anything is
// written or copied). The plan (core/io/pte_plan.cc) then describes the output as
// pieces: ranges copied from the input, and new bytes. The same pieces drive the
// writing (core/io/pte_write.cc: copy_file_range for the copies) and the verification
// (core/io/pte_verify.cc: every output byte compared with what its piece says it must be).
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
  std::vector<JudgedBlob> judged = judge_blobs(container, options, rewrite);
  bool writes = !dry_run && !output_path.empty();
  bool in_place = writes && same_file(input, output_path);
  // Replacing the input must survive a power loss; a new file beside it need not.
  std::optional<CopiedOutput> copied;
  if (writes) copied.emplace(input, output_path, /*durable=*/in_place, options.progress);
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
