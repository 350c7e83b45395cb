// What the codesign_*.cc files share; not part of the interface (core/format/codesign.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/bytes.h"
#include "core/format/codesign.h"
#include "core/base/util.h"

namespace machofix::cs {

// lld's CodeSignatureSection layout (SyntheticSections.cpp): the SuperBlob header
// and its one index entry padded to 8, the version 0x20400 CodeDirectory, the
// identifier zero-padded so that all headers end 16-aligned, one SHA-256 per page.
constexpr uint64_t kLldBlobHeadersSize = align_up(sizeof(SuperBlob) + sizeof(BlobIndex), 8);
constexpr uint64_t kLldCodeDirectorySize = fixed_header_size(kVersionExecSeg);
constexpr uint64_t kLldFixedHeadersSize = kLldBlobHeadersSize + kLldCodeDirectorySize;
constexpr uint64_t kLinkerPageSize = 4096;
constexpr uint8_t kLinkerPageShift = 12;
static_assert(kLldBlobHeadersSize == 24 && kLldCodeDirectorySize == 88);

// ---------------------------------------------------------------------------
// Reading and writing the fixed header of a CodeDirectory

// The fixed header of a CodeDirectory whose version has `fixed_size` bytes of it
// (fixed_header_size): the fields a later version added read as zero.
CodeDirectoryHeader read_fixed_header(const Bytes& cd, uint32_t fixed_size);
// Writes the first `fixed_size` bytes of `header` at `at`: a CodeDirectory of an
// older version ends its header there.
void put_fixed_header(MutableBytes out, uint64_t at, const CodeDirectoryHeader& header, uint32_t fixed_size);
void put_string(MutableBytes out, uint64_t at, const std::string& value);

// ---------------------------------------------------------------------------
// Where things are in the slice

// Where a CodeDirectory's hashes live in the slice.
struct CdPlace {
  uint64_t start;   // of the CodeDirectory, from the start of the slice
  uint64_t hashes;  // of code slot 0
  uint64_t special_hash(uint32_t slot, uint8_t hash_size) const { return hashes - uint64_t(slot) * hash_size; }
};
CdPlace place_of(const CodeSignature& signature, const CodeDirectory& directory);

Bytes blob_bytes(const MachO& image, const CodeSignature& signature, const SignatureBlob& blob);

bool all_zero(const Bytes& bytes);

// A slice about to be re-signed, with its signature read; an Error when it has none.
struct ParsedSlice {
  const MachO& image;  // views the slice being re-signed
  CodeSignature signature;
};
ParsedSlice read_signed_slice(const MachO& image, const char* action);

// ---------------------------------------------------------------------------
// The linker-style signature (codesign_write.cc), for codesign_attach.cc

struct LinkerSignatureLayout {
  uint64_t offset = 0;        // dataoff: the end of __LINKEDIT data, 16-aligned
  uint64_t headers_size = 0;  // SuperBlob header .. padded identifier
  uint64_t pages = 0;
  uint64_t size = 0;  // datasize
};
LinkerSignatureLayout linker_layout(uint64_t linkedit_end, const std::string& identifier);

// Writes lld's signature at layout.offset of `slice`, which already holds the final
// Mach-O up to there (headers included: they are hashed) and zeros after. Returns the
// page hashes it wrote, for the check of the signature (HashedPages).
HashedPages write_linker_signature(MutableBytes slice, const LinkerSignatureLayout& layout, const MachO& image,
                                   const std::string& identifier);

}  // namespace machofix::cs
