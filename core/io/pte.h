// ExecuTorch .pte (Program) and .ptd (FlatTensor) files: find the Mach-O images
// stored as named data, prune them, and patch the file around them.
//
// See docs/pte-format.md and docs/pte-load-rules.md. The flatbuffer is read through
// machofix's own schemas (core/io/schema/*.fbs) after flatbuffers::Verifier has
// accepted it, and the file is held to ExecuTorch's load rules; it is never
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

#include "core/base/bytes.h"
#include "core/io/file_io.h"
#include "core/rewrite/macho_repair.h"

namespace machofix {

enum class ContainerKind { Pte, Ptd };

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
  // For an AOTI backend (MetalBackend, CudaBackend): the blob keys it looks up, as
  // ExecuTorch's runtime resolves them (from the payload, or from the compile spec
  // "method_name" when the payload is empty). The .so key is always found (else the
  // file is refused); the weights are skipped by the backend when not found, and
  // the model then computes with constants it never received (check's missing-weights).
  struct AotiKeys {
    std::string so_key, weights_key;
    bool weights_found = false;
    std::string weights_missing;     // why not found: "the key is empty", "...no such key", ...
    bool weights_unreadable = false;  // an entry is there but cannot be read (not merely absent)
    uint64_t weights_missing_at = 0;  // absolute: the entry, the key in the payload, or the delegate
  };
  std::optional<AotiKeys> aoti;
};

// What a named-data entry's bytes are, by their first bytes (as FileKind for a file).
enum class BlobKind { MachO, Universal, Elf, Other };

struct NamedDataReport {
  std::string key;
  uint32_t segment_index = 0;
  uint64_t offset = 0;  // absolute
  uint64_t size = 0;
  BlobKind kind = BlobKind::Other;
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


}  // namespace machofix
