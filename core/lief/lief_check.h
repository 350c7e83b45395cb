// A second, independent reading of a rewritten slice by LIEF.
//
// machofix's own reader decides everything; LIEF (an unrelated parser) re-reads each
// output slice and must agree on the load commands (kind, place, size), the dependent
// dylibs, every symbol-table entry and the library of every undefined one, and every
// bind and lazy bind of the dyld-info streams (symbol, library, weak import). A
// disagreement means one of the two readers is wrong about this file: nothing is
// written. LIEF reads the slice's skeleton (core/lief/lief_skeleton.h): the load
// commands and __LINKEDIT, not the contents of the other segments, which neither
// comparison looks at; its cost is the size of the load commands plus LIEF's own
// copy of __LINKEDIT, not the size of the file.
#pragma once

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core/format/imports.h"
#include "core/format/macho.h"
#include "core/lief/lief_reading.h"

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

// Throws Error ("LIEF reads the rewritten slice differently, nothing written: ...")
// when LIEF's reading of `slice` differs from `ours` (machofix's reading of the same
// bytes) and `scan` (its imports).
void cross_check_with_lief(const Bytes& slice, const MachO& ours, const ImportScan& scan);
// The comparison alone, of a reading LIEF made of some image of the slice `ours` read
// (tests, benchmarks: of the whole slice, of a skeleton).
// binds_read false: LIEF was asked to read no bind (read_with_lief), so they are not compared.
void compare_lief_reading(const LiefView& lief, const MachO& ours, const ImportScan& scan, bool binds_read = true);

// Whether LIEF 0.9 reads the slice's binds in bounded time. It reads them one bound
// address at a time (repeat counts expanded) and searches its symbols for each
// (BinaryParser::do_bind): a crafted 94 KB file took it 93 s. Beyond about 2^28
// symbol comparisons or 2^20 bound addresses (LIEF keeps an object for each), or a
// bound symbol name over 4 KiB (no linker writes one),
// LIEF reads the load commands and symbols only, and the binds are checked by
// machofix's own re-read of the output alone.
bool lief_reads_binds_in_bounded_time(const MachO& ours, const ImportScan& scan);

}  // namespace machofix
