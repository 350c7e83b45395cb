// The .pte/.ptd container as read (core/io/pte.cc): header, segments, named data,
// delegates, with the file offset of every field a rewrite may patch, and what
// ExecuTorch's runtime would find when it loads the file (core/io/pte_load_rules.cc).
// Shared by core/pte*.cc and the unit tests; front ends use the reports of
// core/io/pte.h.
//
// Reading records what the file says, even where it says something the runtime never
// looks at (a segment past the end of the file that nothing loads): the load rules
// refuse only what the runtime refuses, and a rewrite refuses what it cannot do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/bytes.h"
#include "core/io/pte.h"

namespace machofix {

namespace pte_internal {

struct Header {
  uint32_t length = 0;  // 0: a .pte without extended header (its segments are then based at 0)
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
  // What the runtime takes from the table (core/io/pte_load_rules.cc judges it).
  bool has_id = false;
  bool has_processed = false;
  uint8_t location = 0;      // DataLocation as stored: 0 inline, 1 segment, else unknown
  bool specs_complete = true;  // every compile spec has a key and a value
  std::string method_name_spec;  // the compile spec "method_name" (AOTI key prefix), "" if none
  size_t plan = 0;           // index of its ExecutionPlan
};

struct InlineData {
  uint64_t at = 0;
  uint64_t size = 0;
  bool present = true;  // the entry has its data vector
};

// How an AOTI backend (MetalBackend, CudaBackend) resolves a delegate's blob keys
// (the runtime's resolve_blob_keys and its named-data lookup).
struct KeyResolution {
  size_t delegate = 0;  // index into Container::delegates
  std::string so_key, weights_key;
  // Where each key lies in the payload (absolute), when it was read from there
  // rather than made from the method name.
  std::optional<uint64_t> so_key_at, weights_key_at;
  std::optional<size_t> so_named, weights_named;  // the NamedData entry found, if any
  // Why the weights were not found (empty when they were): the key is empty, the
  // program has no such key, or an entry cannot be read (PteDataMap::get_data's
  // NotFound or InvalidArgument); the backend then runs without its constants.
  // weights_unreadable: InvalidArgument (an entry that is there but cannot be read, or
  // a keyless entry before it), as opposed to no entry of that key.
  std::string weights_missing;
  bool weights_unreadable = false;
  uint64_t weights_missing_at = 0;  // the entry, or the key in the payload, or the delegate
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
  // Plans by index: whether load_method reaches it (the first plan of its name).
  std::vector<bool> plan_reachable;
  // Every AOTI delegate of a reachable plan, in order (filled by the load rules).
  std::vector<KeyResolution> resolutions;

  uint64_t segment_start(uint32_t index) const;  // absolute
  // The segment lies in the file (its index in range, its end not past the file's).
  bool segment_in_file(uint32_t index) const;
  Bytes segment_bytes(uint32_t index) const;
  // The delegate's processed data, where the runtime would find it; std::nullopt
  // where it would not (possible only for a plan load_method never reaches).
  std::optional<Bytes> payload_if_present(const DelegateEntry& delegate) const;
  Bytes payload(const DelegateEntry& delegate) const;
};

// Header, Verifier, the structure, then ExecuTorch's load rules: refuses (Error) what
// the runtime would refuse to load, and nothing else.
Container read_container(const Bytes& file);

// The runtime's rules (core/io/pte_load_rules.cc), each mirroring the runtime function
// its comment names; called by read_container once the structure is read.
void check_file_head(const Bytes& file);
void check_header_loads(const Bytes& file, const Header& header, ContainerKind kind);
void check_program_loads(Container& container);
void check_flat_tensor_loads(const Container& container);

BlobKind blob_kind(const Bytes& blob);
bool is_content_hash_key(const std::string& key, const std::string& sha256);

// A delegate payload read as "key\nkey" text; empty unless it is short printable text.
// For reports only: the keys an AOTI backend uses are Container::resolutions.
struct PayloadLine {
  std::string text;
  uint64_t at = 0;  // absolute
};
std::vector<PayloadLine> payload_lines(const Bytes& payload);
bool is_aoti_backend(const std::string& id);

PteReport describe(const Container& container);
// Distinct segments named by Mach-O named data, in file order.
std::vector<uint32_t> macho_segments(const Container& container);
std::vector<std::string> keys_of(const Container& container, uint32_t segment_index);
std::string blob_part(const Container& container, uint32_t segment_index);  // for Error::in_part
RepairOptions blob_options(const Container& container, uint32_t segment_index, const RepairOptions& options);

}  // namespace pte_internal

}  // namespace machofix
