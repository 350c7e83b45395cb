// Small, valid Mach-O files for fuzz seeds (fuzz/make_seeds.cc) and for the bad-input
// corpus (tests/failures/bad_inputs/make_bad_inputs.cc), built with tests/support/macho_builder.h.
// Test-only, header-only. Every image has room in its header for LC_CODE_SIGNATURE
// and __LINKEDIT at its end, so machofix can sign it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/format/codesign.h"
#include "core/format/macho.h"
#include "core/format/macho_format.h"
#include "core/base/sha.h"
#include "tests/support/macho_builder.h"

namespace machofix::samples {

using namespace machofix::test;

inline const char* const kSystem = "/usr/lib/libSystem.B.dylib";
inline const char* const kUnused = "/usr/lib/libunused.dylib";
inline const char* const kFoo = "/usr/lib/libfoo.dylib";

// dyld-info: bind, lazy bind and an exports trie with a re-export, a symbol table;
// libSystem (1) and libfoo (3) are used, libunused (2) is removable.
inline MachOBuilder dyld_info_dylib(uint32_t cputype = macho::CPU_TYPE_ARM64) {
  BindStream bind, lazy;
  bind.bind(1, "_malloc").bind(3, "_foo_data").done();
  lazy.lazy(1, "_free").lazy(3, "_foo");
  Trie trie = make_trie({{"_mine", 0, 0x10, 0, 0, ""}, {"_reexported", macho::EXPORT_SYMBOL_FLAGS_REEXPORT, 0, 3, 0, "_foo"}});
  return MachOBuilder()
      .cpu(cputype, cputype == macho::CPU_TYPE_X86_64 ? 3 : 0)  // CPU_SUBTYPE_X86_64_ALL, as linkers write it
      .header_padding(64)
      .id_dylib("/usr/lib/libme.dylib")
      .dyld_info({{}, bind, {}, lazy, trie.bytes})
      .symtab()
      .load_dylib(kSystem)
      .load_dylib(kUnused)
      .load_dylib(kFoo)
      .uuid()
      .defined("_mine", 0x10)
      .undefined("_malloc", 1)
      .undefined("_foo_data", 3)
      .undefined("_free", 1)
      .undefined("_foo", 3);
}

// Chained fixups in `format` (1, 2, 3) and an LC_DYLD_EXPORTS_TRIE re-export.
inline MachOBuilder chained_dylib(uint32_t format = macho::DYLD_CHAINED_IMPORT_ADDEND) {
  return MachOBuilder()
      .header_padding(64)
      .id_dylib("/usr/lib/libme.dylib")
      .chained_fixups(format, {{1, "_malloc"}, {3, "_foo", true, 8}, {macho::BIND_SPECIAL_DYLIB_WEAK_LOOKUP, "_weakdef"}})
      .exports_trie(reexport_trie("_reexported", 3, "_foo").bytes)
      .symtab()
      .load_dylib(kSystem)
      .load_dylib(kUnused)
      .load_dylib(kFoo)
      .undefined("_malloc", 1)
      .undefined("_foo", 3)
      .undefined("_weakdef", 3);
}

// 21 dylibs; ordinals above 15 are ULEB operands, renumbering crosses the IMM/ULEB line.
inline MachOBuilder many_dylibs() {
  BindStream bind, lazy;
  for (int ordinal : {1, 2, 5, 15, 16, 17, 19, 21}) bind.bind(ordinal, "_fn" + std::to_string(ordinal));
  bind.done();
  for (int ordinal : {3, 18, 20}) lazy.lazy(ordinal, "_lazy" + std::to_string(ordinal));
  MachOBuilder builder;
  builder.header_padding(64).dyld_info({{}, bind, {}, lazy, {}}).load_dylib(kSystem).numbered_dylibs(1, 20);
  builder.undefined("_fn1", 1).undefined("_fn21", 21);
  return builder;
}

// Every dylib command kind, weak imports, special ordinals.
inline MachOBuilder command_kinds() {
  BindStream bind;
  bind.bind(1, "_malloc").bind(2, "_weak_fn", 8, macho::BIND_SYMBOL_FLAGS_WEAK_IMPORT).bind(0, "_self_fn", 16);
  bind.bind(-1, "_main_fn", 24).bind(-2, "_flat_fn", 32).done();
  return MachOBuilder()
      .header_padding(64)
      .dyld_info({{}, bind, {}, {}, {}})
      .load_dylib(kSystem)
      .weak_dylib("/usr/lib/libweak.dylib")
      .reexport_dylib("/usr/lib/libre.dylib")
      .upward_dylib("/usr/lib/libup.dylib")
      .lazy_load_dylib("/usr/lib/liblazy.dylib")
      .load_dylib(kUnused)
      .source_version()
      .undefined("_malloc", 1)
      .undefined("_weak_fn", 2, N_WEAK_REF);
}

// An executable in the flat namespace with -undefined dynamic_lookup imports.
inline MachOBuilder flat_executable() {
  return MachOBuilder()
      .filetype(macho::MH_EXECUTE)
      .flags(MH_DYLDLINK)
      .cpu(macho::CPU_TYPE_X86_64, 3)
      .header_padding(64)
      .load_dylib(kSystem)
      .load_dylib(kUnused)
      .undefined("_malloc", 1)
      .undefined("_dlsym", -2)
      .undefined("_objc_getClass", -2);
}

// A linker-style (lld) ad hoc signature, added by machofix itself.
inline std::vector<uint8_t> signed_copy(const std::vector<uint8_t>& image, const std::string& identifier = "seed") {
  return add_adhoc_signature(parse_macho(Bytes(image)), identifier);
}

// ------------------------------------------------------------ codesign-style signatures

struct SignatureSpec {
  std::vector<uint8_t> hash_types = {kHashSha256};  // the first in slot 0, the next ones in 0x1000...
  bool requirements = true;                         // an empty requirement set in slot 2
  std::string entitlements;                         // slot 5 when not empty
  uint32_t cms_length = 8;                          // slot 0x10000: 0 none, 8 empty (ad hoc), more: "identity"
  uint32_t flags = cs::kFlagAdhoc;
  std::string identifier = "com.example.seed";
};

inline void put_be32_at(std::vector<uint8_t>& out, uint64_t at, uint32_t value) { write_u32(out, at, __builtin_bswap32(value)); }
inline void put_be64_at(std::vector<uint8_t>& out, uint64_t at, uint64_t value) { write_u64(out, at, __builtin_bswap64(value)); }

// A version 0x20400 CodeDirectory over `code` (everything before the signature).
inline std::vector<uint8_t> code_directory(const SignatureSpec& spec, uint8_t hash_type, const Bytes& code,
                                           const std::vector<std::vector<uint8_t>>& special_blobs,
                                           const MachO& image) {
  const uint64_t fixed = 88;
  uint8_t hash_size = stored_hash_size(hash_type);
  uint32_t special_slots = static_cast<uint32_t>(special_blobs.size());
  std::vector<uint8_t> pages = hash_pages(code, 4096, hash_type);
  uint64_t code_slots = pages.size() / hash_size;
  uint64_t hash_offset = fixed + spec.identifier.size() + 1 + uint64_t(special_slots) * hash_size;
  std::vector<uint8_t> cd(hash_offset + pages.size(), 0);
  put_be32_at(cd, 0, cs::kCodeDirectoryMagic);
  put_be32_at(cd, 4, static_cast<uint32_t>(cd.size()));
  put_be32_at(cd, 8, cs::kVersionExecSeg);
  put_be32_at(cd, 12, spec.flags);
  put_be32_at(cd, 16, static_cast<uint32_t>(hash_offset));
  put_be32_at(cd, 20, static_cast<uint32_t>(fixed));
  put_be32_at(cd, 24, special_slots);
  put_be32_at(cd, 28, static_cast<uint32_t>(code_slots));
  put_be32_at(cd, 32, static_cast<uint32_t>(code.size()));
  cd[36] = hash_size;
  cd[37] = hash_type;
  cd[39] = 12;  // 4 KiB pages
  const Segment* text = image.segment("__TEXT");
  put_be64_at(cd, 64, text ? text->file_offset : 0);
  put_be64_at(cd, 72, text ? text->file_size : 0);
  put_be64_at(cd, 80, image.filetype == macho::MH_EXECUTE ? cs::kExecSegMainBinary : 0);
  std::copy(spec.identifier.begin(), spec.identifier.end(), cd.begin() + fixed);
  Hasher hasher(hash_type);
  for (uint32_t slot = 1; slot <= special_slots; ++slot)
    if (!special_blobs[slot - 1].empty()) {
      std::vector<uint8_t> hash = hasher.hash(Bytes(special_blobs[slot - 1]));
      std::copy(hash.begin(), hash.end(), cd.begin() + hash_offset - uint64_t(slot) * hash_size);
    }
  std::copy(pages.begin(), pages.end(), cd.begin() + hash_offset);
  return cd;
}

// `image` signed the way codesign signs (several blobs), in the space an lld-style
// signature with a long identifier reserved.
inline std::vector<uint8_t> codesign_signed(const std::vector<uint8_t>& unsigned_image, const SignatureSpec& spec) {
  std::vector<uint8_t> out = signed_copy(unsigned_image, std::string(900, 'r'));
  MachO image = parse_macho(Bytes(out));
  uint64_t offset = image.code_signature.offset, size = image.code_signature.size;
  Bytes code(out.data(), offset);

  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> blobs;
  std::vector<std::vector<uint8_t>> specials;  // slot n at n - 1
  if (spec.requirements) {
    std::vector<uint8_t> requirements(12, 0);
    put_be32_at(requirements, 0, cs::kRequirementsMagic);
    put_be32_at(requirements, 4, 12);
    specials.resize(2);
    specials[1] = requirements;
  }
  if (!spec.entitlements.empty()) {
    std::vector<uint8_t> entitlements(8, 0);
    put_be32_at(entitlements, 0, cs::kEntitlementsMagic);
    append_cstr(entitlements, spec.entitlements, false);
    put_be32_at(entitlements, 4, static_cast<uint32_t>(entitlements.size()));
    specials.resize(5);
    specials[4] = entitlements;
  }
  for (size_t i = 0; i < spec.hash_types.size(); ++i)
    blobs.push_back({i == 0 ? cs::kSlotCodeDirectory : cs::kSlotAlternateCodeDirectory + uint32_t(i - 1),
                     code_directory(spec, spec.hash_types[i], code, specials, image)});
  for (size_t slot = 1; slot <= specials.size(); ++slot)
    if (!specials[slot - 1].empty()) blobs.push_back({static_cast<uint32_t>(slot), specials[slot - 1]});
  if (spec.cms_length) {
    std::vector<uint8_t> cms(spec.cms_length, 0x30);
    put_be32_at(cms, 0, cs::kCmsWrapperMagic);
    put_be32_at(cms, 4, spec.cms_length);
    blobs.push_back({cs::kSlotCms, cms});
  }
  std::sort(blobs.begin(), blobs.end(), [](auto& a, auto& b) { return a.first < b.first; });

  uint64_t position = 12 + 8 * blobs.size();
  std::vector<uint8_t> superblob(position, 0);
  put_be32_at(superblob, 0, cs::kSuperBlobMagic);
  put_be32_at(superblob, 8, static_cast<uint32_t>(blobs.size()));
  for (size_t i = 0; i < blobs.size(); ++i) {
    put_be32_at(superblob, 12 + 8 * i, blobs[i].first);
    put_be32_at(superblob, 16 + 8 * i, static_cast<uint32_t>(superblob.size()));
    append_bytes(superblob, blobs[i].second);
  }
  put_be32_at(superblob, 4, static_cast<uint32_t>(superblob.size()));
  if (superblob.size() > size) throw std::logic_error("sample_images: the signature does not fit");
  std::fill(out.begin() + offset, out.end(), 0);
  std::copy(superblob.begin(), superblob.end(), out.begin() + offset);
  return out;
}

// -------------------------------------------------------------------- universal

struct SliceSpec {
  uint32_t cputype = macho::CPU_TYPE_ARM64;
  uint32_t cpusubtype = 0;
  std::vector<uint8_t> bytes;
};

// A universal file: 32- or 64-bit fat header, slices in order, each at 2^align; by
// default on its page, as lipo places them and dyld requires (16 KiB for arm64).
inline std::vector<uint8_t> universal(const std::vector<SliceSpec>& slices, bool fat64 = false, uint32_t fixed_align = 0) {
  uint64_t entry = fat64 ? 32 : 20;
  std::vector<uint8_t> out(8 + entry * slices.size(), 0);
  put_be32_at(out, 0, fat64 ? macho::FAT_MAGIC_64 : macho::FAT_MAGIC);
  put_be32_at(out, 4, static_cast<uint32_t>(slices.size()));
  for (size_t i = 0; i < slices.size(); ++i) {
    uint32_t align = fixed_align ? fixed_align : slices[i].cputype == macho::CPU_TYPE_ARM64 ? 14 : 12;
    out.resize(align_up(out.size(), uint64_t(1) << align), 0);
    uint64_t at = 8 + entry * i, offset = out.size(), size = slices[i].bytes.size();
    put_be32_at(out, at, slices[i].cputype);
    put_be32_at(out, at + 4, slices[i].cpusubtype);
    if (fat64) {
      put_be64_at(out, at + 8, offset);
      put_be64_at(out, at + 16, size);
      put_be32_at(out, at + 24, align);
    } else {
      put_be32_at(out, at + 8, static_cast<uint32_t>(offset));
      put_be32_at(out, at + 12, static_cast<uint32_t>(size));
      put_be32_at(out, at + 16, align);
    }
    append_bytes(out, slices[i].bytes);
  }
  return out;
}

}  // namespace machofix::samples
