// RepairOptions as every front end gets them from run_job: LIEF is the second reader
// of each rewrite (core/rewrite/second_reader.h). Tests that call the rewriters directly
// start from these.
#pragma once

#include "core/lief/lief_check.h"
#include "core/rewrite/macho_repair.h"

namespace machofix::test {

inline RepairOptions checked(RepairOptions options = {}) {
  options.second_reader = cross_check_with_lief;
  return options;
}

}  // namespace machofix::test
