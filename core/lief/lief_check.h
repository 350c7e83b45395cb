// A second, independent reading of a rewritten slice by LIEF.
//
// machofix's own reader decides everything; LIEF (an unrelated parser) re-reads each
// output slice and must agree on the load commands, the dependent dylibs, and the
// library every undefined symbol and every bind names. A disagreement means one of
// the two readers is wrong about this file: nothing is written.
#pragma once

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core/format/imports.h"
#include "core/format/macho.h"

namespace machofix {

// LIEF is a plugin loaded on first use (core/lief/lief_plugin_abi.h); this is the file
// that would be loaded, or "not found (tried ...)". Shown by `machofix --version`.
std::string lief_reader_location();

// Loads the plugin on a thread of its own (about 2 ms), unless it is loaded
// already, so that it is ready by the time a pruned Mach-O file is checked; the
// destructor waits for it (a process must not end while dlopen runs the plugin's
// static initialisers). Not for .pte files: a thread created while dlopen runs
// can wait for it (1.2 ms in a test), and the copy of a .pte must start at once;
// its plan loads LIEF when it needs it.
class LiefPreload {
 public:
  LiefPreload();
  ~LiefPreload();
  LiefPreload(const LiefPreload&) = delete;
  LiefPreload& operator=(const LiefPreload&) = delete;

 private:
  std::thread thread_;
};

void cross_check_with_lief(const Bytes& slice, const MachO& ours, const ImportScan& scan);

}  // namespace machofix
