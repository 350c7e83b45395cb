// The second, independent reader every rewritten slice must satisfy.
//
// machofix's own reader decides everything; a second parser (LIEF, core/lief/lief_check.h)
// re-reads each output slice and must agree with it, or nothing is written. The
// rewriters (prune, edit, weak link) are handed it by whoever runs them (core/jobs/job.cc
// for the command line and every front end) rather than knowing how it is loaded: it
// throws Error when it disagrees with `ours`, the slice as machofix re-read it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/base/proof_seam.h"
#include "core/format/imports.h"
#include "core/format/macho.h"

namespace machofix {

using SecondReader = std::function<void(const Bytes& slice, const MachO& ours, const ImportScan& scan)>;

// A rewritten slice read again, as its proof reads it (the proof seam may hand a
// spoiled copy, kept in `spoiled`: core/base/proof_seam.h).
inline MachO reread_output(const Bytes& after, std::vector<uint8_t>& spoiled) {
  return parse_macho(seam::offer(seam::ProofStep::Reread, after, spoiled));
}

// The reader, or an internal error when the caller gave none: a rewrite is never
// written unproven.
inline const SecondReader& required(const SecondReader& reader) {
  if (!reader) fail("internal error: no second reader to cross-check the rewrite (RepairOptions::second_reader)");
  return reader;
}

}  // namespace machofix
