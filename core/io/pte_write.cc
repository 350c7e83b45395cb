// repair_pte's writing: over the early copy of the input (core/io/copy_ahead.h), kept
// as far as the plan keeps the input in place, the new bytes and the pieces the copy
// does not hold, copied a chunk at a time (the kernel copies; each chunk handed to the
// CopyChecker as soon as it is written).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "core/io/pte_repair_internal.h"

namespace machofix::pte_internal {

namespace {

// Calls `chunk(out_at, in_at, length)` for each copy chunk of `piece` from `skip`
// bytes into it on.
template <typename OnChunk>
void for_each_chunk(const Piece& piece, uint64_t skip, OnChunk chunk) {
  for (uint64_t done = skip, length = 0; done < piece.length; done += length) {
    length = copy_chunk_at(piece.out_at + done, piece.out_at + piece.length);
    chunk(piece.out_at + done, *piece.in_at + done, length);
  }
}

// The input ranges the plan copies, where it puts them.
std::vector<CopiedRange> wanted_ranges(const Plan& plan) {
  std::vector<CopiedRange> wanted;
  for (const Piece& piece : plan.pieces)
    if (piece.in_at) wanted.push_back({*piece.in_at, piece.out_at, piece.length});
  return wanted;
}

}  // namespace

void write_pieces(const MappedFile& input, const Plan& plan, CopiedOutput& output) {
  std::vector<CopiedRange> kept = output.keep_copy(first_unheld(output.plan(), wanted_ranges(plan)), plan.output_size);
  AtomicOutput& file = output.output();
  // In order, so that past the early copy the file grows from its end without holes.
  for (const Piece& piece : plan.pieces) {
    if (!piece.in_at) {
      file.write_at(piece.out_at, piece.bytes);
      continue;
    }
    uint64_t held = held_by(kept, *piece.in_at, piece.out_at, piece.length);
    for_each_chunk(piece, held, [&](uint64_t out_at, uint64_t in_at, uint64_t length) {
      file.copy_from(input.fd(), in_at, out_at, length);
      hand_to_checker(file, output.checker(), out_at, in_at, length);
    });
  }
}

bool same_file(const MappedFile& input, const std::string& path) {
  if (is_standard_stream(path)) return false;  // standard output, not a file named "-"
  struct stat in, out;
  return fstat(input.fd(), &in) == 0 && stat(path.c_str(), &out) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino;
}

}  // namespace machofix::pte_internal
