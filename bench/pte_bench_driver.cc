// Stand-in for `machofix prune IN -o OUT` on a .pte/.ptd, for bench/pte_bench.sh
// while the CLI does not take .pte files: the same library call, nothing else.
#include <cstdio>

#include "core/pte.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: pte_bench_driver IN.pte OUT.pte\n");
    return 2;
  }
  try {
    machofix::MappedFile input(argv[1]);
    machofix::PteReport report = machofix::repair_pte(input, argv[2], machofix::RepairOptions{}, false);
    std::printf("%zu blob(s), changed %d, %llu -> %llu bytes\n", report.blobs.size(), report.changed,
                static_cast<unsigned long long>(report.file_size), static_cast<unsigned long long>(report.output_size));
  } catch (machofix::Error& error) {
    std::fprintf(stderr, "%s\n", error.in_file(argv[1]).describe().c_str());
    return 1;
  }
  return 0;
}
