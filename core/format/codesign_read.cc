// Reading a code signature: the SuperBlob, its blobs and CodeDirectories, with the
// structural checks the kernel applies (cs_validate_csblob, cs_validate_codedirectory)
// before any hash is compared. A malformed signature is an Error at the field.
#include <algorithm>
#include <cstring>

#include "core/format/codesign_internal.h"
#include "core/base/sha.h"

namespace machofix {

using namespace cs;

namespace {

using Cd = CodeDirectoryHeader;

// The versions Apple's Security framework accepts (earliestVersion, compatibilityLimit).
constexpr uint32_t kEarliestVersion = 0x20001;
constexpr uint32_t kLatestVersion = 0x2f000;
constexpr uint32_t kMinimumHeaderSize = fixed_header_size(kEarliestVersion);
// xnu accepts pages from 4 KiB (PAGE_SHIFT_4K) up to its own page size (16 KiB on arm64).
constexpr uint8_t kMinPageShift = 12;
constexpr uint8_t kMaxPageShift = 14;

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

  // The version decides how long the fixed header is: read it, then the header.
  void read_header() {
    name_ = "CodeDirectory in slot " + hex(directory_.slot);
    if (cd_.size() < kMinimumHeaderSize)
      fail(offsetof(Cd, length), "length " + hex(cd_.size()) + " is shorter than 44 bytes");
    directory_.version = read_fixed_header(cd_, kMinimumHeaderSize).version;
    if (directory_.version < kEarliestVersion || directory_.version > kLatestVersion)
      fail(offsetof(Cd, version), "version " + hex(directory_.version) + " is not supported");
    directory_.fixed_size = fixed_header_size(directory_.version);
    if (cd_.size() < directory_.fixed_size)
      fail(offsetof(Cd, length), "length " + hex(cd_.size()) + " is shorter than the " +
                                     std::to_string(directory_.fixed_size) + "-byte header of version " +
                                     hex(directory_.version));
    header_ = read_fixed_header(cd_, directory_.fixed_size);
    directory_.flags = header_.flags;
    directory_.hash_offset = header_.hashOffset;
    directory_.ident_offset = header_.identOffset;
    directory_.special_slots = header_.nSpecialSlots;
    directory_.code_slots = header_.nCodeSlots;
    directory_.code_limit = header_.codeLimit;
    directory_.hash_size = header_.hashSize;
    directory_.hash_type = header_.hashType;
    directory_.page_size_log2 = header_.pageSize;
  }

  void check_hash_type() {
    uint8_t expected_size = stored_hash_size(directory_.hash_type);
    if (expected_size == 0) fail(offsetof(Cd, hashType), "unknown hash type " + std::to_string(directory_.hash_type));
    name_ = directory_.name();  // from here on, named by its hash type
    if (directory_.hash_size != expected_size)
      fail(offsetof(Cd, hashSize), "hash size " + std::to_string(directory_.hash_size) + " does not match " +
                                       hash_type_name(directory_.hash_type) + " (" + std::to_string(expected_size) +
                                       ")");
    if (directory_.page_size_log2 < kMinPageShift || directory_.page_size_log2 > kMaxPageShift)
      fail(offsetof(Cd, pageSize), "page size 2^" + std::to_string(directory_.page_size_log2) +
                                       " is not accepted by the kernel (4 KiB to 16 KiB)");
  }

  void check_slots() {
    const CodeDirectory& d = directory_;
    if (d.hash_offset > cd_.size())
      fail(offsetof(Cd, hashOffset), "hashOffset " + hex(d.hash_offset) + " lies past its length " + hex(cd_.size()));
    if (d.hash_offset / d.hash_size < d.special_slots)
      fail(offsetof(Cd, nSpecialSlots),
           std::to_string(d.special_slots) + " special slots do not fit before hashOffset " + hex(d.hash_offset));
    // Not a kernel rule, but renewing writes every slot: none may overlap the header.
    if (d.hash_offset - d.special_slots * d.hash_size < d.fixed_size)
      fail(offsetof(Cd, hashOffset), "the hash slots before hashOffset " + hex(d.hash_offset) + " overlap the " +
                                          std::to_string(d.fixed_size) + "-byte header");
    if ((cd_.size() - d.hash_offset) / d.hash_size < d.code_slots)
      fail(offsetof(Cd, nCodeSlots), std::to_string(d.code_slots) + " code slots do not fit between hashOffset " +
                                         hex(d.hash_offset) + " and its length " + hex(cd_.size()));
  }

  void read_strings() {
    if (directory_.ident_offset >= cd_.size())
      fail(offsetof(Cd, identOffset), "identOffset " + hex(directory_.ident_offset) + " lies past its length");
    directory_.identifier = std::string(cd_.cstr(directory_.ident_offset, "CodeDirectory identifier"));
    directory_.team_offset = header_.teamOffset;  // 0 before kVersionTeamId
    if (directory_.team_offset == 0) return;
    if (directory_.team_offset >= cd_.size())
      fail(offsetof(Cd, teamOffset), "teamOffset " + hex(directory_.team_offset) + " lies past its length");
    directory_.team_id = std::string(cd_.cstr(directory_.team_offset, "CodeDirectory team id"));
  }

  // A field the version does not have reads as zero (read_fixed_header).
  void read_versioned_fields() {
    if (header_.scatterOffset != 0) fail(offsetof(Cd, scatterOffset), "scatter vectors are not supported");
    if (header_.codeLimit64 != 0) {
      directory_.code_limit = header_.codeLimit64;
      directory_.code_limit_64 = true;
    }
    directory_.exec_seg_base = header_.execSegBase;
    directory_.exec_seg_limit = header_.execSegLimit;
    directory_.exec_seg_flags = header_.execSegFlags;
  }

  const Bytes& cd_;
  CodeDirectoryHeader header_{};
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
    if (data_.size() < sizeof(SuperBlob))
      data_.fail_here(0, "code signature datasize " + hex(data_.size()) + " is too small for a SuperBlob header");
    SuperBlob header = data_.get<SuperBlob>(0, "SuperBlob header");
    if (header.magic != kSuperBlobMagic)
      data_.fail_here(offsetof(SuperBlob, magic), "code signature magic " + hex(header.magic) +
                                                      " is not an embedded-signature SuperBlob (" +
                                                      hex(kSuperBlobMagic) + ")");
    signature_.length = header.length;
    if (signature_.length > data_.size())
      data_.fail_here(offsetof(SuperBlob, length), "SuperBlob length " + hex(signature_.length) +
                                                       " exceeds datasize " + hex(data_.size()));
    if (signature_.length < sizeof(SuperBlob))
      data_.fail_here(offsetof(SuperBlob, length),
                      "SuperBlob length " + hex(signature_.length) + " is shorter than its header");
    count_ = header.count;
    if (count_ > (signature_.length - sizeof(SuperBlob)) / sizeof(BlobIndex))
      data_.fail_here(offsetof(SuperBlob, count), "SuperBlob count " + std::to_string(count_) +
                                                      ": its index does not fit in length " + hex(signature_.length));
  }

  void read_index_entry(uint32_t index) {
    uint64_t at = sizeof(SuperBlob) + uint64_t(index) * sizeof(BlobIndex);
    BlobIndex entry = data_.get<BlobIndex>(at, "blob index");  // inside: count_ was checked
    SignatureBlob blob;
    blob.slot = entry.type;
    blob.offset = entry.offset;
    std::string name = "blob " + std::to_string(index) + " (slot " + hex(blob.slot) + ")";
    uint64_t index_end = sizeof(SuperBlob) + uint64_t(count_) * sizeof(BlobIndex);
    if (blob.offset < index_end || !fits(blob.offset, sizeof(GenericBlob), signature_.length))
      data_.fail_here(at + offsetof(BlobIndex, offset), name + " offset " + hex(blob.offset) +
                                                            " lies outside the SuperBlob (index end " +
                                                            hex(index_end) + ", length " + hex(signature_.length) + ")");
    GenericBlob header = data_.get<GenericBlob>(blob.offset, "blob header");
    blob.magic = header.magic;
    blob.length = header.length;
    if (blob.length < sizeof(GenericBlob) || !fits(blob.offset, blob.length, signature_.length))
      data_.fail_here(blob.offset + offsetof(GenericBlob, length), name + " length " + hex(blob.length) +
                                                                       " runs past the SuperBlob length " +
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
      data_.fail_here(offsetof(SuperBlob, count), "the SuperBlob has no CodeDirectory in slot 0");
  }

  const MachO& image_;
  Bytes data_;
  uint32_t count_ = 0;
  CodeSignature signature_;
};

}  // namespace

namespace cs {

CodeDirectoryHeader read_fixed_header(const Bytes& cd, uint32_t fixed_size) {
  if (fixed_size > sizeof(CodeDirectoryHeader))
    fail_as(ErrorKind::Internal, "internal error: a CodeDirectory header of " + std::to_string(fixed_size) + " bytes");
  Bytes bytes = cd.sub(0, fixed_size, "CodeDirectory header");
  CodeDirectoryHeader header{};
  std::memcpy(&header, bytes.data(), bytes.size());
  return header;
}

CdPlace place_of(const CodeSignature& signature, const CodeDirectory& directory) {
  uint64_t start = signature.offset + directory.offset;
  return {start, start + directory.hash_offset};
}

Bytes blob_bytes(const MachO& image, const CodeSignature& signature, const SignatureBlob& blob) {
  return image.bytes.sub(signature.offset + blob.offset, blob.length, "signature blob");
}

bool all_zero(const Bytes& bytes) {
  return std::all_of(bytes.data(), bytes.data() + bytes.size(), [](uint8_t byte) { return byte == 0; });
}

}  // namespace cs

// ---------------------------------------------------------------------------
// What was read

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
  bool lld = cd.version == kVersionExecSeg && cd.offset == kLldBlobHeadersSize &&
             cd.ident_offset == kLldCodeDirectorySize &&
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

}  // namespace machofix
