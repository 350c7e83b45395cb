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

// The fields as ExtendedHeader::Parse reads them; check_header_loads judges them.
Header read_pte_header(const Bytes& file) {
  Header header;
  if (!has_tag(file, kHeaderAt, "eh00")) {
    header.flatbuffer_end = file.size();  // no extended header: the whole file is the flatbuffer
    return header;
  }
  header.length = file.u32(kHeaderAt + offsetof(ExtendedHeader, length), "extended header length");
  // ExtendedHeader::Parse refuses a short header (and length 0 here means "none").
  if (header.length < offsetof(ExtendedHeader, segment_data_size))
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

// The fields as FlatTensorHeader::Parse reads them. The flatbuffer starts at 0 (the
// header sits inside it, after the identifier); flatbuffer_offset is the padded
// header length, so the two add up to its end (as FlatTensorDataMap::load adds them).
Header read_ptd_header(const Bytes& file) {
  Header header;
  header.length = file.u32(kHeaderAt + offsetof(FlatTensorHeader, length), "FH01 header length");
  uint64_t flatbuffer_offset = file.u64(kHeaderAt + offsetof(FlatTensorHeader, flatbuffer_offset), "flatbuffer_offset");
  uint64_t flatbuffer_size = file.u64(kHeaderAt + offsetof(FlatTensorHeader, flatbuffer_size), "flatbuffer_size");
  header.flatbuffer_end = flatbuffer_offset + flatbuffer_size;  // wraps as the runtime's size_t sum does
  header.base_at = kHeaderAt + offsetof(FlatTensorHeader, segment_base_offset);
  header.base = file.u64(header.base_at, "segment_base_offset");
  header.segment_data_size_at = kHeaderAt + offsetof(FlatTensorHeader, segment_data_size);
  header.segment_data_size = file.u64(*header.segment_data_size_at, "segment_data_size");
  return header;
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
  // The runtime's verifier, with its default limits (depth 64, a million tables):
  // what it refuses, the runtime does not load (Program::load, InternalConsistency).
  flatbuffers::Verifier verifier(flatbuffer.data(), flatbuffer.size());
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
      fail_as(ErrorKind::Internal, "internal error: DataSegment fields are not where the vtable says", entry.table_at);
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

void read_delegate(const Bytes& file, const pte_fb::BackendDelegate& delegate, DelegateEntry& entry) {
  entry.table_at = position_in(file, &delegate);
  entry.has_id = delegate.id() != nullptr;
  entry.id = entry.has_id ? delegate.id()->str() : "";
  entry.has_processed = delegate.processed() != nullptr;
  if (entry.has_processed) {
    entry.location = static_cast<uint8_t>(delegate.processed()->location());
    entry.inline_data = delegate.processed()->location() == pte_fb::DataLocation::INLINE;
    entry.index = delegate.processed()->index();
  }
  if (!delegate.compile_specs()) return;
  bool found_method_name = false;
  for (const pte_fb::CompileSpec* spec : *delegate.compile_specs()) {
    if (!spec->key() || !spec->value()) {
      entry.specs_complete = false;
      continue;
    }
    // The AOTI backends compare the key as a C string (strcmp) and take the first match.
    if (!found_method_name && std::strcmp(spec->key()->c_str(), "method_name") == 0) {
      entry.method_name_spec.assign(reinterpret_cast<const char*>(spec->value()->data()), spec->value()->size());
      found_method_name = true;
    }
  }
}

// load_method finds a plan by name with strcmp, taking the first match: a later plan
// of the same name (as a C string) is never loaded.
bool first_of_its_name(const pte_fb::Program& program, size_t index) {
  const pte_fb::ExecutionPlan* plan = program.execution_plan()->Get(index);
  if (!plan->name()) return true;
  for (size_t i = 0; i < index; ++i) {
    const pte_fb::ExecutionPlan* other = program.execution_plan()->Get(i);
    if (other->name() && std::strcmp(other->name()->c_str(), plan->name()->c_str()) == 0) return false;
  }
  return true;
}

void read_program(const Bytes& file, Container& container) {
  const pte_fb::Program* program = pte_fb::GetProgram(file.data());
  if (program->backend_delegate_data()) {
    for (const pte_fb::BackendDelegateInlineData* inline_data : *program->backend_delegate_data()) {
      InlineData entry;
      entry.present = inline_data->data() != nullptr;
      if (entry.present) entry = {position_in(file, inline_data->data()->data()), inline_data->data()->size(), true};
      container.inline_data.push_back(entry);
    }
  }
  if (program->execution_plan()) {
    for (size_t p = 0; p < program->execution_plan()->size(); ++p) {
      const pte_fb::ExecutionPlan* plan = program->execution_plan()->Get(p);
      std::string method = plan->name() ? plan->name()->str() : "";
      container.methods.push_back(method);
      container.plan_reachable.push_back(first_of_its_name(*program, p));
      if (!plan->delegates()) continue;
      for (const pte_fb::BackendDelegate* delegate : *plan->delegates()) {
        DelegateEntry entry;
        entry.method = method;
        entry.plan = p;
        read_delegate(file, *delegate, entry);
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

}  // namespace

uint64_t Container::segment_start(uint32_t index) const { return header.base + segments.at(index).offset; }

bool Container::segment_in_file(uint32_t index) const {
  if (index >= segments.size()) return false;
  uint64_t start = 0, end = 0;
  return !__builtin_add_overflow(header.base, segments[index].offset, &start) &&
         !__builtin_add_overflow(start, segments[index].size, &end) && end <= file.size();
}

Bytes Container::segment_bytes(uint32_t index) const {
  if (!segment_in_file(index)) fail_at(index < segments.size() ? segments[index].table_at : 0, "segment " + std::to_string(index) + " is not in the file");
  return file.sub(segment_start(index), segments.at(index).size, "segment");
}

std::optional<Bytes> Container::payload_if_present(const DelegateEntry& delegate) const {
  if (!delegate.has_processed || delegate.location > 1) return std::nullopt;
  if (!delegate.inline_data) {
    if (!segment_in_file(delegate.index)) return std::nullopt;
    return segment_bytes(delegate.index);
  }
  if (delegate.index >= inline_data.size() || !inline_data[delegate.index].present) return std::nullopt;
  const InlineData& data = inline_data[delegate.index];
  return file.sub(data.at, data.size, "inline delegate data");
}

Bytes Container::payload(const DelegateEntry& delegate) const {
  std::optional<Bytes> payload = payload_if_present(delegate);
  if (!payload) fail_at(delegate.table_at, "delegate '" + delegate.id + "' has no processed data in the file");
  return *payload;
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
  bool pte = container.kind == ContainerKind::Pte;
  try {
    check_file_head(file);
    container.header = pte ? read_pte_header(file) : read_ptd_header(file);
    check_header_loads(file, container.header, container.kind);
  } catch (Error& error) {
    throw error.in_part(pte ? "extended header" : "FH01 header");
  }
  try {
    verify_flatbuffer(file.sub(0, container.header.flatbuffer_end, "flatbuffer"), container.kind);
    if (pte)
      read_program(file, container);
    else
      read_flat_tensor(file, container);
  } catch (Error& error) {
    throw error.in_part(pte ? "Program flatbuffer" : "FlatTensor flatbuffer");
  }
  if (pte)
    check_program_loads(container);
  else
    check_flat_tensor_loads(container);
  return container;
}

BlobKind blob_kind(const Bytes& blob) {
  if (looks_like_universal(blob)) return BlobKind::Universal;
  if (looks_like_thin_macho(blob)) return BlobKind::MachO;
  if (blob.size() >= 4 && blob.u32(0) == kElfMagic) return BlobKind::Elf;
  return BlobKind::Other;
}

bool is_aoti_backend(const std::string& id) { return id == "MetalBackend" || id == "CudaBackend"; }

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
    // A plan that load_method never reaches may name data that is not there.
    std::optional<Bytes> payload = container.payload_if_present(delegate);
    DelegateReport entry{delegate.method, delegate.id, delegate.inline_data, delegate.index,
                         payload ? payload->base() : 0, payload ? payload->size() : 0, {}, std::nullopt};
    if (payload)
      for (const PayloadLine& line : payload_lines(*payload)) entry.payload_keys.push_back(line.text);
    for (const KeyResolution& resolution : container.resolutions) {
      if (&container.delegates[resolution.delegate] != &delegate) continue;
      entry.aoti = DelegateReport::AotiKeys{resolution.so_key,           resolution.weights_key,
                                            resolution.weights_named.has_value(), resolution.weights_missing,
                                            resolution.weights_unreadable,  resolution.weights_missing_at};
    }
    report.delegates.push_back(std::move(entry));
  }
  for (const NamedEntry& named : container.named) {
    // An entry no delegate looks up may name a segment that is not in the file.
    if (!container.segment_in_file(named.segment_index)) {
      report.named_data.push_back({named.key, named.segment_index, 0, 0, BlobKind::Other, false});
      continue;
    }
    Bytes bytes = container.segment_bytes(named.segment_index);
    report.named_data.push_back({named.key, named.segment_index, bytes.base(), bytes.size(), blob_kind(bytes), false});
  }
  return report;
}

std::vector<uint32_t> macho_segments(const Container& container) {
  std::vector<uint32_t> indices;
  for (const NamedEntry& named : container.named) {
    if (!container.segment_in_file(named.segment_index)) continue;
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
      // What dyld refuses in it stays known, for verify and check to fail it.
      try {
        entry.macho.loader_rules = check_image_rules(blob);
      } catch (const Error&) {
      }
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
