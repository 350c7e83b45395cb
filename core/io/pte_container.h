// The .pte/.ptd container as read (core/io/pte.cc): header, segments, named data,
// delegates, with the file offset of every field a rewrite may patch. Shared by
// core/pte*.cc and the unit tests; front ends use the reports of core/io/pte.h.
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

BlobKind blob_kind(const Bytes& blob);
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
