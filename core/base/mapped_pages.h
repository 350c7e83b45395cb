// Letting go of the pages of a mapped input once a pass over them is done.
//
// A file mapped read-only (MappedFile) costs resident memory for every page touched,
// until it is unmapped: hashing every page of a 500 MB dylib made `verify` as large
// as the file. A long pass (hashing pages) calls release_mapped_pages behind it; the
// pages stay in the page cache and are read again from there if touched again.
// Memory that is not such a mapping (a vector being built) is never touched: the
// mappings are registered here by MappedFile.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace machofix {

// `data` maps `size` bytes of the file open as `fd` from `file_offset` on (a page
// boundary). The descriptor must stay open until the mapping is unregistered.
void register_read_only_mapping(const uint8_t* data, uint64_t size, int fd, uint64_t file_offset = 0);
void unregister_read_only_mapping(const uint8_t* data);

// Where bytes that lie wholly in one registered mapping come from: the image of a
// slice being rewritten maps them again, copy-on-write (core/base/output_image.h), instead
// of copying them.
struct FileBehind {
  int fd = -1;
  uint64_t offset = 0;  // of the first byte, in that file
};
std::optional<FileBehind> file_behind(const uint8_t* data, uint64_t length);

// The bytes data[0, length) for a pass that reads them once (hashing): `data` itself,
// or, when they lie in one registered mapping, a copy read with pread into `buffer`
// (resized to fit): touching the mapping would cost resident memory for every page,
// and letting the pages go again (madvise) makes the kernel interrupt every other CPU
// of the process to flush its TLB. A copy out of the page cache costs a fraction of
// hashing the same bytes. nullptr when the file ended first (it shrank since it was
// mapped) or could not be read.
const uint8_t* bytes_to_read(const uint8_t* data, uint64_t length, std::vector<uint8_t>& buffer);

// True when both ranges lie in registered mappings of the same open file at the same
// offset: the same bytes, so equal without reading either (both are read-only).
bool same_file_bytes(const uint8_t* a, const uint8_t* b, uint64_t length);

// How many bytes from `data` on (at most `limit`) lie alike with respect to the
// registered mappings: up to the end of the mapping holding `data`, or, outside every
// mapping, up to the start of the next one. A pass that asks same_file_bytes of such
// parts never straddles a mapping's edge (a slice's private head and its borrowed
// middle, say), which would make the whole part read and compared.
uint64_t mapping_uniform_extent(const uint8_t* data, uint64_t limit);

// For a long pass that has just gone over [data, data + length), in a registered
// read-only mapping larger than 16 MiB: drops this process's resident pages of the
// whole 2 MiB blocks the pass has moved past, from the block holding `data` up to the
// last block boundary at or below data + length (or to the mapping's end, if the pass
// reached it). Elsewhere does nothing. A pass that calls it for each part it reads
// lets go of every block once, behind it. Only a hint.
void release_mapped_pages(const uint8_t* data, uint64_t length);

}  // namespace machofix
