// ExecuTorch's load rules: what its runtime checks when an application loads a .pte
// (Program::load with InternalConsistency verification, load_method up to each
// delegate's init, an AOTI backend's key lookup) or a .ptd (FlatTensorDataMap::load
// and its lookups). Each function mirrors the runtime function named in its comment,
// at the commit docs/pte-load-rules.md names; the test suite holds them to that
// runtime, built from its sources (tests/executorch/).
//
// A rule refuses (Error, with the offset of the field) only what the runtime refuses,
// or what it would crash on (a field it dereferences without a check): machofix's
// gate must fail every model that will not load, and pass every one that will.
#include <cstring>

#include "core/base/util.h"
#include "core/io/pte_container.h"
#include "flat_tensor_generated.h"
#include "program_generated.h"

namespace machofix::pte_internal {

namespace {

// The runtime reads this many bytes before anything else (ExtendedHeader::kNumHeadBytes,
// FlatTensorHeader::kNumHeadBytes), through a loader that refuses a read past the end.
constexpr uint64_t kHeadBytes = 64;
constexpr uint64_t kHeaderAt = 8;
constexpr uint32_t kPtdMinimumHeader = 40;  // FlatTensorHeader: ... and segment_data_size
constexpr uint64_t kIdentifierEnd = 8;      // root offset and file identifier
constexpr int8_t kScalarTypeCount = 30;     // ScalarType 0..29 (Undefined is 30)

// FileDataLoader::load: offset + size must not overflow nor pass the end of the file
// (core/base/bytes.h's fits).
bool loadable(const Bytes& file, uint64_t offset, uint64_t size) { return fits(offset, size, file.size()); }

// ExecuTorch's elementSize, by ScalarType.
uint64_t element_size(int8_t scalar_type) {
  static const uint8_t sizes[kScalarTypeCount] = {1, 1, 2, 4, 8, 2, 4, 8, 4, 8, 16, 1, 1, 1, 4,
                                                  2, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 2, 4, 8};
  return sizes[scalar_type];
}

// --- Program::load's header ------------------------------------------------------------

// Program::load, the part before the flatbuffer: ExtendedHeader::Parse and the file
// size check (which, for files written before segment_data_size existed, runs only
// when the header says there is nothing or a positive amount of segment data).
void check_pte_header(const Bytes& file, const Header& header) {
  if (header.length == 0) return;  // no extended header (a shorter one was refused as it was read)
  uint64_t base = header.base, data_size = header.segment_data_size.value_or(0);
  if ((data_size == 0 && base == 0) || data_size > 0) {
    uint64_t end = 0;
    if (__builtin_add_overflow(base, data_size, &end))
      fail_at(header.base_at, "segment_base_offset + segment_data_size overflows");
    uint64_t expected = base == 0 ? header.flatbuffer_end : end;
    if (expected > file.size()) {
      // The field to look at: the base when it alone is past the end, else the size.
      uint64_t field = base == 0 ? kHeaderAt + 8 : base > file.size() ? header.base_at : header.segment_data_size_at.value_or(header.base_at);
      fail_at(field, "segment_base_offset " + hex(base) + " + segment_data_size " + hex(data_size) + " says the file is at least " +
                         hex(expected) + " bytes, but it is " + hex(file.size()) + ": the file is truncated");
    }
  }
  if (header.flatbuffer_end > file.size())
    fail_at(kHeaderAt + 8, "program_size: the flatbuffer would end at " + hex(header.flatbuffer_end) + ", past the end of the file (" +
                               hex(file.size()) + ")");
  if (header.flatbuffer_end < kIdentifierEnd)
    fail_at(kHeaderAt + 8, "program_size " + std::to_string(header.flatbuffer_end) + " is less than 8");
}

// FlatTensorDataMap::load, the part before the flatbuffer: FlatTensorHeader::Parse,
// the file size check (the runtime adds without an overflow check, and so does this),
// and the flatbuffer's own read. The runtime reads the file identifier without
// checking that the flatbuffer holds 8 bytes: a shorter one is refused here.
void check_ptd_header(const Bytes& file, const Header& header) {
  if (header.length < kPtdMinimumHeader)
    fail_at(kHeaderAt + 4, "FH01 header length " + std::to_string(header.length) + " is less than 40");
  uint64_t expected = header.base + *header.segment_data_size;
  if (expected > file.size())
    fail_at(*header.segment_data_size_at, "segment_base_offset + segment_data_size says the file is at least " + hex(expected) +
                                              " bytes, but it is " + hex(file.size()) + ": the file is truncated");
  if (header.flatbuffer_end > file.size() || header.flatbuffer_end < kIdentifierEnd)
    fail_at(kHeaderAt + 8, "flatbuffer_offset + flatbuffer_size: the flatbuffer would end at " + hex(header.flatbuffer_end) +
                               ", which does not fit the file (" + hex(file.size()) + ")");
}

// --- validate_program ----------------------------------------------------------------

// validate_tensor: sizes present and non-negative, a valid scalar type, and a byte
// size that fits in 64 bits (numel as a signed product, then times the element size).
bool tensor_valid(const pte_fb::Tensor* tensor) {
  if (!tensor || !tensor->sizes()) return false;
  int64_t numel = 1;
  bool overflowed = false;
  for (int32_t size : *tensor->sizes()) {
    if (size < 0) return false;
    if (!overflowed) overflowed = __builtin_mul_overflow(numel, static_cast<int64_t>(size), &numel);
  }
  int8_t scalar_type = tensor->scalar_type();
  if (scalar_type < 0 || scalar_type >= kScalarTypeCount || overflowed) return false;
  uint64_t bytes = 0;
  return !__builtin_mul_overflow(static_cast<uint64_t>(numel), element_size(scalar_type), &bytes);
}

// validate_program's exemption: an input tensor of dynamic shape is checked later.
bool dynamic_input(const pte_fb::ExecutionPlan& plan, uint32_t value_index) {
  if (!plan.inputs()) return false;
  for (int32_t input : *plan.inputs()) {
    if (input != static_cast<int32_t>(value_index)) continue;
    const pte_fb::Tensor* tensor = plan.values()->Get(value_index)->val_as_Tensor();
    return tensor && tensor->shape_dynamism() != 0;
  }
  return false;
}

void check_tensor_list(const pte_fb::ExecutionPlan& plan, const pte_fb::TensorList* list, uint64_t at) {
  if (!list || !list->items()) fail_at(at, "a TensorList value has no items");
  for (int32_t item : *list->items()) {
    if (item < 0 || static_cast<uint32_t>(item) >= plan.values()->size())
      fail_at(at, "a TensorList names value " + std::to_string(item) + " of " + std::to_string(plan.values()->size()));
    if (plan.values()->Get(item)->val_type() != pte_fb::KernelTypes::Tensor)
      fail_at(at, "a TensorList names value " + std::to_string(item) + ", which is not a Tensor");
  }
}

// validate_program: every plan has its values; each Tensor value is valid (but for
// dynamic inputs), each TensorList names Tensor values.
void validate_program(const Bytes& file, const pte_fb::Program& program) {
  auto at = [&](const void* table) { return static_cast<uint64_t>(static_cast<const uint8_t*>(table) - file.data()); };
  if (!program.execution_plan()) fail_at(0, "the Program has no execution_plan");
  for (const pte_fb::ExecutionPlan* plan : *program.execution_plan()) {
    if (!plan->values()) fail_at(at(plan), "execution plan '" + (plan->name() ? plan->name()->str() : "") + "' has no values");
    for (uint32_t v = 0; v < plan->values()->size(); ++v) {
      const pte_fb::EValue* value = plan->values()->Get(v);
      if (value->val_type() == pte_fb::KernelTypes::Tensor && !tensor_valid(value->val_as_Tensor()) && !dynamic_input(*plan, v))
        fail_at(at(value), "value " + std::to_string(v) + " of plan '" + (plan->name() ? plan->name()->str() : "") +
                               "' is not a valid tensor (sizes, scalar type or byte size)");
      if (value->val_type() == pte_fb::KernelTypes::TensorList) check_tensor_list(*plan, value->val_as_TensorList(), at(value));
    }
  }
}

// --- the rest of Program::load ---------------------------------------------------------

// PteDataMap::create needs the segments wherever there is named data.
void check_named_data_map(const pte_fb::Program& program) {
  if (program.named_data() && !program.segments())
    fail_at(0, "the Program has named_data but no segments table (the runtime's PteDataMap refuses it)");
}

// Program::load's constant segment: loaded unless its offsets hold only the
// placeholder for non-constant tensors. The runtime adds base and offset without an
// overflow check (its loader then checks the read), and so does this.
void check_constant_segment(const Container& container, const pte_fb::Program& program) {
  const pte_fb::SubsegmentOffsets* constant = program.constant_segment();
  if (!constant || !constant->offsets() || constant->offsets()->size() <= 1) return;
  uint64_t at = static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(constant) - container.file.data());
  if (program.constant_buffer() && program.constant_buffer()->size() != 0)
    fail_at(at, "the Program has both a constant_buffer and a constant_segment");
  if (!program.segments()) fail_at(at, "the constant_segment names a segment, but the Program has no segments");
  uint32_t index = constant->segment_index();
  if (index >= program.segments()->size())
    fail_at(at, "the constant_segment names segment " + std::to_string(index) + " of " + std::to_string(program.segments()->size()));
  const SegmentEntry& segment = container.segments[index];
  if (!loadable(container.file, container.header.base + segment.offset, segment.size))
    fail_at(segment.table_at, "the constant segment (segment " + std::to_string(index) + ") runs past the end of the file (" +
                                  hex(container.file.size()) + ")");
}

// --- load_method, up to each delegate's init ---------------------------------------------

// Program::method_meta: the fields it reads without a check.
void check_method_meta(const Container& container, const pte_fb::ExecutionPlan& plan) {
  uint64_t at = static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(&plan) - container.file.data());
  std::string name = "method '" + plan.name()->str() + "'";
  if (!plan.non_const_buffer_sizes()) fail_at(at, name + " has no non_const_buffer_sizes");
  if (!plan.inputs()) fail_at(at, name + " has no inputs");
  if (!plan.outputs()) fail_at(at, name + " has no outputs");
  if (!plan.delegates()) fail_at(at, name + " has no delegates table (Method::init refuses it)");
}

// BackendDelegate::Init and GetProcessedData: the backend id, the compile specs (their
// key and value are dereferenced), and the processed data, inline (an entry of
// backend_delegate_data) or in a segment (Program::LoadSegment, which needs a
// segment base: a file without extended header, or with base 0, has none).
void check_processed_data(const Container& container, const DelegateEntry& delegate) {
  std::string name = "delegate '" + delegate.id + "' of method '" + delegate.method + "'";
  if (!delegate.has_id) fail_at(delegate.table_at, "a delegate of method '" + delegate.method + "' has no backend id");
  if (!delegate.specs_complete) fail_at(delegate.table_at, name + " has a compile spec without key or value");
  if (!delegate.has_processed) fail_at(delegate.table_at, name + " has no processed data reference");
  if (delegate.location > 1)
    fail_at(delegate.table_at, name + " keeps its processed data at unknown location " + std::to_string(delegate.location));
  if (delegate.inline_data) {
    if (delegate.index >= container.inline_data.size() || !container.inline_data[delegate.index].present)
      fail_at(delegate.table_at, name + " refers to inline data " + std::to_string(delegate.index) + " of " +
                                     std::to_string(container.inline_data.size()) + " (or to an entry without data)");
    return;
  }
  if (container.header.base == 0)
    fail_at(delegate.table_at, name + " keeps its processed data in segment " + std::to_string(delegate.index) +
                                   ", but the file has no segment base (no extended header, or segment_base_offset 0)");
  if (delegate.index >= container.segments.size())
    fail_at(delegate.table_at, name + " refers to segment " + std::to_string(delegate.index) + " of " +
                                   std::to_string(container.segments.size()));
  if (!container.segment_in_file(delegate.index))
    fail_at(container.segments[delegate.index].table_at, name + ": its segment " + std::to_string(delegate.index) +
                                                           " lies outside the file (" + hex(container.file.size()) + " bytes)");
}

// PteDataMap::get_data's answer for one key: the entry found, or why there is none.
struct Lookup {
  std::optional<size_t> found;
  std::string why;
  uint64_t at = 0;
};

// PteDataMap::get_data: the first NamedData whose key equals, every entry before it
// keyed (an entry without key stops the search with an error), its segment in range
// and inside the file (the runtime adds base and offset without an overflow check).
Lookup find_named(const Container& container, const pte_fb::Program& program, const std::string& key) {
  for (size_t i = 0; i < container.named.size(); ++i) {
    const NamedEntry& entry = container.named[i];
    if (!program.named_data()->Get(i)->key()) return {std::nullopt, "named data " + std::to_string(i) + " has no key", entry.table_at};
    if (entry.key != key) continue;
    uint32_t index = entry.segment_index;
    if (index >= container.segments.size())
      return {std::nullopt, "it names segment " + std::to_string(index) + " of " + std::to_string(container.segments.size()), entry.table_at};
    const SegmentEntry& segment = container.segments[index];
    if (!loadable(container.file, container.header.base + segment.offset, segment.size))
      return {std::nullopt, "its segment " + std::to_string(index) + " lies outside the file (" + hex(container.file.size()) + " bytes)",
              segment.table_at};
    return {i, "", entry.table_at};
  }
  return {std::nullopt, "the Program's named data has no such key", 0};
}

// resolve_blob_keys (backends/aoti/aoti_delegate_handle.h): a non-empty payload is
// "so_key\nweights_key" (everything after the first newline is the weights key);
// an empty one means keys made from the compile spec "method_name".
KeyResolution resolve_blob_keys(const Container& container, size_t delegate_index) {
  const DelegateEntry& delegate = container.delegates[delegate_index];
  KeyResolution resolution;
  resolution.delegate = delegate_index;
  Bytes payload = container.payload(delegate);
  if (payload.size() == 0) {
    const std::string& prefix = delegate.method_name_spec;
    resolution.so_key = prefix.empty() ? "so_blob" : prefix + "_so_blob";
    resolution.weights_key = prefix.empty() ? "weights_blob" : prefix + "_weights_blob";
    return resolution;
  }
  std::string_view text(reinterpret_cast<const char*>(payload.data()), payload.size());
  size_t newline = text.find('\n');
  if (newline == std::string_view::npos)
    fail_at(payload.base(), "the " + delegate.id + " payload of method '" + delegate.method +
                                "' has no newline: the backend cannot read its blob keys (\"so_key\\nweights_key\")");
  resolution.so_key = std::string(text.substr(0, newline));
  resolution.weights_key = std::string(text.substr(newline + 1));
  resolution.so_key_at = payload.base();
  resolution.weights_key_at = payload.base() + newline + 1;
  return resolution;
}

// An AOTI backend's init: the .so must be found, and not empty (the backends refuse a
// null buffer); the weights are looked up too, and skipped when absent.
KeyResolution check_aoti_keys(const Container& container, const pte_fb::Program& program, size_t delegate_index) {
  const DelegateEntry& delegate = container.delegates[delegate_index];
  KeyResolution resolution = resolve_blob_keys(container, delegate_index);
  std::string name = "the " + delegate.id + " delegate of method '" + delegate.method + "'";
  if (!program.named_data())
    fail_at(delegate.table_at, name + " looks up '" + resolution.so_key + "', but the Program has no named data");
  Lookup so = find_named(container, program, resolution.so_key);
  if (!so.found)
    fail_at(so.at ? so.at : resolution.so_key_at.value_or(delegate.table_at),
            name + " cannot load its .so '" + resolution.so_key + "': " + so.why);
  resolution.so_named = so.found;
  const SegmentEntry& so_segment = container.segments[container.named[*so.found].segment_index];
  if (so_segment.size == 0) fail_at(so_segment.table_at, name + ": its .so '" + resolution.so_key + "' is empty");
  Lookup weights = find_named(container, program, resolution.weights_key);
  resolution.weights_named = weights.found;
  if (!weights.found) {
    resolution.weights_missing = resolution.weights_key.empty() ? "the key is empty" : weights.why;
    resolution.weights_unreadable = weights.at != 0 && !resolution.weights_key.empty();
    resolution.weights_missing_at = weights.at ? weights.at : resolution.weights_key_at.value_or(delegate.table_at);
  }
  return resolution;
}

}  // namespace

void check_file_head(const Bytes& file) {
  if (file.size() < kHeadBytes)
    fail_at(0, "the file is " + std::to_string(file.size()) + " bytes; ExecuTorch's runtime reads a 64-byte head first");
}

void check_header_loads(const Bytes& file, const Header& header, ContainerKind kind) {
  if (kind == ContainerKind::Pte)
    check_pte_header(file, header);
  else
    check_ptd_header(file, header);
}

void check_program_loads(Container& container) {
  const pte_fb::Program& program = *pte_fb::GetProgram(container.file.data());
  try {
    validate_program(container.file, program);
    check_named_data_map(program);
    check_constant_segment(container, program);
  } catch (Error& error) {
    throw error.in_part("Program flatbuffer");
  }
  for (size_t p = 0; p < container.methods.size(); ++p) {
    const pte_fb::ExecutionPlan& plan = *program.execution_plan()->Get(p);
    uint64_t at = static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(&plan) - container.file.data());
    if (!plan.name()) fail_at(at, "execution plan " + std::to_string(p) + " has no name");
    if (!container.plan_reachable[p]) continue;
    try {
      check_method_meta(container, plan);
      for (size_t d = 0; d < container.delegates.size(); ++d) {
        if (container.delegates[d].plan != p) continue;
        check_processed_data(container, container.delegates[d]);
        if (is_aoti_backend(container.delegates[d].id)) container.resolutions.push_back(check_aoti_keys(container, program, d));
      }
    } catch (Error& error) {
      throw error.in_part("method '" + container.methods[p] + "'");
    }
  }
}

// FlatTensorDataMap::load and get_data of every key: named_data and segments present,
// every entry keyed (the lookups dereference each key), and for each key its first
// entry's segment in range, inside the header's segment data and inside the file.
void check_flat_tensor_loads(const Container& container) {
  const ptd_fb::FlatTensor& flat_tensor = *ptd_fb::GetFlatTensor(container.file.data());
  if (!flat_tensor.named_data()) fail_at(0, "the FlatTensor has no named_data");
  if (!flat_tensor.segments()) fail_at(0, "the FlatTensor has no segments");
  for (const NamedEntry& named : container.named)
    if (!flat_tensor.named_data()->Get(&named - container.named.data())->key())
      fail_at(named.table_at, "a NamedData entry has no key");
  uint64_t segment_end = 0;
  if (!container.named.empty() &&
      __builtin_add_overflow(container.header.base, *container.header.segment_data_size, &segment_end))
    fail_at(container.header.base_at, "segment_base_offset + segment_data_size overflows");
  for (const NamedEntry& entry : container.named) {
    // Lookups go by the key as a C string, and find the first entry of that name.
    std::string key = entry.key.substr(0, entry.key.find('\0'));
    const NamedEntry* found = nullptr;
    for (const NamedEntry& candidate : container.named)
      if (!found && candidate.key == key) found = &candidate;
    if (!found) fail_at(entry.key_at, "key '" + key + "' cannot be looked up (it holds a NUL byte)");
    uint32_t index = found->segment_index;
    std::string name = "named data '" + key + "'";
    if (index >= container.segments.size())
      fail_at(found->table_at, name + " names segment " + std::to_string(index) + " of " + std::to_string(container.segments.size()));
    const SegmentEntry& segment = container.segments[index];
    uint64_t relative_end = 0;
    if (__builtin_add_overflow(segment.offset, segment.size, &relative_end) || relative_end > segment_end)
      fail_at(segment.table_at, name + ": segment " + std::to_string(index) + " ends past segment_base_offset + segment_data_size");
    if (!loadable(container.file, container.header.base + segment.offset, segment.size))
      fail_at(segment.table_at, name + ": segment " + std::to_string(index) + " runs past the end of the file");
  }
}

}  // namespace machofix::pte_internal
