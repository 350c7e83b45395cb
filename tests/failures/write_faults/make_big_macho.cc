// Writes a large, valid Mach-O for the write-fault tests (tests/failures/write_faults/test_faults.py):
//
//   make_big_macho OUT MEBIBYTES
//
// An x86_64 dylib (unsigned, so that nothing but the size makes it slow to write)
// with a __text section of MEBIBYTES MiB and one unused dylib that `prune` removes,
// so both `prune -o` and `prune --in-place` write a file of the same size.
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "fuzz/sample_images.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: make_big_macho OUT MEBIBYTES\n";
    return 2;
  }
  uint64_t size = std::strtoull(argv[2], nullptr, 0) << 20;
  std::vector<uint8_t> text(size);
  for (uint64_t i = 0; i < size; ++i) text[i] = static_cast<uint8_t>(0x90 + (i >> 12));  // a different byte per page
  machofix::test::Image image =
      machofix::samples::dyld_info_dylib(machofix::macho::CPU_TYPE_X86_64).text(std::move(text)).build();
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(image.bytes.data()), static_cast<std::streamsize>(image.bytes.size()));
  if (!out.flush()) {
    std::cerr << "make_big_macho: cannot write " << argv[1] << "\n";
    return 1;
  }
  return 0;
}
