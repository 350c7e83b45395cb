// ExecuTorch .pte (Program) and .ptd (FlatTensor) files: find the Mach-O images
// stored as named data, prune them, and patch the file around them.
//
// See shared/spec/pte.md. The flatbuffer is read through machofix's own schemas
// (core/schema/*.fbs) after flatbuffers::Verifier has accepted it, and is never
// re-serialized: a rewrite patches bytes at offsets found through the vtables
// (named-data keys, DataSegment offset/size, delegate payloads) and copies every
// other byte from the input. Inputs are mapped, never read whole into memory; the
// weights are copied by the kernel (copy_file_range) and read once, to verify.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/bytes.h"
#include "core/file_io.h"
#include "core/macho_repair.h"

namespace machofix {

enum class ContainerKind { Pte, Ptd };
const char* container_kind_name(ContainerKind kind);  // "pte", "ptd"

// Cheap content checks: the flatbuffer file identifier ("ET12" / "FT01" at 4); a
// .ptd also needs its "FH01" header at 8. They do not validate anything else.
bool looks_like_pte(const Bytes& file);
bool looks_like_ptd(const Bytes& file);

struct ContainerHeaderReport {
  // .pte: 0 when there is no "eh00" extended header (then there are no segments),
  // else 24 or 32 (only 32 carries segment_data_size). .ptd: 40 or more.
  uint32_t length = 0;
  uint64_t flatbuffer_end = 0;  // .pte program_size; .ptd flatbuffer_offset + flatbuffer_size
  uint64_t segment_base_offset = 0;
  std::optional<uint64_t> segment_data_size;
};

struct SegmentReport {
  uint32_t index = 0;
  uint64_t offset = 0;  // absolute file offset (segment_base_offset + DataSegment.offset)
  uint64_t size = 0;
  std::optional<uint64_t> new_offset;  // when the rewrite moved it (absolute)
  std::optional<uint64_t> new_size;    // when the rewrite resized it
};

struct DelegateReport {
  std::string method;  // ExecutionPlan.name
  std::string id;      // BackendDelegate.id, e.g. "MetalBackend"
  bool inline_data = true;  // processed data in backend_delegate_data (else a segment)
  uint32_t index = 0;       // into backend_delegate_data or segments
  uint64_t payload_offset = 0;  // absolute
  uint64_t payload_size = 0;
  // The payload read as lines, when it is short printable text such as the AOTI
  // "so_key\nweights_key"; empty otherwise.
  std::vector<std::string> payload_keys;
};

struct NamedDataReport {
  std::string key;
  uint32_t segment_index = 0;
  uint64_t offset = 0;  // absolute
  uint64_t size = 0;
  std::string kind;  // "mach-o", "mach-o universal", "elf", "other"
  // The key is sha256(bytes) in hex followed by a suffix ("_so_blob"): ExecuTorch
  // 1.4+ content-hash keys, renewed when the bytes change.
  bool content_hash_key = false;
};

// Where a renewed key was written.
struct KeyRenewal {
  std::string old_key;
  std::string new_key;
  std::vector<std::string> renewed_in;  // "NamedData.key", "delegate payload (segment 1)", "delegate payload (inline 0)"
};

// One Mach-O image, however many keys name its segment.
struct BlobReport {
  uint32_t segment_index = 0;
  std::vector<std::string> keys;
  uint64_t offset = 0;  // absolute, in the input
  uint64_t size = 0;
  uint64_t new_size = 0;  // == size unless the rewrite changed it (e.g. --sign added a signature)
  std::string sha256;      // of the input bytes
  std::string new_sha256;  // of the rewritten bytes (== sha256 when unchanged)
  MachOReport macho;       // inspect_macho for inspect_pte, prune_macho's for repair_pte
  std::string error;       // inspect_pte only: why the blob could not be analyzed
  std::vector<KeyRenewal> renewals;
  bool changed = false;
};

struct PteReport {
  ContainerKind kind = ContainerKind::Pte;
  ContainerHeaderReport header;
  uint64_t file_size = 0;
  uint64_t output_size = 0;  // == file_size unless a blob changed size
  std::vector<std::string> methods;
  std::vector<DelegateReport> delegates;
  std::vector<SegmentReport> segments;
  std::vector<NamedDataReport> named_data;
  std::vector<BlobReport> blobs;  // one per distinct segment holding a Mach-O image
  std::vector<std::string> warnings;
  bool changed = false;   // the output differs from the input (or would, in a dry run)
  bool written = false;   // an output file was committed
  // Of the bytes copied from the input, how many the file system shares with it
  // (proven by its extent map, not read: shared_extents.h); the rest were compared.
  uint64_t bytes_shared = 0;
};

// Reads the file (header, verified flatbuffer, segments, named data, delegates) and
// runs inspect_macho on every Mach-O blob. Throws Error with absolute offsets.
PteReport inspect_pte(const Bytes& file, const RepairOptions& options = {});

// What happens to each Mach-O blob, in two steps. The first reads the blob and takes
// every decision that refuses it (throwing Error), for every blob before anything
// is written or copied; it returns the second, which rewrites it. Production uses
// MachORewrite (macho_rewriter); tests pass stand-ins that make a blob grow or
// shrink. Blob bytes carry their absolute file offset as Bytes::base().
using BlobRewrite = std::function<MachORepair()>;
using BlobRewriter = std::function<BlobRewrite(const Bytes& blob, const RepairOptions& options)>;
BlobRewriter macho_rewriter(RewriteKind kind);

// Prunes every Mach-O blob, renews content-hash keys, moves later segments when a
// blob changes size, and writes `output_path` through AtomicOutput. Every blob is
// read and judged (the rewriter's first step: an invalid signature, an identity
// signature without --adhoc refuse the file) before the output is created; then
// unchanged ranges are copied by the kernel, changed bytes written, and the temporary
// output is re-read and verified (FlatBuffers Verifier, every segment re-located,
// every byte compared with the input or with what was meant to be written) before
// commit().
//
// - dry_run: everything up to writing; nothing is created, not even a temporary file.
// - Nothing to change: when output_path is another file, it becomes an identical
//   (verified) copy of the input; when it is the input itself, nothing is written.
// - Any failure throws Error (file offsets, part = named-data key, ...) and leaves
//   output_path untouched.
PteReport repair_pte(const MappedFile& input, const std::string& output_path, const RepairOptions& options,
                     bool dry_run, const BlobRewriter& rewrite = macho_rewriter(RewriteKind::Prune));

// ---------------------------------------------------------------------------
// Building blocks, exposed for the unit tests.

// SHA-256 of the bytes, lowercase hex.
std::string sha256_hex(const Bytes& bytes);

// Where segments go when some change size.
//
// Segments keep their order and the gaps between them. Everything after a resized
// segment moves by one shift, a multiple of the largest alignment among the
// segments that move, so each of them keeps at least its original alignment: the
// alignment of a segment is the largest power of two dividing its offset, both in
// the file and from segment_base_offset (ExecuTorch aligns offsets from the base
// to lcm(segment_alignment, entry alignment): 128 by default, often 4096), capped
// at kMaxKeptAlignment. The gap right after a resized segment absorbs the
// difference (the shift is the smallest such multiple that keeps the next segment
// after the new end; a shrinking segment may leave a larger gap) and is zero-filled.
// The price is at most kMaxKeptAlignment - 1 bytes of padding per resized segment.
constexpr uint64_t kMaxKeptAlignment = 65536;

struct SegmentMove {
  uint64_t old_offset = 0;
  uint64_t old_size = 0;
  uint64_t new_offset = 0;
  uint64_t new_size = 0;
};

struct Relocation {
  std::vector<SegmentMove> segments;  // parallel to the input
  // One step per resized segment, in file order: from `resume` on, the input is
  // copied `shift` bytes further (negative: earlier) than it was.
  struct Step {
    uint64_t resized_start = 0;  // the resized segment's old offset
    uint64_t resized_old_end = 0;
    uint64_t new_end = 0;  // where its new bytes end in the output
    uint64_t resume = 0;   // input offset where copying resumes (next segment, or old end)
    int64_t shift = 0;     // output offset - input offset from resume on
  };
  std::vector<Step> steps;
  int64_t final_shift() const { return steps.empty() ? 0 : steps.back().shift; }
};

// `offsets` are absolute, `base` is segment_base_offset, `new_sizes` the size each
// segment will have. Fails (Error) if a resized segment overlaps another one.
Relocation relocate_segments(uint64_t base, const std::vector<uint64_t>& offsets, const std::vector<uint64_t>& sizes,
                             const std::vector<uint64_t>& new_sizes);

// ---------------------------------------------------------------------------
// The container as read, shared by core/pte*.cc and the unit tests; front ends
// use the reports above.
namespace pte_internal {

struct Header {
  uint32_t length = 0;  // 0: a .pte without extended header
  uint64_t flatbuffer_end = 0;
  uint64_t base = 0;  // segment_base_offset
  uint64_t base_at = 0;  // where that field is
  std::optional<uint64_t> segment_data_size;
  std::optional<uint64_t> segment_data_size_at;  // where that field is, when present
};

// Positions (`*_at`) are absolute file offsets.
struct SegmentEntry {
  uint64_t offset = 0;  // DataSegment.offset: relative to the base
  uint64_t size = 0;
  uint64_t table_at = 0;
  std::optional<uint64_t> offset_at;  // none: omitted by the writer (it was 0)
  std::optional<uint64_t> size_at;
};

struct NamedEntry {
  std::string key;
  uint64_t key_at = 0;  // the key's first character
  uint32_t segment_index = 0;
  uint64_t table_at = 0;
};

struct DelegateEntry {
  std::string method;
  std::string id;
  bool inline_data = true;
  uint32_t index = 0;
  uint64_t table_at = 0;
};

struct InlineData {
  uint64_t at = 0;
  uint64_t size = 0;
};

struct Container {
  ContainerKind kind = ContainerKind::Pte;
  Bytes file;
  Header header;
  std::vector<std::string> methods;
  std::vector<SegmentEntry> segments;
  std::vector<NamedEntry> named;
  std::vector<DelegateEntry> delegates;
  std::vector<InlineData> inline_data;  // Program.backend_delegate_data
  // Segments used other than as named data or delegate payloads (constant_segment, ...).
  std::vector<std::pair<uint32_t, std::string>> other_users;

  uint64_t segment_start(uint32_t index) const;  // absolute
  Bytes segment_bytes(uint32_t index) const;
  Bytes payload(const DelegateEntry& delegate) const;
};

// Header, Verifier, segments inside the file, every index in range.
Container read_container(const Bytes& file);

std::string blob_kind(const Bytes& blob);
bool is_content_hash_key(const std::string& key, const std::string& sha256);

// A delegate payload read as "key\nkey" text; empty unless it is short printable text.
struct PayloadLine {
  std::string text;
  uint64_t at = 0;  // absolute
};
std::vector<PayloadLine> payload_lines(const Bytes& payload);

PteReport describe(const Container& container);
// Distinct segments named by Mach-O named data, in file order.
std::vector<uint32_t> macho_segments(const Container& container);
std::vector<std::string> keys_of(const Container& container, uint32_t segment_index);
std::string blob_part(const Container& container, uint32_t segment_index);  // for Error::in_part
RepairOptions blob_options(const Container& container, uint32_t segment_index, const RepairOptions& options);

}  // namespace pte_internal

}  // namespace machofix
