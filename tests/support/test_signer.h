// TestSigner: writes signatures with layouts lld does not produce (codesign's ad hoc
// layout, agile SHA-1 + SHA-256, Developer ID) into an lld file, with OpenSSL's
// one-shot digests and none of core/'s signing code, so that what machofix reads,
// renews and replaces is checked against an independent writer.
#pragma once

#include <openssl/evp.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/format/codesign_format.h"
#include "tests/support/codesign_fixtures.h"

namespace machofix::codesign_test {

inline std::vector<uint8_t> digest(uint8_t hash_type, const uint8_t* data, size_t size) {
  const EVP_MD* md = hash_type == 1 ? EVP_sha1() : hash_type == 4 ? EVP_sha384() : EVP_sha256();
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  REQUIRE(EVP_Digest(data, size, out, &length, md, nullptr) == 1);
  size_t kept = hash_type == 1 || hash_type == 3 ? 20 : length;
  return std::vector<uint8_t>(out, out + kept);
}

inline std::vector<uint8_t> blob(uint32_t magic, const std::string& payload) {
  std::vector<uint8_t> out(8 + payload.size());
  set_be32(out, 0, magic);
  set_be32(out, 4, static_cast<uint32_t>(out.size()));
  std::copy(payload.begin(), payload.end(), out.begin() + 8);
  return out;
}

struct CdSpec {
  uint8_t hash_type = 2;
  uint8_t page_shift = 12;
  uint32_t flags = 0x2;
  std::string identifier = "libfoo";
  std::string team;
  uint32_t special_slots = 0;
  std::map<uint32_t, std::vector<uint8_t>> external;  // hashes of Info.plist / resources
  uint64_t exec_seg_limit = 0x4000;
  uint64_t exec_seg_flags = 0;
};

// codesign's layout: 88-byte version 0x20400 header, identifier, team id, special
// slots, code slots; nothing padded.
inline std::vector<uint8_t> code_directory(const std::vector<uint8_t>& file, uint64_t code_limit, const CdSpec& spec,
                                    const std::map<uint32_t, std::vector<uint8_t>>& blobs) {
  size_t hash_size = digest(spec.hash_type, nullptr, 0).size();
  uint64_t page = uint64_t(1) << spec.page_shift;
  uint64_t pages = (code_limit + page - 1) / page;
  uint64_t ident = 88;
  uint64_t team = spec.team.empty() ? 0 : ident + spec.identifier.size() + 1;
  uint64_t hash_offset =
      ident + spec.identifier.size() + 1 + (team ? spec.team.size() + 1 : 0) + spec.special_slots * hash_size;
  std::vector<uint8_t> cd(hash_offset + pages * hash_size, 0);
  set_be32(cd, 0, cs::kCodeDirectoryMagic);
  set_be32(cd, 4, static_cast<uint32_t>(cd.size()));
  set_be32(cd, 8, 0x20400);
  set_be32(cd, 12, spec.flags);
  set_be32(cd, 16, static_cast<uint32_t>(hash_offset));
  set_be32(cd, 20, static_cast<uint32_t>(ident));
  set_be32(cd, 24, spec.special_slots);
  set_be32(cd, 28, static_cast<uint32_t>(pages));
  set_be32(cd, 32, static_cast<uint32_t>(code_limit));
  cd[36] = static_cast<uint8_t>(hash_size);
  cd[37] = spec.hash_type;
  cd[39] = spec.page_shift;
  set_be32(cd, 48, static_cast<uint32_t>(team));
  put_be64(cd, 72, spec.exec_seg_limit);
  put_be64(cd, 80, spec.exec_seg_flags);
  std::copy(spec.identifier.begin(), spec.identifier.end(), cd.begin() + ident);
  std::copy(spec.team.begin(), spec.team.end(), cd.begin() + team);
  for (uint32_t slot = 1; slot <= spec.special_slots; ++slot) {
    std::vector<uint8_t> hash(hash_size, 0);
    if (auto found = blobs.find(slot); found != blobs.end())
      hash = digest(spec.hash_type, found->second.data(), found->second.size());
    if (auto found = spec.external.find(slot); found != spec.external.end()) hash = found->second;
    std::copy(hash.begin(), hash.end(), cd.begin() + hash_offset - slot * hash_size);
  }
  for (uint64_t p = 0; p < pages; ++p) {
    uint64_t end = std::min((p + 1) * page, code_limit);
    std::vector<uint8_t> hash = digest(spec.hash_type, file.data() + p * page, end - p * page);
    std::copy(hash.begin(), hash.end(), cd.begin() + hash_offset + p * hash_size);
  }
  return cd;
}

inline std::vector<uint8_t> superblob(const std::vector<std::pair<uint32_t, std::vector<uint8_t>>>& blobs) {
  uint64_t offset = 12 + 8 * blobs.size();
  std::vector<uint8_t> out(offset);
  for (size_t i = 0; i < blobs.size(); ++i) {
    set_be32(out, 12 + 8 * i, blobs[i].first);
    set_be32(out, 16 + 8 * i, static_cast<uint32_t>(out.size()));
    out.insert(out.end(), blobs[i].second.begin(), blobs[i].second.end());
  }
  set_be32(out, 0, cs::kSuperBlobMagic);
  set_be32(out, 4, static_cast<uint32_t>(out.size()));
  set_be32(out, 8, static_cast<uint32_t>(blobs.size()));
  return out;
}

// Gives a signed file `datasize` bytes of signature space (zeroed), growing or
// shrinking __LINKEDIT as lld lays it out (vmsize = filesize).
inline void set_signature_space(std::vector<uint8_t>& file, uint64_t datasize) {
  MachO image = parse(file);
  const Segment* linkedit = image.segment("__LINKEDIT");
  REQUIRE(linkedit);
  uint64_t dataoff = image.code_signature.offset;
  uint64_t command = image.commands[*image.code_signature_command].offset;
  uint64_t segment = image.commands[linkedit->command_index].offset;
  file.resize(dataoff);
  file.resize(dataoff + datasize, 0);
  put_u32(file, command + 12, static_cast<uint32_t>(datasize));
  put_u64(file, segment + 32, dataoff + datasize - linkedit->file_offset);
  put_u64(file, segment + 48, dataoff + datasize - linkedit->file_offset);
}

// Which signature TestSigner writes.
struct Recipe {
  std::vector<CdSpec> directories = {CdSpec{}};    // slot 0, then 0x1000, 0x1001...
  std::map<uint32_t, std::vector<uint8_t>> blobs;  // other slots: requirements, entitlements, CMS
  uint64_t reserve = 0;                            // zero bytes after the SuperBlob
  // The exact signature space; 0: the SuperBlob and `reserve`, 16-aligned.
  uint64_t datasize = 0;
};

// Replaces the signature of an lld-signed file by the one `recipe` describes.
inline std::vector<uint8_t> test_sign(std::vector<uint8_t> file, const Recipe& recipe) {
  // Pass 1 sizes the SuperBlob (its size does not depend on hash values); the
  // header changes with the size, so the hashes come from pass 2.
  for (int pass = 0; pass < 2; ++pass) {
    uint64_t dataoff = signature_offset(file);
    std::vector<std::pair<uint32_t, std::vector<uint8_t>>> blobs;
    for (size_t i = 0; i < recipe.directories.size(); ++i)
      blobs.push_back({i == 0 ? 0u : 0x1000u + uint32_t(i - 1),
                       code_directory(file, dataoff, recipe.directories[i], recipe.blobs)});
    for (const auto& [slot, bytes] : recipe.blobs) blobs.push_back({slot, bytes});
    std::stable_sort(blobs.begin(), blobs.end(), [](auto& a, auto& b) { return a.first < b.first; });
    std::vector<uint8_t> signature = superblob(blobs);
    if (pass == 0) {
      set_signature_space(file, recipe.datasize ? recipe.datasize : (signature.size() + recipe.reserve + 15) / 16 * 16);
    } else {
      std::copy(signature.begin(), signature.end(), file.begin() + dataoff);
    }
  }
  return file;
}

inline std::vector<uint8_t> requirements_blob(const std::string& payload) {
  return blob(cs::kRequirementsMagic, payload);
}

inline const std::vector<uint8_t> kEmptyRequirements = {0xfa, 0xde, 0x0c, 0x01, 0, 0, 0, 0x0c, 0, 0, 0, 0};
inline const std::vector<uint8_t> kEmptyCms = {0xfa, 0xde, 0x0b, 0x01, 0, 0, 0, 8};

inline std::vector<uint8_t> entitlements() {
  return blob(cs::kEntitlementsMagic,
              "<?xml version=\"1.0\"?><plist version=\"1.0\"><dict><key>com.apple.security.get-task-allow</key>"
              "<true/></dict></plist>");
}

// codesign -s - on a plain file with entitlements: CD (flags 0x2), requirements,
// entitlements, empty CMS.
inline Recipe codesign_adhoc_recipe() {
  Recipe recipe;
  recipe.directories[0].special_slots = 5;
  recipe.blobs[cs::kSlotRequirements] = kEmptyRequirements;
  recipe.blobs[cs::kSlotEntitlements] = entitlements();
  recipe.blobs[cs::kSlotCms] = kEmptyCms;
  return recipe;
}

// A Developer ID signature as codesign writes it (hardened runtime, team id,
// a designated requirement, entitlements, a CMS signature), with room to spare.
inline Recipe identity_recipe() {
  Recipe recipe;
  CdSpec& cd = recipe.directories[0];
  cd.flags = cs::kFlagRuntime;
  cd.team = "ABCDE12345";
  cd.identifier = "com.example.libfoo";
  cd.special_slots = 5;
  recipe.blobs[cs::kSlotRequirements] = requirements_blob(std::string(40, '\x07'));
  recipe.blobs[cs::kSlotEntitlements] = entitlements();
  recipe.blobs[cs::kSlotCms] = blob(cs::kCmsWrapperMagic, std::string(3000, '\x42'));
  recipe.reserve = 1000;
  return recipe;
}

}  // namespace machofix::codesign_test
