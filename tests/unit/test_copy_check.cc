// CopyChecker: every copied byte is read back from the output and compared with the
// input; a difference anywhere, in any part of a range, is reported at its output
// offset, whichever thread compared it.
#include <fcntl.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/base/util.h"
#include "core/io/copy_check.h"
#include "core/base/error.h"

using namespace machofix;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMiB = 1ull << 20;

struct Scratch {
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "machofix-test-copy-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    directory = pattern;
  }
  ~Scratch() { fs::remove_all(directory); }
  std::string path(const std::string& name) const { return directory + "/" + name; }
  std::string directory;
};

std::vector<uint8_t> random_bytes(size_t size) {
  std::mt19937_64 generator(size);
  std::vector<uint8_t> bytes(size);
  for (uint8_t& byte : bytes) byte = static_cast<uint8_t>(generator());
  return bytes;
}

void write(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// Runs a checker over `ranges` of `output` against `input`; returns the error it
// throws, or nullopt.
std::optional<Error> check(const std::vector<uint8_t>& input, const std::vector<uint8_t>& output,
                           const std::vector<CopiedRange>& ranges, bool help) {
  Scratch scratch;
  write(scratch.path("in"), input);
  write(scratch.path("out"), output);
  MappedFile mapped(scratch.path("in"));
  CopyChecker checker(mapped, scratch.path("out"), output.size());
  try {
    for (const CopiedRange& range : ranges) checker.submit(range);
    checker.close_submissions();
    if (help) checker.help();
    checker.finish();
  } catch (const Error& error) {
    return error;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("CopyChecker: identical copies pass, in place and moved") {
  std::vector<uint8_t> input = random_bytes(20 * kMiB + 12345);
  for (bool help : {false, true}) {
    CAPTURE(help);
    CHECK_FALSE(check(input, input, {{0, 0, input.size()}}, help));
    // The input's first 9 MiB + 1 written 4096 + 7 bytes further on, in two ranges.
    std::vector<uint8_t> moved(input.size() + 4103, 0);
    std::copy(input.begin(), input.begin() + 9 * kMiB + 1, moved.begin() + 4103);
    CHECK_FALSE(check(input, moved, {{0, 4103, 3 * kMiB}, {3 * kMiB, 3 * kMiB + 4103, 6 * kMiB + 1}}, help));
  }
}

TEST_CASE("CopyChecker: one byte changed anywhere is reported at its output offset") {
  std::vector<uint8_t> input = random_bytes(20 * kMiB + 12345);
  // First byte, a unit boundary, deep inside a range, last byte.
  for (uint64_t at : {uint64_t{0}, kMiB, 13 * kMiB + 77, uint64_t{input.size() - 1}}) {
    for (bool help : {false, true}) {
      CAPTURE(at);
      CAPTURE(help);
      std::vector<uint8_t> output = input;
      output[at] ^= 0x20;
      std::optional<Error> error = check(input, output, {{0, 0, 8 * kMiB}, {8 * kMiB, 8 * kMiB, input.size() - 8 * kMiB}}, help);
      REQUIRE(error);
      CHECK(error->offset() == at);
      CHECK(error->problem() == "the output differs from input offset " + hex(at) + ", which it copies");
    }
  }
}

TEST_CASE("CopyChecker: a moved range is compared with the bytes it copies") {
  std::vector<uint8_t> input = random_bytes(3 * kMiB);
  std::vector<uint8_t> output(3 * kMiB + 512, 0);
  std::copy(input.begin(), input.end(), output.begin() + 512);
  // Claimed to copy from offset 1 instead of 0: the first byte already differs.
  std::optional<Error> error = check(input, output, {{1, 512, 3 * kMiB - 1}}, true);
  REQUIRE(error);
  CHECK(error->offset() == 512);
  CHECK(error->problem() == "the output differs from input offset 0x1, which it copies");
}

TEST_CASE("copy_chunk_at: 2 MiB chunks first, growing to 64 MiB, every one ending on a 2 MiB boundary") {
  constexpr uint64_t MiB = 1ull << 20;
  constexpr uint64_t far = UINT64_MAX;  // a copy that does not end soon
  CHECK(copy_chunk_at(0, far) == 2 * MiB);
  CHECK(copy_chunk_at(2 * MiB, far) == 2 * MiB);
  CHECK(copy_chunk_at(4 * MiB, far) == 4 * MiB);
  CHECK(copy_chunk_at(8 * MiB, far) == 8 * MiB);
  CHECK(copy_chunk_at(64 * MiB, far) == 64 * MiB);
  CHECK(copy_chunk_at(100 * MiB, far) == 28 * MiB);   // to 128 MiB
  CHECK(copy_chunk_at(4096 * MiB, far) == 64 * MiB);  // never larger
  uint64_t page = system_page_size();
  CHECK(copy_chunk_at(3 * page + 100, far) == 2 * MiB - 3 * page);  // counted from the page's start
  // A whole file's copy, chunk by chunk: every chunk ends on a 2 MiB boundary.
  for (uint64_t at = 0; at < 300 * MiB; at += copy_chunk_at(at, far)) CHECK((at + copy_chunk_at(at, far)) % (2 * MiB) == 0);
}

TEST_CASE("copy_chunk_at: chunks shrink towards the copy's end, so that the last comparison is short") {
  constexpr uint64_t MiB = 1ull << 20;
  // A 2 GiB (and 5,000 bytes) copy: at most half of what is left, then 2 MiB.
  uint64_t end = 2048 * MiB + 5000;
  CHECK(copy_chunk_at(1024 * MiB, end) == 64 * MiB);  // 1 GiB left: the largest chunk
  CHECK(copy_chunk_at(1984 * MiB, end) == 32 * MiB);  // 64 MiB left
  CHECK(copy_chunk_at(2016 * MiB, end) == 16 * MiB);
  CHECK(copy_chunk_at(2032 * MiB, end) == 8 * MiB);
  CHECK(copy_chunk_at(2040 * MiB, end) == 4 * MiB);
  CHECK(copy_chunk_at(2044 * MiB, end) == 2 * MiB);
  CHECK(copy_chunk_at(2046 * MiB, end) == 2 * MiB);   // never below 2 MiB
  CHECK(copy_chunk_at(2048 * MiB, end) == 5000);      // but cut at the end
  CHECK(copy_chunk_at(end, end) == 0);
  // The chunks of the whole copy: each ends on a 2 MiB boundary but the one cut at the
  // end, and what is left after the one before it is at most 2 MiB and 5,000 bytes.
  std::vector<uint64_t> chunks;
  for (uint64_t at = 0, length = 0; at < end; at += length) {
    length = copy_chunk_at(at, end);
    chunks.push_back(length);
    if (at + length < end) CHECK((at + length) % (2 * MiB) == 0);
  }
  REQUIRE(chunks.size() >= 2);
  CHECK(chunks[chunks.size() - 2] + chunks.back() <= 2 * MiB + 5000);
  // A copy that starts and ends far into a file (a moved range) shrinks the same way.
  CHECK(copy_chunk_at(1024 * MiB, 1024 * MiB + 10 * MiB) == 4 * MiB);
}

TEST_CASE("copy_chunk_at: a mid-sized copy goes in chunks of at most 1/32 of it, so its comparison follows closely") {
  constexpr uint64_t MiB = 1ull << 20;
  // A 100 MiB copy: 2 MiB chunks throughout (1/32 of it is 3.1 MiB).
  uint64_t end = 100 * MiB + 5000;
  for (uint64_t at = 0, length = 0; at < end; at += length) {
    length = copy_chunk_at(at, end);
    CHECK(length == std::min(2 * MiB, end - at));
  }
  // A 1 GiB copy: chunks grow to 32 MiB, not 64.
  uint64_t largest = 0;
  for (uint64_t at = 0, length = 0; at < 1024 * MiB; at += length) largest = std::max(largest, length = copy_chunk_at(at, 1024 * MiB));
  CHECK(largest == 32 * MiB);
}

// An output under kReadNotMappedBelow is read back, not mapped: the same checks hold.
TEST_CASE("CopyChecker: a small output, read back rather than mapped, is compared as a mapped one is") {
  static_assert(kReadNotMappedBelow > 64 * 1024 + 4103);
  std::vector<uint8_t> input = random_bytes(64 * 1024 + 17);
  for (bool help : {false, true}) {
    CAPTURE(help);
    CHECK_FALSE(check(input, input, {{0, 0, input.size()}}, help));
    std::vector<uint8_t> moved(input.size() + 4103, 0);
    std::copy(input.begin(), input.end(), moved.begin() + 4103);
    CHECK_FALSE(check(input, moved, {{0, 4103, 4096}, {4096, 4096 + 4103, input.size() - 4096}}, help));
    for (uint64_t at : {uint64_t{0}, uint64_t{4095}, uint64_t{40000}, uint64_t{input.size() - 1}}) {
      CAPTURE(at);
      std::vector<uint8_t> output = input;
      output[at] ^= 0x40;
      std::optional<Error> error = check(input, output, {{0, 0, 4096}, {4096, 4096, input.size() - 4096}}, help);
      REQUIRE(error);
      CHECK(error->offset() == at);
    }
  }
}

TEST_CASE("CopyChecker: a small output shorter than a range copied into it is an error, not a read past its end") {
  std::vector<uint8_t> input = random_bytes(8192);
  // The checker was told the output is 8192 bytes; the file holds 4096 of them.
  Scratch scratch;
  write(scratch.path("in"), input);
  write(scratch.path("out"), std::vector<uint8_t>(input.begin(), input.begin() + 4096));
  MappedFile mapped(scratch.path("in"));
  CopyChecker checker(mapped, scratch.path("out"), input.size());
  checker.submit({0, 0, input.size()});
  try {
    checker.finish();
    FAIL("a range the output does not hold passed");
  } catch (const Error& error) {
    CHECK(error.offset() == 4096);
    CHECK(error.problem() == "the temporary output ends before the copy it should hold");
  }
}

TEST_CASE("CopyChecker: an output that grew or shrank since the checker was made is compared whole") {
  std::vector<uint8_t> small = random_bytes(4096 * 3), large = random_bytes(3 * kMiB);
  for (bool grows : {true, false}) {
    CAPTURE(grows);
    const std::vector<uint8_t>& before = grows ? small : large;
    const std::vector<uint8_t>& after = grows ? large : small;
    Scratch scratch;
    write(scratch.path("in"), after);
    write(scratch.path("out"), before);
    MappedFile mapped(scratch.path("in"));
    CopyChecker checker(mapped, scratch.path("out"), before.size());
    checker.close_submissions();
    checker.help();
    std::vector<uint8_t> written = after;
    written[after.size() / 2] ^= 1;  // the copy went wrong in its middle
    write(scratch.path("out"), written);
    checker.submit({0, 0, after.size()});
    try {
      checker.finish();
      FAIL("a changed byte passed");
    } catch (const Error& error) {
      CHECK(error.offset() == after.size() / 2);
    }
  }
}
