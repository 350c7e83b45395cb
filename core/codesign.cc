#include "core/codesign.h"

#include <algorithm>
#include <map>

#include "core/load_commands.h"
#include "core/macho_format.h"
#include "core/macho_structs.h"
#include "core/sha.h"

namespace machofix {

using namespace cs;

namespace {

// SuperBlob: magic, length, count, then {type, offset} per blob.
constexpr uint64_t kSuperBlobHeaderSize = 12;
constexpr uint64_t kBlobIndexSize = 8;
constexpr uint64_t kBlobHeaderSize = 8;  // every blob starts with magic, length

// CodeDirectory field offsets (cs_blobs.h CS_CodeDirectory).
constexpr uint64_t kCdLength = 4;
constexpr uint64_t kCdVersion = 8;
constexpr uint64_t kCdFlags = 12;
constexpr uint64_t kCdHashOffset = 16;
constexpr uint64_t kCdIdentOffset = 20;
constexpr uint64_t kCdSpecialSlots = 24;
constexpr uint64_t kCdCodeSlots = 28;
constexpr uint64_t kCdCodeLimit = 32;
constexpr uint64_t kCdHashSize = 36;
constexpr uint64_t kCdHashType = 37;
constexpr uint64_t kCdPageSize = 39;
constexpr uint64_t kCdScatterOffset = 44;  // version >= 0x20100
constexpr uint64_t kCdTeamOffset = 48;     // version >= 0x20200
constexpr uint64_t kCdCodeLimit64 = 56;    // version >= 0x20300
constexpr uint64_t kCdExecSegBase = 64;    // version >= 0x20400
constexpr uint64_t kCdExecSegLimit = 72;
constexpr uint64_t kCdExecSegFlags = 80;
constexpr uint64_t kCdPreEncryptOffset = 92;  // version >= 0x20500
constexpr uint64_t kCdLinkageSize = 104;      // version >= 0x20600
constexpr uint64_t kCdMinimumSize = 44;

// The versions Apple's Security framework accepts (earliestVersion, compatibilityLimit).
constexpr uint32_t kEarliestVersion = 0x20001;
constexpr uint32_t kLatestVersion = 0x2f000;
// xnu accepts pages from 4 KiB (PAGE_SHIFT_4K) up to its own page size (16 KiB on arm64).
constexpr uint8_t kMinPageShift = 12;
constexpr uint8_t kMaxPageShift = 14;

// Mismatching pages listed one by one per CodeDirectory; the rest are counted.
constexpr size_t kMaxListedPages = 32;

// lld's CodeSignatureSection layout (SyntheticSections.cpp): the SuperBlob header
// and its one index entry padded to 8, the version 0x20400 CodeDirectory, the
// identifier zero-padded so that all headers end 16-aligned, one SHA-256 per page.
constexpr uint64_t kLldBlobHeadersSize = 24;
constexpr uint64_t kCdSizeExecSeg = 88;
constexpr uint64_t kLldFixedHeadersSize = kLldBlobHeadersSize + kCdSizeExecSeg;
constexpr uint64_t kLinkerPageSize = 4096;
constexpr uint8_t kLinkerPageShift = 12;
constexpr uint64_t kLoadCommandSize = 16;  // LC_CODE_SIGNATURE: cmd, cmdsize, dataoff, datasize

uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

uint64_t page_count(uint64_t limit, uint64_t page_size) { return limit / page_size + (limit % page_size != 0); }

uint32_t fixed_header_size(uint32_t version) {
  if (version < 0x20100) return 44;
  if (version < 0x20200) return 48;
  if (version < 0x20300) return 52;
  if (version < 0x20400) return 64;
  if (version < 0x20500) return 88;
  if (version < 0x20600) return 96;
  return 108;
}

bool is_code_directory_slot(uint32_t slot) {
  return slot == kSlotCodeDirectory ||
         (slot >= kSlotAlternateCodeDirectory && slot < kSlotAlternateCodeDirectory + kAlternateCodeDirectoryCount);
}

// Slots whose hash a CodeDirectory seals in its special slots (1 .. nSpecialSlots).
bool is_special_slot(uint32_t slot) { return slot > 0 && slot < kSlotAlternateCodeDirectory; }

// Info.plist and resources are files of a bundle, outside the Mach-O.
bool is_external_slot(uint32_t slot) { return slot == kSlotInfoPlist || slot == kSlotResources; }

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

// The magic a blob in `slot` must have; 0 where any magic is allowed.
uint32_t expected_magic(uint32_t slot) {
  if (is_code_directory_slot(slot)) return kCodeDirectoryMagic;
  switch (slot) {
    case kSlotRequirements: return kRequirementsMagic;
    case kSlotEntitlements: return kEntitlementsMagic;
    case kSlotDerEntitlements: return kDerEntitlementsMagic;
    case kSlotCms: return kCmsWrapperMagic;
  }
  return 0;
}

bool all_zero(const Bytes& bytes) {
  return std::all_of(bytes.data(), bytes.data() + bytes.size(), [](uint8_t byte) { return byte == 0; });
}

// ---------------------------------------------------------------------------
// Reading

// Checks what xnu's cs_validate_codedirectory checks, and rejects what machofix
// could not renew faithfully (scatter vectors, hash slots over the header).
class CodeDirectoryReader {
 public:
  CodeDirectoryReader(const Bytes& cd, const SignatureBlob& blob) : cd_(cd) {
    directory_.slot = blob.slot;
    directory_.offset = blob.offset;
    directory_.length = blob.length;
  }

  CodeDirectory read() {
    read_header();
    check_hash_type();
    check_slots();
    read_strings();
    read_versioned_fields();
    return std::move(directory_);
  }

 private:
  [[noreturn]] void fail(uint64_t field, const std::string& problem) const {
    cd_.fail_here(field, name_ + ": " + problem);
  }

  void read_header() {
    name_ = "CodeDirectory in slot " + hex(directory_.slot);
    if (cd_.size() < kCdMinimumSize) fail(kCdLength, "length " + hex(cd_.size()) + " is shorter than 44 bytes");
    directory_.version = cd_.be32(kCdVersion);
    if (directory_.version < kEarliestVersion || directory_.version > kLatestVersion)
      fail(kCdVersion, "version " + hex(directory_.version) + " is not supported");
    directory_.fixed_size = fixed_header_size(directory_.version);
    if (cd_.size() < directory_.fixed_size)
      fail(kCdLength, "length " + hex(cd_.size()) + " is shorter than the " + std::to_string(directory_.fixed_size) +
                          "-byte header of version " + hex(directory_.version));
    directory_.flags = cd_.be32(kCdFlags);
    directory_.hash_offset = cd_.be32(kCdHashOffset);
    directory_.ident_offset = cd_.be32(kCdIdentOffset);
    directory_.special_slots = cd_.be32(kCdSpecialSlots);
    directory_.code_slots = cd_.be32(kCdCodeSlots);
    directory_.code_limit = cd_.be32(kCdCodeLimit);
    directory_.hash_size = cd_.u8(kCdHashSize);
    directory_.hash_type = cd_.u8(kCdHashType);
    directory_.page_size_log2 = cd_.u8(kCdPageSize);
  }

  void check_hash_type() {
    uint8_t expected_size = stored_hash_size(directory_.hash_type);
    if (expected_size == 0) fail(kCdHashType, "unknown hash type " + std::to_string(directory_.hash_type));
    name_ = directory_.name();  // from here on, named by its hash type
    if (directory_.hash_size != expected_size)
      fail(kCdHashSize, "hash size " + std::to_string(directory_.hash_size) + " does not match " +
                            hash_type_name(directory_.hash_type) + " (" + std::to_string(expected_size) + ")");
    if (directory_.page_size_log2 < kMinPageShift || directory_.page_size_log2 > kMaxPageShift)
      fail(kCdPageSize, "page size 2^" + std::to_string(directory_.page_size_log2) +
                            " is not accepted by the kernel (4 KiB to 16 KiB)");
  }

  void check_slots() {
    const CodeDirectory& d = directory_;
    if (d.hash_offset > cd_.size())
      fail(kCdHashOffset, "hashOffset " + hex(d.hash_offset) + " lies past its length " + hex(cd_.size()));
    if (d.hash_offset / d.hash_size < d.special_slots)
      fail(kCdSpecialSlots,
           std::to_string(d.special_slots) + " special slots do not fit before hashOffset " + hex(d.hash_offset));
    // Not a kernel rule, but renewing writes every slot: none may overlap the header.
    if (d.hash_offset - d.special_slots * d.hash_size < d.fixed_size)
      fail(kCdHashOffset, "the hash slots before hashOffset " + hex(d.hash_offset) + " overlap the " +
                              std::to_string(d.fixed_size) + "-byte header");
    if ((cd_.size() - d.hash_offset) / d.hash_size < d.code_slots)
      fail(kCdCodeSlots, std::to_string(d.code_slots) + " code slots do not fit between hashOffset " +
                             hex(d.hash_offset) + " and its length " + hex(cd_.size()));
  }

  void read_strings() {
    if (directory_.ident_offset >= cd_.size())
      fail(kCdIdentOffset, "identOffset " + hex(directory_.ident_offset) + " lies past its length");
    directory_.identifier = std::string(cd_.cstr(directory_.ident_offset, "CodeDirectory identifier"));
    if (directory_.version >= 0x20200) directory_.team_offset = cd_.be32(kCdTeamOffset);
    if (directory_.team_offset == 0) return;
    if (directory_.team_offset >= cd_.size())
      fail(kCdTeamOffset, "teamOffset " + hex(directory_.team_offset) + " lies past its length");
    directory_.team_id = std::string(cd_.cstr(directory_.team_offset, "CodeDirectory team id"));
  }

  void read_versioned_fields() {
    if (directory_.version >= 0x20100 && cd_.be32(kCdScatterOffset) != 0)
      fail(kCdScatterOffset, "scatter vectors are not supported");
    if (directory_.version >= 0x20300 && cd_.be64(kCdCodeLimit64) != 0) {
      directory_.code_limit = cd_.be64(kCdCodeLimit64);
      directory_.code_limit_64 = true;
    }
    if (directory_.version >= 0x20400) {
      directory_.exec_seg_base = cd_.be64(kCdExecSegBase);
      directory_.exec_seg_limit = cd_.be64(kCdExecSegLimit);
      directory_.exec_seg_flags = cd_.be64(kCdExecSegFlags);
    }
  }

  const Bytes& cd_;
  CodeDirectory directory_;
  std::string name_;
};

class SignatureReader {
 public:
  explicit SignatureReader(const MachO& image) : image_(image) {}

  CodeSignature read() {
    signature_.offset = image_.code_signature.offset;
    signature_.size = image_.code_signature.size;
    // parse_macho checked that the range lies inside the slice.
    data_ = image_.bytes.sub(signature_.offset, signature_.size, "code signature");
    read_superblob_header();
    for (uint32_t index = 0; index < count_; ++index) read_index_entry(index);
    require_code_directories();
    return std::move(signature_);
  }

 private:
  void read_superblob_header() {
    if (data_.size() < kSuperBlobHeaderSize)
      data_.fail_here(0, "code signature datasize " + hex(data_.size()) + " is too small for a SuperBlob header");
    uint32_t magic = data_.be32(0, "SuperBlob magic");
    if (magic != kSuperBlobMagic)
      data_.fail_here(0, "code signature magic " + hex(magic) + " is not an embedded-signature SuperBlob (" +
                             hex(kSuperBlobMagic) + ")");
    signature_.length = data_.be32(4, "SuperBlob length");
    if (signature_.length > data_.size())
      data_.fail_here(4, "SuperBlob length " + hex(signature_.length) + " exceeds datasize " + hex(data_.size()));
    if (signature_.length < kSuperBlobHeaderSize)
      data_.fail_here(4, "SuperBlob length " + hex(signature_.length) + " is shorter than its header");
    count_ = data_.be32(8, "SuperBlob count");
    if (count_ > (signature_.length - kSuperBlobHeaderSize) / kBlobIndexSize)
      data_.fail_here(8, "SuperBlob count " + std::to_string(count_) + ": its index does not fit in length " +
                             hex(signature_.length));
  }

  void read_index_entry(uint32_t index) {
    uint64_t at = kSuperBlobHeaderSize + uint64_t(index) * kBlobIndexSize;
    SignatureBlob blob;
    blob.slot = data_.be32(at, "blob slot");
    blob.offset = data_.be32(at + 4, "blob offset");
    std::string name = "blob " + std::to_string(index) + " (slot " + hex(blob.slot) + ")";
    uint64_t index_end = kSuperBlobHeaderSize + uint64_t(count_) * kBlobIndexSize;
    if (blob.offset < index_end || !fits(blob.offset, kBlobHeaderSize, signature_.length))
      data_.fail_here(at + 4, name + " offset " + hex(blob.offset) + " lies outside the SuperBlob (index end " +
                                  hex(index_end) + ", length " + hex(signature_.length) + ")");
    blob.magic = data_.be32(blob.offset, "blob magic");
    blob.length = data_.be32(blob.offset + 4, "blob length");
    if (blob.length < kBlobHeaderSize || !fits(blob.offset, blob.length, signature_.length))
      data_.fail_here(blob.offset + 4, name + " length " + hex(blob.length) + " runs past the SuperBlob length " +
                                           hex(signature_.length));
    if (signature_.blob_in_slot(blob.slot)) data_.fail_here(at, name + ": slot " + hex(blob.slot) + " appears twice");
    check_magic(blob, name);
    signature_.blobs.push_back(blob);
    if (blob.magic == kCodeDirectoryMagic) add_code_directory(blob);
    if (blob.slot == kSlotCms) {
      signature_.has_cms = true;
      signature_.has_identity = blob.length > kEmptyCmsLength;
    }
  }

  void check_magic(const SignatureBlob& blob, const std::string& name) {
    if (blob.magic == kCodeDirectoryMagic && !is_code_directory_slot(blob.slot))
      data_.fail_here(blob.offset, name + " is a CodeDirectory: only slots 0 and 0x1000-0x1004 hold CodeDirectories");
    uint32_t expected = expected_magic(blob.slot);
    if (expected != 0 && blob.magic != expected)
      data_.fail_here(blob.offset, name + " has magic " + hex(blob.magic) + " instead of " + hex(expected));
  }

  void add_code_directory(const SignatureBlob& blob) {
    Bytes cd = data_.sub(blob.offset, blob.length, "CodeDirectory");
    CodeDirectory directory = CodeDirectoryReader(cd, blob).read();
    for (const CodeDirectory& other : signature_.code_directories)
      if (other.hash_type == directory.hash_type)
        data_.fail_here(blob.offset, "CodeDirectories in slots " + hex(other.slot) + " and " + hex(blob.slot) +
                                         " both use " + hash_type_name(directory.hash_type));
    // The primary (slot 0) CodeDirectory comes first, whatever the SuperBlob order.
    auto position =
        blob.slot == kSlotCodeDirectory ? signature_.code_directories.begin() : signature_.code_directories.end();
    signature_.code_directories.insert(position, std::move(directory));
  }

  void require_code_directories() {
    if (!signature_.blob_in_slot(kSlotCodeDirectory))
      data_.fail_here(8, "the SuperBlob has no CodeDirectory in slot 0");
  }

  const MachO& image_;
  Bytes data_;
  uint32_t count_ = 0;
  CodeSignature signature_;
};

// ---------------------------------------------------------------------------
// Verifying

// Where a CodeDirectory's hashes live in the slice.
struct CdPlace {
  uint64_t start;   // of the CodeDirectory, from the start of the slice
  uint64_t hashes;  // of code slot 0
  uint64_t special_hash(uint32_t slot, uint8_t hash_size) const { return hashes - uint64_t(slot) * hash_size; }
};

CdPlace place_of(const CodeSignature& signature, const CodeDirectory& directory) {
  uint64_t start = signature.offset + directory.offset;
  return {start, start + directory.hash_offset};
}

Bytes blob_bytes(const MachO& image, const CodeSignature& signature, const SignatureBlob& blob) {
  return image.bytes.sub(signature.offset + blob.offset, blob.length, "signature blob");
}

// Records a problem; the first one also gives the offset a refusal points at.
void add_problem(SignatureCheck& check, std::string problem, uint64_t absolute_offset) {
  if (check.problems.empty()) check.first_problem_at = absolute_offset;
  check.problems.push_back(std::move(problem));
}

void check_placement(const MachO& image, const CodeSignature& signature, SignatureCheck& check) {
  uint64_t dataoff_field = image.bytes.base() + image.commands[*image.code_signature_command].offset + 8;
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

void check_code_pages(const MachO& image, const CodeSignature& signature, const CodeDirectory& directory,
                      SignatureCheck& check) {
  const std::string name = directory.name();
  const uint64_t base = image.bytes.base();
  CdPlace place = place_of(signature, directory);
  uint64_t limit_field = base + place.start + (directory.code_limit_64 ? kCdCodeLimit64 : kCdCodeLimit);
  if (directory.code_limit != signature.offset)
    add_problem(check,
                name + ": codeLimit " + hex(directory.code_limit) + " is not the signature offset " + hex(signature.offset),
                limit_field);
  if (directory.code_limit > image.bytes.size()) {
    add_problem(check, name + ": codeLimit " + hex(directory.code_limit) + " lies past the end of the slice", limit_field);
    return;
  }
  uint64_t page_size = directory.page_size();
  uint64_t needed = page_count(directory.code_limit, page_size);
  if (directory.code_slots != needed)
    add_problem(check,
                name + ": " + std::to_string(directory.code_slots) + " code slots, but codeLimit " +
                    hex(directory.code_limit) + " needs " + std::to_string(needed),
                base + place.start + kCdCodeSlots);
  uint64_t checked = std::min<uint64_t>(needed, directory.code_slots);
  std::vector<uint8_t> hashes =
      hash_pages(image.bytes.sub(0, directory.code_limit, "signed code"), page_size, directory.hash_type);
  Bytes stored = image.bytes.sub(place.hashes, checked * directory.hash_size, "code hashes");
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

// ---------------------------------------------------------------------------
// Writing

// A blob being built: big-endian fields at fixed offsets, bounds-checked.
struct BlobBuilder {
  std::vector<uint8_t> bytes;
  explicit BlobBuilder(uint64_t size) : bytes(size, 0) {}
  void be32(uint64_t at, uint32_t value) { put_be32(bytes, at, value); }
  void be64(uint64_t at, uint64_t value) { put_be64(bytes, at, value); }
  void u8(uint64_t at, uint8_t value) { put_u8(bytes, at, value); }
  void copy(uint64_t at, const Bytes& from) { put_bytes(bytes, at, from.data(), from.size()); }
  void copy(uint64_t at, const std::vector<uint8_t>& from) { put_bytes(bytes, at, from.data(), from.size()); }
  void text(uint64_t at, const std::string& value) {
    put_bytes(bytes, at, reinterpret_cast<const uint8_t*>(value.data()), value.size());
  }
};

void write_code_limit(std::vector<uint8_t>& slice, uint64_t cd_start, const CodeDirectory& directory, uint64_t limit) {
  if (directory.code_limit_64)
    put_be64(slice, cd_start + kCdCodeLimit64, limit);
  else
    put_be32(slice, cd_start + kCdCodeLimit, static_cast<uint32_t>(limit));
}

// The new hash of special slot `slot`, or nothing to keep what is stored.
std::optional<std::vector<uint8_t>> special_slot_hash(const MachO& image, const CodeSignature& signature, uint32_t slot,
                                                      Hasher& hasher) {
  if (const SignatureBlob* blob = signature.blob_in_slot(slot)) return hasher.hash(blob_bytes(image, signature, *blob));
  if (is_external_slot(slot)) return std::nullopt;  // seals a file we neither have nor change
  return std::vector<uint8_t>(hasher.size(), 0);
}

void renew_code_directory(std::vector<uint8_t>& slice, const MachO& image, const CodeSignature& signature,
                          const CodeDirectory& directory) {
  CdPlace place = place_of(signature, directory);
  uint64_t limit = signature.offset;  // the code ends where the signature starts
  uint64_t needed = page_count(limit, directory.page_size());
  if (needed != directory.code_slots)
    image.bytes.fail_here(place.start + kCdCodeSlots,
                          directory.name() + " has " + std::to_string(directory.code_slots) +
                              " code slots but the code up to the signature (" + hex(limit) + ") has " +
                              std::to_string(needed) + " pages: renewing cannot resize the signature");
  std::vector<uint8_t> hashes =
      hash_pages(image.bytes.sub(0, limit, "signed code"), directory.page_size(), directory.hash_type);
  Hasher hasher(directory.hash_type);
  std::vector<std::optional<std::vector<uint8_t>>> specials;
  for (uint32_t slot = 1; slot <= directory.special_slots; ++slot)
    specials.push_back(special_slot_hash(image, signature, slot, hasher));
  // Every hash is computed before anything is written: `image` views `slice`.
  write_code_limit(slice, place.start, directory, limit);
  put_bytes(slice, place.hashes, hashes.data(), hashes.size());
  for (uint32_t slot = 1; slot <= directory.special_slots; ++slot)
    if (const auto& hash = specials[slot - 1])
      put_bytes(slice, place.special_hash(slot, hasher.size()), hash->data(), hash->size());
}

struct ParsedSlice {
  MachO image;
  CodeSignature signature;
};

ParsedSlice read_signed_slice(const std::vector<uint8_t>& slice, uint64_t file_offset, const char* action) {
  MachO image = parse_macho(Bytes(slice.data(), slice.size(), file_offset));
  std::optional<CodeSignature> signature = read_code_signature(image);
  if (!signature) fail(std::string("the slice is not signed: nothing to ") + action);
  return {std::move(image), std::move(*signature)};
}

// --- codesign-style ad hoc signature (replace_with_adhoc_signature) ---

std::vector<uint8_t> empty_requirements() {
  BlobBuilder blob(12);
  blob.be32(0, kRequirementsMagic);
  blob.be32(4, 12);
  return blob.bytes;  // count 0
}

std::vector<uint8_t> empty_cms() {
  BlobBuilder blob(kEmptyCmsLength);
  blob.be32(0, kCmsWrapperMagic);
  blob.be32(4, kEmptyCmsLength);
  return blob.bytes;
}

// The fields codesign does not carry over into an ad hoc CodeDirectory, or that
// machofix cannot reproduce, must be absent.
void require_plain_code_directory(const Bytes& cd, const CodeDirectory& directory) {
  if (directory.version >= 0x20500 && cd.be32(kCdPreEncryptOffset) != 0)
    cd.fail_here(kCdPreEncryptOffset, directory.name() + ": pre-encryption hashes are not supported");
  if (directory.version >= 0x20600 && cd.be32(kCdLinkageSize) != 0)
    cd.fail_here(kCdLinkageSize, directory.name() + ": linkage hashes are not supported");
}

// Special slots of the ad hoc CodeDirectory: codesign seals requirements (slot 2)
// always, plus every blob it carries and the bundle files the old one sealed.
uint32_t adhoc_special_slots(const MachO& image, const CodeSignature& signature, const CodeDirectory& old,
                             const std::map<uint32_t, std::vector<uint8_t>>& blobs) {
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

// codesign's CodeDirectory layout: fixed header, identifier, special slots, code slots.
std::vector<uint8_t> adhoc_code_directory(const MachO& image, const CodeSignature& signature, const CodeDirectory& old,
                                          const std::map<uint32_t, std::vector<uint8_t>>& blobs) {
  Bytes old_bytes = image.bytes.sub(signature.offset + old.offset, old.length, "CodeDirectory");
  require_plain_code_directory(old_bytes, old);
  uint32_t special_slots = adhoc_special_slots(image, signature, old, blobs);
  uint64_t limit = signature.offset;
  uint64_t code_slots = page_count(limit, old.page_size());
  uint64_t hash_offset = old.fixed_size + old.identifier.size() + 1 + uint64_t(special_slots) * old.hash_size;
  uint64_t length = hash_offset + code_slots * old.hash_size;

  BlobBuilder cd(length);
  cd.copy(0, old_bytes.sub(0, old.fixed_size, "CodeDirectory header"));  // version, platform, execSeg, runtime...
  cd.be32(kCdLength, static_cast<uint32_t>(length));
  cd.be32(kCdFlags, (old.flags | kFlagAdhoc) & ~kFlagLinkerSigned);
  cd.be32(kCdHashOffset, static_cast<uint32_t>(hash_offset));
  cd.be32(kCdIdentOffset, old.fixed_size);
  cd.be32(kCdSpecialSlots, special_slots);
  cd.be32(kCdCodeSlots, static_cast<uint32_t>(code_slots));
  cd.be32(kCdCodeLimit, static_cast<uint32_t>(limit));
  if (old.version >= 0x20200) cd.be32(kCdTeamOffset, 0);
  if (old.version >= 0x20300) cd.be64(kCdCodeLimit64, 0);
  cd.text(old.fixed_size, old.identifier);

  Hasher hasher(old.hash_type);
  CdPlace old_place = place_of(signature, old);
  for (uint32_t slot = 1; slot <= special_slots; ++slot) {
    uint64_t at = hash_offset - uint64_t(slot) * old.hash_size;
    if (auto blob = blobs.find(slot); blob != blobs.end())
      cd.copy(at, hasher.hash(Bytes(blob->second)));
    else if (is_external_slot(slot) && slot <= old.special_slots)
      cd.copy(at, image.bytes.sub(old_place.special_hash(slot, old.hash_size), old.hash_size, "special slot"));
  }
  cd.copy(hash_offset, hash_pages(image.bytes.sub(0, limit, "signed code"), old.page_size(), old.hash_type));
  return cd.bytes;
}

// SuperBlob with the blobs in slot order, contiguous after the index (as
// Security's SuperBlob::Maker lays them out).
std::vector<uint8_t> assemble_superblob(const std::map<uint32_t, std::vector<uint8_t>>& blobs) {
  uint64_t offset = kSuperBlobHeaderSize + blobs.size() * kBlobIndexSize;
  uint64_t length = offset;
  for (const auto& [slot, bytes] : blobs) length += bytes.size();
  if (length > UINT32_MAX) fail("the new signature would be larger than 4 GiB");
  BlobBuilder superblob(length);
  superblob.be32(0, kSuperBlobMagic);
  superblob.be32(4, static_cast<uint32_t>(length));
  superblob.be32(8, static_cast<uint32_t>(blobs.size()));
  uint64_t index = kSuperBlobHeaderSize;
  for (const auto& [slot, bytes] : blobs) {
    superblob.be32(index, slot);
    superblob.be32(index + 4, static_cast<uint32_t>(offset));
    superblob.copy(offset, bytes);
    index += kBlobIndexSize;
    offset += bytes.size();
  }
  return superblob.bytes;
}

// --- lld-style linker signature (add_adhoc_signature) ---

struct LinkerSignatureLayout {
  uint64_t offset = 0;        // dataoff: the end of __LINKEDIT data, 16-aligned
  uint64_t headers_size = 0;  // SuperBlob header .. padded identifier
  uint64_t pages = 0;
  uint64_t size = 0;  // datasize
};

LinkerSignatureLayout linker_layout(uint64_t linkedit_end, const std::string& identifier) {
  LinkerSignatureLayout layout;
  layout.offset = align_up(linkedit_end, 16);
  layout.headers_size = align_up(kLldFixedHeadersSize + identifier.size() + 1, 16);
  layout.pages = page_count(layout.offset, kLinkerPageSize);
  layout.size = layout.headers_size + layout.pages * stored_hash_size(kHashSha256);
  return layout;
}

void write_linker_headers(BlobBuilder& out, uint64_t at, const LinkerSignatureLayout& layout, const MachO& image,
                          const std::string& identifier) {
  const Segment* text = image.segment("__TEXT");
  uint64_t cd = at + kLldBlobHeadersSize;
  out.be32(at, kSuperBlobMagic);
  out.be32(at + 4, static_cast<uint32_t>(layout.size));
  out.be32(at + 8, 1);
  out.be32(at + 12, kSlotCodeDirectory);
  out.be32(at + 16, static_cast<uint32_t>(kLldBlobHeadersSize));
  out.be32(cd, kCodeDirectoryMagic);
  out.be32(cd + kCdLength, static_cast<uint32_t>(layout.size - kLldBlobHeadersSize));
  out.be32(cd + kCdVersion, kVersionExecSeg);
  out.be32(cd + kCdFlags, kFlagAdhoc | kFlagLinkerSigned);
  out.be32(cd + kCdHashOffset, static_cast<uint32_t>(layout.headers_size - kLldBlobHeadersSize));
  out.be32(cd + kCdIdentOffset, static_cast<uint32_t>(kCdSizeExecSeg));
  out.be32(cd + kCdCodeSlots, static_cast<uint32_t>(layout.pages));
  out.be32(cd + kCdCodeLimit, static_cast<uint32_t>(layout.offset));
  out.u8(cd + kCdHashSize, stored_hash_size(kHashSha256));
  out.u8(cd + kCdHashType, kHashSha256);
  out.u8(cd + kCdPageSize, kLinkerPageShift);
  out.be64(cd + kCdExecSegBase, text ? text->file_offset : 0);
  out.be64(cd + kCdExecSegLimit, text ? text->file_size : 0);
  out.be64(cd + kCdExecSegFlags, image.filetype == macho::MH_EXECUTE ? kExecSegMainBinary : 0);
  out.text(cd + kCdSizeExecSeg, identifier);  // the padding after it stays zero
}

// The end of the room after the load commands: the first section data, or the
// first segment content after the header.
uint64_t header_room_end(const MachO& image) {
  uint64_t end = image.first_section_offset();
  for (const Segment& segment : image.segments)
    if (segment.file_offset > 0 && segment.file_size > 0) end = std::min(end, segment.file_offset);
  return end;
}

void require_header_room(const MachO& image) {
  uint64_t start = image.load_commands_end();
  uint64_t end = header_room_end(image);
  if (end < start || end - start < kLoadCommandSize)
    fail("no room in the header for LC_CODE_SIGNATURE (" + std::to_string(end < start ? 0 : end - start) +
         " bytes free after the load commands, 16 needed)");
  if (!all_zero(image.bytes.sub(start, kLoadCommandSize, "header padding")))
    image.bytes.fail_here(
        start, "no room in the header for LC_CODE_SIGNATURE: the bytes after the load commands are not zero");
}

const Segment& linkedit_at_end(const MachO& image) {
  const Segment* linkedit = image.segment("__LINKEDIT");
  if (!linkedit) fail("cannot add a signature: there is no __LINKEDIT segment");
  if (linkedit->file_offset + linkedit->file_size != image.bytes.size())
    fail("cannot add a signature: __LINKEDIT (ends at " + hex(linkedit->file_offset + linkedit->file_size) +
         ") is not at the end of the slice (" + hex(image.bytes.size()) + " bytes)");
  for (const Segment& segment : image.segments)
    if (&segment != linkedit && segment.file_size > 0 && segment.file_offset > linkedit->file_offset)
      fail("cannot add a signature: segment " + segment.name + " lies after __LINKEDIT in the file");
  return *linkedit;
}

// lld leaves __LINKEDIT's vmsize equal to its filesize; ld64 and llvm-objcopy round
// it up to the target's page. Keep whichever convention the file follows.
uint64_t new_linkedit_vmsize(const MachO& image, const Segment& linkedit, uint64_t file_size) {
  if (linkedit.vmsize >= file_size) return linkedit.vmsize;
  if (linkedit.vmsize == linkedit.file_size) return file_size;
  uint64_t page = image.cputype == macho::CPU_TYPE_ARM64 ? 0x4000 : 0x1000;
  return align_up(file_size, page);
}

void require_vm_room(const MachO& image, const Segment& linkedit, uint64_t vmsize) {
  for (const Segment& segment : image.segments)
    if (&segment != &linkedit && segment.vmsize > 0 && segment.vmaddr >= linkedit.vmaddr &&
        segment.vmaddr < linkedit.vmaddr + vmsize)
      fail("cannot add a signature: growing __LINKEDIT would overlap segment " + segment.name);
}

void grow_linkedit(BlobBuilder& out, const MachO& image, const Segment& linkedit, uint64_t new_end) {
  uint64_t file_size = new_end - linkedit.file_offset;
  uint64_t vmsize = new_linkedit_vmsize(image, linkedit, file_size);
  require_vm_room(image, linkedit, vmsize);
  uint64_t command = image.commands[linkedit.command_index].offset;
  put_u64(out.bytes, command + 32, vmsize);
  put_u64(out.bytes, command + 48, file_size);
}

void append_signature_command(BlobBuilder& out, const MachO& image, const LinkerSignatureLayout& layout) {
  macho::LinkeditDataCommand command;
  command.cmd = macho::LC_CODE_SIGNATURE;
  command.cmdsize = sizeof command;
  command.dataoff = static_cast<uint32_t>(layout.offset);
  command.datasize = static_cast<uint32_t>(layout.size);
  std::vector<uint8_t> bytes(sizeof command);
  put(bytes, 0, command);
  LoadCommandList commands(image);  // appended last, as ld64 and lld place it
  commands.insert(commands.size(), std::move(bytes));
  commands.write(image, out.bytes);
}

}  // namespace

// ---------------------------------------------------------------------------
// Public API

std::string CodeDirectory::name() const { return "CodeDirectory " + hash_type_name(hash_type); }

const SignatureBlob* CodeSignature::blob_in_slot(uint32_t slot) const {
  for (const SignatureBlob& blob : blobs)
    if (blob.slot == slot) return &blob;
  return nullptr;
}

bool CodeSignature::linker_signed() const { return primary().flags & kFlagLinkerSigned; }

std::string CodeSignature::style() const {
  if (has_identity) return "identity (CMS)";
  if (has_cms || blob_in_slot(kSlotRequirements)) return "ad hoc (codesign)";
  const CodeDirectory& cd = primary();
  if (!linker_signed()) return (cd.flags & kFlagAdhoc) ? "ad hoc" : "unknown (no CMS, not ad hoc)";
  // lld pads the identifier so that the headers end 16-aligned; ld64 does not pad.
  uint64_t identifier_end = cd.ident_offset + cd.identifier.size() + 1;
  uint64_t special_hashes = uint64_t(cd.special_slots) * cd.hash_size;
  bool lld = cd.version == kVersionExecSeg && cd.offset == kLldBlobHeadersSize && cd.ident_offset == kCdSizeExecSeg &&
             cd.hash_offset == align_up(kLldFixedHeadersSize + cd.identifier.size() + 1, 16) - kLldBlobHeadersSize;
  if (lld && code_directories.size() == 1) return "linker-signed (lld)";
  if (cd.ident_offset == cd.fixed_size && cd.hash_offset == identifier_end + special_hashes)
    return "linker-signed (ld64)";
  return "linker-signed";
}

std::string CodeSignature::identifier() const { return primary().identifier; }

std::vector<std::string> CodeSignature::hash_type_names() const {
  std::vector<std::string> names;
  for (const CodeDirectory& directory : code_directories) names.push_back(hash_type_name(directory.hash_type));
  return names;
}

uint32_t CodeSignature::page_size() const { return static_cast<uint32_t>(primary().page_size()); }

std::optional<CodeSignature> read_code_signature(const MachO& image) {
  if (!image.code_signature.present) return std::nullopt;
  return SignatureReader(image).read();
}

SignatureCheck check_code_signature(const MachO& image) {
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
    check_code_pages(image, *signature, directory, check);
    check_special_slots(image, *signature, directory, check);
  }
  if (signature->has_identity) check.notes.push_back("the CMS signature (identity) is not checked");
  return check;
}

std::vector<std::string> verify_code_signature(const MachO& image) { return check_code_signature(image).problems; }

void renew_code_signature(std::vector<uint8_t>& slice, uint64_t file_offset) {
  ParsedSlice parsed = read_signed_slice(slice, file_offset, "renew");
  if (parsed.signature.has_identity)
    fail(
        "signed with an identity (Developer ID?): cannot be renewed; pass --adhoc to replace it with an ad hoc "
        "signature");
  for (const CodeDirectory& directory : parsed.signature.code_directories)
    renew_code_directory(slice, parsed.image, parsed.signature, directory);
}

void replace_with_adhoc_signature(std::vector<uint8_t>& slice, uint64_t file_offset) {
  ParsedSlice parsed = read_signed_slice(slice, file_offset, "replace");
  const CodeSignature& signature = parsed.signature;
  // Blobs other than CodeDirectories, requirements and CMS (entitlements,
  // launch constraints) are kept as they are.
  std::map<uint32_t, std::vector<uint8_t>> blobs;
  for (const SignatureBlob& blob : signature.blobs) {
    if (is_code_directory_slot(blob.slot) || blob.slot == kSlotRequirements || blob.slot == kSlotCms) continue;
    Bytes bytes = blob_bytes(parsed.image, signature, blob);
    blobs[blob.slot].assign(bytes.data(), bytes.data() + bytes.size());
  }
  blobs[kSlotRequirements] = empty_requirements();
  // CodeDirectories seal the other blobs, so they are built after them.
  std::map<uint32_t, std::vector<uint8_t>> directories;
  for (const CodeDirectory& directory : signature.code_directories)
    directories[directory.slot] = adhoc_code_directory(parsed.image, signature, directory, blobs);
  blobs.merge(directories);
  blobs[kSlotCms] = empty_cms();
  std::vector<uint8_t> superblob = assemble_superblob(blobs);
  if (superblob.size() > signature.size)
    fail("the ad hoc signature (" + std::to_string(superblob.size()) +
         " bytes) does not fit in the LC_CODE_SIGNATURE space (datasize " + std::to_string(signature.size) + ")");
  superblob.resize(signature.size, 0);
  put_bytes(slice, signature.offset, superblob.data(), superblob.size());
}

std::vector<uint8_t> add_adhoc_signature(const MachO& image, const std::string& identifier) {
  if (image.code_signature.present) fail("the slice is already signed");
  if (identifier.empty() || identifier.find('\0') != std::string::npos)
    fail("the signature identifier must be a non-empty string without NUL bytes");
  const Segment& linkedit = linkedit_at_end(image);
  require_header_room(image);
  LinkerSignatureLayout layout = linker_layout(linkedit.file_offset + linkedit.file_size, identifier);
  if (layout.offset + layout.size > UINT32_MAX) fail("cannot add a signature: the slice would exceed 4 GiB");

  BlobBuilder out(layout.offset + layout.size);
  out.copy(0, image.bytes);
  append_signature_command(out, image, layout);
  grow_linkedit(out, image, linkedit, layout.offset + layout.size);
  write_linker_headers(out, layout.offset, layout, image, identifier);
  // The header changed above: hash the code as it is now.
  std::vector<uint8_t> hashes = hash_pages(Bytes(out.bytes.data(), layout.offset), kLinkerPageSize, kHashSha256);
  out.copy(layout.offset + layout.headers_size, hashes);
  return std::move(out.bytes);
}

std::vector<uint8_t> replace_unreadable_signature(const MachO& image, const std::string& identifier) {
  if (!image.code_signature_command) fail("the slice is not signed: no signature to replace");
  const Segment* linkedit = image.segment("__LINKEDIT");
  uint64_t dataoff = image.code_signature.offset;
  uint64_t end = dataoff + image.code_signature.size;
  if (!linkedit || dataoff < linkedit->file_offset || end != image.bytes.size() ||
      linkedit->file_offset + linkedit->file_size != end)
    fail("cannot replace the unreadable signature: it does not end both __LINKEDIT and the slice");
  for (const DataRange* range : {&image.chained_fixups, &image.exports_trie, &image.dyld_info.bind,
                                 &image.dyld_info.lazy_bind, &image.dyld_info.weak_bind, &image.dyld_info.rebase,
                                 &image.dyld_info.exports})
    if (range->present && range->size > 0 && range->offset + range->size > dataoff)
      fail("cannot replace the unreadable signature: other __LINKEDIT data runs into it");
  if (image.symtab.present && image.symtab.strings_offset + image.symtab.strings_size > dataoff)
    fail("cannot replace the unreadable signature: the string table runs into it");
  // The slice up to the signature, __LINKEDIT ending there, without LC_CODE_SIGNATURE
  // (the commands after it move up; the freed bytes become zero header padding).
  std::vector<uint8_t> stripped(image.bytes.data(), image.bytes.data() + dataoff);
  LoadCommandList commands(image);
  std::vector<uint8_t> segment = commands.bytes(linkedit->command_index);
  put_u64(segment, offsetof(macho::SegmentCommand64, filesize), dataoff - linkedit->file_offset);
  commands.replace(linkedit->command_index, std::move(segment));
  commands.remove(*image.code_signature_command);
  commands.write(image, stripped);
  return add_adhoc_signature(parse_macho(Bytes(stripped.data(), stripped.size(), image.bytes.base())), identifier);
}

std::string default_identifier(const MachO& image, const std::string& file_name) {
  std::string path = image.id_name && !image.id_name->empty() ? *image.id_name : file_name;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace machofix
