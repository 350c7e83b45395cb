// OutputImage: a rewritten slice whose code and data are borrowed from the input file
// (read only, costing no memory until read), whose head and tail are private copies,
// and whose bytes equal the input's until a rewrite writes them.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/base/mapped_pages.h"
#include "core/base/output_image.h"
#include "core/io/file_io.h"

using namespace machofix;

namespace {

constexpr uint64_t kSize = 1ull << 20;
constexpr uint64_t kPage = 4096;

// A file of kSize patterned bytes, removed with the object.
struct PatternFile {
  std::string path = "/tmp/machofix-output-image-" + std::to_string(getpid());
  std::vector<uint8_t> bytes;
  PatternFile() : bytes(kSize) {
    for (uint64_t i = 0; i < kSize; ++i) bytes[i] = static_cast<uint8_t>(i * 13 + i / 4096);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), kSize);
  }
  ~PatternFile() { std::remove(path.c_str()); }
};

bool equals(const OutputImage& image, const uint8_t* data, uint64_t size) {
  return image.size() == size && std::equal(image.data(), image.data() + size, data);
}

}  // namespace

TEST_CASE("an image borrows the whole pages between head and tail from the file, and equals the input") {
  PatternFile pattern;
  MappedFile file(pattern.path);
  OutputImage image = OutputImage::borrowing(file.bytes(), 100, kSize - 5000, 64);
  CHECK(equals(image, pattern.bytes.data(), kSize));
  REQUIRE(image.borrowed().size() == 1);
  const OutputImage::Borrowed& middle = image.borrowed().front();
  CHECK(middle.from == kPage);                              // the head's page stays private
  CHECK(middle.to == (kSize - 5000) / kPage * kPage);       // so does the page where the tail starts
  CHECK(middle.file_offset == middle.from);
  CHECK(middle.fd == file.fd());
  CHECK(same_file_bytes(image.data() + middle.from, file.bytes().data() + middle.from, middle.size()));
  CHECK_FALSE(same_file_bytes(image.data() + middle.from, file.bytes().data() + middle.from + kPage, kPage));

  // The head and the tail are the rewrite's to write; the file stays as it was.
  image.data()[50] ^= 0xff;
  image.data()[kSize - 10] ^= 0xff;
  image.resize(kSize + 64);
  CHECK(image.data()[kSize + 63] == 0);
  CHECK(file.bytes().data()[50] == pattern.bytes[50]);
  CHECK_THROWS_AS(image.resize(kSize + 65), Error);   // past the room asked for
  CHECK_THROWS_AS(image.resize(middle.to - 1), Error);  // into the borrowed middle
}

TEST_CASE("a write into a borrowed page faults instead of changing what is proven unchanged") {
  PatternFile pattern;
  MappedFile file(pattern.path);
  OutputImage image = OutputImage::borrowing(file.bytes(), kPage, kSize - kPage, 0);
  REQUIRE(!image.borrowed().empty());
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::signal(SIGSEGV, SIG_DFL);  // not the test framework's handler: the parent judges
    image.data()[kSize / 2] = 0;
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGSEGV);
}

TEST_CASE("bytes that are no file mapping are copied whole") {
  std::vector<uint8_t> bytes(kSize, 0x5a);
  OutputImage image = OutputImage::borrowing(Bytes(bytes), kPage, kSize - kPage, 0);
  CHECK(image.borrowed().empty());
  CHECK(equals(image, bytes.data(), kSize));
  image.data()[kSize / 2] = 1;  // all of it is private
  CHECK(bytes[kSize / 2] == 0x5a);
  CHECK_FALSE(same_file_bytes(image.data(), bytes.data(), kPage));
}

TEST_CASE("a slice put into a larger image keeps borrowing where the pages line up") {
  PatternFile pattern;
  MappedFile file(pattern.path);
  OutputImage slice = OutputImage::borrowing(file.bytes(), kPage, kSize - kPage, 0);
  OutputImage whole = OutputImage::zeroed(3 * kSize + kPage);
  whole.put_image(kSize, slice);  // page-aligned: the middle stays borrowed, at the same file offsets
  CHECK(whole.borrowed_size() == slice.borrowed_size());
  CHECK(whole.borrowed().front().file_offset == slice.borrowed().front().file_offset);
  whole.put_image(2 * kSize + 1, slice);
  CHECK(whole.borrowed().size() == 1);  // one byte off a page boundary: copied
  CHECK(std::equal(whole.data() + kSize, whole.data() + 2 * kSize, pattern.bytes.data()));
  CHECK(std::equal(whole.data() + 2 * kSize + 1, whole.data() + 3 * kSize + 1, pattern.bytes.data()));
  CHECK(whole.data()[0] == 0);
  CHECK_THROWS_AS(whole.put_image(kSize + kPage, slice), Error);  // over a borrowed range
}

TEST_CASE("first_difference finds a change next to borrowed bytes") {
  PatternFile pattern;
  MappedFile file(pattern.path);
  OutputImage image = OutputImage::borrowing(file.bytes(), kPage, kSize - kPage, 0);
  CHECK_FALSE(first_difference(image.data(), file.bytes().data(), 0, kSize));
  image.data()[kSize - 3] ^= 1;
  CHECK(first_difference(image.data(), file.bytes().data(), 0, kSize) == kSize - 3);
  std::vector<uint8_t> copy = image.to_vector();
  copy[kSize / 2] ^= 1;  // a copy is compared byte for byte, borrowed or not
  CHECK(first_difference(copy.data(), file.bytes().data(), 0, kSize) == kSize / 2);
}

TEST_CASE("a pass over an image stops at the edges of its borrowed range") {
  PatternFile pattern;
  MappedFile file(pattern.path);
  OutputImage image = OutputImage::borrowing(file.bytes(), kPage, kSize - kPage, 0);
  const uint8_t* start = image.data();
  // The private head runs up to the borrowed middle, which runs to its own end.
  CHECK(mapping_uniform_extent(start, kSize) == kPage);
  CHECK(mapping_uniform_extent(start + 100, kSize) == kPage - 100);
  CHECK(mapping_uniform_extent(start + kPage, kSize) == kSize - 2 * kPage);
  CHECK(mapping_uniform_extent(start + kPage, 10) == 10);
  CHECK(mapping_uniform_extent(start + kSize - kPage, kPage) == kPage);
  // So first_difference compares the head alone and proves the middle without reading it.
  image.data()[kPage - 1] ^= 1;
  CHECK(first_difference(image.data(), file.bytes().data(), 0, kSize) == kPage - 1);
  CHECK(first_difference(image.data(), file.bytes().data(), kPage, kSize) == std::nullopt);
}
