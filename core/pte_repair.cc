// repair_pte: prune every Mach-O blob of a .pte/.ptd and patch the file around it.
//
// Every blob is judged first (MachORewrite: a refusal comes before anything is
// written or copied). The output is then described as a list of pieces (ranges
// copied from the input, and new bytes), built from three kinds of edit: a blob
// replaced by its rewrite, small same-length patches (keys, DataSegment fields,
// header fields), and, when a blob changes size, a shift of everything after it.
// The same pieces drive the writing (copy_file_range for the copies) and the
// verification (every output byte compared with what its piece says it must be).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <thread>

#include "core/copy_check.h"
#include "core/proof_seam.h"
#include "core/pte.h"

namespace machofix {

namespace {

using namespace pte_internal;

struct BlobJob {
  uint32_t segment_index = 0;
  Bytes old_bytes;
  MachORepair result;
  bool changed = false;
  std::string old_sha256, new_sha256;
};

// Same-length bytes to write over the input at `at` (absolute, input coordinates).
struct Patch {
  uint64_t at = 0;
  std::vector<uint8_t> bytes;
  std::string what;
};

struct Piece {
  uint64_t out_at = 0;
  uint64_t length = 0;
  std::optional<uint64_t> in_at;  // copied from the input; else `bytes`
  std::vector<uint8_t> bytes;
};

struct Plan {
  std::vector<BlobJob> blobs;
  std::vector<Patch> patches;
  Relocation relocation;
  std::vector<uint64_t> new_offsets;  // absolute, per segment
  std::vector<uint64_t> new_sizes;
  std::optional<uint64_t> new_segment_data_size;
  std::vector<std::string> new_keys;  // per named entry
  std::vector<Piece> pieces;
  uint64_t output_size = 0;
  bool changed = false;
};

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

// A Mach-O blob read and judged (the rewriter's first step), waiting for its rewrite.
struct JudgedBlob {
  uint32_t segment_index = 0;
  Bytes bytes;
  BlobRewrite rewrite;
};

// Every blob is judged before anything is written or copied: a refusal costs no more
// than reading the blobs.
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

std::vector<BlobJob> rewrite_blobs(const Container& container, std::vector<JudgedBlob>& judged) {
  std::vector<BlobJob> jobs;
  for (JudgedBlob& blob : judged) {
    BlobJob job;
    job.segment_index = blob.segment_index;
    job.old_bytes = blob.bytes;
    try {
      job.result = blob.rewrite();
      job.changed = job.result.output.size() != job.old_bytes.size() ||
                    std::memcmp(job.result.output.data(), job.old_bytes.data(), job.old_bytes.size()) != 0;
      if (job.changed) require_blob_alone(container, blob.segment_index);
    } catch (Error& error) {
      throw error.in_part(blob_part(container, blob.segment_index));
    }
    job.old_sha256 = sha256_hex(job.old_bytes);
    job.new_sha256 = job.changed ? sha256_hex(Bytes(job.result.output)) : job.old_sha256;
    jobs.push_back(std::move(job));
  }
  return jobs;
}

// --- keys -----------------------------------------------------------------------

std::string payload_name(const DelegateEntry& delegate) {
  return std::string("delegate payload (") + (delegate.inline_data ? "inline " : "segment ") + std::to_string(delegate.index) + ")";
}

// Writes the new hash over the old one wherever a delegate payload names `old_key`.
void renew_in_payloads(const Container& container, const std::string& old_key, const std::string& new_sha256,
                       KeyRenewal& renewal, std::vector<Patch>& patches) {
  std::vector<uint64_t> done;  // several delegates may share one payload
  for (const DelegateEntry& delegate : container.delegates) {
    for (const PayloadLine& line : payload_lines(container.payload(delegate))) {
      if (line.text != old_key || std::count(done.begin(), done.end(), line.at)) continue;
      done.push_back(line.at);
      patches.push_back({line.at, text_bytes(new_sha256), payload_name(delegate)});
      renewal.renewed_in.push_back(payload_name(delegate));
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

void lay_out(const Container& container, Plan& plan) {
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

// The input from `start` replaced by `bytes`; copying resumes at `resume`, shifted
// by `shift_after` (nullopt: the current shift).
struct Edit {
  uint64_t start = 0;
  std::vector<uint8_t> bytes;
  uint64_t resume = 0;
  std::optional<int64_t> shift_after;
  std::string what;
};

std::vector<Edit> collect_edits(const Plan& plan) {
  std::vector<Edit> edits;
  for (const BlobJob& job : plan.blobs) {
    if (!job.changed) continue;
    uint64_t start = job.old_bytes.base(), end = start + job.old_bytes.size();
    Edit edit{start, job.result.output, end, std::nullopt, "segment " + std::to_string(job.segment_index)};
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
  auto same = [](const Edit& a, const Edit& b) { return a.start == b.start && a.bytes == b.bytes && a.resume == b.resume; };
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

void build_pieces(const Container& container, Plan& plan) {
  uint64_t cursor = 0;  // input
  int64_t shift = 0;
  for (Edit& edit : collect_edits(plan)) {
    if (edit.start < cursor)
      fail_at(edit.start, "internal error: the edit of " + edit.what + " overlaps an earlier edit (ending at " + hex(cursor) + ")");
    add_copy(plan.pieces, cursor, cursor + shift, edit.start - cursor);
    uint64_t out_end = edit.start + shift + edit.bytes.size();
    add_bytes(plan.pieces, edit.start + shift, std::move(edit.bytes));
    shift = edit.shift_after.value_or(shift);
    uint64_t resume_out = edit.resume + shift;
    if (resume_out < out_end) fail_at(edit.start, "internal error: the segment after " + edit.what + " would overlap it");
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

// --- writing --------------------------------------------------------------------

// Starts writing a copied chunk to disk now, so that commit()'s fsync has little
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

// Copies go a chunk at a time, so that the comparison of one chunk (copy_check.h)
// runs while the next is copied and, for an in-place rewrite, each chunk's
// writeback starts at once (the disk works meanwhile and commit()'s fsync has
// little left to wait for).
constexpr uint64_t kCopyChunk = 8ull << 20;

// How much to copy from output offset `at`: up to the next multiple of kCopyChunk
// (counted in whole pages, so a chunk that starts inside a page ends at the same
// place in another page). The page cache then builds each 8 MiB block of the output
// from a single copy_file_range call, in large folios; chunks that cut the blocks
// elsewhere (a segment at 58352, say) made a 1 GiB .pte copy 25% slower.
uint64_t copy_chunk_at(uint64_t at) {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return kCopyChunk - (at - at % page) % kCopyChunk;
}

// Hands a chunk just copied from in_at to out_at to `checker`.
void hand_to_checker(AtomicOutput& output, CopyChecker& checker, uint64_t out_at, uint64_t in_at, uint64_t length) {
  if (output.durable()) start_writeback(checker.fd(), out_at, length);
  seam::offer_file(seam::ProofStep::Copy, output.temp_path(), out_at, length);  // tests only
  checker.submit({in_at, out_at, length});
}

// Copies the whole input to the output, chunk by chunk, on a thread of its own,
// while the blobs are being rewritten, and hands each chunk to the checker as it
// goes. Usually every blob keeps its size, so the output is the input with a few
// byte ranges replaced and this copy is most of the work; starting it before the
// plan exists takes the plan (a few milliseconds of pruning, signing and
// re-reading) off the critical path. When the plan keeps every segment in place,
// the new bytes are written once all of it is copied and compared; otherwise the
// copy is stopped and the pieces are written as usual.
class CopyAhead {
 public:
  CopyAhead(const MappedFile& input, AtomicOutput& output, CopyChecker& checker)
      : input_(input), output_(output), checker_(checker) {
    thread_ = std::thread([this] { run(); });
  }
  ~CopyAhead() { stop(); }
  CopyAhead(const CopyAhead&) = delete;
  CopyAhead& operator=(const CopyAhead&) = delete;

  // Waits until the whole input is copied; throws what made the copy fail.
  void finish() {
    if (thread_.joinable()) thread_.join();
    if (error_) std::rethrow_exception(error_);
    if (copied_ != input_.size()) fail("internal error: the early copy stopped at " + hex(copied_));
  }
  // Stops copying (the output is about to be written another way) and waits for
  // the thread.
  void stop() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    try {
      for (uint64_t length = 0; copied_ < input_.size() && !stopping_; copied_ += length) {
        length = std::min(copy_chunk_at(copied_), input_.size() - copied_);
        output_.copy_from(input_.fd(), copied_, copied_, length);
        hand_to_checker(output_, checker_, copied_, copied_, length);
      }
    } catch (...) {
      error_ = std::current_exception();
    }
    checker_.close_submissions();
  }

  const MappedFile& input_;
  AtomicOutput& output_;
  CopyChecker& checker_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  uint64_t copied_ = 0;        // written by the thread, read after join
  std::exception_ptr error_;  // likewise
};

// Whether every copied piece stays where it was in the input and the size is
// unchanged: then the early copy already holds every byte but the new ones.
bool keeps_layout(const Plan& plan, uint64_t input_size) {
  if (plan.output_size != input_size) return false;
  return std::all_of(plan.pieces.begin(), plan.pieces.end(),
                     [](const Piece& piece) { return !piece.in_at || *piece.in_at == piece.out_at; });
}

// Calls `chunk(out_at, in_at, length)` for each copy chunk of `piece`.
template <typename OnChunk>
void for_each_chunk(const Piece& piece, OnChunk chunk) {
  for (uint64_t done = 0, length = 0; done < piece.length; done += length) {
    length = std::min(copy_chunk_at(piece.out_at + done), piece.length - done);
    chunk(piece.out_at + done, *piece.in_at + done, length);
  }
}

// Writes every piece; hands each copied chunk to `checker` once it is written.
void write_pieces(const MappedFile& input, const Plan& plan, AtomicOutput& output, CopyChecker& checker) {
  for (const Piece& piece : plan.pieces) {
    if (!piece.in_at) {
      output.write_at(piece.out_at, piece.bytes);
      continue;
    }
    for_each_chunk(piece, [&](uint64_t out_at, uint64_t in_at, uint64_t length) {
      output.copy_from(input.fd(), in_at, out_at, length);
      hand_to_checker(output, checker, out_at, in_at, length);
    });
  }
}

// The layout is kept: `ahead` copies every byte where it belongs, and the plan is
// made; this thread now helps compare the copied chunks. Only the new bytes
// remain, written once the copy and its comparison are done, so that neither can
// see them.
void write_new_bytes(const Plan& plan, AtomicOutput& output, CopyChecker& checker, CopyAhead& ahead) {
  checker.help();
  ahead.finish();
  for (const Piece& piece : plan.pieces)
    if (!piece.in_at) output.write_at(piece.out_at, piece.bytes);
}

bool same_file(const MappedFile& input, const std::string& path) {
  if (is_standard_stream(path)) return false;  // standard output, not a file named "-"
  struct stat in, out;
  return fstat(input.fd(), &in) == 0 && stat(path.c_str(), &out) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino;
}

// --- verification ------------------------------------------------------------------

uint64_t first_difference(const Bytes& a, const Bytes& b) {
  uint64_t i = 0;
  while (i < a.size() && i < b.size() && a.data()[i] == b.data()[i]) ++i;
  return i;
}

// The new bytes are what was meant (the copies are CopyChecker's job).
void compare_new_bytes(const Bytes& output, const Plan& plan) {
  for (const Piece& piece : plan.pieces) {
    if (piece.in_at) continue;
    Bytes written = output.sub(piece.out_at, piece.length, "output range");
    Bytes expected(piece.bytes);
    if (std::memcmp(written.data(), expected.data(), piece.length) != 0)
      fail_at(written.base() + first_difference(written, expected), "the output differs from the bytes written there");
  }
}

void check_header_after(const Container& before, const Container& after, const Plan& plan) {
  if (after.kind != before.kind || after.header.length != before.header.length ||
      after.header.flatbuffer_end != before.header.flatbuffer_end || after.header.base != before.header.base)
    fail_at(0, "the header does not describe the flatbuffer and segments as the input's did");
  std::optional<uint64_t> expected = plan.new_segment_data_size ? plan.new_segment_data_size : before.header.segment_data_size;
  if (after.header.segment_data_size != expected)
    fail_at(after.header.segment_data_size_at.value_or(0), "segment_data_size is not the one written");
}

void check_segments_after(const Container& before, const Container& after, const Plan& plan) {
  if (after.segments.size() != before.segments.size()) fail_at(0, "the number of segments changed");
  for (uint32_t i = 0; i < after.segments.size(); ++i) {
    if (after.segment_start(i) != plan.new_offsets[i] || after.segments[i].size != plan.new_sizes[i])
      fail_at(after.segments[i].table_at, "segment " + std::to_string(i) + " is at [" + hex(after.segment_start(i)) + ", +" +
                                              hex(after.segments[i].size) + "), not at [" + hex(plan.new_offsets[i]) + ", +" +
                                              hex(plan.new_sizes[i]) + ")");
  }
}

void check_names_after(const Container& before, const Container& after, const Plan& plan) {
  if (after.named.size() != before.named.size() || after.delegates.size() != before.delegates.size() ||
      after.inline_data.size() != before.inline_data.size() || after.methods != before.methods)
    fail_at(0, "the methods, named data or delegates are not the input's");
  for (size_t i = 0; i < after.named.size(); ++i) {
    if (after.named[i].key != plan.new_keys[i] || after.named[i].segment_index != before.named[i].segment_index)
      fail_at(after.named[i].table_at, "named data " + std::to_string(i) + " reads '" + after.named[i].key + "', not '" +
                                           plan.new_keys[i] + "'");
  }
  for (size_t i = 0; i < after.delegates.size(); ++i) {
    if (after.delegates[i].inline_data != before.delegates[i].inline_data || after.delegates[i].index != before.delegates[i].index)
      fail_at(after.delegates[i].table_at, "delegate " + std::to_string(i) + " refers to other data than in the input");
  }
}

// Each rewritten blob is exactly what prune produced, and each renewed key is the
// SHA-256 of the bytes it now names, in NamedData and in the delegate payloads.
void check_blobs_after(const Container& before, const Container& after, const Plan& plan) {
  for (const BlobJob& job : plan.blobs) {
    if (!job.changed) continue;
    Bytes written = after.segment_bytes(job.segment_index);
    Bytes expected(job.result.output);
    if (written.size() != expected.size() || std::memcmp(written.data(), expected.data(), expected.size()) != 0)
      fail_at(written.base(), "segment " + std::to_string(job.segment_index) + " is not the rewritten Mach-O image");
    std::string hash = sha256_hex(written);
    for (size_t i = 0; i < after.named.size(); ++i) {
      const std::string& key = after.named[i].key;
      if (after.named[i].segment_index != job.segment_index || key == before.named[i].key) continue;
      if (!is_content_hash_key(key, hash))
        fail_at(after.named[i].key_at, "renewed key '" + key + "' is not the blob's SHA-256 " + hash);
    }
  }
}

void check_payloads_after(const Container& before, const Container& after, const Plan& plan) {
  for (size_t d = 0; d < after.delegates.size(); ++d) {
    std::vector<PayloadLine> old_lines = payload_lines(before.payload(before.delegates[d]));
    std::vector<PayloadLine> new_lines = payload_lines(after.payload(after.delegates[d]));
    if (old_lines.size() != new_lines.size()) fail_at(after.payload(after.delegates[d]).base(), "a delegate payload changed form");
    for (size_t l = 0; l < new_lines.size(); ++l) {
      std::string expected = old_lines[l].text;
      for (size_t i = 0; i < before.named.size(); ++i)
        if (before.named[i].key == expected) expected = plan.new_keys[i];
      if (new_lines[l].text != expected)
        fail_at(new_lines[l].at, "the delegate payload names '" + new_lines[l].text + "', not '" + expected + "'");
    }
  }
}

// A delegate payload segment (small: payload_lines reads at most 4 KiB) must be
// the input with the patches applied.
void check_patched_segment(const Container& before, const Container& after, const Plan& plan, uint32_t index) {
  Bytes original = before.segment_bytes(index);
  std::vector<uint8_t> expected(original.data(), original.data() + original.size());
  for (const Patch& patch : plan.patches) {
    if (patch.at < original.base() || patch.at + patch.bytes.size() > original.base() + original.size()) continue;
    std::copy(patch.bytes.begin(), patch.bytes.end(), expected.begin() + (patch.at - original.base()));
  }
  Bytes written = after.segment_bytes(index);
  if (written.size() != expected.size() || std::memcmp(written.data(), expected.data(), expected.size()) != 0)
    fail_at(written.base(), "delegate payload segment " + std::to_string(index) + " is not the input with its keys renewed");
}

// An unchanged segment is proven identical when the pieces copy all its bytes to
// where the output's flatbuffer now locates it: CopyChecker has checked every
// copy byte for byte. A segment with patches (a delegate payload) must be the input
// with the patches applied.
void check_unchanged_segments(const Container& before, const Container& after, const Plan& plan) {
  for (uint32_t i = 0; i < before.segments.size(); ++i) {
    bool rewritten = std::any_of(plan.blobs.begin(), plan.blobs.end(),
                                 [&](const BlobJob& job) { return job.changed && job.segment_index == i; });
    uint64_t start = before.segment_start(i), end = start + before.segments[i].size;
    if (rewritten || start == end) continue;
    bool patched = std::any_of(plan.patches.begin(), plan.patches.end(),
                               [&](const Patch& patch) { return patch.at >= start && patch.at < end; });
    if (patched) {
      check_patched_segment(before, after, plan, i);
      continue;
    }
    int64_t delta = static_cast<int64_t>(plan.new_offsets[i]) - static_cast<int64_t>(start);
    uint64_t covered = 0;
    for (const Piece& piece : plan.pieces) {
      if (!piece.in_at) continue;
      uint64_t from = std::max(start, *piece.in_at), to = std::min(end, *piece.in_at + piece.length);
      if (from >= to) continue;
      if (static_cast<int64_t>(piece.out_at) - static_cast<int64_t>(*piece.in_at) != delta)
        fail_at(from, "segment " + std::to_string(i) + " is not copied to where the output locates it");
      covered += to - from;
    }
    if (covered != end - start) fail_at(start, "segment " + std::to_string(i) + " is not entirely copied to the output");
  }
}

// Re-reads the temporary output as a new input: header, Verifier, every segment
// located again, then every byte compared with the plan (the copies by `checker`).
void verify_output(const Container& before, const Plan& plan, const std::string& temp_path, CopyChecker& checker) {
  seam::offer_file(seam::ProofStep::PteReread, temp_path, 0, plan.output_size);  // tests only
  MappedFile written(temp_path);
  try {
    if (written.size() != plan.output_size)
      fail_at(written.size(), "the output is " + std::to_string(written.size()) + " bytes, not " + std::to_string(plan.output_size));
    Container after = read_container(written.bytes());
    check_header_after(before, after, plan);
    check_segments_after(before, after, plan);
    check_names_after(before, after, plan);
    check_blobs_after(before, after, plan);
    check_payloads_after(before, after, plan);
    check_unchanged_segments(before, after, plan);
    compare_new_bytes(written.bytes(), plan);
    checker.finish();
  } catch (Error& error) {
    throw error.in_part("verifying the output before committing it (offsets in the output)");
  }
}

}  // namespace

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
  // Destroyed in reverse: the copy stops, then the checker, then the temporary
  // file goes unless committed.
  std::optional<AtomicOutput> output;
  std::optional<CopyChecker> checker;
  std::optional<CopyAhead> ahead;
  if (writes) {
    output.emplace(output_path, input.mode(), /*durable=*/in_place);
    // Where the file system shares blocks, the output starts as a clone of the input
    // and the copies are proven by its extent map (shared_extents.h); elsewhere that
    // map is never asked (it would write back every copied page first).
    bool cloned = output->clone_from(input.fd());
    output->truncate(input.size());
    checker.emplace(input, output->temp_path(), input.size(), options.progress);
    if (cloned) checker->prove_shared_extents();
    ahead.emplace(input, *output, *checker);
  }
  Plan plan = make_plan(container, judged, report);
  // Unchanged: an identical copy for another path, nothing at all in place.
  if (!writes || (!plan.changed && in_place)) return report;
  if (keeps_layout(plan, input.size())) {
    write_new_bytes(plan, *output, *checker, *ahead);
  } else {
    ahead.reset();
    checker->help();  // nothing reads the output while it changes size
    output->truncate(plan.output_size);
    checker->resize_output(plan.output_size);
    write_pieces(input, plan, *output, *checker);
  }
  verify_output(container, plan, output->temp_path(), *checker);
  output->commit();
  report.written = true;
  report.bytes_shared = checker->proven_shared_bytes();
  return report;
}

}  // namespace machofix
