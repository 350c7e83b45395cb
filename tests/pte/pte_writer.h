// A test-only writer of .pte/.ptd files, laid out the way ExecuTorch's Python
// serializer lays them out (exir/_serialize/_program.py, extension/flat_tensor/
// serialize/serialize.py): the flatbuffer is built with defaults omitted, the
// extended header is inserted after the file identifier, segments follow at
// segment_base_offset, each aligned, gaps zero. Header-only so that the unit tests
// can use it without a library; tests/pte/pte_writer.cc is its command line.
//
// It writes through machofix's own schema, so it cannot catch a schema mistake
// shared with the reader: the samples in shared/samples (written by ExecuTorch)
// are there for that.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/io/pte.h"
#include "core/base/sha.h"
#include "tests/support/whole_file.h"
#include "flat_tensor_generated.h"
#include "program_generated.h"

namespace pte_test {

// One distinct named-data buffer; several keys may name it (it is stored once).
struct Data {
  std::vector<uint8_t> bytes;
  uint64_t generated_size = 0;  // instead of `bytes`: this many pseudo-random bytes, streamed
  uint64_t alignment = 1;
  uint64_t size() const { return generated_size ? generated_size : bytes.size(); }
};

struct Named {
  std::string key;
  size_t data = 0;  // index into Spec::data
  int64_t segment_index = -1;  // >= 0: written as is (a fault), whatever `data` is
};

enum class PayloadAt { Segment, Inline };

struct Method {
  std::string name;
  std::string payload;  // the delegate's processed bytes: "" (1.1-1.3) or "so_key\nweights_key"
  PayloadAt payload_at = PayloadAt::Segment;  // ExecuTorch moves non-empty payloads to segments
  bool method_name_spec = true;  // false: no compile spec "method_name" (the AOTI keys are then so_blob, weights_blob)
};

struct Spec {
  bool ptd = false;
  std::vector<Method> methods;  // .pte only
  std::vector<Data> data;
  std::vector<Named> named;
  uint64_t segment_alignment = 128;
  uint32_t header_length = 32;  // .pte: 24 or 32; 0: no extended header (segments then lie at their offsets)
  // Faults, for the corrupted cases: written as is, whatever the data says.
  int64_t first_named_segment_index = -1;  // >= 0: NamedData[0].segment_index
  uint64_t last_segment_extra_size = 0;    // added to the last DataSegment.size
  int64_t constant_segment_index = -1;     // >= 0: Program.constant_segment.segment_index (else 0)
  std::vector<uint64_t> constant_offsets{0};  // Program.constant_segment.offsets: {0} is the placeholder alone
  bool segments_table = true;              // false: the Program has no segments table (named data still written)
};

inline uint64_t aligned(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

inline std::vector<uint8_t> to_bytes(const std::string& text) { return {text.begin(), text.end()}; }

inline std::string hash_key(const std::vector<uint8_t>& bytes, const std::string& suffix) {
  return machofix::sha256_hex(machofix::Bytes(bytes)) + suffix;
}

// Deterministic filler for weights.
inline std::vector<uint8_t> pseudo_random(uint64_t size, uint64_t seed) {
  std::vector<uint8_t> bytes(size);
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  for (uint64_t i = 0; i < size; ++i) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    bytes[i] = static_cast<uint8_t>(state);
  }
  return bytes;
}

// Where each segment's bytes come from.
struct SegmentSource {
  enum Kind { Empty, Payload, NamedData } kind = Empty;
  size_t index = 0;  // method or data index
  uint64_t offset = 0;  // relative to the base
  uint64_t size = 0;
};

inline std::vector<SegmentSource> segment_sources(const Spec& spec) {
  std::vector<SegmentSource> sources;
  if (!spec.ptd) sources.push_back({SegmentSource::Empty, 0});  // the constant segment (no constants)
  for (size_t m = 0; m < spec.methods.size(); ++m) {
    const Method& method = spec.methods[m];
    if (!method.payload.empty() && method.payload_at == PayloadAt::Segment)
      sources.push_back({SegmentSource::Payload, m, 0, method.payload.size()});
  }
  for (size_t d = 0; d < spec.data.size(); ++d) sources.push_back({SegmentSource::NamedData, d, 0, spec.data[d].size()});
  uint64_t end = 0;
  for (SegmentSource& source : sources) {
    uint64_t alignment = source.kind == SegmentSource::NamedData
                             ? std::lcm(spec.segment_alignment, spec.data[source.index].alignment)
                             : spec.segment_alignment;
    source.offset = aligned(end, alignment);
    end = source.offset + source.size;
  }
  return sources;
}

inline uint32_t segment_of_data(const std::vector<SegmentSource>& sources, size_t data) {
  for (size_t s = 0; s < sources.size(); ++s)
    if (sources[s].kind == SegmentSource::NamedData && sources[s].index == data) return static_cast<uint32_t>(s);
  throw std::logic_error("no segment for data");
}

template <typename DataSegment>
std::vector<flatbuffers::Offset<DataSegment>> data_segments(flatbuffers::FlatBufferBuilder& builder, const Spec& spec,
                                                           const std::vector<SegmentSource>& sources, uint64_t shift = 0) {
  std::vector<flatbuffers::Offset<DataSegment>> segments;
  for (size_t s = 0; s < sources.size(); ++s) {
    uint64_t size = sources[s].size + (s + 1 == sources.size() ? spec.last_segment_extra_size : 0);
    typename DataSegment::Builder segment(builder);
    segment.add_offset(sources[s].offset + shift);
    segment.add_size(size);
    segments.push_back(segment.Finish());
  }
  return segments;
}

inline uint32_t named_segment_index(const Spec& spec, const std::vector<SegmentSource>& sources, size_t n) {
  if (n == 0 && spec.first_named_segment_index >= 0) return static_cast<uint32_t>(spec.first_named_segment_index);
  if (spec.named[n].segment_index >= 0) return static_cast<uint32_t>(spec.named[n].segment_index);
  return segment_of_data(sources, spec.named[n].data);
}

inline flatbuffers::Offset<machofix::pte_fb::ExecutionPlan> execution_plan(flatbuffers::FlatBufferBuilder& builder,
                                                                          const Method& method, uint32_t payload_index,
                                                                          bool payload_in_segment) {
  namespace fb = machofix::pte_fb;
  auto reference = fb::CreateBackendDelegateDataReference(
      builder, payload_in_segment ? fb::DataLocation::SEGMENT : fb::DataLocation::INLINE, payload_index);
  std::vector<uint8_t> name_bytes = to_bytes(method.name);
  std::vector<flatbuffers::Offset<fb::CompileSpec>> specs;
  if (method.method_name_spec) specs.push_back(fb::CreateCompileSpecDirect(builder, "method_name", &name_bytes));
  std::vector<flatbuffers::Offset<fb::BackendDelegate>> delegates{
      fb::CreateBackendDelegateDirect(builder, "MetalBackend", reference, &specs)};
  // Two float tensors of 2x2, the method's input and output, handed to the delegate
  // by the chain's one instruction: an AOTI export's whole graph is one delegate call.
  std::vector<int32_t> sizes{2, 2};
  std::vector<uint8_t> dim_order{0, 1};
  auto tensor = [&] {
    auto value = fb::CreateTensorDirect(builder, /*scalar_type=float*/ 6, 0, &sizes, &dim_order);
    return fb::CreateEValue(builder, fb::KernelTypes::Tensor, value.Union());
  };
  std::vector<flatbuffers::Offset<fb::EValue>> values{tensor(), tensor()};
  std::vector<int32_t> inputs{0}, outputs{1}, call_args{0, 1};
  auto call = fb::CreateDelegateCallDirect(builder, 0, &call_args);
  std::vector<flatbuffers::Offset<fb::Instruction>> instructions{
      fb::CreateInstruction(builder, fb::InstructionArguments::DelegateCall, call.Union())};
  std::vector<flatbuffers::Offset<fb::Chain>> chains{fb::CreateChainDirect(builder, &inputs, &outputs, &instructions)};
  std::vector<flatbuffers::Offset<fb::Operator>> operators;
  std::vector<int64_t> buffer_sizes{0};
  auto metadata = fb::CreateContainerMetadataDirect(builder, "", "");
  return fb::CreateExecutionPlanDirect(builder, method.name.c_str(), metadata, &values, &inputs, &outputs,
                                       &chains, &operators, &delegates, &buffer_sizes);
}

// `shift` is added to every DataSegment.offset (a file without extended header has
// its segments located from the start of the file).
inline std::vector<uint8_t> program_flatbuffer(const Spec& spec, const std::vector<SegmentSource>& sources, uint64_t shift = 0) {
  namespace fb = machofix::pte_fb;
  flatbuffers::FlatBufferBuilder builder;
  std::vector<flatbuffers::Offset<fb::ExecutionPlan>> plans;
  std::vector<flatbuffers::Offset<fb::BackendDelegateInlineData>> inline_data;
  for (size_t m = 0; m < spec.methods.size(); ++m) {
    const Method& method = spec.methods[m];
    bool in_segment = !method.payload.empty() && method.payload_at == PayloadAt::Segment;
    uint32_t index = 0;
    if (in_segment) {
      for (size_t s = 0; s < sources.size(); ++s)
        if (sources[s].kind == SegmentSource::Payload && sources[s].index == m) index = static_cast<uint32_t>(s);
    } else {
      index = static_cast<uint32_t>(inline_data.size());
      std::vector<uint8_t> payload = to_bytes(method.payload);
      inline_data.push_back(fb::CreateBackendDelegateInlineDataDirect(builder, &payload));
    }
    plans.push_back(execution_plan(builder, method, index, in_segment));
  }
  std::vector<flatbuffers::Offset<fb::Buffer>> constant_buffer;
  std::vector<flatbuffers::Offset<fb::DataSegment>> segments = data_segments<fb::DataSegment>(builder, spec, sources, shift);
  const std::vector<uint64_t>& constant_offsets = spec.constant_offsets;
  uint32_t constant_index = spec.constant_segment_index >= 0 ? static_cast<uint32_t>(spec.constant_segment_index) : 0;
  auto constant_segment = fb::CreateSubsegmentOffsetsDirect(builder, constant_index, &constant_offsets);
  std::vector<flatbuffers::Offset<fb::NamedData>> named;
  for (size_t n = 0; n < spec.named.size(); ++n)
    named.push_back(fb::CreateNamedDataDirect(builder, spec.named[n].key.c_str(), named_segment_index(spec, sources, n)));
  auto program = fb::CreateProgramDirect(builder, 0, &plans, &constant_buffer, &inline_data,
                                         spec.segments_table ? &segments : nullptr, constant_segment,
                                         nullptr, &named);
  fb::FinishProgramBuffer(builder, program);
  return {builder.GetBufferPointer(), builder.GetBufferPointer() + builder.GetSize()};
}

inline std::vector<uint8_t> flat_tensor_flatbuffer(const Spec& spec, const std::vector<SegmentSource>& sources) {
  namespace fb = machofix::ptd_fb;
  flatbuffers::FlatBufferBuilder builder;
  std::vector<flatbuffers::Offset<fb::DataSegment>> segments = data_segments<fb::DataSegment>(builder, spec, sources);
  std::vector<flatbuffers::Offset<fb::NamedData>> named;
  for (size_t n = 0; n < spec.named.size(); ++n)
    named.push_back(fb::CreateNamedDataDirect(builder, spec.named[n].key.c_str(), named_segment_index(spec, sources, n)));
  fb::FinishFlatTensorBuffer(builder, fb::CreateFlatTensorDirect(builder, 0, &segments, &named));
  return {builder.GetBufferPointer(), builder.GetBufferPointer() + builder.GetSize()};
}

inline void put_le(std::vector<uint8_t>& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

// _insert_flatbuffer_header: the header goes after the root offset and identifier,
// and the root offset grows by its (padded) length.
inline std::vector<uint8_t> insert_header(const std::vector<uint8_t>& flatbuffer, const std::vector<uint8_t>& header) {
  std::vector<uint8_t> out;
  uint32_t root = static_cast<uint32_t>(flatbuffer[0] | flatbuffer[1] << 8 | flatbuffer[2] << 16 | flatbuffer[3] << 24);
  put_le(out, root + header.size(), 4);
  out.insert(out.end(), flatbuffer.begin() + 4, flatbuffer.begin() + 8);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), flatbuffer.begin() + 8, flatbuffer.end());
  return out;
}

inline uint64_t segment_data_size(const std::vector<SegmentSource>& sources) {
  return sources.empty() ? 0 : sources.back().offset + sources.back().size;
}

// The flatbuffer with its header, padded to segment_base_offset.
inline std::vector<uint8_t> head(const Spec& spec, const std::vector<SegmentSource>& sources) {
  std::vector<uint8_t> header;
  if (!spec.ptd && spec.header_length == 0) {
    // Older writers: no extended header, the segments after the flatbuffer at offsets
    // from the start of the file (the flatbuffer's size first measured without them).
    uint64_t base = aligned(program_flatbuffer(spec, sources).size() + 256, spec.segment_alignment);
    std::vector<uint8_t> out = program_flatbuffer(spec, sources, base);
    if (out.size() > base) throw std::logic_error("the flatbuffer outgrew its room");
    out.resize(base, 0);
    return out;
  }
  if (!spec.ptd) {
    std::vector<uint8_t> flatbuffer = program_flatbuffer(spec, sources);
    const uint64_t padded = 32;  // the header padded to the schema's largest force_align (16)
    uint64_t program_size = padded + flatbuffer.size();
    uint64_t base = aligned(program_size, spec.segment_alignment);
    header = to_bytes("eh00");
    put_le(header, spec.header_length, 4);
    put_le(header, program_size, 8);
    put_le(header, base, 8);
    if (spec.header_length >= 32) put_le(header, segment_data_size(sources), 8);
    header.resize(padded, 0);
    std::vector<uint8_t> out = insert_header(flatbuffer, header);
    out.resize(base, 0);
    return out;
  }
  std::vector<uint8_t> flatbuffer = flat_tensor_flatbuffer(spec, sources);
  const uint64_t padded_header = 48;  // 40 aligned to the tensor alignment (16)
  uint64_t padded_flatbuffer = aligned(flatbuffer.size(), 16);
  uint64_t base = aligned(padded_header + padded_flatbuffer, spec.segment_alignment);
  header = to_bytes("FH01");
  put_le(header, 40, 4);
  put_le(header, padded_header, 8);  // flatbuffer_offset
  put_le(header, flatbuffer.size(), 8);
  put_le(header, base, 8);
  put_le(header, segment_data_size(sources), 8);
  header.resize(padded_header, 0);
  flatbuffer.resize(padded_flatbuffer, 0);
  std::vector<uint8_t> out = insert_header(flatbuffer, header);
  out.resize(base, 0);
  return out;
}

using Sink = std::function<void(const uint8_t* data, uint64_t size)>;

// Writes the whole file to `sink`, generating large data a chunk at a time.
inline void write(const Spec& spec, const Sink& sink) {
  std::vector<SegmentSource> sources = segment_sources(spec);
  std::vector<uint8_t> start = head(spec, sources);
  sink(start.data(), start.size());
  uint64_t written = 0;  // relative to the base
  for (const SegmentSource& source : sources) {
    std::vector<uint8_t> padding(source.offset - written, 0);
    sink(padding.data(), padding.size());
    if (source.kind == SegmentSource::Payload) {
      const std::string& payload = spec.methods[source.index].payload;
      sink(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
    } else if (source.kind == SegmentSource::NamedData) {
      const Data& data = spec.data[source.index];
      if (!data.generated_size) sink(data.bytes.data(), data.bytes.size());
      for (uint64_t done = 0; done < data.generated_size; done += 1 << 20) {
        std::vector<uint8_t> chunk = pseudo_random(std::min<uint64_t>(1 << 20, data.generated_size - done), done + 7);
        sink(chunk.data(), chunk.size());
      }
    }
    written = source.offset + source.size;
  }
}

inline std::vector<uint8_t> build(const Spec& spec) {
  std::vector<uint8_t> out;
  write(spec, [&](const uint8_t* data, uint64_t size) { out.insert(out.end(), data, data + size); });
  return out;
}

inline void write_file(const Spec& spec, const std::string& path) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  write(spec, [&](const uint8_t* data, uint64_t size) { file.write(reinterpret_cast<const char*>(data), size); });
  if (!file.flush()) throw std::runtime_error("cannot write " + path);
}

inline std::vector<uint8_t> read_file(const std::string& path) {
  auto bytes = machofix::test::read_whole_file<std::vector<uint8_t>>(path);
  if (!bytes) throw std::runtime_error("cannot read " + path);
  return *bytes;
}

// ---------------------------------------------------------------------------
// The matrix of cases, over the Mach-O images of tests/pte/make_blobs.sh.

struct Blobs {
  std::vector<uint8_t> forward, decode, universal, clean, flat, unsigned_;
  static Blobs load(const std::string& directory) {
    return {read_file(directory + "/forward.so"), read_file(directory + "/decode.so"),
            read_file(directory + "/universal.so"), read_file(directory + "/clean.so"),
            read_file(directory + "/flat.so"), read_file(directory + "/unsigned.so")};
  }
};

enum class Keys { Hash, Method };  // ExecuTorch 1.4+ / 1.1-1.3

// A method with its .so and weights, stored the way the AOTI Metal backend stores them.
struct MethodBlobs {
  std::string name;
  const std::vector<uint8_t>* so;
  uint64_t weights_seed;
};

inline Spec aoti_spec(Keys keys, const std::vector<MethodBlobs>& methods, uint64_t alignment = 128,
                      PayloadAt payload_at = PayloadAt::Segment) {
  Spec spec;
  spec.segment_alignment = alignment;
  auto data_index = [&](const std::vector<uint8_t>& bytes, uint64_t data_alignment) {
    for (size_t d = 0; d < spec.data.size(); ++d)
      if (spec.data[d].bytes == bytes) return d;  // NamedDataStore stores identical buffers once
    spec.data.push_back({bytes, 0, data_alignment});
    return spec.data.size() - 1;
  };
  auto name_data = [&](const std::string& key, size_t data) {
    for (const Named& named : spec.named)
      if (named.key == key) return;  // the same content-hash key twice: one entry
    spec.named.push_back({key, data});
  };
  for (const MethodBlobs& method : methods) {
    std::vector<uint8_t> weights = pseudo_random(3000 + 100 * method.weights_seed, method.weights_seed);
    std::string so_key = keys == Keys::Hash ? hash_key(*method.so, "_so_blob") : method.name + "_so_blob";
    std::string weights_key = keys == Keys::Hash ? hash_key(weights, "_weights_blob") : method.name + "_weights_blob";
    name_data(so_key, data_index(*method.so, 1));
    name_data(weights_key, data_index(weights, 16));
    spec.methods.push_back({method.name, keys == Keys::Hash ? so_key + "\n" + weights_key : "", payload_at});
  }
  return spec;
}

enum class Expect { Pruned, Identical };

struct Case {
  std::string name;
  Spec spec;
  Expect expect = Expect::Pruned;
  bool sign_unsigned = false;  // RepairOptions::sign_unsigned: the blob grows
  size_t renewed_keys = 0;     // content-hash keys renewed
  size_t rewritten_blobs = 0;  // distinct segments rewritten
};

inline std::vector<Case> matrix(const Blobs& blobs) {
  std::vector<Case> cases;
  auto add = [&](std::string name, Spec spec, Expect expect, size_t renewed, size_t rewritten, bool sign = false) {
    cases.push_back({std::move(name), std::move(spec), expect, sign, renewed, rewritten});
  };
  MethodBlobs forward{"forward", &blobs.forward, 1}, decode{"decode", &blobs.decode, 2};
  MethodBlobs decode_same{"decode", &blobs.forward, 2};
  add("hash_forward_128", aoti_spec(Keys::Hash, {forward}), Expect::Pruned, 1, 1);
  add("method_forward_128", aoti_spec(Keys::Method, {forward}), Expect::Pruned, 0, 1);
  add("hash_two_methods_4096", aoti_spec(Keys::Hash, {forward, decode}, 4096), Expect::Pruned, 2, 2);
  add("method_two_methods_4096", aoti_spec(Keys::Method, {forward, decode}, 4096), Expect::Pruned, 0, 2);
  // One .so for both methods: stored once; one hash key named by both payloads, or two method keys.
  add("hash_shared_blob_128", aoti_spec(Keys::Hash, {forward, decode_same}), Expect::Pruned, 1, 1);
  add("method_shared_blob_4096", aoti_spec(Keys::Method, {forward, decode_same}, 4096), Expect::Pruned, 0, 1);
  add("hash_inline_payload", aoti_spec(Keys::Hash, {forward, decode}, 128, PayloadAt::Inline), Expect::Pruned, 2, 2);
  Spec header24 = aoti_spec(Keys::Hash, {forward});
  header24.header_length = 24;
  add("hash_header24", header24, Expect::Pruned, 1, 1);
  // No extended header, as ExecuTorch's older test models: segments located from the
  // start of the file, the payloads inline (the runtime loads no delegate segment
  // without a segment base), the constant segment only its placeholder.
  Spec no_header = aoti_spec(Keys::Method, {forward}, 128, PayloadAt::Inline);
  no_header.header_length = 0;
  add("method_no_header", no_header, Expect::Pruned, 0, 1);
  add("hash_universal", aoti_spec(Keys::Hash, {{"forward", &blobs.universal, 1}}), Expect::Pruned, 1, 1);
  add("hash_clean_blob", aoti_spec(Keys::Hash, {{"forward", &blobs.clean, 1}}), Expect::Identical, 0, 0);
  add("method_flat_namespace", aoti_spec(Keys::Method, {{"forward", &blobs.flat, 1}}), Expect::Identical, 0, 0);
  // Signing an unsigned blob makes it larger: the segments after it move.
  add("hash_unsigned_signed_4096", aoti_spec(Keys::Hash, {{"forward", &blobs.unsigned_, 1}, decode}, 4096), Expect::Pruned,
      2, 2, true);
  add("method_unsigned_signed_128", aoti_spec(Keys::Method, {{"forward", &blobs.unsigned_, 1}, decode}), Expect::Pruned,
      0, 2, true);
  Spec ptd;
  ptd.ptd = true;
  ptd.segment_alignment = 16;
  ptd.data = {{blobs.forward, 0, 1}, {pseudo_random(5000, 3), 0, 16}};
  ptd.named = {{"forward_so_blob", 0}, {"forward_weights_blob", 1}};
  add("ptd_method_key", ptd, Expect::Pruned, 0, 1);
  Spec ptd_hash = ptd;
  ptd_hash.segment_alignment = 4096;
  ptd_hash.named[0].key = hash_key(blobs.forward, "_so_blob");  // kept: the .pte names it
  add("ptd_hash_key_4096", ptd_hash, Expect::Pruned, 0, 1);
  Spec ptd_grow = ptd;
  ptd_grow.data[0].bytes = blobs.unsigned_;
  add("ptd_unsigned_signed", ptd_grow, Expect::Pruned, 0, 1, true);
  // Other kinds of named data are reported and left alone.
  Spec others = aoti_spec(Keys::Method, {forward});
  std::vector<uint8_t> elf = to_bytes("\x7f" "ELF");
  elf.resize(4096, 1);
  others.data.push_back({elf, 0, 1});
  others.data.push_back({pseudo_random(777, 9), 0, 1});
  others.named.push_back({"linux_so_blob", others.data.size() - 2});
  others.named.push_back({"opaque_blob", others.data.size() - 1});
  add("method_with_elf_and_other", others, Expect::Pruned, 0, 1);
  return cases;
}

}  // namespace pte_test
