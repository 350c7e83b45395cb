// write_macho_file over the early copy of its input (core/io/copy_ahead.h): whether
// the rewrite keeps every borrowed range where it was (written over the copy, the file
// cut or extended to the new size) or moves one (the copy abandoned from there, the
// rest written again), or the early copy followed a plan of where ranges go, right or
// wrong, the file written is the image, byte for byte.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <fcntl.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tests/support/thrown.h"
#include "core/base/copied_range.h"
#include "core/base/error.h"
#include "core/base/proof_seam.h"
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
// `plan`: where the early copy puts the input (empty: all of it in place).
void write_image(const MappedFile& input, const std::string& path, const OutputImage& image,
                 std::vector<CopiedRange> plan = {}) {
  CopiedOutput output(input, path, /*durable=*/false, ByteProgress{}, std::move(plan));
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

// Writes `image` as write_image does and checks that the file written is the image.
void check_writes(const MappedFile& input, const std::string& path, const OutputImage& image,
                  std::vector<CopiedRange> plan = {}) {
  write_image(input, path, image, std::move(plan));
  CHECK(pte_test::read_file(path) == image.to_vector());
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Runs `test(input, output_path)` on an input of random bytes of each size: below and
// above kThreadedCopyMinimum (the early copy in the caller, and on a thread).
template <typename Test>
void for_each_input(Test test) {
  for (uint64_t size : {uint64_t(20) * kPage, uint64_t(640) * kPage}) {
    CAPTURE(size);
    WriteScratch scratch(size);
    MappedFile input(scratch.input_path);
    test(input, scratch.output_path);
  }
}

}  // namespace

TEST_CASE("write_macho_file: a rewrite that keeps the borrowed ranges in place, at the same size, grown or shrunk") {
  for_each_input([](const MappedFile& input, const std::string& output) {
    for (int64_t grow : {int64_t(0), int64_t(5000), int64_t(-3000)}) {
      CAPTURE(grow);
      check_writes(input, output, rewritten_in_place(input, grow));
    }
  });
}

TEST_CASE("write_macho_file: a rewrite that moves a borrowed range (a universal file laid out again)") {
  for_each_input([](const MappedFile& input, const std::string& output) {
    // The whole input one page further on, after a new header.
    OutputImage image = OutputImage::zeroed(input.size() + kPage);
    std::fill(image.data(), image.data() + 64, uint8_t(0xca));
    image.put_bytes_of(kPage, input.bytes());
    REQUIRE(image.borrowed_size() > 0);
    check_writes(input, output, image);
  });
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
  for_each_input([](const MappedFile& input, const std::string& output) {
    check_writes(input, output, first_half_kept(input, 3 * kPage));
  });
}

// Writing `image` fails on the copy it spoils, and leaves no output.
void check_refused(const MappedFile& input, const std::string& output, const OutputImage& image,
                   std::vector<CopiedRange> plan = {}) {
  std::optional<Error> error = test::thrown([&] { write_image(input, output, image, std::move(plan)); });
  REQUIRE(error);
  CHECK(error->problem().find("which it copies") != std::string::npos);
  CHECK(error->kind() == ErrorKind::ProofFailed);
  CHECK_FALSE(exists(output));
}

TEST_CASE("write_macho_file: a range that stays in place is refused when its early copy is wrong, a moved one when its copy is") {
  for_each_input([](const MappedFile& input, const std::string& output) {
    uint64_t size = input.size(), half = size / 2;
    for (uint64_t spoiled : {uint64_t(17), half - 5, half + 3 * kPage + 9, size + 3 * kPage - 1}) {
      CAPTURE(spoiled);
      SpoiledCopies spoiling(spoiled);
      check_refused(input, output, first_half_kept(input, 3 * kPage));
    }
  });
}

TEST_CASE("write_macho_file: a borrowed range copied wrong is refused, the early copy or the copy after a move") {
  for_each_input([](const MappedFile& input, const std::string& output) {
    uint64_t size = input.size();
    for (bool moved : {false, true}) {
      CAPTURE(moved);
      OutputImage image = OutputImage::zeroed(moved ? size + kPage : size);
      image.put_bytes_of(moved ? kPage : 0, input.bytes());
      REQUIRE(image.borrowed_size() > 0);
      // Moved: a byte past the input's size, which only the copy after the move writes.
      SpoiledCopies spoiled(moved ? size + 17 : 3 * kPage + 17);
      check_refused(input, output, image);
    }
  });
}

// ------------------------------------------------- an early copy that follows a plan

namespace {

// The early copy's plan for first_half_kept: the first half in place, the second
// `shift` bytes further on.
std::vector<CopiedRange> halves_plan(const MappedFile& input, uint64_t shift) {
  uint64_t half = input.size() / 2 / kPage * kPage;
  return {{0, 0, half}, {half, half + shift, input.size() - half}};
}

// How many bytes were copied into the output (by the early copy and the writer) while
// the object lives: the proof seam's Copy step sees every copied chunk.
struct CountedCopies {
  static inline uint64_t bytes = 0;
  static void count(seam::ProofStep step, const std::string&, uint64_t, uint64_t length) {
    if (step == seam::ProofStep::Copy) bytes += length;
  }
  CountedCopies() {
    bytes = 0;
    seam::install(nullptr, count);
  }
  ~CountedCopies() { seam::install(nullptr, nullptr); }
  CountedCopies(const CountedCopies&) = delete;
  CountedCopies& operator=(const CountedCopies&) = delete;
};

}  // namespace

TEST_CASE("held_by: the part of an output range that ranges already placed hold, the input's bytes at that offset") {
  std::vector<CopiedRange> placed = {{0, 0, 100}, {100, 150, 50}};
  CHECK(held_by(placed, 10, 10, 20) == 20);
  CHECK(held_by(placed, 80, 80, 40) == 20);    // up to the range's end
  CHECK(held_by(placed, 110, 160, 100) == 40);  // a moved range, at its own distance
  CHECK(held_by(placed, 160, 160, 10) == 0);    // other bytes of the input are there
  CHECK(held_by(placed, 120, 120, 10) == 0);    // nothing is there
  CHECK(held_by(placed, 5, 15, 10) == 0);
}

TEST_CASE("first_unheld: where an output first wants what the plan does not put there") {
  std::vector<CopiedRange> in_place = in_place_plan(1000);
  CHECK(first_unheld(in_place, {{0, 0, 100}, {200, 200, 800}}) == UINT64_MAX);
  CHECK(first_unheld(in_place, {{0, 0, 100}, {200, 300, 700}}) == 300);
  CHECK(first_unheld(in_place, {{0, 0, 1000}, {1000, 1000, 10}}) == 1000);  // past the plan's end
  std::vector<CopiedRange> moved = {{0, 0, 500}, {500, 600, 500}};
  CHECK(first_unheld(moved, {{0, 0, 500}, {500, 600, 500}}) == UINT64_MAX);
  CHECK(first_unheld(moved, {{0, 0, 500}, {500, 700, 500}}) == 700);
}

TEST_CASE("write_macho_file: a moved range the early copy put where it goes is copied once, and kept") {
  for_each_input([](const MappedFile& input, const std::string& output) {
    CountedCopies counted;
    check_writes(input, output, first_half_kept(input, 3 * kPage), halves_plan(input, 3 * kPage));
    CHECK(CountedCopies::bytes == input.size());  // without the plan: the second half twice
  });
}

TEST_CASE("write_macho_file: an early copy whose plan guessed wrong is written over where it is wrong") {
  for_each_input([](const MappedFile& input, const std::string& output) {
    for (uint64_t planned : {uint64_t(0), 1 * kPage, 5 * kPage}) {
      CAPTURE(planned);
      check_writes(input, output, first_half_kept(input, 3 * kPage), halves_plan(input, planned));
    }
  });
}

TEST_CASE("write_macho_file: a range the early copy moved is refused when its copy is wrong") {
  for_each_input([](const MappedFile& input, const std::string& output) {
    SpoiledCopies spoiled(input.size() + 3 * kPage - 1);  // the moved half's last byte
    check_refused(input, output, first_half_kept(input, 3 * kPage), halves_plan(input, 3 * kPage));
  });
}
