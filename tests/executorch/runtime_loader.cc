// ExecuTorch's own runtime as the judge of a .pte or .ptd file: would a model's user
// get it loaded? Built from ExecuTorch's runtime sources (tests/executorch/
// CMakeLists.txt), never part of machofix.
//
//   runtime_loader FILE   prints one JSON object; exit 0: loads, 1: refused, 2: usage
//
// A .pte is judged the way an application meets it:
// - Program::load(InternalConsistency): the extended header, the FlatBuffers verifier,
//   validate_program, the named-data map, the constant segment;
// - for each method, by name: Program::method_meta (load_method's first step);
// - each delegate of the method as Method::init and BackendDelegate::Init take it
//   (the delegates table, the backend id, the compile specs, the processed data
//   through get_backend_delegate_data or LoadSegment);
// - for the AOTI delegates (MetalBackend, CudaBackend), the blob keys resolved by
//   resolve_blob_keys (backends/aoti/aoti_delegate_handle.h) and looked up in the
//   program's named data: the .so must be found and non-empty (the backends refuse
//   an empty buffer), the weights are optional (the backends skip them when absent).
// Not judged: the values and chains that Method::init parses before and after the
// delegates, and the kernels and backends an application registers.
//
// A .ptd is judged as FlatTensorDataMap::load and get_data of every key. The runtime
// does not verify a .ptd's flatbuffer before reading it, so a file whose FlatTensor
// does not pass the verifier would be read out of bounds: such a file counts as
// refused, and so does one whose reading would dereference a missing field.
#include <cstdio>
#include <cstring>
#include <string>

#include <executorch/backends/aoti/aoti_delegate_handle.h>
#include <executorch/extension/data_loader/file_data_loader.h>
#include <executorch/extension/flat_tensor/flat_tensor_data_map.h>
#include <executorch/extension/flat_tensor/serialize/flat_tensor_generated.h>
#include <executorch/extension/flat_tensor/serialize/flat_tensor_header.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/runtime.h>
#include <executorch/schema/program_generated.h>
#include <nlohmann/json.hpp>

using executorch::extension::FileDataLoader;
using executorch::extension::FlatTensorDataMap;
using executorch::runtime::DataLoader;
using executorch::runtime::Error;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::NamedDataMap;
using executorch::runtime::Program;
using executorch::runtime::Result;
using json = nlohmann::json;

namespace executorch::runtime::testing {

// The private members a loader needs, reached as ExecuTorch's program_test.cpp does.
class ProgramTestFriend final {
 public:
  static const executorch_flatbuffer::Program* internal(const Program& program) { return program.get_internal_program(); }
  static Error inline_data(const Program& program, size_t index, const void** data, size_t* size) {
    return program.get_backend_delegate_data(index, data, size);
  }
  static Result<FreeableBuffer> segment(const Program& program, size_t index, const char* backend_id) {
    return program.LoadSegment(DataLoader::SegmentInfo(DataLoader::SegmentInfo::Type::Backend, index, backend_id));
  }
};

}  // namespace executorch::runtime::testing

namespace {

using Friend = executorch::runtime::testing::ProgramTestFriend;

// A refusal: where the runtime stopped, and its error code or what it would crash on.
struct Refused {
  std::string stage;
  std::string reason;
};

std::string error_code(Error error) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%x", static_cast<unsigned>(error));
  return text;
}

std::string hex_of(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) hex += {digits[c >> 4], digits[c & 15]};
  return hex;
}

json describe_lookup(const NamedDataMap& map, const std::string& key) {
  Result<FreeableBuffer> data = map.get_data(key);
  json entry = {{"key", key}, {"key_hex", hex_of(key)}, {"found", data.ok()}};
  if (data.ok()) {
    entry["size"] = data->size();
  } else {
    entry["error"] = error_code(data.error());
  }
  return entry;
}

// The processed data of one delegate, as BackendDelegate::GetProcessedData reads it.
// get_backend_delegate_data dereferences the inline-data table and the entry's bytes
// without a check: where they are missing the runtime would crash, so it is a refusal.
Result<FreeableBuffer> processed_data(const Program& program, const executorch_flatbuffer::BackendDelegate& delegate,
                                      Refused& refused) {
  const auto* processed = delegate.processed();
  if (processed == nullptr) {
    refused = {"BackendDelegate::GetProcessedData", "null processed (the runtime would crash)"};
    return Error::InvalidProgram;
  }
  if (processed->location() == executorch_flatbuffer::DataLocation::INLINE) {
    const auto* table = Friend::internal(program)->backend_delegate_data();
    if (table == nullptr || (processed->index() < table->size() && table->Get(processed->index())->data() == nullptr)) {
      refused = {"Program::get_backend_delegate_data", "missing inline data (the runtime would crash)"};
      return Error::InvalidProgram;
    }
    const void* data = nullptr;
    size_t size = 0;
    Error error = Friend::inline_data(program, processed->index(), &data, &size);
    if (error != Error::Ok) {
      refused = {"Program::get_backend_delegate_data", error_code(error)};
      return error;
    }
    return FreeableBuffer(data, size, nullptr);
  }
  if (processed->location() != executorch_flatbuffer::DataLocation::SEGMENT) {
    refused = {"BackendDelegate::GetProcessedData", "unknown data location"};
    return Error::Internal;
  }
  Result<FreeableBuffer> data = Friend::segment(program, processed->index(), delegate.id()->c_str());
  if (!data.ok()) refused = {"Program::LoadSegment", error_code(data.error())};
  return data;
}

// The compile spec "method_name", which the AOTI backends take their key prefix from.
std::string aoti_method_name(const executorch_flatbuffer::BackendDelegate& delegate) {
  if (delegate.compile_specs() == nullptr) return "";
  for (const auto* spec : *delegate.compile_specs()) {
    if (std::strcmp(spec->key()->c_str(), "method_name") == 0)
      return std::string(reinterpret_cast<const char*>(spec->value()->data()), spec->value()->size());
  }
  return "";
}

bool is_aoti(const std::string& id) { return id == "MetalBackend" || id == "CudaBackend"; }

// One delegate: BackendDelegate::Init up to the backend's init, and for an AOTI
// backend its key resolution. Returns false with `refused` set when it fails.
bool judge_delegate(const Program& program, const executorch_flatbuffer::BackendDelegate& delegate, json& entry,
                    Refused& refused) {
  if (delegate.id() == nullptr) {
    refused = {"BackendDelegate::Init", "missing backend id"};
    return false;
  }
  std::string id = delegate.id()->str();
  entry["id"] = id;
  if (delegate.compile_specs() != nullptr) {
    for (const auto* spec : *delegate.compile_specs()) {
      if (spec->key() == nullptr || spec->value() == nullptr) {
        refused = {"BackendDelegate::PopulateCompileSpecs", "compile spec without key or value (the runtime would crash)"};
        return false;
      }
    }
  }
  Result<FreeableBuffer> processed = processed_data(program, delegate, refused);
  if (!processed.ok()) return false;
  bool inline_data = delegate.processed()->location() == executorch_flatbuffer::DataLocation::INLINE;
  entry["location"] = inline_data ? "inline" : "segment";
  entry["index"] = delegate.processed()->index();
  entry["processed_size"] = processed->size();
  if (!is_aoti(id)) return true;

  std::string so_key, weights_key;
  Error error = executorch::backends::aoti::resolve_blob_keys(&processed.get(), aoti_method_name(delegate), so_key, weights_key);
  if (error != Error::Ok) {
    refused = {"aoti::resolve_blob_keys", error_code(error) + " (processed data without a newline)"};
    return false;
  }
  Result<const NamedDataMap*> map = program.get_named_data_map();
  if (!map.ok()) {
    refused = {"AOTI backend init", "the program has no named data (the backend's named data map would be null)"};
    return false;
  }
  json so = describe_lookup(*map.get(), so_key);
  entry["aoti"] = {{"so", so}, {"weights", describe_lookup(*map.get(), weights_key)}};
  if (!so["found"].get<bool>()) {
    refused = {"AOTI backend init", "so key '" + so_key + "' not found: " + so["error"].get<std::string>()};
    return false;
  }
  if (so["size"].get<size_t>() == 0) {
    refused = {"AOTI backend init", "so key '" + so_key + "' names empty data"};
    return false;
  }
  return true;
}

// Each method as load_method reaches it: by name (the first plan of that name).
bool judge_methods(const Program& program, json& report, Refused& refused) {
  report["methods"] = json::array();
  for (size_t i = 0; i < program.num_methods(); ++i) {
    Result<const char*> name = program.get_method_name(i);
    if (!name.ok()) {
      refused = {"Program::get_method_name", error_code(name.error())};
      return false;
    }
    json method = {{"name", name.get()}, {"delegates", json::array()}};
    auto meta = program.method_meta(name.get());
    if (!meta.ok()) {
      refused = {"Program::method_meta", error_code(meta.error())};
      report["methods"].push_back(method);
      return false;
    }
    const executorch_flatbuffer::ExecutionPlan* plan = nullptr;
    for (const auto* candidate : *Friend::internal(program)->execution_plan()) {
      if (candidate->name() != nullptr && std::strcmp(candidate->name()->c_str(), name.get()) == 0) {
        plan = candidate;
        break;
      }
    }
    if (plan->delegates() == nullptr) {
      refused = {"Method::init", "missing delegates field"};
      report["methods"].push_back(method);
      return false;
    }
    for (const auto* delegate : *plan->delegates()) {
      json entry;
      bool ok = judge_delegate(program, *delegate, entry, refused);
      method["delegates"].push_back(entry);
      if (!ok) {
        report["methods"].push_back(method);
        return false;
      }
    }
    report["methods"].push_back(method);
  }
  return true;
}

bool judge_pte(DataLoader& loader, json& report, Refused& refused) {
  Result<Program> program = Program::load(&loader, Program::Verification::InternalConsistency);
  if (!program.ok()) {
    refused = {"Program::load", error_code(program.error())};
    return false;
  }
  const auto* named = Friend::internal(program.get())->named_data();
  report["named_data"] = json::array();
  if (named != nullptr) {
    for (const auto* entry : *named) report["named_data"].push_back(entry->key() ? entry->key()->str() : "");
  }
  return judge_methods(program.get(), report, refused);
}

// What FlatTensorDataMap's lookups dereference without a check.
bool ptd_fields_present(const flat_tensor_flatbuffer::FlatTensor& flat_tensor) {
  if (flat_tensor.named_data() == nullptr || flat_tensor.segments() == nullptr) return true;  // load() refuses these
  for (const auto* named : *flat_tensor.named_data())
    if (named->key() == nullptr) return false;
  return true;
}

bool judge_ptd(DataLoader& loader, json& report, Refused& refused) {
  Result<FreeableBuffer> head = loader.load(0, executorch::extension::FlatTensorHeader::kNumHeadBytes,
                                           DataLoader::SegmentInfo(DataLoader::SegmentInfo::Type::Program));
  if (head.ok()) {
    auto header = executorch::extension::FlatTensorHeader::Parse(head->data(), head->size());
    // The runtime reads this much, adding without an overflow check.
    uint64_t end = header.ok() ? header->flatbuffer_offset + header->flatbuffer_size : 0;
    if (header.ok()) {
      Result<FreeableBuffer> buffer = loader.load(0, end, DataLoader::SegmentInfo(DataLoader::SegmentInfo::Type::Program));
      if (buffer.ok() && buffer->size() < 8) {
        refused = {"FlatTensorDataMap::load", "a flatbuffer shorter than its identifier (the runtime would read past it)"};
        return false;
      }
      if (buffer.ok() && flat_tensor_flatbuffer::FlatTensorBufferHasIdentifier(buffer->data())) {
        flatbuffers::Verifier verifier(static_cast<const uint8_t*>(buffer->data()), buffer->size());
        if (!flat_tensor_flatbuffer::VerifyFlatTensorBuffer(verifier)) {
          refused = {"FlatTensor verifier", "the FlatTensor flatbuffer does not verify (the runtime would read it out of bounds)"};
          return false;
        }
        if (!ptd_fields_present(*flat_tensor_flatbuffer::GetFlatTensor(buffer->data()))) {
          refused = {"FlatTensorDataMap::get_data", "a NamedData without key (the runtime would crash)"};
          return false;
        }
      }
    }
  }
  Result<FlatTensorDataMap> map = FlatTensorDataMap::load(&loader);
  if (!map.ok()) {
    refused = {"FlatTensorDataMap::load", error_code(map.error())};
    return false;
  }
  report["named_data"] = json::array();
  uint32_t count = map->get_num_keys().get();
  for (uint32_t i = 0; i < count; ++i) {
    std::string key = map->get_key(i).get();
    json entry = describe_lookup(map.get(), key);
    report["named_data"].push_back(entry);
    if (!entry["found"].get<bool>()) {
      refused = {"FlatTensorDataMap::get_data", "key '" + key + "': " + entry["error"].get<std::string>()};
      return false;
    }
  }
  return true;
}

bool is_ptd(const std::string& path) {
  char head[12] = {};
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return false;
  size_t got = std::fread(head, 1, sizeof head, file);
  std::fclose(file);
  return got == sizeof head && std::memcmp(head + 4, "FT01", 4) == 0 && std::memcmp(head + 8, "FH01", 4) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: runtime_loader FILE.pte|FILE.ptd\n");
    return 2;
  }
  executorch::runtime::runtime_init();
  std::string path = argv[1];
  json report = {{"file", path}};
  Refused refused;
  bool loads = false;
  Result<FileDataLoader> loader = FileDataLoader::from(path.c_str());
  if (!loader.ok()) {
    refused = {"FileDataLoader::from", error_code(loader.error())};
  } else if (is_ptd(path)) {
    report["kind"] = "ptd";
    loads = judge_ptd(loader.get(), report, refused);
  } else {
    report["kind"] = "pte";
    loads = judge_pte(loader.get(), report, refused);
  }
  report["loads"] = loads;
  if (!loads) report["refused"] = {{"stage", refused.stage}, {"reason", refused.reason}};
  std::printf("%s\n", report.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  return loads ? 0 : 1;
}
