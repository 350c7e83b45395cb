// Building and writing signatures: lld's linker signature for a slice that has none,
// codesign's ad hoc layout in place of an identity signature, and the renewal of
// every hash of an existing signature in place. Each blob is laid out in the order
// of the format (core/format/codesign_format.h), field by field.
#include <algorithm>
#include <map>

#include "core/format/codesign_internal.h"
#include "core/format/macho_format.h"
#include "core/base/sha.h"

namespace machofix {

using namespace cs;

namespace {

using Cd = CodeDirectoryHeader;
using BlobsBySlot = std::map<uint32_t, std::vector<uint8_t>>;

template <typename T>
std::vector<uint8_t> bytes_of(const T& structure) {
  std::vector<uint8_t> out(sizeof structure);
  put(out, 0, structure);
  return out;
}

// ---------------------------------------------------------------------------
// Renewal: the same signature, every hash computed again

void write_code_limit(MutableBytes slice, uint64_t cd_start, const CodeDirectory& directory, uint64_t limit) {
  if (directory.code_limit_64)
    put(slice, cd_start + offsetof(Cd, codeLimit64), ub64(limit));
  else
    put(slice, cd_start + offsetof(Cd, codeLimit), ub32(static_cast<uint32_t>(limit)));
}

// The new hash of special slot `slot`, or nothing to keep what is stored.
std::optional<std::vector<uint8_t>> special_slot_hash(const MachO& image, const CodeSignature& signature, uint32_t slot,
                                                      Hasher& hasher) {
  if (const SignatureBlob* blob = signature.blob_in_slot(slot)) return hasher.hash(blob_bytes(image, signature, *blob));
  if (is_external_slot(slot)) return std::nullopt;  // seals a file we neither have nor change
  return std::vector<uint8_t>(hasher.size(), 0);
}

// Returns the page hashes it wrote (the check of the renewed signature may take them).
HashedPages renew_code_directory(MutableBytes slice, const MachO& image, const CodeSignature& signature,
                                 const CodeDirectory& directory, const KnownPageHashes* known) {
  CdPlace place = place_of(signature, directory);
  uint64_t limit = signature.offset;  // the code ends where the signature starts
  uint64_t needed = page_count(limit, directory.page_size());
  if (needed != directory.code_slots)
    image.bytes.fail_here(place.start + offsetof(Cd, nCodeSlots),
                          directory.name() + " has " + std::to_string(directory.code_slots) +
                              " code slots but the code up to the signature (" + hex(limit) + ") has " +
                              std::to_string(needed) + " pages: renewing cannot resize the signature");
  HashedPages hashed(image.bytes.sub(0, limit, "signed code"), directory.page_size(), directory.hash_type, known);
  Hasher hasher(directory.hash_type);
  std::vector<std::optional<std::vector<uint8_t>>> specials;
  for (uint32_t slot = 1; slot <= directory.special_slots; ++slot)
    specials.push_back(special_slot_hash(image, signature, slot, hasher));
  // Every hash is computed before anything is written: `image` views `slice`.
  write_code_limit(slice, place.start, directory, limit);
  put_bytes(slice, place.hashes, hashed.hashes().data(), hashed.hashes().size());
  for (uint32_t slot = 1; slot <= directory.special_slots; ++slot)
    if (const auto& hash = specials[slot - 1])
      put_bytes(slice, place.special_hash(slot, hasher.size()), hash->data(), hash->size());
  return hashed;
}

// ---------------------------------------------------------------------------
// codesign's ad hoc signature (replace_with_adhoc_signature)

std::vector<uint8_t> empty_requirements() {
  SuperBlob set{};  // a requirement set is a SuperBlob of requirements: here none
  set.magic = kRequirementsMagic;
  set.length = sizeof set;
  set.count = 0;
  return bytes_of(set);
}

std::vector<uint8_t> empty_cms() {
  GenericBlob cms{};
  cms.magic = kCmsWrapperMagic;
  cms.length = kEmptyCmsLength;
  return bytes_of(cms);
}
static_assert(kEmptyCmsLength == sizeof(GenericBlob));

// The fields codesign does not carry over into an ad hoc CodeDirectory, or that
// machofix cannot reproduce, must be absent.
void require_plain_code_directory(const Bytes& cd, const Cd& header, const CodeDirectory& directory) {
  if (header.preEncryptOffset != 0)
    cd.fail_here(offsetof(Cd, preEncryptOffset), directory.name() + ": pre-encryption hashes are not supported");
  if (header.linkageSize != 0)
    cd.fail_here(offsetof(Cd, linkageSize), directory.name() + ": linkage hashes are not supported");
}

// Special slots of the ad hoc CodeDirectory: codesign seals requirements (slot 2)
// always, plus every blob it carries and the bundle files the old one sealed.
uint32_t adhoc_special_slots(const MachO& image, const CodeSignature& signature, const CodeDirectory& old,
                             const BlobsBySlot& blobs) {
  uint32_t count = kSlotRequirements;
  for (const auto& [slot, bytes] : blobs)
    if (is_special_slot(slot)) count = std::max(count, slot);
  CdPlace place = place_of(signature, old);
  for (uint32_t slot : {kSlotInfoPlist, kSlotResources})
    if (slot <= old.special_slots &&
        !all_zero(image.bytes.sub(place.special_hash(slot, old.hash_size), old.hash_size, "special slot")))
      count = std::max(count, slot);
  return count;
}

// The special slots below `hash_offset`: the hash of each blob, and the hashes of the
// bundle files the old CodeDirectory sealed, copied.
void write_special_slots(std::vector<uint8_t>& cd, uint64_t hash_offset, uint32_t special_slots, const MachO& image,
                         const CodeSignature& signature, const CodeDirectory& old, const BlobsBySlot& blobs) {
  Hasher hasher(old.hash_type);
  CdPlace old_place = place_of(signature, old);
  for (uint32_t slot = 1; slot <= special_slots; ++slot) {
    uint64_t at = hash_offset - uint64_t(slot) * old.hash_size;
    if (auto blob = blobs.find(slot); blob != blobs.end()) {
      std::vector<uint8_t> hash = hasher.hash(Bytes(blob->second));
      put_bytes(cd, at, hash.data(), hash.size());
    } else if (is_external_slot(slot) && slot <= old.special_slots) {
      Bytes sealed = image.bytes.sub(old_place.special_hash(slot, old.hash_size), old.hash_size, "special slot");
      put_bytes(cd, at, sealed.data(), sealed.size());
    }
  }
}

// codesign's CodeDirectory layout: fixed header, identifier, special slots, code slots.
// The page hashes it computes are added to `hashed`.
std::vector<uint8_t> adhoc_code_directory(const MachO& image, const CodeSignature& signature, const CodeDirectory& old,
                                          const BlobsBySlot& blobs, const KnownPageHashes* known,
                                          HashedPagesList& hashed) {
  Bytes old_bytes = image.bytes.sub(signature.offset + old.offset, old.length, "CodeDirectory");
  // The old header is carried over (version, platform, execSeg, runtime...).
  Cd header = read_fixed_header(old_bytes, old.fixed_size);
  require_plain_code_directory(old_bytes, header, old);
  uint32_t special_slots = adhoc_special_slots(image, signature, old, blobs);
  uint64_t limit = signature.offset;
  uint64_t code_slots = page_count(limit, old.page_size());
  uint64_t hash_offset = old.fixed_size + old.identifier.size() + 1 + uint64_t(special_slots) * old.hash_size;
  uint64_t length = hash_offset + code_slots * old.hash_size;

  header.length = static_cast<uint32_t>(length);
  header.flags = (old.flags | kFlagAdhoc) & ~kFlagLinkerSigned;
  header.hashOffset = static_cast<uint32_t>(hash_offset);
  header.identOffset = old.fixed_size;
  header.nSpecialSlots = special_slots;
  header.nCodeSlots = static_cast<uint32_t>(code_slots);
  header.codeLimit = static_cast<uint32_t>(limit);
  header.teamOffset = 0;  // beyond the header of versions without a team id: not written there
  header.codeLimit64 = 0;
  std::vector<uint8_t> cd(length, 0);
  put_fixed_header(cd, 0, header, old.fixed_size);
  put_string(cd, old.fixed_size, old.identifier);
  write_special_slots(cd, hash_offset, special_slots, image, signature, old, blobs);
  HashedPages pages(image.bytes.sub(0, limit, "signed code"), old.page_size(), old.hash_type, known);
  put_bytes(cd, hash_offset, pages.hashes().data(), pages.hashes().size());
  hashed.add(std::move(pages));
  return cd;
}

// SuperBlob with the blobs in slot order, contiguous after the index (as
// Security's SuperBlob::Maker lays them out).
std::vector<uint8_t> assemble_superblob(const BlobsBySlot& blobs) {
  uint64_t offset = sizeof(SuperBlob) + blobs.size() * sizeof(BlobIndex);
  uint64_t length = offset;
  for (const auto& [slot, bytes] : blobs) length += bytes.size();
  if (length > UINT32_MAX) fail("the new signature would be larger than 4 GiB");
  std::vector<uint8_t> out(length, 0);
  SuperBlob header{};
  header.magic = kSuperBlobMagic;
  header.length = static_cast<uint32_t>(length);
  header.count = static_cast<uint32_t>(blobs.size());
  put(out, 0, header);
  uint64_t index_at = sizeof header;
  for (const auto& [slot, bytes] : blobs) {
    BlobIndex index{};
    index.type = slot;
    index.offset = static_cast<uint32_t>(offset);
    put(out, index_at, index);
    put_bytes(out, offset, bytes.data(), bytes.size());
    index_at += sizeof index;
    offset += bytes.size();
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------
// lld's linker signature (add_adhoc_signature)

namespace cs {

LinkerSignatureLayout linker_layout(uint64_t linkedit_end, const std::string& identifier) {
  LinkerSignatureLayout layout;
  layout.offset = align_up(linkedit_end, 16);
  layout.headers_size = align_up(kLldFixedHeadersSize + identifier.size() + 1, 16);
  layout.pages = page_count(layout.offset, kLinkerPageSize);
  layout.size = layout.headers_size + layout.pages * stored_hash_size(kHashSha256);
  return layout;
}

HashedPages write_linker_signature(MutableBytes slice, const LinkerSignatureLayout& layout, const MachO& image,
                                   const std::string& identifier) {
  const uint64_t at = layout.offset;
  SuperBlob superblob{};
  superblob.magic = kSuperBlobMagic;
  superblob.length = static_cast<uint32_t>(layout.size);
  superblob.count = 1;
  put(slice, at, superblob);

  BlobIndex index{};  // padded to kLldBlobHeadersSize
  index.type = kSlotCodeDirectory;
  index.offset = static_cast<uint32_t>(kLldBlobHeadersSize);
  put(slice, at + sizeof superblob, index);

  const Segment* text = image.segment("__TEXT");
  Cd cd{};  // zero: no special slots, platform, scatter vector or team id
  cd.magic = kCodeDirectoryMagic;
  cd.length = static_cast<uint32_t>(layout.size - kLldBlobHeadersSize);
  cd.version = kVersionExecSeg;
  cd.flags = kFlagAdhoc | kFlagLinkerSigned;
  cd.hashOffset = static_cast<uint32_t>(layout.headers_size - kLldBlobHeadersSize);
  cd.identOffset = static_cast<uint32_t>(kLldCodeDirectorySize);
  cd.nCodeSlots = static_cast<uint32_t>(layout.pages);
  cd.codeLimit = static_cast<uint32_t>(layout.offset);
  cd.hashSize = stored_hash_size(kHashSha256);
  cd.hashType = kHashSha256;
  cd.pageSize = kLinkerPageShift;
  cd.execSegBase = text ? text->file_offset : 0;
  cd.execSegLimit = text ? text->file_size : 0;
  cd.execSegFlags = image.filetype == macho::MH_EXECUTE ? kExecSegMainBinary : 0;
  put_fixed_header(slice, at + kLldBlobHeadersSize, cd, kLldCodeDirectorySize);
  put_string(slice, at + kLldFixedHeadersSize, identifier);  // the padding after it stays zero

  // The Mach-O headers were changed before: the code is hashed as it is now.
  HashedPages hashed(Bytes(slice.data(), layout.offset), kLinkerPageSize, kHashSha256);
  put_bytes(slice, at + layout.headers_size, hashed.hashes().data(), hashed.hashes().size());
  return hashed;
}

void put_fixed_header(MutableBytes out, uint64_t at, const CodeDirectoryHeader& header, uint32_t fixed_size) {
  if (fixed_size > sizeof header)
    fail_as(ErrorKind::Internal, "internal error: a CodeDirectory header of " + std::to_string(fixed_size) + " bytes");
  put_bytes(out, at, reinterpret_cast<const uint8_t*>(&header), fixed_size);
}

void put_string(MutableBytes out, uint64_t at, const std::string& value) {
  put_bytes(out, at, reinterpret_cast<const uint8_t*>(value.data()), value.size());
}

ParsedSlice read_signed_slice(const MachO& image, const char* action) {
  std::optional<CodeSignature> signature = read_code_signature(image);
  if (!signature) fail(std::string("the slice is not signed: nothing to ") + action);
  return {image, std::move(*signature)};
}

}  // namespace cs

// ---------------------------------------------------------------------------
// Public API

HashedPagesList renew_code_signature(MutableBytes slice, uint64_t file_offset, const KnownPageHashes* known) {
  return renew_code_signature(slice, parse_macho(slice.bytes(file_offset)), known);
}

HashedPagesList renew_code_signature(MutableBytes slice, const MachO& image, const KnownPageHashes* known) {
  ParsedSlice parsed = read_signed_slice(image, "renew");
  if (parsed.signature.has_identity)
    fail(
        "signed with an identity (Developer ID?): cannot be renewed; pass --adhoc to replace it with an ad hoc "
        "signature");
  HashedPagesList hashed;
  for (const CodeDirectory& directory : parsed.signature.code_directories)
    hashed.add(renew_code_directory(slice, parsed.image, parsed.signature, directory, known));
  return hashed;
}

HashedPagesList replace_with_adhoc_signature(MutableBytes slice, uint64_t file_offset, const KnownPageHashes* known) {
  return replace_with_adhoc_signature(slice, parse_macho(slice.bytes(file_offset)), known);
}

HashedPagesList replace_with_adhoc_signature(MutableBytes slice, const MachO& image, const KnownPageHashes* known) {
  ParsedSlice parsed = read_signed_slice(image, "replace");
  const CodeSignature& signature = parsed.signature;
  // Blobs other than CodeDirectories, requirements and CMS (entitlements,
  // launch constraints) are kept as they are.
  BlobsBySlot blobs;
  for (const SignatureBlob& blob : signature.blobs) {
    if (is_code_directory_slot(blob.slot) || blob.slot == kSlotRequirements || blob.slot == kSlotCms) continue;
    Bytes bytes = blob_bytes(parsed.image, signature, blob);
    blobs[blob.slot].assign(bytes.data(), bytes.data() + bytes.size());
  }
  blobs[kSlotRequirements] = empty_requirements();
  // CodeDirectories seal the other blobs, so they are built after them.
  BlobsBySlot directories;
  HashedPagesList hashed;
  for (const CodeDirectory& directory : signature.code_directories)
    directories[directory.slot] = adhoc_code_directory(parsed.image, signature, directory, blobs, known, hashed);
  blobs.merge(directories);
  blobs[kSlotCms] = empty_cms();
  std::vector<uint8_t> superblob = assemble_superblob(blobs);
  if (superblob.size() > signature.size)
    fail("the ad hoc signature (" + std::to_string(superblob.size()) +
         " bytes) does not fit in the LC_CODE_SIGNATURE space (datasize " + std::to_string(signature.size) + ")");
  superblob.resize(signature.size, 0);
  put_bytes(slice, signature.offset, superblob.data(), superblob.size());
  return hashed;
}

}  // namespace machofix
