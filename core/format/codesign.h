// Embedded code signatures (LC_CODE_SIGNATURE): read, verify, renew, add.
//
// See docs/codesign.md. A renewal keeps the existing structure (blobs, order,
// identifier, flags, hash types, page size) and recomputes only hashes, so re-signing
// a valid file changes nothing.
//
// The on-disk structures are declared in core/format/codesign_format.h. One file per job:
// codesign_read.cc reads a signature and applies the kernel's structural checks,
// codesign_verify.cc checks every hash (what it finds: codesign_findings.h),
// codesign_write.cc builds and writes signatures, codesign_attach.cc makes room in a
// Mach-O for a new one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/base/output_image.h"
#include "core/base/sha.h"
#include "core/format/codesign_findings.h"
#include "core/format/codesign_format.h"
#include "core/format/macho.h"

namespace machofix {

// A CodeDirectory as read (its on-disk form: cs::CodeDirectoryHeader).
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
  // Added by the implementation:
  uint32_t fixed_size = 0;     // bytes of the fixed header this version has (44..108)
  uint32_t team_offset = 0;    // 0: no team id
  bool code_limit_64 = false;  // codeLimit64 holds the limit (codeLimit is 0)

  uint64_t page_size() const { return uint64_t(1) << page_size_log2; }
  std::string name() const;  // "CodeDirectory sha256"
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
  std::vector<CodeDirectory> code_directories;  // slot 0 first, then in SuperBlob order
  bool has_cms = false;                         // a CMS wrapper blob is present
  bool has_identity = false;                    // the CMS wrapper is not empty: signed by a certificate

  bool linker_signed() const;
  std::string style() const;  // "linker-signed (lld)", "linker-signed (ld64)", "ad hoc (codesign)", "identity (CMS)"
  std::string identifier() const;
  std::vector<std::string> hash_type_names() const;
  uint32_t page_size() const;
  // Added by the implementation:
  const CodeDirectory& primary() const { return code_directories.front(); }  // slot 0
  const SignatureBlob* blob_in_slot(uint32_t slot) const;
};

// nullopt for an unsigned slice; an Error (with offset) for a malformed signature.
std::optional<CodeSignature> read_code_signature(const MachO& image);

// What verifying a signature found (core/format/codesign_findings.h): `problems` make
// it invalid; `notes` are what cannot be checked here and does not make it invalid
// (hashes of an Info.plist or of bundle resources, which live outside the Mach-O
// file; the CMS signature of an identity). An unsigned slice has one problem,
// NotSigned; a malformed signature one, Unreadable (not thrown). Runs of mismatching
// pages are listed up to a limit per CodeDirectory, then counted.
struct SignatureCheck {
  std::vector<SignatureFinding> problems;
  std::vector<SignatureFinding> notes;
  bool valid() const { return problems.empty(); }
  // Where the first problem is, as an absolute file offset: the first wrong page, the
  // blob of a wrong special slot, the malformed field. Unset when there is none.
  std::optional<uint64_t> first_problem_at() const { return problems.empty() ? std::nullopt : problems.front().at; }
};
// `known`: page hashes to take instead of hashing (VerifiedInputHashes).
SignatureCheck check_code_signature(const MachO& image, const KnownPageHashes* known = nullptr);
// The same for a signature already read from `image` (read_code_signature).
SignatureCheck check_code_signature(const MachO& image, const CodeSignature& signature,
                                    const KnownPageHashes* known = nullptr);
// The one problem of a signature read_code_signature refused.
SignatureFinding unreadable_signature(const Error& error);

// The code hashes of an input's signature, once check_code_signature found it valid,
// for the rewrite of that input: a page being hashed whose bytes map the input's
// very bytes at the same offset (an OutputImage's borrowed code and data:
// core/base/mapped_pages.h, same_file_bytes) takes the stored hash of that page
// instead of being hashed again. Any other page (a copy, a changed page, the last
// short page) is hashed. So re-signing a rewrite hashes what it changed, not the file.
class VerifiedInputHashes : public KnownPageHashes {
 public:
  // `input` and `signature` (read from it, and verified) must outlive this.
  VerifiedInputHashes(const MachO& input, const CodeSignature& signature) : input_(input), signature_(signature) {}
  const uint8_t* find(const uint8_t* page, uint64_t length, uint64_t index, uint64_t page_size,
                      uint8_t hash_type) const override;

 private:
  const MachO& input_;
  const CodeSignature& signature_;
};

// Recomputes every hash of the existing signature in `slice` (code pages, special
// slots of the blobs that are kept), in place. Refuses identity signatures.
// codeLimit is set to the signature's offset; if that changes the number of pages
// the CodeDirectory would have to grow, which this refuses (an Error). Returns the
// page hashes it wrote, one HashedPages per CodeDirectory: where `known` cannot serve
// the check of the new signature (an invalid input's, --resign-invalid), they can.
HashedPagesList renew_code_signature(MutableBytes slice, uint64_t file_offset, const KnownPageHashes* known = nullptr);
// The same with the slice already read: `image` views `slice`'s bytes.
HashedPagesList renew_code_signature(MutableBytes slice, const MachO& image, const KnownPageHashes* known);

// Replaces an identity signature with an ad hoc one in the same space (--adhoc):
// codesign's layout (CodeDirectories with CS_ADHOC and no team id, an empty
// Requirements set, entitlements and other blobs kept, an empty CMS wrapper),
// zero-padded to the old datasize. An Error if it does not fit. Returns the page
// hashes it wrote (renew_code_signature).
HashedPagesList replace_with_adhoc_signature(MutableBytes slice, uint64_t file_offset,
                                             const KnownPageHashes* known = nullptr);
HashedPagesList replace_with_adhoc_signature(MutableBytes slice, const MachO& image,
                                             const KnownPageHashes* known);  // `image` views `slice`

// For --resign-invalid on a signature too malformed to read (so it cannot be renewed
// in its own structure): removes LC_CODE_SIGNATURE and the signature at the end of
// __LINKEDIT, then adds a linker-style ad hoc one (add_adhoc_signature), in `slice`
// (room: adhoc_signature_room); an Error when the signature is not the last thing in
// the slice. Returns the page hashes it wrote (add_adhoc_signature).
HashedPages replace_unreadable_signature(OutputImage& slice, uint64_t file_offset, const std::string& identifier);
std::vector<uint8_t> replace_unreadable_signature(const MachO& image, const std::string& identifier);  // on a copy

// Adds a linker-style ad hoc signature (SHA-256, 4096-byte pages) to an unsigned
// slice: grows __LINKEDIT and the slice, within the room `slice` has
// (adhoc_signature_room), and adds LC_CODE_SIGNATURE.
// The signature is the one ld64.lld writes, byte for byte, for the same layout.
// Returns the page hashes it wrote, for the check of the new signature: it hashes
// again only what it cannot take from them (HashedPages, core/base/sha.h).
HashedPages add_adhoc_signature(OutputImage& slice, uint64_t file_offset, const std::string& identifier);
std::vector<uint8_t> add_adhoc_signature(const MachO& image, const std::string& identifier);  // on a copy
// How much an unsigned slice of `slice_size` bytes may grow when signed: the room an
// OutputImage needs for add_adhoc_signature.
uint64_t adhoc_signature_room(uint64_t slice_size, const std::string& identifier);

// The identifier `sign` uses on an unsigned file: the install name's leaf, else the file name.
std::string default_identifier(const MachO& image, const std::string& file_name);

}  // namespace machofix
