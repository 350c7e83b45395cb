// release_mapped_pages: a mapped input's pages go once a pass is done with them (its
// memory does not grow with the file), their bytes stay readable, and memory that is
// not a registered file mapping is never touched.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "core/io/file_io.h"
#include "core/base/mapped_pages.h"
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

}  // namespace

TEST_CASE("release_mapped_pages drops a mapped file's pages, which stay readable") {
  std::string path = "/tmp/machofix-mapped-pages-" + std::to_string(getpid());
  {
    std::vector<uint8_t> pattern(kSize);
    for (uint64_t i = 0; i < kSize; ++i) pattern[i] = static_cast<uint8_t>(i * 7 + i / 4096);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(pattern.data()), kSize);
  }
  {
    MappedFile file(path);
    uint64_t before = checksum(file.bytes().data(), kSize);  // every page touched
    uint64_t touched = resident_bytes();
    release_mapped_pages(file.bytes().data(), kSize);
#ifdef __linux__
    CHECK(touched - resident_bytes() > kSize / 2);
#endif
    CHECK(checksum(file.bytes().data(), kSize) == before);
  }
  std::remove(path.c_str());
}

TEST_CASE("hashing every page of a mapped file costs no memory for the file") {
  std::string path = "/tmp/machofix-hashed-pages-" + std::to_string(getpid());
  {
    std::vector<uint8_t> zeros(kSize, 1);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(zeros.data()), kSize);
  }
  {
    MappedFile file(path);
    uint64_t before = resident_bytes();
    std::vector<uint8_t> hashes = hash_pages(file.bytes(), 4096, kHashSha256);
    CHECK(hashes.size() == kSize / 4096 * 32);
#ifdef __linux__
    CHECK(resident_bytes() < before + kSize / 4);
#endif
  }
  std::remove(path.c_str());
}

TEST_CASE("release_mapped_pages leaves memory alone that is no registered mapping") {
  std::vector<uint8_t> built(kSize, 0xab);
  release_mapped_pages(built.data(), built.size());
  CHECK(std::all_of(built.begin(), built.end(), [](uint8_t byte) { return byte == 0xab; }));
}
