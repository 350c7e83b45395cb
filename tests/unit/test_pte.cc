// .pte/.ptd reading and rewriting.
//
// - The two samples written by ExecuTorch's own serializer (shared/samples) become
//   exactly what their README says, checked at offsets read off their flatbuffers
//   with flatc, independently of machofix's reader.
// - The writer's matrix (tests/pte/pte_writer.h) over real Mach-O images linked by
//   tests/pte/make_blobs.sh: every output re-read and compared with the input.
// - Stand-in rewriters make blobs grow and shrink, to test moving segments
//   without depending on what pruning does to a blob's size.
// - Corrupted files: a clear error with its offset, and nothing written.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "tests/support/checked_options.h"
#include "core/io/copy_check.h"
#include "core/io/pte.h"
#include "core/io/pte_container.h"
#include "core/io/pte_layout.h"
#include "core/base/sha.h"
#include "tests/pte/pte_writer.h"
#include "tests/support/spoiled_copies.h"
#include "tests/support/whole_file.h"

using namespace machofix;
using pte_internal::Container;
using pte_internal::read_container;

namespace {

std::string source_root() {
  std::string file = __FILE__;
  return file.substr(0, file.rfind("/tests/unit/"));
}

// The .pte files written by ExecuTorch's own serializer are not part of the
// repository: tests/e2e/run_samples.py finds them and runs the "executorch-samples"
// suite with MACHOFIX_SAMPLES set (ctest reports it skipped when they are absent).
std::string samples_directory() {
  const char* configured = std::getenv("MACHOFIX_SAMPLES");
  return configured ? configured : source_root() + "/../shared/samples";
}

struct TempDir {
  std::string path;
  TempDir() {
    char pattern[] = "/tmp/machofix-pte-test-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    DIR* directory = opendir(path.c_str());
    while (dirent* entry = readdir(directory))
      if (std::string(entry->d_name) != "." && std::string(entry->d_name) != "..") names.push_back(entry->d_name);
    closedir(directory);
    std::sort(names.begin(), names.end());
    return names;
  }
};

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  FILE* file = std::fopen(path.c_str(), "wb");
  REQUIRE(file);
  REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size());
  std::fclose(file);
}

// The Mach-O images of make_blobs.sh, linked once per run; null when the script
// failed (its output is then in <dir>/make_blobs.log).
struct LinkedBlobs {
  TempDir directory;
  std::unique_ptr<pte_test::Blobs> blobs;
  std::string log = directory.path + "/make_blobs.log";
};

std::string read_text(const std::string& path) {
  return test::whole_file(path);
}

const LinkedBlobs& linked_blobs() {
  static LinkedBlobs linked;  // made in place: a copy of its TempDir would remove the directory
  static bool linked_once = [] {
    std::string command = "'" + source_root() + "/tests/pte/make_blobs.sh' '" + linked.directory.path + "' >'" +
                          linked.log + "' 2>&1";
    if (std::system(command.c_str()) == 0)
      linked.blobs = std::make_unique<pte_test::Blobs>(pte_test::Blobs::load(linked.directory.path));
    return true;
  }();
  (void)linked_once;
  return linked;
}

// setup.sh installs what make_blobs.sh needs (clang-16, ld64.lld-16, llvm-lipo-16):
// its failure is a failure of the test, never a pass with nothing checked.
#define REQUIRE_BLOBS()                                                                              \
  const pte_test::Blobs* blobs = linked_blobs().blobs.get();                                        \
  if (!blobs) FAIL((std::string("tests/pte/make_blobs.sh failed (needs clang-16, ld64.lld-16, llvm-lipo-16): ") + \
                    read_text(linked_blobs().log)));

// Bytes that look like a thin Mach-O to looks_like_thin_macho, for stand-in rewriters.
std::vector<uint8_t> fake_macho(uint64_t size, uint64_t seed) {
  std::vector<uint8_t> bytes = pte_test::pseudo_random(size, seed);
  const uint8_t magic[] = {0xcf, 0xfa, 0xed, 0xfe};
  std::copy(magic, magic + 4, bytes.begin());
  return bytes;
}

// A rewriter whose first step accepts every blob and whose second does all the work.
using OneStep = std::function<MachORepair(const Bytes& blob, const RepairOptions& options)>;
BlobRewriter in_second_step(OneStep rewrite) {
  return [rewrite](const Bytes& blob, const RepairOptions& options) -> BlobRewrite {
    return [rewrite, blob, options] { return rewrite(blob, options); };
  };
}

const BlobRewriter kPrune = macho_rewriter(RewriteKind::Prune);

// A stand-in for prune_macho: flips a byte, then grows (0xee bytes) or shrinks.
BlobRewriter resize_by(int64_t delta) {
  return in_second_step([delta](const Bytes& blob, const RepairOptions&) {
    std::vector<uint8_t> output(blob.data(), blob.data() + blob.size());
    output[64] ^= 0x5a;
    output.resize(static_cast<size_t>(static_cast<int64_t>(blob.size()) + delta), 0xee);
    MachORepair repair;
    repair.output = OutputImage::copy_of(Bytes(output));
    repair.report.changed = true;
    return repair;
  });
}

BlobRewriter unchanged() {
  return in_second_step([](const Bytes& blob, const RepairOptions&) {
    MachORepair repair;
    repair.output = OutputImage::copy_of(blob);
    return repair;
  });
}

std::vector<uint8_t> slice(const std::vector<uint8_t>& bytes, uint64_t offset, uint64_t size) {
  REQUIRE(offset + size <= bytes.size());
  return {bytes.begin() + offset, bytes.begin() + offset + size};
}

std::string text_at(const std::vector<uint8_t>& bytes, uint64_t offset, uint64_t size) {
  std::vector<uint8_t> part = slice(bytes, offset, size);
  return {part.begin(), part.end()};
}

uint64_t lowest_bit(uint64_t value) { return value & (~value + 1); }

struct Rewrite {
  PteReport report;
  std::vector<uint8_t> output;
};

Rewrite rewrite_file(const std::vector<uint8_t>& input, const BlobRewriter& rewriter, RepairOptions options = test::checked()) {
  TempDir directory;
  write_bytes(directory / "in.pte", input);
  MappedFile mapped(directory / "in.pte");
  Rewrite result;
  result.report = repair_pte(mapped, directory / "out.pte", options, false, rewriter);
  result.output = pte_test::read_file(directory / "out.pte");
  return result;
}

// Checks an output against its input, locating everything through both files'
// flatbuffers: rewritten blobs are what `rewriter` makes of the input blobs, every
// other segment is byte-identical (wherever it moved to, keeping its alignment),
// the bytes before the segments differ only in renewed keys, patched DataSegment
// fields and segment_data_size, and padding is zero.
// Where the segments start: the segment base, or in a file without extended header
// (whose segments lie at their offsets from the start) the first non-empty segment.
uint64_t segment_area(const Container& container) {
  if (container.header.length) return container.header.base;
  uint64_t start = container.file.size();
  for (uint32_t i = 0; i < container.segments.size(); ++i)
    if (container.segments[i].size) start = std::min(start, container.segment_start(i));
  return start;
}

void check_rewrite(const std::vector<uint8_t>& input, const Rewrite& rewrite, const BlobRewriter& rewriter,
                   bool renew_hash_keys, const RepairOptions& options = test::checked()) {
  Container before = read_container(Bytes(input));
  Container after = read_container(Bytes(rewrite.output));
  const uint64_t head = segment_area(before), head_after = segment_area(after);
  REQUIRE(after.segments.size() == before.segments.size());
  REQUIRE(after.named.size() == before.named.size());
  std::vector<bool> may_differ(head, false);  // bytes before the segments
  std::vector<uint32_t> macho = pte_internal::macho_segments(before);
  for (uint32_t i = 0; i < before.segments.size(); ++i) {
    Bytes old_bytes = before.segment_bytes(i), new_bytes = after.segment_bytes(i);
    for (uint64_t field : {before.segments[i].offset_at.value_or(0), before.segments[i].size_at.value_or(0)})
      if (field) std::fill(may_differ.begin() + field, may_differ.begin() + field + 8, true);
    uint64_t kept_alignment = std::min<uint64_t>(lowest_bit(old_bytes.base()), kMaxKeptAlignment);
    CHECK(lowest_bit(new_bytes.base()) >= kept_alignment);
    if (std::count(macho.begin(), macho.end(), i)) {
      MachORepair expected = rewriter(old_bytes, pte_internal::blob_options(before, i, options))();
      CHECK(std::vector<uint8_t>(new_bytes.data(), new_bytes.data() + new_bytes.size()) == expected.output.to_vector());
      continue;
    }
    bool is_payload = false;
    for (const auto& delegate : before.delegates) is_payload |= !delegate.inline_data && delegate.index == i;
    if (!is_payload) CHECK(std::memcmp(old_bytes.data(), new_bytes.data(), old_bytes.size()) == 0);
  }
  for (size_t n = 0; n < before.named.size(); ++n) {
    const auto& old_named = before.named[n];
    const auto& new_named = after.named[n];
    Bytes blob = after.segment_bytes(new_named.segment_index);
    std::string old_hash = sha256_hex(before.segment_bytes(old_named.segment_index));
    bool renewable = renew_hash_keys && pte_internal::is_content_hash_key(old_named.key, old_hash) &&
                     old_hash != sha256_hex(blob);
    if (renewable) {
      CHECK(new_named.key == sha256_hex(blob) + old_named.key.substr(64));
      std::fill(may_differ.begin() + old_named.key_at, may_differ.begin() + old_named.key_at + 64, true);
    } else {
      CHECK(new_named.key == old_named.key);
    }
  }
  // Delegate payloads: the same lines, renewed keys replaced.
  for (size_t d = 0; d < before.delegates.size(); ++d) {
    Bytes old_payload = before.payload(before.delegates[d]), new_payload = after.payload(after.delegates[d]);
    CHECK(old_payload.size() == new_payload.size());
    auto old_lines = pte_internal::payload_lines(old_payload);
    auto new_lines = pte_internal::payload_lines(new_payload);
    REQUIRE(old_lines.size() == new_lines.size());
    for (size_t l = 0; l < old_lines.size(); ++l) {
      std::string expected = old_lines[l].text;
      for (size_t n = 0; n < before.named.size(); ++n)
        if (before.named[n].key == expected) expected = after.named[n].key;
      CHECK(new_lines[l].text == expected);
      if (expected != old_lines[l].text && old_lines[l].at < head)
        std::fill(may_differ.begin() + old_lines[l].at, may_differ.begin() + old_lines[l].at + 64, true);
    }
  }
  if (before.header.segment_data_size_at) {
    uint64_t field = *before.header.segment_data_size_at;
    std::fill(may_differ.begin() + field, may_differ.begin() + field + 8, true);
    uint64_t end = 0;
    for (uint32_t i = 0; i < after.segments.size(); ++i) end = std::max(end, after.segments[i].offset + after.segments[i].size);
    CHECK(*after.header.segment_data_size == end);
  }
  for (uint64_t i = 0; i < head; ++i)
    if (!may_differ[i] && input[i] != rewrite.output[i]) FAIL_CHECK("byte " << hex(i) << " of the flatbuffer changed");
  // Padding: every output byte after the segment area's start that no segment holds is zero.
  std::vector<bool> in_segment(rewrite.output.size() - head_after, false);
  for (uint32_t i = 0; i < after.segments.size(); ++i) {
    if (!after.segments[i].size) continue;
    uint64_t start = after.segment_start(i) - head_after;
    std::fill(in_segment.begin() + start, in_segment.begin() + start + after.segments[i].size, true);
  }
  for (uint64_t i = 0; i < in_segment.size(); ++i)
    if (!in_segment[i] && rewrite.output[head_after + i] != 0) FAIL_CHECK("padding byte " << hex(head_after + i) << " is not zero");
}

// The error of running f (with its offset), or none.
struct Failure {
  bool thrown = false;
  std::string text;
  std::optional<uint64_t> offset;
};

template <typename F>
Failure failure_of(F&& f) {
  try {
    f();
  } catch (const Error& error) {
    return {true, error.describe(), error.offset()};
  }
  return {};
}

// Runs repair_pte on `bytes` into a fresh directory; the failure, and what the
// directory holds afterwards (it must hold only the input).
Failure repair_failure(const std::vector<uint8_t>& bytes, const BlobRewriter& rewriter = resize_by(0)) {
  TempDir directory;
  write_bytes(directory / "in.pte", bytes);
  Failure failure = failure_of([&] {
    MappedFile mapped(directory / "in.pte");
    repair_pte(mapped, directory / "out.pte", test::checked(), false, rewriter);
  });
  CHECK(directory.entries() == std::vector<std::string>{"in.pte"});
  return failure;
}

std::vector<uint8_t> synthetic_pte(pte_test::Keys keys, uint64_t alignment = 128, uint32_t header_length = 32) {
  static const std::vector<uint8_t> forward = fake_macho(20000, 1), decode = fake_macho(9000, 2);
  pte_test::Spec spec = pte_test::aoti_spec(keys, {{"forward", &forward, 1}, {"decode", &decode, 2}}, alignment);
  spec.header_length = header_length;
  return pte_test::build(spec);
}


}  // namespace

// ---------------------------------------------------------------------------
// The samples written by ExecuTorch

TEST_CASE("sample metal_hashkeys.pte is read as ExecuTorch wrote it" * doctest::test_suite("executorch-samples")) {
  MappedFile sample(samples_directory() + "/metal_hashkeys.pte");
  Container container = read_container(sample.bytes());
  CHECK(container.kind == ContainerKind::Pte);
  CHECK(container.header.length == 32);
  CHECK(container.header.flatbuffer_end == 0x338);
  CHECK(container.header.base == 0x380);
  CHECK(container.header.segment_data_size == 0x559e0);
  CHECK(container.methods == std::vector<std::string>{"forward"});
  REQUIRE(container.segments.size() == 4);
  CHECK(!container.segments[0].offset_at);  // offset 0, size 0: both omitted by the writer
  CHECK(!container.segments[0].size_at);
  CHECK(container.segment_start(2) == 0x480);
  CHECK(container.segments[2].size == 50400);
  REQUIRE(container.delegates.size() == 1);
  CHECK(!container.delegates[0].inline_data);
  CHECK(container.delegates[0].index == 1);
  PteReport report = inspect_pte(sample.bytes());
  REQUIRE(report.named_data.size() == 2);
  CHECK(report.named_data[0].kind == BlobKind::MachO);
  CHECK(report.named_data[0].content_hash_key);
  CHECK(report.named_data[1].kind == BlobKind::Other);
  REQUIRE(report.delegates.size() == 1);
  CHECK(report.delegates[0].payload_keys == std::vector<std::string>{report.named_data[0].key, report.named_data[1].key});
  REQUIRE(report.blobs.size() == 1);
  CHECK(report.blobs[0].error == "");
  CHECK(report.blobs[0].macho.removable_count() == 1);
  CHECK(report.blobs[0].macho.removed_count() == 0);  // inspect removes nothing
}

TEST_CASE("sample metal_hashkeys.pte: libomp removed, so key renewed in NamedData and payload, nothing else changed" * doctest::test_suite("executorch-samples")) {
  std::vector<uint8_t> input = pte_test::read_file(samples_directory() + "/metal_hashkeys.pte");
  // Offsets read off the file with flatc (independent of machofix's reader):
  const uint64_t kKeyAt = 0xd8;       // NamedData[0].key characters (72: 64 hex + "_so_blob")
  const uint64_t kPayloadAt = 0x380;  // segment 1: "so_key\nweights_key", 150 bytes
  const uint64_t kBlobAt = 0x480, kBlobSize = 50400;  // segment 2
  Rewrite rewrite = rewrite_file(input, kPrune);
  REQUIRE(rewrite.output.size() == input.size());

  std::vector<uint8_t> old_blob = slice(input, kBlobAt, kBlobSize), new_blob = slice(rewrite.output, kBlobAt, kBlobSize);
  MachORepair expected = prune_macho(Bytes(old_blob.data(), old_blob.size(), kBlobAt), test::checked());
  CHECK(new_blob == expected.output.to_vector());
  CHECK(new_blob != old_blob);
  std::string old_hash = sha256_hex(Bytes(old_blob)), new_hash = sha256_hex(Bytes(new_blob));
  CHECK(text_at(input, kKeyAt, 72) == old_hash + "_so_blob");
  CHECK(text_at(rewrite.output, kKeyAt, 72) == new_hash + "_so_blob");
  CHECK(text_at(input, kPayloadAt, 64) == old_hash);
  CHECK(text_at(rewrite.output, kPayloadAt, 73) == new_hash + "_so_blob\n");
  for (uint64_t i = 0; i < input.size(); ++i) {
    bool allowed = (i >= kBlobAt && i < kBlobAt + kBlobSize) || (i >= kKeyAt && i < kKeyAt + 64) ||
                   (i >= kPayloadAt && i < kPayloadAt + 64);
    if (!allowed && input[i] != rewrite.output[i]) FAIL_CHECK("byte " << hex(i) << " changed");
  }

  MachOReport before = inspect_macho(Bytes(old_blob)), after = inspect_macho(Bytes(new_blob));
  REQUIRE(before.slices.size() == 1);
  REQUIRE(after.slices.size() == 1);
  std::vector<std::string> expected_names;
  for (const DylibReport& dylib : before.slices[0].dylibs)
    if (dylib.install_name != "/opt/llvm-openmp/lib/libomp.dylib") expected_names.push_back(dylib.install_name);
  std::vector<std::string> names;
  for (const DylibReport& dylib : after.slices[0].dylibs) names.push_back(dylib.install_name);
  CHECK(names == expected_names);
  CHECK(names.size() + 1 == before.slices[0].dylibs.size());
  CHECK(after.slices[0].signature.status == SignatureStatus::Valid);
  CHECK(after.removable_count() == 0);  // nothing left to remove

  REQUIRE(rewrite.report.blobs.size() == 1);
  const BlobReport& blob = rewrite.report.blobs[0];
  CHECK(blob.changed);
  CHECK(blob.macho.removed_count() == 1);
  REQUIRE(blob.renewals.size() == 1);
  CHECK(blob.renewals[0].old_key == old_hash + "_so_blob");
  CHECK(blob.renewals[0].new_key == new_hash + "_so_blob");
  CHECK(blob.renewals[0].renewed_in == std::vector<std::string>{"NamedData.key", "delegate payload (segment 1)"});
  CHECK(rewrite.report.written);
  check_rewrite(input, rewrite, kPrune, true);
}

TEST_CASE("sample metal_methodkeys.pte: libomp removed, keys unchanged, nothing else changed" * doctest::test_suite("executorch-samples")) {
  std::vector<uint8_t> input = pte_test::read_file(samples_directory() + "/metal_methodkeys.pte");
  const uint64_t kBlobAt = 0x300, kBlobSize = 33904;  // segment 1 (offset 0: omitted)
  Rewrite rewrite = rewrite_file(input, kPrune);
  REQUIRE(rewrite.output.size() == input.size());
  std::vector<uint8_t> old_blob = slice(input, kBlobAt, kBlobSize), new_blob = slice(rewrite.output, kBlobAt, kBlobSize);
  CHECK(new_blob == prune_macho(Bytes(old_blob.data(), old_blob.size(), kBlobAt), test::checked()).output.to_vector());
  CHECK(new_blob != old_blob);
  for (uint64_t i = 0; i < input.size(); ++i)
    if ((i < kBlobAt || i >= kBlobAt + kBlobSize) && input[i] != rewrite.output[i]) FAIL_CHECK("byte " << hex(i) << " changed");
  CHECK(inspect_macho(Bytes(new_blob)).slices.at(0).signature.status == SignatureStatus::Valid);
  REQUIRE(rewrite.report.blobs.size() == 1);
  CHECK(rewrite.report.blobs[0].macho.removed_count() == 1);
  CHECK(rewrite.report.blobs[0].renewals.empty());
  CHECK(read_container(Bytes(rewrite.output)).named[0].key == "forward_so_blob");
}

TEST_CASE("pruning a pruned sample changes nothing" * doctest::test_suite("executorch-samples")) {
  std::vector<uint8_t> input = pte_test::read_file(samples_directory() + "/metal_hashkeys.pte");
  Rewrite once = rewrite_file(input, kPrune);
  Rewrite twice = rewrite_file(once.output, kPrune);
  CHECK(!twice.report.changed);
  CHECK(twice.output == once.output);
}

// ---------------------------------------------------------------------------
// The writer's matrix, with real Mach-O images

TEST_CASE("matrix: every case rewritten as expected and verified byte for byte") {
  REQUIRE_BLOBS();
  for (const pte_test::Case& test_case : pte_test::matrix(*blobs)) {
    CAPTURE(test_case.name);
    std::vector<uint8_t> input = pte_test::build(test_case.spec);
    RepairOptions options = test::checked();
    options.sign_unsigned = test_case.sign_unsigned;
    BlobRewriter rewriter = kPrune;
    Rewrite rewrite = rewrite_file(input, rewriter, options);
    CHECK(rewrite.report.written);
    size_t rewritten = 0, renewed = 0;
    for (const BlobReport& blob : rewrite.report.blobs) rewritten += blob.changed, renewed += blob.renewals.size();
    CHECK(rewritten == test_case.rewritten_blobs);
    CHECK(renewed == test_case.renewed_keys);
    if (test_case.expect == pte_test::Expect::Identical) {
      CHECK(!rewrite.report.changed);
      CHECK(rewrite.output == input);
      continue;
    }
    CHECK(rewrite.report.changed);
    check_rewrite(input, rewrite, rewriter, !test_case.spec.ptd, options);
    if (test_case.sign_unsigned) {
      // The signature makes the blob larger; the file grows unless the padding after it absorbs that.
      CHECK(rewrite.report.blobs.at(0).new_size > rewrite.report.blobs.at(0).size);
      CHECK(rewrite.report.segments.at(rewrite.report.blobs.at(0).segment_index).new_size);
    }
    // Every blob is now clean: a second run changes nothing.
    Rewrite again = rewrite_file(rewrite.output, rewriter, options);
    CHECK(!again.report.changed);
    CHECK(again.output == rewrite.output);
  }
}

TEST_CASE("matrix: a signed blob whose code changed refuses the file, .pte and .ptd, thin and universal") {
  REQUIRE_BLOBS();
  size_t refused = 0;
  for (const pte_test::Case& test_case : pte_test::matrix(*blobs)) {
    CAPTURE(test_case.name);
    std::vector<uint8_t> input = pte_test::build(test_case.spec);
    Container container = read_container(Bytes(input));
    std::vector<uint32_t> segments = pte_internal::macho_segments(container);
    if (segments.empty()) continue;
    MachOReport blob = inspect_macho(container.segment_bytes(segments[0]));
    const SliceReport* target = nullptr;
    for (const SliceReport& slice : blob.slices)
      if (!target && slice.signature.status == SignatureStatus::Valid) target = &slice;
    if (!target) continue;  // unsigned blobs: nothing to break
    MachO image = parse_macho(Bytes(input.data() + target->offset, target->size, target->offset));
    uint64_t text = 0;
    for (const Segment& segment : image.segments)
      for (const Section& section : segment.sections)
        if (section.name == "__text") text = section.file_offset;
    REQUIRE(text > 0);
    input[target->offset + text + 8] ^= 0xff;
    Failure failure = repair_failure(input, kPrune);  // checks that nothing but the input is left
    uint64_t page = (text + 8) / 4096 * 4096;
    CHECK(failure.offset == target->offset + page);
    for (const std::string& part : {pte_internal::blob_part(container, segments[0]), "slice " + target->arch,
                                    std::string("the input signature is invalid"),
                                    "page " + std::to_string(page / 4096) + " (slice bytes " + hex(page)})
      CHECK_MESSAGE(failure.text.find(part) != std::string::npos, failure.text);
    ++refused;
  }
  CHECK(refused >= 5);
}

TEST_CASE("matrix: kinds of named data and keys are reported") {
  REQUIRE_BLOBS();
  for (const pte_test::Case& test_case : pte_test::matrix(*blobs)) {
    if (test_case.name != "method_with_elf_and_other" && test_case.name != "hash_universal") continue;
    std::vector<uint8_t> input = pte_test::build(test_case.spec);
    PteReport report = inspect_pte(Bytes(input));
    std::vector<BlobKind> kinds;
    for (const NamedDataReport& named : report.named_data) kinds.push_back(named.kind);
    if (test_case.name == "hash_universal") {
      CHECK(kinds == std::vector<BlobKind>{BlobKind::Universal, BlobKind::Other});
      CHECK(report.named_data[0].content_hash_key);
      REQUIRE(report.blobs.size() == 1);
      CHECK(report.blobs[0].macho.universal);
      CHECK(report.blobs[0].macho.removable_count() == 2);  // libomp in each slice
      CHECK(report.blobs[0].macho.removed_count() == 0);    // inspect removes nothing
    } else {
      CHECK(kinds == std::vector<BlobKind>{BlobKind::MachO, BlobKind::Other, BlobKind::Elf, BlobKind::Other});
      CHECK(!report.named_data[0].content_hash_key);
    }
  }
}

TEST_CASE("matrix: a content-hash key in a .ptd is kept, with a warning") {
  REQUIRE_BLOBS();
  for (const pte_test::Case& test_case : pte_test::matrix(*blobs)) {
    if (test_case.name != "ptd_hash_key_4096") continue;
    std::vector<uint8_t> input = pte_test::build(test_case.spec);
    CHECK(looks_like_ptd(Bytes(input)));
    Rewrite rewrite = rewrite_file(input, kPrune);
    REQUIRE(rewrite.report.warnings.size() == 1);
    CHECK(rewrite.report.warnings[0].find("kept") != std::string::npos);
    CHECK(read_container(Bytes(rewrite.output)).named[0].key == test_case.spec.named[0].key);
  }
}

// ---------------------------------------------------------------------------
// Moving segments, with stand-in rewriters

TEST_CASE("relocate_segments keeps order, gaps and alignment") {
  // base 0x380; segments as in metal_hashkeys, the blob (2) grows by 300.
  std::vector<uint64_t> offsets{0x380, 0x380, 0x480, 0xc980}, sizes{0, 150, 50400, 300000};
  std::vector<uint64_t> grown = sizes;
  grown[2] += 300;
  Relocation relocation = relocate_segments(0x380, offsets, sizes, grown);
  CHECK(relocation.segments[0].new_offset == 0x380);
  CHECK(relocation.segments[1].new_offset == 0x380);
  CHECK(relocation.segments[2].new_offset == 0x480);
  // 0xc980 is 128-aligned in the file and 512-aligned from the base: moved by 512.
  CHECK(relocation.segments[3].new_offset == 0xc980 + 512);
  CHECK(relocation.final_shift() == 512);
  std::vector<uint64_t> shrunk = sizes;
  shrunk[2] -= 600;
  CHECK(relocate_segments(0x380, offsets, sizes, shrunk).segments[3].new_offset == 0xc980 - 512);
  shrunk[2] = sizes[2] - 100;  // less than an alignment step: nothing moves
  CHECK(relocate_segments(0x380, offsets, sizes, shrunk).segments[3].new_offset == 0xc980);
  // Growth the gap after the segment absorbs moves nothing; beyond it, a 64 KiB-aligned
  // segment moves by 64 KiB.
  CHECK(relocate_segments(0x1000, {0x1000, 0x10000}, {0x100, 0x10}, {0x101, 0x10}).final_shift() == 0);
  Relocation big = relocate_segments(0x1000, {0x1000, 0x10000}, {0xf000, 0x10}, {0xf001, 0x10});
  CHECK(big.segments[1].new_offset == 0x20000);
  // The last segment growing moves nothing and needs no alignment.
  CHECK(relocate_segments(0, {0, 128}, {100, 50}, {100, 77}).final_shift() == 27);
}

TEST_CASE("relocate_segments refuses a resized segment that overlaps another") {
  Failure failure = failure_of([] { relocate_segments(0, {0, 64}, {128, 16}, {200, 16}); });
  CHECK(failure.thrown);
  CHECK(failure.text.find("overlaps segment 1") != std::string::npos);
}

TEST_CASE("blobs that grow or shrink move the segments after them") {
  struct Variant {
    pte_test::Keys keys;
    uint64_t alignment;
    uint32_t header;
  };
  for (Variant variant : {Variant{pte_test::Keys::Hash, 128, 32}, Variant{pte_test::Keys::Method, 4096, 32},
                          Variant{pte_test::Keys::Hash, 4096, 24}, Variant{pte_test::Keys::Method, 128, 24}}) {
    std::vector<uint8_t> input = synthetic_pte(variant.keys, variant.alignment, variant.header);
    for (int64_t delta : {1, 127, 128, 300, 4095, 4097, 70000, -1, -200, -5000}) {
      CAPTURE(variant.alignment);
      CAPTURE(variant.header);
      CAPTURE(delta);
      Rewrite rewrite = rewrite_file(input, resize_by(delta));
      CHECK(rewrite.report.changed);
      CHECK(rewrite.output.size() == rewrite.report.output_size);
      check_rewrite(input, rewrite, resize_by(delta), true);
    }
  }
}

TEST_CASE("a blob that grows: a spoiled copy of what stays in place, or of what moves, is refused") {
  std::vector<uint8_t> input = synthetic_pte(pte_test::Keys::Hash);
  Rewrite good = rewrite_file(input, resize_by(300));
  Container after = read_container(Bytes(good.output));
  // Offset 100, in the flatbuffer before the first blob, stays in place: the early
  // copy holds it. The last segment (decode's weights) moves with the blob before it:
  // copied again.
  uint32_t last = static_cast<uint32_t>(after.segments.size() - 1);
  uint64_t moved_weights = after.segment_start(last) + after.segments[last].size - 5;
  CHECK(read_container(Bytes(input)).segment_start(last) != after.segment_start(last));
  for (uint64_t at : {uint64_t(100), moved_weights}) {
    CAPTURE(at);
    test::SpoiledCopies spoiling(at);
    Failure failure = repair_failure(input, resize_by(300));
    CHECK(failure.thrown);
    CHECK(failure.text.find("which it copies") != std::string::npos);
  }
}

TEST_CASE("a .ptd blob that grows moves the segments after it and updates its header") {
  static const std::vector<uint8_t> blob = fake_macho(12345, 5);
  pte_test::Spec spec;
  spec.ptd = true;
  spec.segment_alignment = 16;
  spec.data = {{blob, 0, 1}, {pte_test::pseudo_random(5000, 3), 0, 16}};
  spec.named = {{"forward_so_blob", 0}, {"forward_weights_blob", 1}};
  std::vector<uint8_t> input = pte_test::build(spec);
  REQUIRE(looks_like_ptd(Bytes(input)));
  Rewrite rewrite = rewrite_file(input, resize_by(1000));
  CHECK(rewrite.output.size() > input.size());
  check_rewrite(input, rewrite, resize_by(1000), false);
  CHECK(*read_container(Bytes(rewrite.output)).header.segment_data_size - *read_container(Bytes(input)).header.segment_data_size ==
        rewrite.output.size() - input.size());
}

TEST_CASE("renewed keys: inline payloads, and one blob shared by two methods") {
  static const std::vector<uint8_t> forward = fake_macho(20000, 1), decode = fake_macho(9000, 2);
  pte_test::Spec inline_spec = pte_test::aoti_spec(pte_test::Keys::Hash, {{"forward", &forward, 1}, {"decode", &decode, 2}},
                                                   128, pte_test::PayloadAt::Inline);
  std::vector<uint8_t> input = pte_test::build(inline_spec);
  Rewrite rewrite = rewrite_file(input, resize_by(0));
  REQUIRE(rewrite.report.blobs.size() == 2);
  CHECK(rewrite.report.blobs[0].renewals.at(0).renewed_in == std::vector<std::string>{"NamedData.key", "delegate payload (inline 0)"});
  check_rewrite(input, rewrite, resize_by(0), true);

  pte_test::Spec shared = pte_test::aoti_spec(pte_test::Keys::Hash, {{"forward", &forward, 1}, {"decode", &forward, 2}});
  input = pte_test::build(shared);
  rewrite = rewrite_file(input, resize_by(0));
  REQUIRE(rewrite.report.blobs.size() == 1);  // one segment, rewritten once
  CHECK(rewrite.report.blobs[0].renewals.at(0).renewed_in ==
        std::vector<std::string>{"NamedData.key", "delegate payload (segment 1)", "delegate payload (segment 2)"});
  check_rewrite(input, rewrite, resize_by(0), true);

  pte_test::Spec method_keys = pte_test::aoti_spec(pte_test::Keys::Method, {{"forward", &forward, 1}, {"decode", &forward, 2}});
  std::vector<uint8_t> program = pte_test::build(method_keys);
  PteReport report = inspect_pte(Bytes(program));
  REQUIRE(report.blobs.size() == 1);
  CHECK(report.blobs[0].keys == std::vector<std::string>{"forward_so_blob", "decode_so_blob"});
}

// The keys an AOTI backend reads (resolve_blob_keys): the so key up to the first
// newline, the weights key everything after it, whatever those bytes are.
TEST_CASE("AOTI payloads: keys resolved as the runtime resolves them, renewed where it reads them") {
  static const std::vector<uint8_t> forward = fake_macho(20000, 1);
  pte_test::Spec spec = pte_test::aoti_spec(pte_test::Keys::Hash, {{"forward", &forward, 1}});
  const std::string so_key = spec.named[0].key, weights_key = spec.named[1].key;
  auto with_payload = [&](const std::string& payload) {
    pte_test::Spec changed = spec;
    changed.methods[0].payload = payload;
    return pte_test::build(changed);
  };

  SUBCASE("a payload damaged after the so key: the so key is still found, and renewed there") {
    std::string damaged = so_key + "\n" + std::string("\x01\xff\x00junk", 8);
    std::vector<uint8_t> input = with_payload(damaged);
    Container container = read_container(Bytes(input));
    REQUIRE(container.resolutions.size() == 1);
    CHECK(container.resolutions[0].so_key == so_key);
    CHECK(container.resolutions[0].weights_key == damaged.substr(so_key.size() + 1));
    CHECK(container.resolutions[0].so_named == 0u);
    CHECK(!container.resolutions[0].weights_named);
    Rewrite rewrite = rewrite_file(input, resize_by(0));
    Container after = read_container(Bytes(rewrite.output));
    REQUIRE(after.resolutions.size() == 1);
    CHECK(after.resolutions[0].so_key == after.named[0].key);
    CHECK(after.resolutions[0].so_key != so_key);
    CHECK(after.resolutions[0].weights_key == damaged.substr(so_key.size() + 1));
    CHECK(rewrite.report.warnings.empty());
  }
  SUBCASE("the old key also inside the weights key: machofix cannot renew it there, refused") {
    Failure failure = repair_failure(with_payload(so_key + "\n" + "x" + so_key));
    CHECK(failure.text.find("occurs in the MetalBackend payload of method 'forward' where the runtime does not read it as a key") !=
          std::string::npos);
  }
  SUBCASE("a payload without newline: the backend refuses it, and so does machofix") {
    Failure failure = repair_failure(with_payload(so_key));
    CHECK(failure.text.find("has no newline") != std::string::npos);
  }
  SUBCASE("a so key the named data does not hold: the model does not load") {
    std::string other = (so_key[0] == '0' ? "1" : "0") + so_key.substr(1);
    Failure failure = repair_failure(with_payload(other + "\n" + weights_key));
    CHECK(failure.text.find("the Program's named data has no such key") != std::string::npos);
  }
  SUBCASE("a content-hash key the delegate makes from its method name cannot follow a renewal: refused") {
    pte_test::Spec by_name = spec;
    by_name.methods[0].payload = "";
    by_name.methods[0].name = so_key.substr(0, 64);  // the compile spec "method_name" makes "<hash>_so_blob"
    Failure failure = repair_failure(pte_test::build(by_name));
    CHECK(failure.text.find("by a name machofix cannot renew (made from the method name)") != std::string::npos);
  }
}

// Older writers put no extended header: the segments lie at their offsets from the
// start of the file, and the runtime loads named data from there.
TEST_CASE("a .pte without extended header whose Program lists segments: read, and copied where nothing changes") {
  static const std::vector<uint8_t> forward = fake_macho(20000, 1);
  pte_test::Spec spec = pte_test::aoti_spec(pte_test::Keys::Method, {{"forward", &forward, 1}}, 128, pte_test::PayloadAt::Inline);
  spec.header_length = 0;
  std::vector<uint8_t> input = pte_test::build(spec);
  Container container = read_container(Bytes(input));
  CHECK(container.header.length == 0);
  CHECK(container.header.base == 0);
  CHECK(container.segments.size() == 3);
  REQUIRE(container.resolutions.size() == 1);
  CHECK(container.resolutions[0].so_named == 0u);
  CHECK(container.segment_bytes(container.named[0].segment_index).size() == forward.size());
  TempDir directory;
  write_bytes(directory / "in.pte", input);
  MappedFile mapped(directory / "in.pte");
  PteReport copy = repair_pte(mapped, directory / "copy.pte", test::checked(), false, unchanged());
  CHECK(!copy.changed);
  CHECK(pte_test::read_file(directory / "copy.pte") == input);
  // Its delegate payload kept in a segment: Program::LoadSegment has no base to find it from.
  pte_test::Spec in_segment = pte_test::aoti_spec(pte_test::Keys::Hash, {{"forward", &forward, 1}});
  in_segment.header_length = 0;
  Failure failure = repair_failure(pte_test::build(in_segment));
  CHECK(failure.text.find("but the file has no segment base") != std::string::npos);
}

// ---------------------------------------------------------------------------
// Outputs: dry runs, identical copies, nothing written on failure

TEST_CASE("a dry run reports the changes and writes nothing") {
  std::vector<uint8_t> input = synthetic_pte(pte_test::Keys::Hash);
  TempDir directory;
  write_bytes(directory / "in.pte", input);
  MappedFile mapped(directory / "in.pte");
  PteReport report = repair_pte(mapped, directory / "out.pte", test::checked(), true, resize_by(300));
  CHECK(report.changed);
  CHECK(!report.written);
  CHECK(report.output_size > report.file_size);
  CHECK(report.blobs.at(0).renewals.size() == 1);
  CHECK(directory.entries() == std::vector<std::string>{"in.pte"});
}

TEST_CASE("nothing to change: -o gets an identical copy, in place writes nothing") {
  std::vector<uint8_t> input = synthetic_pte(pte_test::Keys::Hash);
  TempDir directory;
  write_bytes(directory / "in.pte", input);
  MappedFile mapped(directory / "in.pte");
  PteReport copy = repair_pte(mapped, directory / "copy.pte", test::checked(), false, unchanged());
  CHECK(!copy.changed);
  CHECK(copy.written);
  CHECK(pte_test::read_file(directory / "copy.pte") == input);
  struct stat before, after;
  stat((directory / "in.pte").c_str(), &before);
  PteReport in_place = repair_pte(mapped, directory / "in.pte", test::checked(), false, unchanged());
  stat((directory / "in.pte").c_str(), &after);
  CHECK(!in_place.written);
  CHECK(before.st_ino == after.st_ino);
  CHECK(directory.entries() == std::vector<std::string>{"copy.pte", "in.pte"});
}

TEST_CASE("in place: the input is replaced by a new file") {
  std::vector<uint8_t> input = synthetic_pte(pte_test::Keys::Method);
  TempDir directory;
  write_bytes(directory / "model.pte", input);
  {
    MappedFile mapped(directory / "model.pte");
    PteReport report = repair_pte(mapped, directory / "model.pte", test::checked(), false, resize_by(0));
    CHECK(report.written);
    CHECK(mapped.bytes().size() == input.size());  // the old inode is still mapped, unchanged
    CHECK(std::memcmp(mapped.bytes().data(), input.data(), input.size()) == 0);
  }
  std::vector<uint8_t> output = pte_test::read_file(directory / "model.pte");
  CHECK(output != input);
  CHECK(output.size() == input.size());
  CHECK(directory.entries() == std::vector<std::string>{"model.pte"});
}

// ---------------------------------------------------------------------------
// Corrupted files

TEST_CASE("corrupted files: a clear error with the offset, nothing written") {
  std::vector<uint8_t> good = synthetic_pte(pte_test::Keys::Hash);
  Container container = read_container(Bytes(good));
  struct Corruption {
    std::string name;
    std::vector<uint8_t> bytes;
    std::string message;
    std::optional<uint64_t> offset;
  };
  std::vector<Corruption> corruptions;
  auto add = [&](std::string name, std::function<void(std::vector<uint8_t>&)> edit, std::string message,
                 std::optional<uint64_t> offset) {
    std::vector<uint8_t> bytes = good;
    edit(bytes);
    corruptions.push_back({std::move(name), std::move(bytes), std::move(message), offset});
  };
  add("identifier", [](auto& b) { b[4] = 'X'; }, "not an ExecuTorch .pte", 4);
  add("too short", [](auto& b) { b.resize(6); }, "not an ExecuTorch .pte", 4);
  add("header length", [](auto& b) { b[12] = 8; }, "extended header: offset 0xc: extended header length 8 is less than 24", 12);
  add("program_size", [](auto& b) { put_u64(b, 16, b.size() + 1); }, "the flatbuffer would end at", 16);
  // The runtime then finds the delegate's payload inside the flatbuffer: no keys in it.
  uint64_t payload_at = 0x40 + container.segments[container.delegates[0].index].offset;
  add("segment base", [](auto& b) { put_u64(b, 24, 0x40); }, "has no newline", payload_at);
  add("truncated", [](auto& b) { b.resize(b.size() - 100); }, "the file is truncated", 32);
  add("root offset", [](auto& b) { put_u32(b, 0, 0x7ffffff0u); }, "does not pass the FlatBuffers verifier", 0);
  add("key length", [&](auto& b) { put_u32(b, container.named[0].key_at - 4, 0x10000); }, "does not pass the FlatBuffers verifier", 0);
  // The .so's segment, and the delegate payload's: the runtime reads both.
  uint32_t so = container.named[0].segment_index, payload = container.delegates[0].index;
  add("segment offset", [&](auto& b) { put_u64(b, *container.segments[so].offset_at, 1ull << 40); },
      "cannot load its .so '" + container.named[0].key + "': its segment " + std::to_string(so) + " lies outside the file",
      container.segments[so].table_at);
  add("segment size overflow", [&](auto& b) { put_u64(b, *container.segments[payload].size_at, ~0ull - 4); },
      "its segment 1 lies outside the file", container.segments[payload].table_at);
  for (const Corruption& corruption : corruptions) {
    CAPTURE(corruption.name);
    Failure failure = repair_failure(corruption.bytes);
    CHECK(failure.thrown);
    CHECK_MESSAGE(failure.text.find(corruption.message) != std::string::npos, failure.text);
    CHECK(failure.offset == corruption.offset);
    CHECK(failure_of([&] { inspect_pte(Bytes(corruption.bytes)); }).text == failure.text);
  }
}

TEST_CASE("corrupted files written by the writer: bad index, segment past the end, old header without size") {
  static const std::vector<uint8_t> forward = fake_macho(20000, 1);
  pte_test::Spec spec = pte_test::aoti_spec(pte_test::Keys::Method, {{"forward", &forward, 1}});
  pte_test::Spec bad_index = spec;
  bad_index.first_named_segment_index = 9;
  Failure failure = repair_failure(pte_test::build(bad_index));
  CHECK(failure.text.find("method 'forward': offset") != std::string::npos);
  CHECK(failure.text.find("cannot load its .so 'forward_so_blob': it names segment 9 of 3") != std::string::npos);
  std::vector<uint8_t> program = pte_test::build(spec);
  CHECK(failure.offset == read_container(Bytes(program)).named[0].table_at);

  pte_test::Spec ptd;
  ptd.ptd = true;
  ptd.data = {{forward, 0, 1}};
  ptd.named = {{"forward_so_blob", 0}};
  std::vector<uint8_t> bytes = pte_test::build(ptd);
  bytes[12] = 16;
  failure = repair_failure(bytes);
  CHECK(failure.text.find("FH01 header: offset 0xc: FH01 header length 16 is less than 40") != std::string::npos);
}

// The runtime reads only the segments a program loads: one that nothing loads may lie
// past the end of the file, and the model still loads.
TEST_CASE("a segment the runtime never reads, past the end of the file: read, rewritten, left as it was") {
  static const std::vector<uint8_t> forward = fake_macho(20000, 1);
  pte_test::Spec spec = pte_test::aoti_spec(pte_test::Keys::Method, {{"forward", &forward, 1}});
  spec.header_length = 24;  // no segment_data_size: the header does not hold the file to the segments
  spec.last_segment_extra_size = 1;  // the weights, which the backend skips when it cannot find them
  std::vector<uint8_t> input = pte_test::build(spec);
  Container container = read_container(Bytes(input));
  CHECK(!container.segment_in_file(2));
  REQUIRE(container.resolutions.size() == 1);
  CHECK(container.resolutions[0].so_named == 0u);
  CHECK(!container.resolutions[0].weights_named);
  PteReport report = inspect_pte(Bytes(input));
  CHECK(report.named_data.at(1).kind == BlobKind::Other);
  Rewrite rewrite = rewrite_file(input, resize_by(0));
  CHECK(rewrite.report.written);
  CHECK(rewrite.output.size() == input.size());
  Container after = read_container(Bytes(rewrite.output));
  CHECK(after.segments[2].offset == container.segments[2].offset);
  CHECK(after.segments[2].size == container.segments[2].size);
  // Moving segments needs them all in the file: a blob that grows is refused here.
  Failure grown = repair_failure(input, resize_by(4096));
  CHECK(grown.text.find("machofix does not move segments in a file where segment 2 lies outside the file") != std::string::npos);
}

TEST_CASE("a Mach-O segment that is also the Program's constant segment is refused when rewritten, nothing written") {
  // Rewriting it would change the constants too (ExecuTorch never shares them, but
  // the format allows it).
  static const std::vector<uint8_t> forward = fake_macho(20000, 1);
  pte_test::Spec spec = pte_test::aoti_spec(pte_test::Keys::Method, {{"forward", &forward, 1}});
  std::vector<uint8_t> program = pte_test::build(spec);
  uint32_t blob = read_container(Bytes(program)).named.at(0).segment_index;
  spec.constant_segment_index = blob;
  std::vector<uint8_t> input = pte_test::build(spec);
  Failure failure = repair_failure(input, resize_by(0));  // also checks that nothing is left but the input
  CHECK(failure.thrown);
  CHECK_MESSAGE(failure.text.find("the segment is also the Program's constant_segment") != std::string::npos, failure.text);
  CHECK(failure.offset == read_container(Bytes(input)).segment_start(blob));
  // Not rewritten (the same bytes back), it is no concern: nothing is written over it.
  TempDir directory;
  write_bytes(directory / "in.pte", input);
  MappedFile mapped(directory / "in.pte");
  CHECK_FALSE(repair_pte(mapped, directory / "out.pte", test::checked(), false, unchanged()).changed);
}

TEST_CASE("a blob the rewriter rejects: the error names its key and offset, nothing written") {
  std::vector<uint8_t> input = synthetic_pte(pte_test::Keys::Method);
  Container container = read_container(Bytes(input));
  REQUIRE(container.named[0].key == "forward_so_blob");
  uint32_t segment = container.named[0].segment_index;
  uint64_t blob_at = container.segment_start(segment);
  BlobRewriter reject = in_second_step([](const Bytes& blob, const RepairOptions&) -> MachORepair {
    blob.fail_here(0x20, "load command runs past sizeofcmds");
  });
  Failure failure = repair_failure(input, reject);
  CHECK_MESSAGE(failure.text.find("named data 'forward_so_blob' (segment " + std::to_string(segment) + "): offset " +
                                  hex(blob_at + 0x20)) != std::string::npos,
                failure.text);
  CHECK(failure.offset == blob_at + 0x20);
}

TEST_CASE("every blob is judged before any is rewritten; a refusal rewrites nothing and creates nothing") {
  std::vector<uint8_t> input = synthetic_pte(pte_test::Keys::Method);  // two Mach-O blobs
  Container container = read_container(Bytes(input));
  std::vector<std::string> events;
  auto rewriter = [&events](bool refuse_second) -> BlobRewriter {
    return [&events, refuse_second](const Bytes& blob, const RepairOptions& options) -> BlobRewrite {
      events.push_back("judge " + hex(blob.base()));
      if (refuse_second && events.size() == 2) throw Error("refused", blob.base()).as_refusal();
      return [&events, blob, options] {
        events.push_back("rewrite " + hex(blob.base()));
        return resize_by(16)(blob, options)();
      };
    };
  };
  std::vector<uint32_t> blobs = pte_internal::macho_segments(container);
  REQUIRE(blobs.size() == 2);
  std::string first = hex(container.segment_start(blobs[0])), second = hex(container.segment_start(blobs[1]));

  rewrite_file(input, rewriter(false));
  CHECK(events == std::vector<std::string>{"judge " + first, "judge " + second, "rewrite " + first, "rewrite " + second});

  events.clear();
  Failure failure = repair_failure(input, rewriter(true));  // also checks that nothing is left but the input
  CHECK(failure.thrown);
  CHECK(failure.offset == container.segment_start(blobs[1]));
  CHECK(events == std::vector<std::string>{"judge " + first, "judge " + second});
}

TEST_CASE("a real Mach-O blob that is malformed fails with its key and an offset inside it" * doctest::test_suite("executorch-samples")) {
  std::vector<uint8_t> broken = pte_test::read_file(samples_directory() + "/metal_methodkeys.pte");
  const uint64_t kBlobAt = 0x300;
  put_u64(broken, kBlobAt + 20, 0xffff);  // sizeofcmds (and flags) far past the blob
  Failure failure = repair_failure(broken, kPrune);
  CHECK(failure.thrown);
  CHECK_MESSAGE(failure.text.find("named data 'forward_so_blob' (segment 1)") != std::string::npos, failure.text);
  REQUIRE(failure.offset);
  CHECK(*failure.offset >= kBlobAt);
  CHECK(*failure.offset < kBlobAt + 33904);
}

TEST_CASE("a failure while writing leaves nothing behind") {
  static const std::vector<uint8_t> forward = fake_macho(20000, 1);
  std::vector<uint8_t> input = pte_test::build(pte_test::aoti_spec(pte_test::Keys::Method, {{"forward", &forward, 1}}));
  Container container = read_container(Bytes(input));
  uint32_t blob = container.named[0].segment_index;
  uint64_t keep = container.segment_start(blob) + container.segments[blob].size;
  // The input shrinks to the end of its (only) blob after it is mapped. (Nothing reads
  // the mapped input past the new end: that would be SIGBUS, the price of mapping a
  // file someone else truncates.)
  SUBCASE("before the copy starts: the copy runs out of input") {
    TempDir directory;
    std::string path = directory / "in.pte";
    write_bytes(path, input);
    MappedFile mapped(path);
    REQUIRE(truncate(path.c_str(), static_cast<off_t>(keep)) == 0);
    Failure failure = failure_of([&] { repair_pte(mapped, directory / "out.pte", test::checked(), false, resize_by(0)); });
    CHECK_MESSAGE(failure.text.find("the input became shorter") != std::string::npos, failure.text);
    CHECK(directory.entries() == std::vector<std::string>{"in.pte"});
  }
  // A small input is copied at once, before its blobs are judged (CopyAhead); the
  // comparison then reads the input again, and finds it shorter. (Truncating in the
  // rewrite of a larger input would race with the copy thread.)
  SUBCASE("while its blob is judged, after the copy: the comparison finds it") {
    TempDir directory;
    std::string path = directory / "in.pte";
    write_bytes(path, input);
    BlobRewriter truncating = [&](const Bytes& blob, const RepairOptions& options) {
      REQUIRE(truncate(path.c_str(), static_cast<off_t>(keep)) == 0);
      return resize_by(0)(blob, options);
    };
    MappedFile mapped(path);
    Failure failure = failure_of([&] { repair_pte(mapped, directory / "out.pte", test::checked(), false, truncating); });
    CHECK_MESSAGE(failure.text.find("the input is shorter than when it was copied") != std::string::npos, failure.text);
    CHECK(directory.entries() == std::vector<std::string>{"in.pte"});
  }
}

TEST_CASE("a blob refused while a large input is being copied leaves nothing behind") {
  // A -o output's copy starts before the blobs are judged; for an input of two copy
  // chunks or more it runs on a thread of its own, and a refusal stops it.
  static const std::vector<uint8_t> forward = fake_macho(20000, 1);
  pte_test::Spec spec = pte_test::aoti_spec(pte_test::Keys::Method, {{"forward", &forward, 1}});
  spec.data.push_back({pte_test::pseudo_random(3 * kThreadedCopyMinimum, 7), 0, 16});
  std::vector<uint8_t> input = pte_test::build(spec);
  REQUIRE(input.size() > 3 * kThreadedCopyMinimum);
  BlobRewriter refusing = [](const Bytes&, const RepairOptions&) -> BlobRewrite {
    fail_as(ErrorKind::Refused, "refused by the test");
  };
  Failure failure = repair_failure(input, refusing);  // checks that nothing but the input is left
  CHECK_MESSAGE(failure.text.find("refused by the test") != std::string::npos, failure.text);
}

TEST_CASE("file kinds are told apart by content") {
  std::vector<uint8_t> pte = synthetic_pte(pte_test::Keys::Hash);
  CHECK(looks_like_pte(Bytes(pte)));
  CHECK(!looks_like_ptd(Bytes(pte)));
  std::vector<uint8_t> short_file{1, 2, 3};
  CHECK(!looks_like_pte(Bytes(short_file)));
  CHECK(!looks_like_ptd(Bytes(short_file)));
}
