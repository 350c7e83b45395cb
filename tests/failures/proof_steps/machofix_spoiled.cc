// machofix with a spoiler installed in its proof seam (core/base/proof_seam.h), for
// tests/failures/proof_steps/test_proof_steps.py: the command line is machofix's own.
//
//   MACHOFIX_SPOIL=STEP@OFFSET[=BYTE] machofix_spoiled COMMAND ...
//
// Before STEP checks its bytes, the byte at OFFSET (from the slice's start for the
// Mach-O steps, from the file's start for pte-reread and copy) is inverted, or set
// to BYTE, and
// "machofix_spoiled: spoiled STEP at OFFSET" goes to standard error, so that a test
// knows the step was handed the wrong bytes. STEP: reread, untouched, lief,
// signature, loader-rules, pte-reread, copy.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/base/proof_seam.h"
#include "tool/main.h"

namespace {

using machofix::seam::ProofStep;

const char* step_name(ProofStep step) {
  switch (step) {
    case ProofStep::Reread: return "reread";
    case ProofStep::Untouched: return "untouched";
    case ProofStep::Lief: return "lief";
    case ProofStep::Signature: return "signature";
    case ProofStep::LoaderRules: return "loader-rules";
    case ProofStep::UniversalRules: return "universal-rules";
    case ProofStep::PteReread: return "pte-reread";
    case ProofStep::Copy: return "copy";
  }
  return "?";
}

std::string spoiled_step;
uint64_t spoiled_offset = 0;
int spoiled_value = -1;  // -1: invert the byte

uint8_t spoiled(uint8_t byte) { return spoiled_value < 0 ? byte ^ 0xFF : static_cast<uint8_t>(spoiled_value); }

void announce(ProofStep step) {
  std::fprintf(stderr, "machofix_spoiled: spoiled %s at %llu\n", step_name(step),
               static_cast<unsigned long long>(spoiled_offset));
}

void spoil_memory(ProofStep step, std::vector<uint8_t>& bytes) {
  if (spoiled_step != step_name(step) || spoiled_offset >= bytes.size()) return;
  bytes[spoiled_offset] = spoiled(bytes[spoiled_offset]);
  announce(step);
}

void spoil_file(ProofStep step, const std::string& path, uint64_t offset, uint64_t length) {
  if (spoiled_step != step_name(step) || spoiled_offset < offset || spoiled_offset >= offset + length) return;
  int fd = open(path.c_str(), O_RDWR);
  uint8_t byte = 0;
  if (fd < 0 || pread(fd, &byte, 1, static_cast<off_t>(spoiled_offset)) != 1) std::abort();
  byte = spoiled(byte);
  if (pwrite(fd, &byte, 1, static_cast<off_t>(spoiled_offset)) != 1) std::abort();
  close(fd);
  announce(step);
}

}  // namespace

int main(int argc, char** argv) {
  const char* spoil = std::getenv("MACHOFIX_SPOIL");
  if (!spoil) {
    std::fprintf(stderr, "machofix_spoiled: set MACHOFIX_SPOIL=STEP@OFFSET[=BYTE]\n");
    return 64;
  }
  std::string setting = spoil;
  size_t at = setting.find('@');
  if (at == std::string::npos) {
    std::fprintf(stderr, "machofix_spoiled: MACHOFIX_SPOIL must be STEP@OFFSET\n");
    return 64;
  }
  spoiled_step = setting.substr(0, at);
  char* end = nullptr;
  spoiled_offset = std::strtoull(setting.c_str() + at + 1, &end, 0);
  if (*end == '=') spoiled_value = static_cast<int>(std::strtoul(end + 1, nullptr, 0) & 0xFF);
  machofix::seam::install(spoil_memory, spoil_file);
  return machofix::cli::main(argc, argv);
}
