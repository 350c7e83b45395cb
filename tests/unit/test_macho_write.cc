// write_macho_file over the early copy of its input (core/io/copy_ahead.h): whether
// the rewrite keeps every borrowed range where it was (written over the copy, the file
// cut or extended to the new size) or moves one (the copy abandoned, everything
// written again), the file written is the image, byte for byte.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <fcntl.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/base/output_image.h"
#include "core/io/copy_ahead.h"
#include "core/io/macho_write.h"
#include "tests/pte/pte_writer.h"
#include "tests/support/spoiled_copies.h"

using namespace machofix;
using machofix::test::SpoiledCopies;

namespace {

constexpr uint64_t kPage = 16384;

// An input file of `size` random bytes and the output path beside it, both removed
// with the object.
struct WriteScratch {
  std::string input_path, output_path;
  explicit WriteScratch(uint64_t size) {
    std::string stem = "/tmp/machofix-macho-write-" + std::to_string(getpid()) + "-" + std::to_string(size);
    input_path = stem + ".in", output_path = stem + ".out";
    std::mt19937_64 generator(size);
    std::vector<char> bytes(size);
    for (char& byte : bytes) byte = static_cast<char>(generator());
    std::ofstream(input_path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(size));
  }
  ~WriteScratch() {
    std::remove(input_path.c_str());
    std::remove(output_path.c_str());
  }
};

// Writes `image` of `input` the way a job does: the output made (and its copy started)
// before the image, then written and committed.
void write_image(const MappedFile& input, const std::string& path, const OutputImage& image) {
  CopiedOutput output(input, path, /*durable=*/false);
  write_macho_file(input, image, output, nullptr);
}

// A slice rewritten in its head and tail, its middle borrowed, `grow` bytes longer
// (or shorter) at its end.
OutputImage rewritten_in_place(const MappedFile& input, int64_t grow) {
  uint64_t size = input.size();
  OutputImage image = OutputImage::borrowing(input.bytes(), kPage, size - 2 * kPage, grow > 0 ? uint64_t(grow) : 0);
  REQUIRE(image.borrowed_size() > 0);
  std::fill(image.data() + 100, image.data() + 200, uint8_t(0xa5));
  image.resize(static_cast<uint64_t>(static_cast<int64_t>(size) + grow));
  std::fill(image.data() + size - 2 * kPage, image.data() + image.size(), uint8_t(0x5a));
  return image;
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

}  // namespace

TEST_CASE("write_macho_file: a rewrite that keeps the borrowed ranges in place, at the same size, grown or shrunk") {
  // Below and above kThreadedCopyMinimum: the early copy in the caller, and on a thread.
  for (uint64_t size : {uint64_t(20) * kPage, uint64_t(640) * kPage}) {
    for (int64_t grow : {int64_t(0), int64_t(5000), int64_t(-3000)}) {
      CAPTURE(size);
      CAPTURE(grow);
      WriteScratch scratch(size);
      MappedFile input(scratch.input_path);
      OutputImage image = rewritten_in_place(input, grow);
      write_image(input, scratch.output_path, image);
      CHECK(pte_test::read_file(scratch.output_path) == image.to_vector());
    }
  }
}

TEST_CASE("write_macho_file: a rewrite that moves a borrowed range (a universal file laid out again)") {
  for (uint64_t size : {uint64_t(20) * kPage, uint64_t(640) * kPage}) {
    CAPTURE(size);
    WriteScratch scratch(size);
    MappedFile input(scratch.input_path);
    // The whole input one page further on, after a new header.
    OutputImage image = OutputImage::zeroed(size + kPage);
    std::fill(image.data(), image.data() + 64, uint8_t(0xca));
    image.put_bytes_of(kPage, input.bytes());
    REQUIRE(image.borrowed_size() > 0);
    write_image(input, scratch.output_path, image);
    CHECK(pte_test::read_file(scratch.output_path) == image.to_vector());
  }
}

// A universal file whose first slice grew: the input's first half stays where it was,
// its second half goes `shift` bytes further on (a new signature before it).
OutputImage first_half_kept(const MappedFile& input, uint64_t shift) {
  uint64_t half = input.size() / 2 / kPage * kPage;
  OutputImage image = OutputImage::zeroed(input.size() + shift);
  image.put_bytes_of(0, input.bytes().sub(0, half, "first half"));
  std::fill(image.data() + half, image.data() + half + shift, uint8_t(0x77));
  image.put_bytes_of(half + shift, input.bytes().sub(half, input.size() - half, "second half"));
  REQUIRE(image.borrowed().size() == 2);
  return image;
}

TEST_CASE("write_macho_file: a rewrite that keeps its first range in place and moves the next") {
  for (uint64_t size : {uint64_t(20) * kPage, uint64_t(640) * kPage}) {
    CAPTURE(size);
    WriteScratch scratch(size);
    MappedFile input(scratch.input_path);
    OutputImage image = first_half_kept(input, 3 * kPage);
    write_image(input, scratch.output_path, image);
    CHECK(pte_test::read_file(scratch.output_path) == image.to_vector());
  }
}

TEST_CASE("write_macho_file: a range that stays in place is refused when its early copy is wrong, a moved one when its copy is") {
  for (uint64_t size : {uint64_t(20) * kPage, uint64_t(640) * kPage}) {
    uint64_t half = size / 2;
    for (uint64_t spoiled : {uint64_t(17), half - 5, half + 3 * kPage + 9, size + 3 * kPage - 1}) {
      CAPTURE(size);
      CAPTURE(spoiled);
      WriteScratch scratch(size);
      MappedFile input(scratch.input_path);
      OutputImage image = first_half_kept(input, 3 * kPage);
      SpoiledCopies spoiling(spoiled);
      CHECK_THROWS_WITH_AS(write_image(input, scratch.output_path, image), doctest::Contains("which it copies"),
                           const Error&);
      CHECK_FALSE(exists(scratch.output_path));
    }
  }
}

TEST_CASE("write_macho_file: a borrowed range copied wrong is refused, the early copy or the copy after a move") {
  for (uint64_t size : {uint64_t(20) * kPage, uint64_t(640) * kPage}) {
    for (bool moved : {false, true}) {
      CAPTURE(size);
      CAPTURE(moved);
      WriteScratch scratch(size);
      MappedFile input(scratch.input_path);
      OutputImage image = OutputImage::zeroed(moved ? size + kPage : size);
      image.put_bytes_of(moved ? kPage : 0, input.bytes());
      REQUIRE(image.borrowed_size() > 0);
      // Moved: a byte past the input's size, which only the copy after the move writes.
      SpoiledCopies spoiled(moved ? size + 17 : 3 * kPage + 17);
      CHECK_THROWS_WITH_AS(write_image(input, scratch.output_path, image),
                           doctest::Contains("which it copies"), const Error&);
      CHECK_FALSE(exists(scratch.output_path));
    }
  }
}
