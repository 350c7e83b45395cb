// A universal file's output: the rewritten slices put back in place, or laid out anew
// when one changed size, and the new file held to dyld's rules for universal files.
#include <algorithm>

#include "core/base/proof_seam.h"
#include "core/format/loader_rules.h"
#include "core/rewrite/slice_judgement.h"

namespace machofix {

namespace {

// A universal file's output: every slice at its offset; between them the input's
// bytes (same layout) or zeros after a new `header` (a new layout).
OutputImage place_slices(const Bytes& file, const Universal& universal, const std::vector<SliceJob>& jobs,
                   const std::optional<Bytes>& header) {
  std::vector<size_t> order(jobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return universal.slices[a].offset < universal.slices[b].offset; });
  uint64_t end = header ? 0 : file.size();
  for (const FatSlice& entry : universal.slices) end = std::max(end, entry.offset + entry.size);
  OutputImage output = OutputImage::zeroed(end);
  uint64_t position = 0;
  if (header) {
    output.put_bytes_of(0, *header);
    position = header->size();
  }
  for (size_t i : order) {
    uint64_t offset = universal.slices[i].offset;
    if (!header && offset > position) output.put_bytes_of(position, file.sub(position, offset - position, "universal file"));
    output.put_image(offset, jobs[i].bytes);
    position = std::max(position, offset + jobs[i].bytes.size());
  }
  if (!header && end > position) output.put_bytes_of(position, file.sub(position, end - position, "universal file"));
  return output;
}

}  // namespace

MachORepair assemble_universal(const Bytes& file, Universal universal, std::vector<SliceJob> jobs) {
  MachORepair result;
  result.report.universal = true;
  result.report.fat64 = universal.fat64;
  bool same_sizes = true;
  for (size_t i = 0; i < jobs.size(); ++i) same_sizes &= jobs[i].bytes.size() == universal.slices[i].size;
  std::vector<uint8_t> header;
  if (!same_sizes) {
    std::vector<uint64_t> sizes;
    for (const SliceJob& job : jobs) sizes.push_back(job.bytes.size());
    layout_universal(universal, sizes);
    header = universal_header_bytes(universal);
  }
  result.output = place_slices(file, universal, jobs, same_sizes ? std::nullopt : std::optional<Bytes>(Bytes(header)));
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].report.offset = universal.slices[i].offset;
    result.report.changed |= jobs[i].report.changed;
    result.report.slices.push_back(std::move(jobs[i].report));
  }
  // The slices passed on their own; a new layout must also place them as dyld requires.
  if (result.report.changed) {
    std::vector<uint8_t> spoiled;  // tests only (proof_seam.h)
    require_loader_rules(check_image_rules(seam::offer(seam::ProofStep::UniversalRules, result.output.bytes(), spoiled)),
                         "the rewritten file");
  }
  return result;
}

std::vector<CopiedRange> slice_placement(const Universal& before, const Universal& after) {
  std::vector<CopiedRange> placement;
  for (size_t i = 0; i < before.slices.size(); ++i)
    placement.push_back({before.slices[i].offset, after.slices[i].offset, before.slices[i].size});
  std::sort(placement.begin(), placement.end(), [](const CopiedRange& a, const CopiedRange& b) { return a.out_at < b.out_at; });
  std::vector<CopiedRange> joined;
  for (const CopiedRange& range : placement) append_joined(joined, range);
  return joined;
}

}  // namespace machofix
