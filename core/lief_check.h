// A second, independent reading of a rewritten slice by LIEF.
//
// machofix's own reader decides everything; LIEF (an unrelated parser) re-reads each
// output slice and must agree on the load commands, the dependent dylibs, and the
// library every undefined symbol and every bind names. A disagreement means one of
// the two readers is wrong about this file: nothing is written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/imports.h"
#include "core/macho.h"

namespace machofix {

// LIEF is a plugin loaded on first use (core/lief_plugin_abi.h); this is the file
// that would be loaded, or "not found (tried ...)". Shown by `machofix --version`.
std::string lief_reader_location();

// Loads the plugin on a background thread (about 2 ms), once per process, so that
// it is ready by the time a pruned Mach-O file is checked. Not for .pte files: a
// thread created while dlopen runs can wait for it (1.2 ms in a test), and the
// copy of a .pte must start at once; its plan loads LIEF when it needs it.
void start_loading_lief_reader();

void cross_check_with_lief(const std::vector<uint8_t>& slice, const MachO& ours, const ImportScan& scan);

}  // namespace machofix
