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

namespace machofix {

void register_read_only_mapping(const uint8_t* data, uint64_t size);
void unregister_read_only_mapping(const uint8_t* data);

// Drops this process's resident pages wholly inside [data, data + length), if that
// range lies in a registered read-only mapping; otherwise does nothing. Only a hint.
void release_mapped_pages(const uint8_t* data, uint64_t length);

}  // namespace machofix
