// Reading .pte/.ptd containers, and the report inspect_pte and repair_pte return.
//
// The flatbuffer is checked by flatbuffers::Verifier before any accessor runs; the
// positions of fields that a rewrite may patch are then found by walking vtables
// through Bytes, so every patch offset is bounds-checked against the file.
#include "core/io/pte.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/base/endian.h"
#include "core/format/macho.h"
#include "core/io/pte_container.h"
#include "core/base/sha.h"
#include "core/base/util.h"
#include "flat_tensor_generated.h"
#include "program_generated.h"

namespace machofix {

namespace {

// A .pte's extended header (ExecuTorch's extended_header.h, tag "eh00").
struct ExtendedHeader {
  char magic[4];
  ul32 length;
  ul64 program_size, segment_base_offset;
  ul64 segment_data_size;  // only in headers of 32 bytes or more
};

// A .ptd's header (ExecuTorch's flat_tensor_header.h, tag "FH01").
struct FlatTensorHeader {
  char magic[4];
  ul32 length;
  ul64 flatbuffer_offset, flatbuffer_size, segment_base_offset, segment_data_size;
};

static_assert(sizeof(ExtendedHeader) == 32 && sizeof(FlatTensorHeader) == 40);
// The field that places the flatbuffer's end: program_size, or flatbuffer_offset in a .ptd.
constexpr uint64_t kFlatbufferField = offsetof(ExtendedHeader, program_size);
static_assert(kFlatbufferField == offsetof(FlatTensorHeader, flatbuffer_offset));

constexpr uint32_t kElfMagic = 0x464c457f;  // "\x7fELF"
constexpr uint64_t kHeaderAt = 8;           // the extended header follows the file identifier
constexpr uint32_t kPteShortHeader = offsetof(ExtendedHeader, segment_data_size);  // 24: without segment_data_size
constexpr uint64_t kMaxPayloadText = 4096;  // AOTI payloads are ~150 bytes of keys

bool has_tag(const Bytes& file, uint64_t offset, const char (&tag)[5]) {
  return fits(offset, 4, file.size()) && std::memcmp(file.data() + offset, tag, 4) == 0;
}

// Four bytes for a message: as text when printable, else in hex.
std::string printable_tag(const Bytes& file, uint64_t offset) {
  if (!fits(offset, 4, file.size())) return "(file too short)";
  Bytes tag = file.sub(offset, 4, "tag");
  std::string text(reinterpret_cast<const char*>(tag.data()), 4);
  bool printable = std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
  return printable ? "\"" + text + "\"" : hex_bytes(tag.data(), 4);
}

}  // namespace

bool looks_like_pte(const Bytes& file) { return has_tag(file, 4, "ET12"); }
bool looks_like_ptd(const Bytes& file) { return has_tag(file, 4, "FT01") && has_tag(file, kHeaderAt, "FH01"); }

namespace pte_internal {

namespace {

// --- headers -----------------------------------------------------------------

Header read_pte_header(const Bytes& file) {
  Header header;
  file.require(0, 8, "flatbuffer root offset and file identifier");
  if (!has_tag(file, kHeaderAt, "eh00")) {
    header.flatbuffer_end = file.size();  // no segments: the whole file is the flatbuffer
    return header;
  }
  header.length = file.u32(kHeaderAt + offsetof(ExtendedHeader, length), "extended header length");
  if (header.length < kPteShortHeader)
    file.fail_here(kHeaderAt + offsetof(ExtendedHeader, length), "extended header length " + std::to_string(header.length) + " is less than 24");
  header.flatbuffer_end = file.u64(kHeaderAt + offsetof(ExtendedHeader, program_size), "program_size");
  header.base_at = kHeaderAt + offsetof(ExtendedHeader, segment_base_offset);
  header.base = file.u64(header.base_at, "segment_base_offset");
  if (header.length >= sizeof(ExtendedHeader)) {
    header.segment_data_size_at = kHeaderAt + offsetof(ExtendedHeader, segment_data_size);
    header.segment_data_size = file.u64(*header.segment_data_size_at, "segment_data_size");
  }
  return header;
}

Header read_ptd_header(const Bytes& file) {
  Header header;
  header.length = file.u32(kHeaderAt + offsetof(FlatTensorHeader, length), "FH01 header length");
  if (header.length < sizeof(FlatTensorHeader))
    file.fail_here(kHeaderAt + offsetof(FlatTensorHeader, length), "FH01 header length " + std::to_string(header.length) + " is less than 40");
  uint64_t flatbuffer_offset = file.u64(kHeaderAt + offsetof(FlatTensorHeader, flatbuffer_offset), "flatbuffer_offset");
  uint64_t flatbuffer_size = file.u64(kHeaderAt + offsetof(FlatTensorHeader, flatbuffer_size), "flatbuffer_size");
  // The flatbuffer starts at 0 (the header sits inside it, after the identifier);
  // flatbuffer_offset is the padded header length, so the two add up to its end.
  header.flatbuffer_end = checked_add(flatbuffer_offset, flatbuffer_size, kHeaderAt + offsetof(FlatTensorHeader, flatbuffer_offset),
                                      "flatbuffer_offset + flatbuffer_size");
  header.base_at = kHeaderAt + offsetof(FlatTensorHeader, segment_base_offset);
  header.base = file.u64(header.base_at, "segment_base_offset");
  header.segment_data_size_at = kHeaderAt + offsetof(FlatTensorHeader, segment_data_size);
  header.segment_data_size = file.u64(*header.segment_data_size_at, "segment_data_size");
  return header;
}

// The header's numbers must describe this file; the segments are checked later.
void check_header(const Bytes& file, const Header& header) {
  uint64_t minimum_end = header.length ? kHeaderAt + header.length : 8;
  if (header.flatbuffer_end < minimum_end || header.flatbuffer_end > file.size()) {
    file.fail_here(kHeaderAt + kFlatbufferField, "the flatbuffer would end at " + hex(header.flatbuffer_end) +
                                      ", outside the file (" + hex(file.size()) + " bytes) or inside the header");
  }
  if (header.length == 0) return;
  if (header.base < header.flatbuffer_end || header.base > file.size()) {
    file.fail_here(header.base_at, "segment_base_offset " + hex(header.base) + " is not between the end of the flatbuffer (" +
                       hex(header.flatbuffer_end) + ") and the end of the file (" + hex(file.size()) + ")");
  }
  if (header.segment_data_size) {
    uint64_t end = checked_add(header.base, *header.segment_data_size, *header.segment_data_size_at, "segment data end");
    if (end > file.size())
      file.fail_here(*header.segment_data_size_at, "segment data would end at " + hex(end) + ", past the end of the file (" +
                                                       hex(file.size()) + "): the file is truncated");
  }
}

// --- flatbuffer --------------------------------------------------------------

uint64_t position_in(const Bytes& file, const void* pointer) {
  return static_cast<uint64_t>(static_cast<const uint8_t*>(pointer) - file.data());
}

// Where the value of a table's field lies, found through the vtable; nullopt when
// the writer omitted it (it held the default): such a field cannot be patched.
std::optional<uint64_t> field_position(const Bytes& file, uint64_t table_at, uint16_t vtable_slot) {
  int32_t to_vtable = static_cast<int32_t>(file.u32(table_at, "table's vtable offset"));
  uint64_t vtable_at = table_at - static_cast<uint64_t>(static_cast<int64_t>(to_vtable));
  uint16_t vtable_size = file.u16(vtable_at, "vtable size");
  if (vtable_slot + 2u > vtable_size) return std::nullopt;
  uint16_t field = file.u16(vtable_at + vtable_slot, "vtable entry");
  if (field == 0) return std::nullopt;
  return table_at + field;
}

void verify_flatbuffer(const Bytes& flatbuffer, ContainerKind kind) {
  // The Verifier's own limit; its constructor only asserts it.
  if (flatbuffer.size() >= FLATBUFFERS_MAX_BUFFER_SIZE)
    fail_at(0, "the flatbuffer is " + std::to_string(flatbuffer.size()) + " bytes, more than FlatBuffers allows");
  // Large programs have many tables; the buffer size already bounds the work.
  flatbuffers::Verifier verifier(flatbuffer.data(), flatbuffer.size(), 64, 1u << 30);
  bool valid = kind == ContainerKind::Pte ? pte_fb::VerifyProgramBuffer(verifier) : ptd_fb::VerifyFlatTensorBuffer(verifier);
  if (!valid) {
    fail_at(0, std::string("the ") + (kind == ContainerKind::Pte ? "Program" : "FlatTensor") +
                   " flatbuffer [0, " + hex(flatbuffer.size()) + ") does not pass the FlatBuffers verifier");
  }
}

template <typename DataSegmentVector>
void read_segments(const Bytes& file, const DataSegmentVector* segments, Container& container) {
  if (!segments) return;
  using DataSegment = std::remove_const_t<std::remove_pointer_t<typename DataSegmentVector::return_type>>;
  for (const DataSegment* segment : *segments) {
    SegmentEntry entry;
    entry.table_at = position_in(file, segment);
    entry.offset = segment->offset();
    entry.size = segment->size();
    entry.offset_at = field_position(file, entry.table_at, DataSegment::VT_OFFSET);
    entry.size_at = field_position(file, entry.table_at, DataSegment::VT_SIZE);
    // The vtable walk must find what the generated accessors read.
    if ((entry.offset_at && file.u64(*entry.offset_at) != entry.offset) || (entry.size_at && file.u64(*entry.size_at) != entry.size))
      fail_at(entry.table_at, "internal error: DataSegment fields are not where the vtable says");
    container.segments.push_back(entry);
  }
}

template <typename NamedDataVector>
void read_named_data(const Bytes& file, const NamedDataVector* named_data, Container& container) {
  if (!named_data) return;
  for (const auto* named : *named_data) {
    NamedEntry entry;
    entry.table_at = position_in(file, named);
    entry.segment_index = named->segment_index();
    if (named->key()) {
      entry.key = named->key()->str();
      entry.key_at = position_in(file, named->key()->data());
    }
    container.named.push_back(entry);
  }
}

void read_program(const Bytes& file, Container& container) {
  const pte_fb::Program* program = pte_fb::GetProgram(file.data());
  if (program->backend_delegate_data()) {
    for (const pte_fb::BackendDelegateInlineData* inline_data : *program->backend_delegate_data()) {
      InlineData entry;
      if (inline_data->data()) entry = {position_in(file, inline_data->data()->data()), inline_data->data()->size()};
      container.inline_data.push_back(entry);
    }
  }
  if (program->execution_plan()) {
    for (const pte_fb::ExecutionPlan* plan : *program->execution_plan()) {
      std::string method = plan->name() ? plan->name()->str() : "";
      container.methods.push_back(method);
      if (!plan->delegates()) continue;
      for (const pte_fb::BackendDelegate* delegate : *plan->delegates()) {
        DelegateEntry entry;
        entry.method = method;
        entry.table_at = position_in(file, delegate);
        entry.id = delegate->id() ? delegate->id()->str() : "";
        if (!delegate->processed()) fail_at(entry.table_at, "delegate '" + entry.id + "' of method '" + method + "' has no processed data");
        entry.inline_data = delegate->processed()->location() == pte_fb::DataLocation::INLINE;
        entry.index = delegate->processed()->index();
        container.delegates.push_back(entry);
      }
    }
  }
  read_segments(file, program->segments(), container);
  read_named_data(file, program->named_data(), container);
  if (program->constant_segment()) container.other_users.push_back({program->constant_segment()->segment_index(), "constant_segment"});
  if (program->mutable_data_segments()) {
    for (const pte_fb::SubsegmentOffsets* mutable_data : *program->mutable_data_segments())
      container.other_users.push_back({mutable_data->segment_index(), "mutable_data_segments"});
  }
}

void read_flat_tensor(const Bytes& file, Container& container) {
  const ptd_fb::FlatTensor* flat_tensor = ptd_fb::GetFlatTensor(file.data());
  read_segments(file, flat_tensor->segments(), container);
  read_named_data(file, flat_tensor->named_data(), container);
}

// --- cross-references ---------------------------------------------------------

void check_segments(const Bytes& file, const Container& container) {
  for (size_t i = 0; i < container.segments.size(); ++i) {
    const SegmentEntry& segment = container.segments[i];
    if (container.header.length == 0)
      fail_at(segment.table_at, "the Program has segments but the file has no extended header to locate them");
    uint64_t start = checked_add(container.header.base, segment.offset, segment.table_at, "segment offset");
    uint64_t end = checked_add(start, segment.size, segment.table_at, "segment end");
    if (end > file.size()) {
      fail_at(segment.table_at, "segment " + std::to_string(i) + " [" + hex(start) + ", " + hex(end) +
                                    ") runs past the end of the file (" + hex(file.size()) + ")");
    }
  }
}

void check_references(const Container& container) {
  size_t segment_count = container.segments.size();
  for (const NamedEntry& named : container.named) {
    if (named.segment_index >= segment_count) {
      Error error("segment_index " + std::to_string(named.segment_index) + " is out of range (" +
                      std::to_string(segment_count) + " segments)",
                  named.table_at);
      throw error.in_part("named data '" + named.key + "'");
    }
  }
  for (const DelegateEntry& delegate : container.delegates) {
    size_t count = delegate.inline_data ? container.inline_data.size() : segment_count;
    if (delegate.index >= count) {
      fail_at(delegate.table_at, "delegate '" + delegate.id + "' of method '" + delegate.method + "' refers to " +
                                     (delegate.inline_data ? "inline data " : "segment ") + std::to_string(delegate.index) +
                                     " of " + std::to_string(count));
    }
  }
}

}  // namespace

uint64_t Container::segment_start(uint32_t index) const { return header.base + segments.at(index).offset; }

Bytes Container::segment_bytes(uint32_t index) const {
  return file.sub(segment_start(index), segments.at(index).size, "segment");
}

Bytes Container::payload(const DelegateEntry& delegate) const {
  if (!delegate.inline_data) return segment_bytes(delegate.index);
  const InlineData& data = inline_data.at(delegate.index);
  return file.sub(data.at, data.size, "inline delegate data");
}

Container read_container(const Bytes& file) {
  Container container;
  container.file = file;
  if (looks_like_ptd(file)) {
    container.kind = ContainerKind::Ptd;
  } else if (!looks_like_pte(file)) {
    fail_at(4, "not an ExecuTorch .pte (identifier \"ET12\") or .ptd (\"FT01\" with an \"FH01\" header) file; "
               "identifier bytes: " + printable_tag(file, 4));
  }
  try {
    container.header = container.kind == ContainerKind::Pte ? read_pte_header(file) : read_ptd_header(file);
    check_header(file, container.header);
  } catch (Error& error) {
    throw error.in_part(container.kind == ContainerKind::Pte ? "extended header" : "FH01 header");
  }
  try {
    verify_flatbuffer(file.sub(0, container.header.flatbuffer_end, "flatbuffer"), container.kind);
    if (container.kind == ContainerKind::Pte)
      read_program(file, container);
    else
      read_flat_tensor(file, container);
    check_segments(file, container);
  } catch (Error& error) {
    throw error.in_part(container.kind == ContainerKind::Pte ? "Program flatbuffer" : "FlatTensor flatbuffer");
  }
  check_references(container);
  return container;
}

BlobKind blob_kind(const Bytes& blob) {
  if (looks_like_universal(blob)) return BlobKind::Universal;
  if (looks_like_thin_macho(blob)) return BlobKind::MachO;
  if (blob.size() >= 4 && blob.u32(0) == kElfMagic) return BlobKind::Elf;
  return BlobKind::Other;
}

bool is_content_hash_key(const std::string& key, const std::string& sha256) {
  return key.size() >= sha256.size() && key.compare(0, sha256.size(), sha256) == 0;
}

std::vector<PayloadLine> payload_lines(const Bytes& payload) {
  std::vector<PayloadLine> lines;
  if (payload.size() == 0 || payload.size() > kMaxPayloadText) return lines;
  for (uint64_t i = 0; i < payload.size(); ++i) {
    uint8_t byte = payload.u8(i);
    if (byte != '\n' && (byte < 0x20 || byte > 0x7e)) return {};
  }
  std::string_view text(reinterpret_cast<const char*>(payload.data()), payload.size());
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = std::min(text.find('\n', start), text.size());
    if (end > start) lines.push_back({std::string(text.substr(start, end - start)), payload.base() + start});
    start = end + 1;
  }
  return lines;
}

PteReport describe(const Container& container) {
  PteReport report;
  report.kind = container.kind;
  report.file_size = report.output_size = container.file.size();
  report.header = {container.header.length, container.header.flatbuffer_end, container.header.base,
                   container.header.segment_data_size};
  report.methods = container.methods;
  for (uint32_t i = 0; i < container.segments.size(); ++i)
    report.segments.push_back({i, container.segment_start(i), container.segments[i].size, std::nullopt, std::nullopt});
  for (const DelegateEntry& delegate : container.delegates) {
    Bytes payload = container.payload(delegate);
    DelegateReport entry{delegate.method, delegate.id, delegate.inline_data, delegate.index, payload.base(), payload.size(), {}};
    for (const PayloadLine& line : payload_lines(payload)) entry.payload_keys.push_back(line.text);
    report.delegates.push_back(std::move(entry));
  }
  for (const NamedEntry& named : container.named) {
    Bytes bytes = container.segment_bytes(named.segment_index);
    report.named_data.push_back({named.key, named.segment_index, bytes.base(), bytes.size(), blob_kind(bytes), false});
  }
  return report;
}

std::vector<uint32_t> macho_segments(const Container& container) {
  std::vector<uint32_t> indices;
  for (const NamedEntry& named : container.named) {
    BlobKind kind = blob_kind(container.segment_bytes(named.segment_index));
    if (kind == BlobKind::MachO || kind == BlobKind::Universal) indices.push_back(named.segment_index);
  }
  std::sort(indices.begin(), indices.end(), [&](uint32_t a, uint32_t b) {
    return container.segments[a].offset != container.segments[b].offset ? container.segments[a].offset < container.segments[b].offset
                                                                         : a < b;
  });
  indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
  return indices;
}

std::vector<std::string> keys_of(const Container& container, uint32_t segment_index) {
  std::vector<std::string> keys;
  for (const NamedEntry& named : container.named)
    if (named.segment_index == segment_index) keys.push_back(named.key);
  return keys;
}

std::string blob_part(const Container& container, uint32_t segment_index) {
  std::vector<std::string> keys = keys_of(container, segment_index);
  std::string names;
  for (const std::string& key : keys) names += (names.empty() ? "'" : ", '") + key + "'";
  return "named data " + names + " (segment " + std::to_string(segment_index) + ")";
}

RepairOptions blob_options(const Container& container, uint32_t segment_index, const RepairOptions& options) {
  RepairOptions blob = options;
  // A signature added to an unsigned blob is named after its key, not the .pte.
  std::vector<std::string> keys = keys_of(container, segment_index);
  if (!keys.empty()) blob.file_name = keys.front();
  return blob;
}

}  // namespace pte_internal

PteReport inspect_pte(const Bytes& file, const RepairOptions& options) {
  using namespace pte_internal;
  Container container = read_container(file);
  PteReport report = describe(container);
  for (uint32_t index : macho_segments(container)) {
    Bytes blob = container.segment_bytes(index);
    BlobReport entry;
    entry.segment_index = index;
    entry.keys = keys_of(container, index);
    entry.offset = blob.base();
    entry.size = entry.new_size = blob.size();
    entry.sha256 = entry.new_sha256 = sha256_hex(blob);
    try {
      entry.macho = inspect_macho(blob, blob_options(container, index, options));
    } catch (Error& error) {
      entry.error = error.in_part(blob_part(container, index)).describe();
    }
    report.blobs.push_back(std::move(entry));
  }
  for (NamedDataReport& named : report.named_data) {
    for (const BlobReport& blob : report.blobs)
      if (blob.segment_index == named.segment_index) named.content_hash_key = is_content_hash_key(named.key, blob.sha256);
  }
  return report;
}

}  // namespace machofix
