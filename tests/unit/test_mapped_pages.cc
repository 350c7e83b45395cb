// release_mapped_pages: a mapped input's pages go once a pass is done with them (its
// memory does not grow with the file), their bytes stay readable, and memory that is
// not a registered file mapping is never touched.
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/io/file_io.h"
#include "core/base/mapped_pages.h"
#include "core/base/output_image.h"
#include "core/base/sha.h"

using namespace machofix;

namespace {

constexpr uint64_t kSize = 64ull << 20;

// This process's resident memory, in bytes (Linux: /proc/self/statm).
uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t total = 0, resident = 0;
  statm >> total >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

uint64_t checksum(const uint8_t* data, uint64_t size) {
  uint64_t sum = 0;
  for (uint64_t i = 0; i < size; i += 512) sum = sum * 31 + data[i];
  return sum;
}

// A file of `bytes` under /tmp, removed with the object.
struct ScratchFile {
  std::string path;
  ScratchFile(const std::string& name, const std::vector<uint8_t>& bytes)
      : path("/tmp/machofix-" + name + "-" + std::to_string(getpid())) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  ~ScratchFile() { std::remove(path.c_str()); }
};

}  // namespace

TEST_CASE("release_mapped_pages drops a mapped file's pages, which stay readable") {
  ScratchFile scratch("mapped-pages", [] {
    std::vector<uint8_t> pattern(kSize);
    for (uint64_t i = 0; i < kSize; ++i) pattern[i] = static_cast<uint8_t>(i * 7 + i / 4096);
    return pattern;
  }());
  {
    MappedFile file(scratch.path);
    uint64_t before = checksum(file.bytes().data(), kSize);  // every page touched
    uint64_t touched = resident_bytes();
    release_mapped_pages(file.bytes().data(), kSize);
#ifdef __linux__
    CHECK(touched - resident_bytes() > kSize / 2);
#endif
    CHECK(checksum(file.bytes().data(), kSize) == before);
  }
}

TEST_CASE("release_mapped_pages lets go only of the blocks a pass has moved past") {
  constexpr uint64_t kMiB = 1ull << 20;
  ScratchFile scratch("passed-blocks", std::vector<uint8_t>(kSize, 5));
  {
    MappedFile file(scratch.path);
    const uint8_t* data = file.bytes().data();
    checksum(data, kSize);  // every page touched
    uint64_t touched = resident_bytes();
    // Short passes, as over a blob's unchanged ranges one by one: every page stays.
    for (uint64_t at = 3 * kMiB + 100; at < 3 * kMiB + 64 * 4096; at += 4096) release_mapped_pages(data + at, 1000);
#ifdef __linux__
    CHECK(touched - resident_bytes() < kMiB / 4);
#endif
    // A pass from 1 MiB to 9 MiB: the blocks behind it go, the one it is in stays.
    uint64_t before = resident_bytes();
    release_mapped_pages(data + kMiB, 8 * kMiB);
#ifdef __linux__
    uint64_t dropped = before - resident_bytes();
    CHECK(dropped >= 5 * kMiB);
    CHECK(dropped <= 9 * kMiB);
#endif
    CHECK(checksum(data, kSize) == checksum(std::vector<uint8_t>(kSize, 5).data(), kSize));
  }
}

TEST_CASE("hashing every page of a mapped file costs no memory for the file") {
  ScratchFile scratch("hashed-pages", std::vector<uint8_t>(kSize, 1));
  {
    MappedFile file(scratch.path);
    uint64_t before = resident_bytes();
    std::vector<uint8_t> hashes = hash_pages(file.bytes(), 4096, kHashSha256);
    CHECK(hashes.size() == kSize / 4096 * 32);
#ifdef __linux__
    CHECK(resident_bytes() < before + kSize / 4);
#endif
  }
}

TEST_CASE("a digest of a whole mapped file (a .pte blob's key) costs no memory for the file") {
  ScratchFile scratch("digest-pages", std::vector<uint8_t>(kSize, 2));
  {
    MappedFile file(scratch.path);
    uint64_t before = resident_bytes();
    std::string digest = sha256_hex(file.bytes());
    uint64_t after = resident_bytes();
    std::vector<uint8_t> twos(kSize, 2);
    CHECK(digest == sha256_hex(Bytes(twos)));
#ifdef __linux__
    CHECK(after < before + kSize / 4);
#endif
  }
}

TEST_CASE("a digest of an image borrowing a mapped file's middle costs no memory for that middle") {
  ScratchFile scratch("digest-image", std::vector<uint8_t>(kSize, 3));
  {
    MappedFile file(scratch.path);
    OutputImage image = OutputImage::borrowing(file.bytes(), 4096, kSize - 4096, 0);
    REQUIRE(image.borrowed_size() == kSize - 2 * 4096);
    image.data()[10] = 4;  // the private head differs from the file
    uint64_t before = resident_bytes();
    std::string digest = sha256_hex(image.bytes());
    uint64_t after = resident_bytes();
    std::vector<uint8_t> expected(kSize, 3);
    expected[10] = 4;
    CHECK(digest == sha256_hex(Bytes(expected)));
#ifdef __linux__
    CHECK(after < before + kSize / 4);
#endif
  }
}

TEST_CASE("release_mapped_pages leaves memory alone that is no registered mapping") {
  // Page-aligned, as an OutputImage's private pages are: a release of them would
  // succeed (and zero them), where an unaligned vector's would be refused anyway.
  void* mapped = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mapped != MAP_FAILED);
  uint8_t* built = static_cast<uint8_t*>(mapped);
  std::fill(built, built + kSize, 0xab);
  release_mapped_pages(built, kSize);
  CHECK(std::all_of(built, built + kSize, [](uint8_t byte) { return byte == 0xab; }));
  munmap(mapped, kSize);
}

namespace {

// Knows a made-up hash for every page before `first_unknown` and after `last_unknown`.
class KnowsAllBut : public KnownPageHashes {
 public:
  KnowsAllBut(uint64_t first_unknown, uint64_t last_unknown) : first_(first_unknown), last_(last_unknown) {}
  const uint8_t* find(const uint8_t*, uint64_t, uint64_t index, uint64_t, uint8_t) const override {
    return index >= first_ && index <= last_ ? nullptr : hash_.data();
  }
  const std::vector<uint8_t>& hash() const { return hash_; }

 private:
  uint64_t first_, last_;
  std::vector<uint8_t> hash_ = std::vector<uint8_t>(32, 0x5a);
};

}  // namespace

TEST_CASE("hash_pages reads no part of a mapped file whose page hashes are all known") {
  constexpr uint64_t kFile = 4ull << 20, kPages = kFile / 4096;
  ScratchFile scratch("known-pages", std::vector<uint8_t>(kFile, 1));
  {
    MappedFile file(scratch.path);
    // Two threads agree with one when the pages to hash lie in one half only.
    KnowsAllBut second_half(kPages / 2, kPages);
    CHECK(hash_pages(file.bytes(), 4096, kHashSha256, 2, &second_half) ==
          hash_pages(file.bytes(), 4096, kHashSha256, 1, &second_half));
    // Cut short under the mapping: a read fails, so only a pass that reads nothing succeeds.
    REQUIRE(truncate(scratch.path.c_str(), 0) == 0);
    KnowsAllBut every(kPages, kPages);
    std::vector<uint8_t> hashes = hash_pages(file.bytes(), 4096, kHashSha256, 0, &every);
    REQUIRE(hashes.size() == kPages * 32);
    CHECK(std::equal(hashes.end() - 32, hashes.end(), every.hash().begin()));
    KnowsAllBut all_but_one(700, 700);
    CHECK_THROWS_WITH_AS(hash_pages(file.bytes(), 4096, kHashSha256, 0, &all_but_one),
                         doctest::Contains("the file changed while it was read"), Error);
  }
}

TEST_CASE("a small file only read back is read into memory, not mapped; an input is always mapped") {
  for (uint64_t size : {uint64_t{1}, uint64_t{70000}, kReadNotMappedBelow - 1, kReadNotMappedBelow}) {
    CAPTURE(size);
    std::vector<uint8_t> bytes(size);
    std::iota(bytes.begin(), bytes.end(), uint8_t{3});
    ScratchFile scratch("read-back", bytes);
    MappedFile read_back(scratch.path, SmallFile::Read), input(scratch.path);
    const uint8_t* read = read_back.bytes().data();
    CHECK(std::equal(bytes.begin(), bytes.end(), read, read + read_back.size()));
    // A file mapping is registered (its pages can be borrowed and let go); memory read into is not.
    CHECK(file_behind(read_back.bytes().data(), size).has_value() == (size >= kReadNotMappedBelow));
    CHECK(file_behind(input.bytes().data(), size).has_value());
  }
}
