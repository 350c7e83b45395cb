// A seam for the tests that prove each proof step refuses a wrong rewrite.
//
// Every rewrite is re-read and proven before it is written; a test that never sees a
// proof step refuse anything cannot tell a working step from one switched off. Just
// before each step checks its bytes, a spoiler a test has installed may change them
// (a copy of them, for the in-memory steps): the step must then refuse the file.
// Nothing in machofix installs a spoiler; tests/failures/proof_steps/machofix_spoiled.cc does, from
// its environment. Without one, each hook costs a branch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/bytes.h"

namespace machofix::seam {

enum class ProofStep {
  Reread,     // prune: the output slice parsed again, its dylib list and imports compared
  Untouched,  // prune: every byte outside the edited ranges compared with the input
  Lief,       // prune: LIEF's reading of the output compared with ours
  Signature,  // the renewed or added signature verified
  LoaderRules,  // the rewritten slice checked against dyld's rules (loader_rules.h)
  UniversalRules,  // a rewritten universal file (offsets from its start) checked against dyld's rules for fat files
  PteReread,  // a written .pte/.ptd parsed again and compared with the plan
  Copy,       // a copied range of a .pte/.ptd compared with the input
};

// Spoils `bytes` (a slice, offsets from its start) before `step` checks them.
using MemorySpoiler = void (*)(ProofStep step, std::vector<uint8_t>& bytes);
// Spoils the file at `path` within [offset, offset + length) before `step` reads it.
using FileSpoiler = void (*)(ProofStep step, const std::string& path, uint64_t offset, uint64_t length);

void install(MemorySpoiler memory, FileSpoiler file);

// `bytes` itself, or a spoiled copy of them held in `copy` when a spoiler is installed.
Bytes offer(ProofStep step, const Bytes& bytes, std::vector<uint8_t>& copy);
void offer_file(ProofStep step, const std::string& path, uint64_t offset, uint64_t length);

}  // namespace machofix::seam
