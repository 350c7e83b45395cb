// Embedded code signatures (LC_CODE_SIGNATURE): read, verify, renew, add.
//
// See shared/spec/codesign.md. All signature fields are big-endian. A renewal keeps
// the existing structure (blobs, order, identifier, flags, hash types, page size)
// and recomputes only hashes, so re-signing a valid file changes nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/macho.h"

namespace machofix {

struct CodeDirectory {
  uint32_t slot = 0;    // 0 or 0x1000-0x1004
  uint64_t offset = 0;  // from the start of the SuperBlob
  uint32_t length = 0;
  uint32_t version = 0;
  uint32_t flags = 0;
  uint32_t hash_offset = 0;
  uint32_t ident_offset = 0;
  uint32_t special_slots = 0;
  uint32_t code_slots = 0;
  uint64_t code_limit = 0;  // codeLimit64 when set
  uint8_t hash_size = 0;
  uint8_t hash_type = 0;
  uint8_t page_size_log2 = 0;
  std::string identifier;
  std::string team_id;
  uint64_t exec_seg_base = 0, exec_seg_limit = 0, exec_seg_flags = 0;
};

struct SignatureBlob {
  uint32_t slot = 0;
  uint32_t magic = 0;
  uint64_t offset = 0;  // from the start of the SuperBlob
  uint32_t length = 0;
};

struct CodeSignature {
  uint64_t offset = 0;  // LC_CODE_SIGNATURE dataoff, from the start of the slice
  uint64_t size = 0;    // datasize
  uint32_t length = 0;  // SuperBlob length
  std::vector<SignatureBlob> blobs;
  std::vector<CodeDirectory> code_directories;
  bool has_cms = false;       // a CMS wrapper blob is present
  bool has_identity = false;  // the CMS wrapper is not empty: signed by a certificate

  bool linker_signed() const;
  std::string style() const;  // "linker-signed (lld)", "linker-signed (ld64)", "ad hoc (codesign)", "identity (CMS)"
  std::string identifier() const;
  std::vector<std::string> hash_type_names() const;
  uint32_t page_size() const;
};

// nullopt for an unsigned slice; an Error (with offset) for a malformed signature.
std::optional<CodeSignature> read_code_signature(const MachO& image);

// Problems with the signature: every mismatching code page and special slot,
// codeLimit, placement. Empty means valid. An unsigned slice gives {"not signed"}.
std::vector<std::string> verify_code_signature(const MachO& image);

// Recomputes every hash of the existing signature in `slice` (code pages, special
// slots of the blobs that are kept), in place. Refuses identity signatures.
void renew_code_signature(std::vector<uint8_t>& slice, uint64_t file_offset);

// Replaces an identity signature with an ad hoc one in the same space (--adhoc).
void replace_with_adhoc_signature(std::vector<uint8_t>& slice, uint64_t file_offset);

// Adds a linker-style ad hoc signature (SHA-256, 4096-byte pages) to an unsigned
// slice: grows __LINKEDIT and adds LC_CODE_SIGNATURE. Returns the new, larger slice.
std::vector<uint8_t> add_adhoc_signature(const MachO& image, const std::string& identifier);

// The identifier `sign` uses on an unsigned file: the install name's leaf, else the file name.
std::string default_identifier(const MachO& image, const std::string& file_name);

}  // namespace machofix
