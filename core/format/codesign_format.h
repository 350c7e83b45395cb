// The on-disk structures and constants of embedded code signatures, declared once,
// as xnu's osfmk/kern/cs_blobs.h declares them (CS_SuperBlob, CS_BlobIndex,
// CS_GenericBlob, CS_CodeDirectory). Every signature field is big-endian (ub32,
// core/base/endian.h), while the Mach-O around it is little-endian. Read with
// Bytes::get<T>, written with put<T>; a field's offset is offsetof(T, field). A
// CodeDirectory's fixed header is as long as its version makes it: it is read and
// written through read_fixed_header and put_fixed_header (codesign_internal.h).
// See docs/codesign.md.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/base/endian.h"

namespace machofix::cs {

// Blob magics.
constexpr uint32_t kSuperBlobMagic = 0xfade0cc0;  // CSMAGIC_EMBEDDED_SIGNATURE
constexpr uint32_t kCodeDirectoryMagic = 0xfade0c02;
constexpr uint32_t kRequirementsMagic = 0xfade0c01;  // a requirement set: a SuperBlob of requirements
constexpr uint32_t kEntitlementsMagic = 0xfade7171;
constexpr uint32_t kDerEntitlementsMagic = 0xfade7172;
constexpr uint32_t kCmsWrapperMagic = 0xfade0b01;

// SuperBlob slots (BlobIndex::type).
constexpr uint32_t kSlotCodeDirectory = 0;
constexpr uint32_t kSlotInfoPlist = 1;
constexpr uint32_t kSlotRequirements = 2;
constexpr uint32_t kSlotResources = 3;
constexpr uint32_t kSlotEntitlements = 5;
constexpr uint32_t kSlotDerEntitlements = 7;
constexpr uint32_t kSlotAlternateCodeDirectory = 0x1000;  // up to 0x1004
constexpr uint32_t kAlternateCodeDirectoryCount = 5;
constexpr uint32_t kSlotCms = 0x10000;

// CodeDirectory flags and execSegFlags.
constexpr uint32_t kFlagAdhoc = 0x2;
constexpr uint32_t kFlagRuntime = 0x10000;
constexpr uint32_t kFlagLinkerSigned = 0x20000;
constexpr uint64_t kExecSegMainBinary = 0x1;

// CodeDirectory versions: each adds the fields named (CS_SUPPORTS*).
constexpr uint32_t kVersionScatter = 0x20100;      // scatterOffset
constexpr uint32_t kVersionTeamId = 0x20200;       // teamOffset
constexpr uint32_t kVersionCodeLimit64 = 0x20300;  // spare3, codeLimit64
constexpr uint32_t kVersionExecSeg = 0x20400;      // execSeg*: what lld and ld64 write
constexpr uint32_t kVersionRuntime = 0x20500;      // runtime, preEncryptOffset
constexpr uint32_t kVersionLinkage = 0x20600;      // linkage*

constexpr uint32_t kEmptyCmsLength = 8;  // a CMS wrapper with no content: ad hoc

struct GenericBlob {  // CS_GenericBlob: the start of every blob; `length` includes it
  ub32 magic, length;
};

struct SuperBlob {  // CS_SuperBlob: `count` BlobIndex follow, offsets from its start
  ub32 magic, length, count;
};

struct BlobIndex {  // CS_BlobIndex
  ub32 type;  // the slot
  ub32 offset;
};

struct CodeDirectoryHeader {  // CS_CodeDirectory's fixed header; its strings and hashes follow
  ub32 magic, length, version, flags;
  ub32 hashOffset;     // of code slot 0; special slot i at hashOffset - i * hashSize
  ub32 identOffset;    // the identifier, NUL-terminated
  ub32 nSpecialSlots;  // special slots, below hashOffset
  ub32 nCodeSlots;
  ub32 codeLimit;  // bytes of code covered; 0 when codeLimit64 holds it
  uint8_t hashSize, hashType, platform;
  uint8_t pageSize;  // log2 of the page size; 0: one page, unsupported here
  ub32 spare2;
  ub32 scatterOffset;  // kVersionScatter
  ub32 teamOffset;     // kVersionTeamId
  ub32 spare3;         // kVersionCodeLimit64
  ub64 codeLimit64;
  ub64 execSegBase, execSegLimit, execSegFlags;  // kVersionExecSeg
  ub32 runtime, preEncryptOffset;                // kVersionRuntime
  uint8_t linkageHashType, linkageApplicationType;  // kVersionLinkage
  ub16 linkageApplicationSubType;
  ub32 linkageOffset, linkageSize;
};

static_assert(sizeof(GenericBlob) == 8 && sizeof(SuperBlob) == 12 && sizeof(BlobIndex) == 8);
static_assert(sizeof(CodeDirectoryHeader) == 108 && offsetof(CodeDirectoryHeader, hashSize) == 36);
static_assert(offsetof(CodeDirectoryHeader, scatterOffset) == 44 && offsetof(CodeDirectoryHeader, codeLimit64) == 56);
static_assert(offsetof(CodeDirectoryHeader, runtime) == 88 && offsetof(CodeDirectoryHeader, linkageSize) == 104);

// Bytes of the fixed header a CodeDirectory of `version` has (44 .. 108): the fields
// up to the first one a later version added.
constexpr uint32_t fixed_header_size(uint32_t version) {
  if (version < kVersionScatter) return offsetof(CodeDirectoryHeader, scatterOffset);
  if (version < kVersionTeamId) return offsetof(CodeDirectoryHeader, teamOffset);
  if (version < kVersionCodeLimit64) return offsetof(CodeDirectoryHeader, spare3);
  if (version < kVersionExecSeg) return offsetof(CodeDirectoryHeader, execSegBase);
  if (version < kVersionRuntime) return offsetof(CodeDirectoryHeader, runtime);
  if (version < kVersionLinkage) return offsetof(CodeDirectoryHeader, linkageHashType);
  return sizeof(CodeDirectoryHeader);
}
static_assert(fixed_header_size(0x20001) == 44 && fixed_header_size(kVersionExecSeg) == 88);

constexpr bool is_code_directory_slot(uint32_t slot) {
  return slot == kSlotCodeDirectory ||
         (slot >= kSlotAlternateCodeDirectory && slot < kSlotAlternateCodeDirectory + kAlternateCodeDirectoryCount);
}

// Slots whose hash a CodeDirectory seals in its special slots (1 .. nSpecialSlots).
constexpr bool is_special_slot(uint32_t slot) { return slot > 0 && slot < kSlotAlternateCodeDirectory; }

// Info.plist and resources are files of a bundle, outside the Mach-O.
constexpr bool is_external_slot(uint32_t slot) { return slot == kSlotInfoPlist || slot == kSlotResources; }

// The magic a blob in `slot` must have; 0 where any magic is allowed.
constexpr uint32_t expected_magic(uint32_t slot) {
  if (is_code_directory_slot(slot)) return kCodeDirectoryMagic;
  switch (slot) {
    case kSlotRequirements: return kRequirementsMagic;
    case kSlotEntitlements: return kEntitlementsMagic;
    case kSlotDerEntitlements: return kDerEntitlementsMagic;
    case kSlotCms: return kCmsWrapperMagic;
  }
  return 0;
}

}  // namespace machofix::cs
