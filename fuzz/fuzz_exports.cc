// libFuzzer target: see run_exports in fuzz/targets.h.
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  machofix::fuzz::run_exports(data, size);
  return 0;
}
