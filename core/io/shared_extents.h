// Proof that two byte ranges hold the same bytes without reading them: the file
// system stores both in the same physical blocks (a reflink clone, FICLONE or
// copy_file_range on XFS and btrfs). Linux only, through FIEMAP; elsewhere, and
// wherever the map leaves any doubt, the answer is "not proven" and the caller
// compares the bytes.
#pragma once

#include <cstdint>

namespace machofix {

// True when every block of output [out_at, out_at + length) is flagged shared and is
// the very block that holds input [in_at, in_at + length) at the same place: the two
// ranges are then one copy of the data on disk. Dirty pages of either file are
// written back first (FIEMAP_FLAG_SYNC), so that a write not yet on disk, which would
// unshare its block, is seen. Holes, inline, encoded, unwritten, delayed or unknown
// extents, and any failure of the ioctl, give false.
bool proven_shared(int in_fd, uint64_t in_at, int out_fd, uint64_t out_at, uint64_t length);

}  // namespace machofix
