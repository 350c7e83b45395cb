// libFuzzer target: see run_tbd in fuzz/targets.h.
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  machofix::fuzz::run_tbd(data, size);
  return 0;
}
