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

std::string slot_name(uint32_t slot) {
  switch (slot) {
    case kSlotInfoPlist: return "special slot 1 (Info.plist)";
    case kSlotRequirements: return "special slot 2 (requirements)";
    case kSlotResources: return "special slot 3 (resources)";
    case 4: return "special slot 4 (application specific)";
    case kSlotEntitlements: return "special slot 5 (entitlements)";
    case kSlotDerEntitlements: return "special slot 7 (DER entitlements)";
  }
  return "special slot " + std::to_string(slot);
}

// Records a problem; the first one also gives the offset a refusal points at.
void add_problem(SignatureCheck& check, std::string problem, uint64_t absolute_offset) {
  if (check.problems.empty()) check.first_problem_at = absolute_offset;
  check.problems.push_back(std::move(problem));
}

void check_placement(const MachO& image, const CodeSignature& signature, SignatureCheck& check) {
  uint64_t dataoff_field = image.bytes.base() + image.commands[*image.code_signature_command].offset +
                           offsetof(macho::LinkeditDataCommand, dataoff);
  if (signature.offset % 8 != 0)
    add_problem(check, "LC_CODE_SIGNATURE dataoff " + hex(signature.offset) + " is not 8-aligned", dataoff_field);
  const Segment* linkedit = image.segment("__LINKEDIT");
  if (!linkedit) {
    add_problem(check, "the signature is not inside __LINKEDIT: there is no __LINKEDIT segment", dataoff_field);
    return;
  }
  if (signature.offset < linkedit->file_offset ||
      !fits(signature.offset - linkedit->file_offset, signature.size, linkedit->file_size))
    add_problem(check,
                "the signature (slice bytes " + hex(signature.offset) + "-" + hex(signature.offset + signature.size) +
                    ") is not inside __LINKEDIT (" + hex(linkedit->file_offset) + "-" +
                    hex(linkedit->file_offset + linkedit->file_size) + ")",
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
    add_problem(check,
                name + ": codeLimit " + hex(directory.code_limit) + " is not the signature offset " + hex(signature.offset),
                limit_field);
  if (directory.code_limit > image.bytes.size()) {
    add_problem(check, name + ": codeLimit " + hex(directory.code_limit) + " lies past the end of the slice", limit_field);
    return false;
  }
  uint64_t needed = page_count(directory.code_limit, directory.page_size());
  if (directory.code_slots != needed)
    add_problem(check,
                name + ": " + std::to_string(directory.code_slots) + " code slots, but codeLimit " +
                    hex(directory.code_limit) + " needs " + std::to_string(needed),
                start + offsetof(CodeDirectoryHeader, nCodeSlots));
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
    add_problem(check,
                name + ": page " + std::to_string(page) + " (slice bytes " + hex(page * page_size) + "-" + hex(end) +
                    ") hash mismatch",
                base + page * page_size);
  }
  if (mismatches > kMaxListedPages)
    check.problems.push_back(name + ": " + std::to_string(mismatches - kMaxListedPages) +
                             " more pages with a hash mismatch (" + std::to_string(mismatches) + " of " +
                             std::to_string(checked) + " in all)");
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
      if (!all_zero(stored))
        check.notes.push_back(name + ": " + slot_name(slot) +
                              " seals a file outside the Mach-O (a bundle's); not checkable here");
      continue;
    }
    if (!blob) {
      if (!all_zero(stored))
        add_problem(check,
                    name + ": " + slot_name(slot) + " (slice bytes " + hex(slot_at) + "-" +
                        hex(slot_at + directory.hash_size) + ") holds a hash but no blob is there",
                    base + slot_at);
      continue;
    }
    std::vector<uint8_t> expected = hasher.hash(blob_bytes(image, signature, *blob));
    uint64_t blob_at = signature.offset + blob->offset;
    if (!std::equal(expected.begin(), expected.end(), stored.data()))
      add_problem(check,
                  name + ": " + slot_name(slot) + " hash mismatch (its blob: slice bytes " + hex(blob_at) + "-" +
                      hex(blob_at + blob->length) + ")",
                  base + blob_at);
  }
  for (const SignatureBlob& blob : signature.blobs)
    if (is_special_slot(blob.slot) && blob.slot > directory.special_slots)
      add_problem(check,
                  name + ": the blob in " + slot_name(blob.slot) + " is not sealed (only " +
                      std::to_string(directory.special_slots) + " special slots)",
                  base + signature.offset + blob.offset);
}

}  // namespace

SignatureCheck check_code_signature(const MachO& image, const KnownPageHashes* known) {
  SignatureCheck check;
  std::optional<CodeSignature> signature;
  try {
    signature = read_code_signature(image);
  } catch (const Error& error) {
    check.problems.push_back(error.describe());
    check.first_problem_at = error.offset();
    return check;
  }
  if (!signature) {
    check.problems.push_back("not signed");
    return check;
  }
  check_placement(image, *signature, check);
  for (const CodeDirectory& directory : signature->code_directories) {
    check_code_pages(image, *signature, directory, check, known);
    check_special_slots(image, *signature, directory, check);
  }
  if (signature->has_identity) check.notes.push_back("the CMS signature (identity) is not checked");
  return check;
}

std::vector<std::string> verify_code_signature(const MachO& image) { return check_code_signature(image).problems; }

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
