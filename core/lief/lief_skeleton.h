// The image of a rewritten slice that LIEF reads: its skeleton.
//
// LIEF 0.9 copies every segment's content while it parses (and its parser copies the
// whole input besides): on a 200 MB dylib that is hundreds of MB for a check that
// looks only at the load commands, the symbol table and the binds. The skeleton is
// the header and the load commands where they are, then __LINKEDIT's bytes up to the
// code signature, and nothing of the other segments:
//   [0, sizeofcmds + 32)   header and load commands, patched (below), then zeros up
//                          to a multiple of 16
//   then                   __LINKEDIT's bytes before the code signature, read in
//                          place from the slice (a view, not a copy)
// Patched in the copy of the load commands: every segment's filesize becomes 0 (LIEF
// then copies no content; it reads LINKEDIT's tables through their own offsets), and
// its fileoff 0, but __LINKEDIT's, which is where its bytes now start; sections'
// offsets become 0 (as for zero-fill); every file offset into __LINKEDIT (LC_SYMTAB,
// LC_DYSYMTAB, LC_DYLD_INFO, every linkedit_data_command) is shifted by the same
// amount. Left out, their ranges (0, 0): the code signature (LIEF only copies it;
// machofix verifies it), and LC_DYLD_INFO's rebases and exports trie: LIEF 0.9 reads
// no ordinal from either (its trie reader does not read re-export ordinals), its
// rebase reader ties each rebase to a symbol by a linear search (rebases x symbols),
// and its trie reader keeps a process-wide set of visited offsets.
//
// The commands and every offset are read from the slice's own bytes, not from
// machofix's parse of them, so that the skeleton does not inherit a mistake of our
// reader. A layout that cannot be compacted safely (a load command the skeleton does
// not know, which may point at file data; a LINKEDIT offset outside __LINKEDIT or
// into the signature; relocation entries of a section; no __LINKEDIT) gives the whole
// slice instead, with the reason: LIEF then reads everything, at the old cost.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/bytes.h"

namespace machofix {

struct LiefImage {
  std::vector<uint8_t> head;  // header and load commands, patched, padded (empty for the whole slice)
  Bytes tail;                 // __LINKEDIT's bytes before the signature, or the whole slice
  std::string whole_slice_because;  // empty for a skeleton

  bool skeleton() const { return whole_slice_because.empty(); }
  // The image, in order: head (if any), then tail.
  std::vector<Bytes> pieces() const;
  uint64_t size() const { return head.size() + tail.size(); }
  // The image as one buffer (tests and tools: what LIEF reads, written out).
  std::vector<uint8_t> joined() const;
};

// The skeleton of `slice` (a thin 64-bit Mach-O), or the whole slice when its layout
// cannot be compacted. Never fails: an unreadable slice is handed whole to LIEF,
// whose reading the comparison then refuses.
LiefImage lief_image(const Bytes& slice);

}  // namespace machofix
