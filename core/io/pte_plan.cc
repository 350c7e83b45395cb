// repair_pte's plan: every Mach-O blob rewritten, the content-hash keys that named
// the old bytes renewed, the segments laid out again when a blob changes size, and
// the output described as a list of pieces (ranges copied from the input, and new
// bytes), built from three kinds of edit: a blob replaced by its rewrite, small
// same-length patches (keys, DataSegment fields, header fields), and, when a blob
// changes size, a shift of everything after it.
#include <algorithm>
#include <cstring>

#include "core/io/pte_repair_internal.h"
#include "core/base/sha.h"

namespace machofix::pte_internal {

namespace {

std::vector<uint8_t> le64(uint64_t value) {
  std::vector<uint8_t> bytes(8);
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(value >> (8 * i));
  return bytes;
}

std::vector<uint8_t> text_bytes(const std::string& text) { return {text.begin(), text.end()}; }

// --- blobs ----------------------------------------------------------------------

// A rewritten blob must be the only thing its bytes belong to.
void require_blob_alone(const Container& container, uint32_t index) {
  for (const auto& [user, what] : container.other_users)
    if (user == index) fail_at(container.segment_start(index), "the segment is also the Program's " + what);
  for (const DelegateEntry& delegate : container.delegates)
    if (!delegate.inline_data && delegate.index == index)
      fail_at(container.segment_start(index), "the segment is also the payload of delegate '" + delegate.id + "'");
  uint64_t start = container.segment_start(index), end = start + container.segments[index].size;
  for (uint32_t other = 0; other < container.segments.size(); ++other) {
    uint64_t other_start = container.segment_start(other), other_end = other_start + container.segments[other].size;
    if (other == index || container.segments[other].size == 0) continue;
    if (other_start < end && other_end > start)
      fail_at(start, "the segment overlaps segment " + std::to_string(other) + " [" + hex(other_start) + ", " + hex(other_end) + ")");
  }
}

std::vector<BlobJob> rewrite_blobs(const Container& container, std::vector<JudgedBlob>& judged) {
  std::vector<BlobJob> jobs;
  for (JudgedBlob& blob : judged) {
    BlobJob job;
    job.segment_index = blob.segment_index;
    job.old_bytes = blob.bytes;
    try {
      job.result = blob.rewrite();
      job.changed = job.result.output.size() != job.old_bytes.size() ||
                    first_difference(job.result.output.data(), job.old_bytes.data(), 0, job.old_bytes.size());
      if (job.changed) require_blob_alone(container, blob.segment_index);
    } catch (Error& error) {
      throw error.in_part(blob_part(container, blob.segment_index));
    }
    job.old_sha256 = sha256_hex(job.old_bytes);
    job.new_sha256 = job.changed ? sha256_hex(job.result.output.bytes()) : job.old_sha256;
    jobs.push_back(std::move(job));
  }
  return jobs;
}

}  // namespace

// Every blob is judged before anything is written: a refusal costs no more than
// reading the blobs (and, for a new output, stopping its early copy).
std::vector<JudgedBlob> judge_blobs(const Container& container, const RepairOptions& options, const BlobRewriter& rewriter) {
  std::vector<JudgedBlob> judged;
  for (uint32_t index : macho_segments(container)) {
    Bytes bytes = container.segment_bytes(index);
    try {
      judged.push_back({index, bytes, rewriter(bytes, blob_options(container, index, options))});
    } catch (Error& error) {
      throw error.in_part(blob_part(container, index));
    }
  }
  return judged;
}

namespace {

// --- keys -----------------------------------------------------------------------

std::string payload_name(const DelegateEntry& delegate) {
  return std::string("delegate payload (") + (delegate.inline_data ? "inline " : "segment ") + std::to_string(delegate.index) + ")";
}

// Writes the new hash over the old one wherever an AOTI backend reads `old_key` from
// a delegate payload (the so key before the first newline, the weights key after it).
void renew_in_payloads(const Container& container, const std::string& old_key, const std::string& new_sha256,
                       KeyRenewal& renewal, std::vector<Patch>& patches) {
  std::vector<uint64_t> done;  // several delegates may share one payload
  for (const KeyResolution& resolution : container.resolutions) {
    const DelegateEntry& delegate = container.delegates[resolution.delegate];
    for (auto [key, at] : {std::pair{resolution.so_key, resolution.so_key_at}, {resolution.weights_key, resolution.weights_key_at}}) {
      if (!at || key != old_key || std::count(done.begin(), done.end(), *at)) continue;
      done.push_back(*at);
      patches.push_back({*at, text_bytes(new_sha256), payload_name(delegate)});
      renewal.renewed_in.push_back(payload_name(delegate));
    }
  }
}

// A renewed key must not stay behind anywhere a delegate payload holds it: a payload
// the runtime reads differently from what machofix renews would name a key that no
// longer exists. Refused before anything is written.
void require_no_stale_key(const Container& container, const std::string& old_key, const std::vector<Patch>& patches) {
  for (const DelegateEntry& delegate : container.delegates) {
    std::optional<Bytes> payload = container.payload_if_present(delegate);
    if (!payload || payload->size() < old_key.size()) continue;
    std::string_view text(reinterpret_cast<const char*>(payload->data()), payload->size());
    for (size_t found = text.find(old_key); found != std::string_view::npos; found = text.find(old_key, found + 1)) {
      uint64_t at = payload->base() + found;
      bool renewed = std::any_of(patches.begin(), patches.end(), [&](const Patch& patch) { return patch.at == at; });
      if (!renewed) {
        throw Error("the old key '" + old_key + "' occurs in the " + delegate.id + " payload of method '" + delegate.method +
                        "' where the runtime does not read it as a key, so machofix cannot renew it there",
                    at)
            .as_refusal();
      }
    }
  }
}

// Each renewed key's bytes must read as planned once every patch is applied: a key
// whose bytes another key shares (strings a writer stored once, or overlapping in a
// damaged file) would change with it.
void require_keys_as_planned(const Container& container, const Plan& plan) {
  for (size_t i = 0; i < container.named.size(); ++i) {
    const NamedEntry& named = container.named[i];
    std::string after = named.key;
    for (const Patch& patch : plan.patches) {
      for (size_t b = 0; b < patch.bytes.size(); ++b) {
        uint64_t at = patch.at + b;
        if (at >= named.key_at && at < named.key_at + after.size()) after[at - named.key_at] = static_cast<char>(patch.bytes[b]);
      }
    }
    if (after != plan.new_keys[i])
      throw Error("named data " + std::to_string(i) + " ('" + named.key + "') shares bytes with a key machofix renews, so it "
                  "cannot renew one without changing the other", named.key_at)
          .as_refusal();
  }
}

// Every key an AOTI delegate resolved before must resolve to the renewed entry: a key
// made from the method name, or read from where no patch renews it, cannot follow.
void require_resolutions_follow(const Container& container, const Plan& plan) {
  for (const KeyResolution& resolution : container.resolutions) {
    const DelegateEntry& delegate = container.delegates[resolution.delegate];
    for (auto [named, at] : {std::pair{resolution.so_named, resolution.so_key_at}, {resolution.weights_named, resolution.weights_key_at}}) {
      if (!named || plan.new_keys[*named] == container.named[*named].key) continue;
      bool renewed = at && std::any_of(plan.patches.begin(), plan.patches.end(), [&](const Patch& patch) { return patch.at == *at; });
      if (!renewed) {
        throw Error("the " + delegate.id + " delegate of method '" + delegate.method + "' finds '" + container.named[*named].key +
                        "' by a name machofix cannot renew (" + (at ? "a payload it cannot patch" : "made from the method name") +
                        "), so the renewed key would not be found",
                    delegate.table_at)
            .as_refusal();
      }
    }
  }
}

void renew_keys(const Container& container, const BlobJob& job, Plan& plan, BlobReport& report,
                std::vector<std::string>& warnings) {
  for (size_t i = 0; i < container.named.size(); ++i) {
    const NamedEntry& named = container.named[i];
    if (named.segment_index != job.segment_index || !is_content_hash_key(named.key, job.old_sha256)) continue;
    if (container.kind == ContainerKind::Ptd) {
      // The .pte whose delegate payload names this key is not being rewritten.
      warnings.push_back("content-hash key '" + named.key + "' kept: the .pte that names it is not rewritten with this .ptd");
      continue;
    }
    KeyRenewal renewal{named.key, job.new_sha256 + named.key.substr(job.old_sha256.size()), {"NamedData.key"}};
    plan.patches.push_back({named.key_at, text_bytes(job.new_sha256), "NamedData.key"});
    renew_in_payloads(container, named.key, job.new_sha256, renewal, plan.patches);
    require_no_stale_key(container, named.key, plan.patches);
    if (renewal.renewed_in.size() == 1)
      warnings.push_back("key '" + named.key + "' renewed, but no delegate payload names it");
    plan.new_keys[i] = renewal.new_key;
    report.renewals.push_back(std::move(renewal));
  }
}

// --- layout ---------------------------------------------------------------------

[[noreturn]] void cannot_patch(const SegmentEntry& segment, uint32_t index, const char* field, uint64_t from, uint64_t to) {
  fail_at(segment.table_at, "segment " + std::to_string(index) + " must change its " + field + " from " + hex(from) + " to " +
                                hex(to) + ", but the flatbuffer omits DataSegment." + field +
                                " (it held the default 0 when written), so it cannot be patched in place");
}

void patch_segment_fields(const Container& container, Plan& plan) {
  for (uint32_t i = 0; i < container.segments.size(); ++i) {
    const SegmentEntry& segment = container.segments[i];
    uint64_t old_offset = container.segment_start(i);
    if (plan.new_offsets[i] != old_offset) {
      uint64_t relative = plan.new_offsets[i] - container.header.base;
      if (!segment.offset_at) cannot_patch(segment, i, "offset", segment.offset, relative);
      plan.patches.push_back({*segment.offset_at, le64(relative), "DataSegment.offset"});
    }
    if (plan.new_sizes[i] != segment.size) {
      if (!segment.size_at) cannot_patch(segment, i, "size", segment.size, plan.new_sizes[i]);
      plan.patches.push_back({*segment.size_at, le64(plan.new_sizes[i]), "DataSegment.size"});
    }
  }
}

// segment_data_size covers up to the end of the last segment: it grows or shrinks
// with that end.
void patch_segment_data_size(const Container& container, Plan& plan) {
  const Header& header = container.header;
  if (!header.segment_data_size) return;
  uint64_t old_end = header.base, new_end = header.base;
  for (uint32_t i = 0; i < container.segments.size(); ++i) {
    old_end = std::max(old_end, container.segment_start(i) + container.segments[i].size);
    new_end = std::max(new_end, plan.new_offsets[i] + plan.new_sizes[i]);
  }
  plan.new_segment_data_size = *header.segment_data_size + new_end - old_end;
  if (*plan.new_segment_data_size != *header.segment_data_size)
    plan.patches.push_back({*header.segment_data_size_at, le64(*plan.new_segment_data_size), "segment_data_size"});
}

// Moving segments needs a layout machofix can prove: segments after the flatbuffer,
// from the segment base, inside the file. The runtime loads files that break this
// (it reads only the segments it needs), and those stay loadable as long as no blob
// changes size.
void require_movable_layout(const Container& container) {
  const Header& header = container.header;
  if (header.length == 0 || header.base < header.flatbuffer_end)
    throw Error("machofix does not move segments in a file without a segment area after the flatbuffer "
                "(a blob here changes size); it can rewrite blobs of the same size only",
                header.base_at)
        .as_refusal();
  for (uint32_t i = 0; i < container.segments.size(); ++i) {
    if (!container.segment_in_file(i))
      throw Error("machofix does not move segments in a file where segment " + std::to_string(i) +
                      " lies outside the file (a blob here changes size)",
                  container.segments[i].table_at)
          .as_refusal();
  }
}

void lay_out(const Container& container, Plan& plan) {
  bool resized = std::any_of(plan.blobs.begin(), plan.blobs.end(),
                             [](const BlobJob& job) { return job.changed && job.result.output.size() != job.old_bytes.size(); });
  if (resized) require_movable_layout(container);
  std::vector<uint64_t> offsets, sizes;
  for (uint32_t i = 0; i < container.segments.size(); ++i) {
    offsets.push_back(container.segment_start(i));
    sizes.push_back(container.segments[i].size);
  }
  plan.new_sizes = sizes;
  for (const BlobJob& job : plan.blobs) plan.new_sizes[job.segment_index] = job.result.output.size();
  plan.relocation = relocate_segments(container.header.base, offsets, sizes, plan.new_sizes);
  for (const SegmentMove& move : plan.relocation.segments) plan.new_offsets.push_back(move.new_offset);
  patch_segment_fields(container, plan);
  patch_segment_data_size(container, plan);
  plan.output_size = container.file.size() + plan.relocation.final_shift();
}

// --- pieces ---------------------------------------------------------------------

// The input from `start` replaced by `bytes` (or by a rewritten blob's `image`);
// copying resumes at `resume`, shifted by `shift_after` (nullopt: the current shift).
struct Edit {
  uint64_t start = 0;
  std::vector<uint8_t> bytes;
  uint64_t resume = 0;
  std::optional<int64_t> shift_after;
  std::string what;
  const OutputImage* image = nullptr;
  uint64_t size() const { return image ? image->size() : bytes.size(); }
};

std::vector<Edit> collect_edits(const Plan& plan) {
  std::vector<Edit> edits;
  for (const BlobJob& job : plan.blobs) {
    if (!job.changed) continue;
    uint64_t start = job.old_bytes.base(), end = start + job.old_bytes.size();
    Edit edit{start, {}, end, std::nullopt, "segment " + std::to_string(job.segment_index), &job.result.output};
    for (const Relocation::Step& step : plan.relocation.steps) {
      if (step.resized_start != start) continue;
      edit.resume = step.resume;
      edit.shift_after = step.shift;
    }
    edits.push_back(std::move(edit));
  }
  for (const Patch& patch : plan.patches)
    edits.push_back({patch.at, patch.bytes, patch.at + patch.bytes.size(), std::nullopt, patch.what});
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.start < b.start; });
  // The same bytes patched twice (a string two tables share) is one patch.
  auto same = [](const Edit& a, const Edit& b) {
    return a.start == b.start && a.bytes == b.bytes && a.resume == b.resume && a.image == b.image;
  };
  edits.erase(std::unique(edits.begin(), edits.end(), same), edits.end());
  return edits;
}

void add_copy(std::vector<Piece>& pieces, uint64_t in_at, uint64_t out_at, uint64_t length) {
  if (length) pieces.push_back({out_at, length, in_at, {}});
}

void add_bytes(std::vector<Piece>& pieces, uint64_t out_at, std::vector<uint8_t> bytes) {
  uint64_t length = bytes.size();
  if (length) pieces.push_back({out_at, length, std::nullopt, std::move(bytes)});
}

// A rewritten blob: what it borrows from the input (its code and data: core/base/output_image.h)
// is copied from there, the rest (its load commands, __LINKEDIT, signature) written.
void add_image(std::vector<Piece>& pieces, uint64_t out_at, const OutputImage& image) {
  uint64_t position = 0;
  for (const OutputImage::Borrowed& range : image.borrowed()) {
    add_bytes(pieces, out_at + position, std::vector<uint8_t>(image.data() + position, image.data() + range.from));
    add_copy(pieces, range.file_offset, out_at + range.from, range.size());
    position = range.to;
  }
  add_bytes(pieces, out_at + position, std::vector<uint8_t>(image.data() + position, image.data() + image.size()));
}

void build_pieces(const Container& container, Plan& plan) {
  uint64_t cursor = 0;  // input
  int64_t shift = 0;
  for (Edit& edit : collect_edits(plan)) {
    if (edit.start < cursor)
      fail_as(ErrorKind::Internal, "internal error: the edit of " + edit.what + " overlaps an earlier edit (ending at " + hex(cursor) + ")", edit.start);
    add_copy(plan.pieces, cursor, cursor + shift, edit.start - cursor);
    uint64_t out_end = edit.start + shift + edit.size();
    if (edit.image) add_image(plan.pieces, edit.start + shift, *edit.image);
    else add_bytes(plan.pieces, edit.start + shift, std::move(edit.bytes));
    shift = edit.shift_after.value_or(shift);
    uint64_t resume_out = edit.resume + shift;
    if (resume_out < out_end) fail_as(ErrorKind::Internal, "internal error: the segment after " + edit.what + " would overlap it", edit.start);
    add_bytes(plan.pieces, out_end, std::vector<uint8_t>(resume_out - out_end, 0));  // padding stays zero
    cursor = edit.resume;
  }
  add_copy(plan.pieces, cursor, cursor + shift, container.file.size() - cursor);
}

// --- report ---------------------------------------------------------------------

BlobReport blob_report(const Container& container, const BlobJob& job) {
  BlobReport report;
  report.segment_index = job.segment_index;
  report.keys = keys_of(container, job.segment_index);
  report.offset = job.old_bytes.base();
  report.size = job.old_bytes.size();
  report.new_size = job.result.output.size();
  report.sha256 = job.old_sha256;
  report.new_sha256 = job.new_sha256;
  report.macho = job.result.report;
  report.changed = job.changed;
  return report;
}

}  // namespace

Plan make_plan(const Container& container, std::vector<JudgedBlob>& judged, PteReport& report) {
  Plan plan;
  plan.blobs = rewrite_blobs(container, judged);
  for (const NamedEntry& named : container.named) plan.new_keys.push_back(named.key);
  for (const BlobJob& job : plan.blobs) {
    BlobReport entry = blob_report(container, job);
    if (job.changed) renew_keys(container, job, plan, entry, report.warnings);
    plan.changed |= job.changed;
    report.blobs.push_back(std::move(entry));
  }
  require_keys_as_planned(container, plan);
  require_resolutions_follow(container, plan);
  lay_out(container, plan);
  build_pieces(container, plan);
  for (NamedDataReport& named : report.named_data)
    for (const BlobJob& job : plan.blobs)
      if (job.segment_index == named.segment_index) named.content_hash_key = is_content_hash_key(named.key, job.old_sha256);
  for (SegmentReport& segment : report.segments) {
    if (plan.new_offsets[segment.index] != segment.offset) segment.new_offset = plan.new_offsets[segment.index];
    if (plan.new_sizes[segment.index] != segment.size) segment.new_size = plan.new_sizes[segment.index];
  }
  report.output_size = plan.output_size;
  report.changed = plan.changed;
  return plan;
}

}  // namespace machofix::pte_internal
