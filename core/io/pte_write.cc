// repair_pte's writing: the new bytes over the early copy of the input
// (core/io/copy_ahead.h), or, when the layout changes, every piece: the copies a chunk
// at a time (the kernel copies; each chunk handed to the CopyChecker as soon as it is
// written).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "core/io/pte_repair_internal.h"

namespace machofix::pte_internal {

namespace {

// Calls `chunk(out_at, in_at, length)` for each copy chunk of `piece`.
template <typename OnChunk>
void for_each_chunk(const Piece& piece, OnChunk chunk) {
  for (uint64_t done = 0, length = 0; done < piece.length; done += length) {
    length = std::min(copy_chunk_at(piece.out_at + done), piece.length - done);
    chunk(piece.out_at + done, *piece.in_at + done, length);
  }
}

}  // namespace

bool keeps_layout(const Plan& plan, uint64_t input_size) {
  if (plan.output_size != input_size) return false;
  return std::all_of(plan.pieces.begin(), plan.pieces.end(),
                     [](const Piece& piece) { return !piece.in_at || *piece.in_at == piece.out_at; });
}

void write_pieces(const MappedFile& input, const Plan& plan, AtomicOutput& output, CopyChecker& checker) {
  for (const Piece& piece : plan.pieces) {
    if (!piece.in_at) {
      output.write_at(piece.out_at, piece.bytes);
      continue;
    }
    for_each_chunk(piece, [&](uint64_t out_at, uint64_t in_at, uint64_t length) {
      output.copy_from(input.fd(), in_at, out_at, length);
      hand_to_checker(output, checker, out_at, in_at, length);
    });
  }
}

void write_new_bytes(const Plan& plan, CopiedOutput& output) {
  output.finish_copy(plan.output_size);
  for (const Piece& piece : plan.pieces)
    if (!piece.in_at) output.output().write_at(piece.out_at, piece.bytes);
}

bool same_file(const MappedFile& input, const std::string& path) {
  if (is_standard_stream(path)) return false;  // standard output, not a file named "-"
  struct stat in, out;
  return fstat(input.fd(), &in) == 0 && stat(path.c_str(), &out) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino;
}

}  // namespace machofix::pte_internal
