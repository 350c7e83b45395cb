// Verifying a code signature that reads well: where it lies (dyld's rules), every
// code page and every special slot hashed again and compared, as the kernel does
// page by page when the code is mapped.
#include <algorithm>

#include "core/format/codesign_internal.h"
#include "core/format/macho_structs.h"
#include "core/base/mapped_pages.h"
#include "core/base/sha.h"

namespace machofix {

using namespace cs;

namespace {

// Mismatching pages listed one by one per CodeDirectory; the rest are counted.
constexpr size_t kMaxListedPages = 32;

// A problem found: the signature is invalid.
void add_problem(SignatureCheck& check, FindingDetail detail, uint64_t absolute_offset,
                 const std::string& code_directory = "") {
  check.problems.push_back({std::move(detail), code_directory, absolute_offset});
}

void check_placement(const MachO& image, const CodeSignature& signature, SignatureCheck& check) {
  uint64_t dataoff_field = image.bytes.base() + image.commands[*image.code_signature_command].offset +
                           offsetof(macho::LinkeditDataCommand, dataoff);
  if (signature.offset % 8 != 0) add_problem(check, finding::DataoffUnaligned{signature.offset}, dataoff_field);
  const Segment* linkedit = image.segment("__LINKEDIT");
  if (!linkedit) {
    add_problem(check, finding::NoLinkedit{}, dataoff_field);
    return;
  }
  if (signature.offset < linkedit->file_offset ||
      !fits(signature.offset - linkedit->file_offset, signature.size, linkedit->file_size))
    add_problem(check,
                finding::OutsideLinkedit{{signature.offset, signature.offset + signature.size},
                                         {linkedit->file_offset, linkedit->file_offset + linkedit->file_size}},
                dataoff_field);
}

// codeLimit and nCodeSlots, checked before the pages they describe.
bool check_code_limit(const MachO& image, const CodeSignature& signature, const CodeDirectory& directory,
                      SignatureCheck& check) {
  const std::string name = directory.name();
  uint64_t start = image.bytes.base() + place_of(signature, directory).start;
  uint64_t limit_field = start + (directory.code_limit_64 ? offsetof(CodeDirectoryHeader, codeLimit64)
                                                          : offsetof(CodeDirectoryHeader, codeLimit));
  if (directory.code_limit != signature.offset)
    add_problem(check, finding::CodeLimitNotSignatureOffset{directory.code_limit, signature.offset}, limit_field,
                name);
  if (directory.code_limit > image.bytes.size()) {
    add_problem(check, finding::CodeLimitPastEnd{directory.code_limit}, limit_field, name);
    return false;
  }
  uint64_t needed = page_count(directory.code_limit, directory.page_size());
  if (directory.code_slots != needed)
    add_problem(check, finding::CodeSlotCount{directory.code_slots, directory.code_limit, needed},
                start + offsetof(CodeDirectoryHeader, nCodeSlots), name);
  return true;
}

void check_code_pages(const MachO& image, const CodeSignature& signature, const CodeDirectory& directory,
                      SignatureCheck& check, const KnownPageHashes* known) {
  if (!check_code_limit(image, signature, directory, check)) return;
  const std::string name = directory.name();
  const uint64_t base = image.bytes.base();
  uint64_t page_size = directory.page_size();
  uint64_t checked = std::min<uint64_t>(page_count(directory.code_limit, page_size), directory.code_slots);
  std::vector<uint8_t> hashes =
      hash_pages(image.bytes.sub(0, directory.code_limit, "signed code"), page_size, directory.hash_type, 0, known);
  Bytes stored =
      image.bytes.sub(place_of(signature, directory).hashes, checked * directory.hash_size, "code hashes");
  size_t mismatches = 0;
  for (uint64_t page = 0; page < checked; ++page) {
    uint64_t at = page * directory.hash_size;
    if (std::equal(hashes.begin() + at, hashes.begin() + at + directory.hash_size, stored.data() + at)) continue;
    if (++mismatches > kMaxListedPages) continue;
    uint64_t end = std::min((page + 1) * page_size, directory.code_limit);
    add_problem(check, finding::PageHashMismatch{page, {page * page_size, end}}, base + page * page_size, name);
  }
  if (mismatches > kMaxListedPages)
    check.problems.push_back(
        {finding::MorePageHashMismatches{mismatches - kMaxListedPages, mismatches, checked}, name, std::nullopt});
}

void check_special_slots(const MachO& image, const CodeSignature& signature, const CodeDirectory& directory,
                         SignatureCheck& check) {
  const std::string name = directory.name();
  const uint64_t base = image.bytes.base();
  CdPlace place = place_of(signature, directory);
  Hasher hasher(directory.hash_type);
  for (uint32_t slot = 1; slot <= directory.special_slots; ++slot) {
    uint64_t slot_at = place.special_hash(slot, directory.hash_size);
    Bytes stored = image.bytes.sub(slot_at, directory.hash_size, "special slot");
    const SignatureBlob* blob = signature.blob_in_slot(slot);
    if (!blob && is_external_slot(slot)) {
      if (!all_zero(stored)) check.notes.push_back({finding::ExternalSlotSealed{slot}, name, std::nullopt});
      continue;
    }
    if (!blob) {
      if (!all_zero(stored))
        add_problem(check, finding::SlotHashWithoutBlob{slot, {slot_at, slot_at + directory.hash_size}},
                    base + slot_at, name);
      continue;
    }
    std::vector<uint8_t> expected = hasher.hash(blob_bytes(image, signature, *blob));
    uint64_t blob_at = signature.offset + blob->offset;
    if (!std::equal(expected.begin(), expected.end(), stored.data()))
      add_problem(check, finding::SlotHashMismatch{slot, {blob_at, blob_at + blob->length}}, base + blob_at, name);
  }
  for (const SignatureBlob& blob : signature.blobs)
    if (is_special_slot(blob.slot) && blob.slot > directory.special_slots)
      add_problem(check, finding::UnsealedBlob{blob.slot, directory.special_slots},
                  base + signature.offset + blob.offset, name);
}

}  // namespace

SignatureFinding unreadable_signature(const Error& error) {
  return {finding::Unreadable{error.describe()}, "", error.offset()};
}

SignatureCheck check_code_signature(const MachO& image, const KnownPageHashes* known) {
  std::optional<CodeSignature> signature;
  try {
    signature = read_code_signature(image);
  } catch (const Error& error) {
    return {{unreadable_signature(error)}, {}};
  }
  if (!signature) return {{{finding::NotSigned{}, "", std::nullopt}}, {}};
  return check_code_signature(image, *signature, known);
}

SignatureCheck check_code_signature(const MachO& image, const CodeSignature& signature, const KnownPageHashes* known) {
  SignatureCheck check;
  check_placement(image, signature, check);
  for (const CodeDirectory& directory : signature.code_directories) {
    check_code_pages(image, signature, directory, check, known);
    check_special_slots(image, signature, directory, check);
  }
  if (signature.has_identity) check.notes.push_back({finding::IdentityNotChecked{}, "", std::nullopt});
  return check;
}

const uint8_t* VerifiedInputHashes::find(const uint8_t* page, uint64_t length, uint64_t index, uint64_t page_size,
                                         uint8_t hash_type) const {
  if (length != page_size) return nullptr;  // a short page is hashed: its stored hash covers other bytes
  for (const CodeDirectory& directory : signature_.code_directories) {
    if (directory.page_size() != page_size || directory.hash_type != hash_type || index >= directory.code_slots ||
        (index + 1) * page_size > directory.code_limit)
      continue;
    if (!same_file_bytes(page, input_.bytes.data() + index * page_size, page_size)) return nullptr;
    return input_.bytes.sub(place_of(signature_, directory).hashes + index * directory.hash_size, directory.hash_size,
                            "code hash").data();
  }
  return nullptr;
}

}  // namespace machofix
