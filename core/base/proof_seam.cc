#include "core/base/proof_seam.h"

namespace machofix::seam {

namespace {
MemorySpoiler memory_spoiler = nullptr;
FileSpoiler file_spoiler = nullptr;
}  // namespace

void install(MemorySpoiler memory, FileSpoiler file) {
  memory_spoiler = memory;
  file_spoiler = file;
}

Bytes offer(ProofStep step, const Bytes& bytes, std::vector<uint8_t>& copy) {
  if (!memory_spoiler) return bytes;
  copy.assign(bytes.data(), bytes.data() + bytes.size());
  memory_spoiler(step, copy);
  return Bytes(copy, bytes.base());
}

void offer_file(ProofStep step, const std::string& path, uint64_t offset, uint64_t length) {
  if (file_spoiler) file_spoiler(step, path, offset, length);
}

}  // namespace machofix::seam
