// Times machofix's code-page hashing (core/base/sha.cc) over a file, to compare with
// `sha256sum` over the same bytes. Run by bench/hash_bench.sh, which builds it.
//
//   hash_bench FILE [PAGE_SIZE]
//
// Prints one line per variant: seconds (best of 5) and MB/s.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "core/base/sha.h"

namespace {

double best_of_five(const std::function<void()>& run) {
  double best = 1e9;
  for (int i = 0; i < 5; ++i) {
    auto start = std::chrono::steady_clock::now();
    run();
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count());
  }
  return best;
}

void report(const char* what, double seconds, uint64_t size) {
  std::printf("%-40s %8.3f s %8.0f MB/s\n", what, seconds, size / seconds / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: hash_bench FILE [PAGE_SIZE]\n");
    return 2;
  }
  uint64_t page_size = argc > 2 ? std::strtoull(argv[2], nullptr, 0) : 4096;
  int fd = open(argv[1], O_RDONLY);
  struct stat status {};
  if (fd < 0 || fstat(fd, &status) != 0) {
    std::perror(argv[1]);
    return 1;
  }
  uint64_t size = status.st_size;
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (map == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  machofix::Bytes bytes(static_cast<const uint8_t*>(map), size);
  using machofix::hash_pages;
  using machofix::kHashSha256;

  report("sha256 whole file, one digest", best_of_five([&] { machofix::Hasher(kHashSha256).hash(bytes); }), size);
  report("sha256 per page, 1 thread", best_of_five([&] { hash_pages(bytes, page_size, kHashSha256, 1); }), size);
  report("sha256 per page, 2 threads", best_of_five([&] { hash_pages(bytes, page_size, kHashSha256, 2); }), size);
  report("sha256 per page, automatic (machofix)", best_of_five([&] { hash_pages(bytes, page_size, kHashSha256); }),
         size);
  report("sha1 per page, automatic", best_of_five([&] { hash_pages(bytes, page_size, machofix::kHashSha1); }), size);
  return 0;
}
