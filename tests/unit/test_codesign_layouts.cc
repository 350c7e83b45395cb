// Code signatures other tools write, built by TestSigner (tests/support/test_signer.h):
// codesign's ad hoc layout with entitlements, agile SHA-1 + SHA-256 and 16 KiB /
// SHA-384 directories, ld64's linker signature, and Developer ID (identity)
// signatures, which are never renewed and are replaced by an ad hoc one with --adhoc.
#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/format/codesign.h"
#include "core/base/sha.h"
#include "tests/support/codesign_fixtures.h"
#include "tests/support/test_signer.h"

using namespace machofix;
using namespace machofix::codesign_test;

// ---------------------------------------------------------------------------
// codesign-style, agile and identity signatures

TEST_CASE("a codesign ad hoc signature with entitlements: verify, renew no-op, re-seal a changed blob") {
  const std::vector<uint8_t> file = test_sign(lld_arm64_dylib(), codesign_adhoc_recipe());
  std::optional<CodeSignature> signature = read_code_signature(parse(file));
  REQUIRE(signature);
  CHECK(signature->style() == "ad hoc (codesign)");
  CHECK(signature->has_cms);
  CHECK(!signature->has_identity);
  CHECK(signature->blobs.size() == 4);
  CHECK(verify(file).empty());
  CHECK(renewed(file) == file);

  // Edit the entitlements in place (same length): slot 5 no longer matches.
  std::vector<uint8_t> edited = file;
  const SignatureBlob* ent = signature->blob_in_slot(cs::kSlotEntitlements);
  edited[signature->offset + ent->offset + ent->length - 3] = 'X';
  uint64_t ent_at = signature->offset + ent->offset;
  CHECK(verify(edited) == std::vector<std::string>{"CodeDirectory sha256: special slot 5 (entitlements) hash mismatch "
                                                   "(its blob: slice bytes " +
                                                   hex(ent_at) + "-" + hex(ent_at + ent->length) + ")"});
  CHECK(check_code_signature(parse(edited)).first_problem_at() == ent_at);
  std::vector<uint8_t> resealed = renewed(edited);
  CHECK(verify(resealed).empty());

  // A zeroed requirements hash is named too.
  std::vector<uint8_t> zeroed = file;
  const CodeDirectory& cd = signature->primary();
  uint64_t slot2 = signature->offset + cd.offset + cd.hash_offset - 2 * 32;
  std::fill(zeroed.begin() + slot2, zeroed.begin() + slot2 + 32, 0);
  uint64_t requirements_at = signature->offset + signature->blob_in_slot(cs::kSlotRequirements)->offset;
  CHECK(verify(zeroed) == std::vector<std::string>{"CodeDirectory sha256: special slot 2 (requirements) hash mismatch "
                                                   "(its blob: slice bytes " +
                                                   hex(requirements_at) + "-" + hex(requirements_at + 12) + ")"});
  CHECK(renewed(zeroed) == file);
}

TEST_CASE("a blob the CodeDirectory does not seal is a problem") {
  Recipe recipe;  // special_slots = 0, but a requirements blob is present
  recipe.blobs[cs::kSlotRequirements] = kEmptyRequirements;
  std::vector<uint8_t> file = test_sign(lld_arm64_dylib(), recipe);
  CHECK(verify(file) == std::vector<std::string>{
                            "CodeDirectory sha256: the blob in special slot 2 (requirements) is not sealed (only 0 "
                            "special slots)"});
}

TEST_CASE("Info.plist and resources hashes are not checkable here, not invalid, and renew keeps them") {
  Recipe recipe = codesign_adhoc_recipe();
  recipe.directories[0].external[cs::kSlotInfoPlist] = std::vector<uint8_t>(32, 0x11);
  recipe.directories[0].external[cs::kSlotResources] = std::vector<uint8_t>(32, 0x33);
  std::vector<uint8_t> file = test_sign(lld_arm64_dylib(), recipe);
  SignatureCheck check = check_code_signature(parse(file));
  CHECK(check.problems.empty());
  REQUIRE(check.notes.size() == 2);
  REQUIRE(check.notes[0].is<finding::ExternalSlotSealed>());
  CHECK(check.notes[0].as<finding::ExternalSlotSealed>().slot == cs::kSlotInfoPlist);
  REQUIRE(check.notes[1].is<finding::ExternalSlotSealed>());
  CHECK(check.notes[1].as<finding::ExternalSlotSealed>().slot == cs::kSlotResources);
  CHECK(describe(check.notes[0]) ==
        "CodeDirectory sha256: special slot 1 (Info.plist) seals a file outside the Mach-O (a bundle's); not checkable "
        "here");
  CHECK(renewed(file) == file);
}

TEST_CASE("agile signature (SHA-1 in slot 0, SHA-256 in 0x1000), as ld64 writes for old targets") {
  Recipe recipe = codesign_adhoc_recipe();
  recipe.directories[0].hash_type = kHashSha1;
  recipe.directories.push_back(recipe.directories[0]);
  recipe.directories[1].hash_type = kHashSha256;
  const std::vector<uint8_t> file = test_sign(lld_arm64_dylib(), recipe);
  std::optional<CodeSignature> signature = read_code_signature(parse(file));
  REQUIRE(signature);
  CHECK(signature->hash_type_names() == std::vector<std::string>{"sha1", "sha256"});
  CHECK(verify(file).empty());
  CHECK(renewed(file) == file);

  std::vector<uint8_t> flipped = file;
  flipped[0x1001] ^= 1;
  CHECK(verify(flipped) ==
        std::vector<std::string>{"CodeDirectory sha1: page 1 (slice bytes 0x1000-0x2000) hash mismatch",
                                 "CodeDirectory sha256: page 1 (slice bytes 0x1000-0x2000) hash mismatch"});
  CHECK(verify(renewed(flipped)).empty());
}

TEST_CASE("16 KiB pages and SHA-384") {
  Recipe recipe;
  recipe.directories[0].page_shift = 14;
  recipe.directories[0].hash_type = kHashSha384;
  const std::vector<uint8_t> file = test_sign(lld_arm64_dylib(), recipe);
  CHECK(read_code_signature(parse(file))->page_size() == 16384);
  CHECK(verify(file).empty());
  std::vector<uint8_t> flipped = file;
  flipped[0x4001] ^= 1;
  CHECK(verify(flipped) ==
        std::vector<std::string>{"CodeDirectory sha384: page 1 (slice bytes 0x4000-0x8000) hash mismatch"});
  CHECK(renewed(flipped) != flipped);
  CHECK(verify(renewed(flipped)).empty());
}

TEST_CASE("ld64-style linker signature: identifier right after the header") {
  Recipe recipe;
  recipe.directories[0].flags = cs::kFlagAdhoc | cs::kFlagLinkerSigned;
  std::vector<uint8_t> file = test_sign(lld_arm64_dylib(), recipe);
  CHECK(read_code_signature(parse(file))->style() == "linker-signed (ld64)");
  CHECK(verify(file).empty());
}


TEST_CASE("an identity signature is not renewed; --adhoc replaces it with codesign's ad hoc layout") {
  std::vector<uint8_t> file = test_sign(lld_arm64_dylib(), identity_recipe());
  std::optional<CodeSignature> signature = read_code_signature(parse(file));
  REQUIRE(signature);
  CHECK(signature->has_identity);
  CHECK(signature->style() == "identity (CMS)");
  CHECK(signature->primary().team_id == "ABCDE12345");
  CHECK(verify(file).empty());
  CHECK(describe(check_code_signature(parse(file)).notes) ==
        std::vector<std::string>{"the CMS signature (identity) is not checked"});
  CHECK(check_code_signature(parse(file)).notes.at(0).is<finding::IdentityNotChecked>());
  CHECK(error_of([&] { renew_code_signature(file, 0); }).problem() ==
        "signed with an identity (Developer ID?): cannot be renewed; pass --adhoc to replace it with an ad hoc "
        "signature");

  std::vector<uint8_t> replaced = file;
  replace_with_adhoc_signature(replaced, 0);
  CHECK(replaced.size() == file.size());
  CHECK(verify(replaced).empty());
  std::optional<CodeSignature> adhoc = read_code_signature(parse(replaced));
  CHECK(adhoc->style() == "ad hoc (codesign)");
  CHECK(adhoc->primary().flags == (cs::kFlagRuntime | cs::kFlagAdhoc));
  CHECK(adhoc->primary().team_id.empty());
  CHECK(adhoc->identifier() == "com.example.libfoo");
  CHECK(adhoc->size == signature->size);  // same space

  // Exactly what codesign -s - --options runtime --entitlements writes, zero padded.
  Recipe expected_recipe = codesign_adhoc_recipe();
  expected_recipe.directories[0].flags = cs::kFlagRuntime | cs::kFlagAdhoc;
  expected_recipe.directories[0].identifier = "com.example.libfoo";
  expected_recipe.datasize = signature->size;  // the identity's space, zero padded
  std::vector<uint8_t> expected = test_sign(file, expected_recipe);
  CHECK(expected == replaced);
  uint64_t dataoff = signature->offset;
  std::vector<uint8_t> want(expected.begin() + dataoff, expected.begin() + dataoff + be32(expected, dataoff + 4));
  std::vector<uint8_t> got(replaced.begin() + dataoff, replaced.begin() + dataoff + be32(replaced, dataoff + 4));
  CHECK(got == want);
  CHECK(std::all_of(replaced.begin() + dataoff + got.size(), replaced.end(), [](uint8_t b) { return b == 0; }));
  // Pages and header: identical to the input (only the signature changed).
  CHECK(std::equal(file.begin(), file.begin() + dataoff, replaced.begin()));
}

TEST_CASE("replace_with_adhoc_signature fails clearly when the ad hoc one does not fit") {
  Recipe recipe = identity_recipe();
  recipe.blobs[cs::kSlotCms] = blob(cs::kCmsWrapperMagic, "x");  // a 9-byte CMS: still an identity
  recipe.blobs[cs::kSlotRequirements] = requirements_blob("");   // 8 bytes, the ad hoc one has 12
  recipe.directories[0].team.clear();                            // dropping it would free 11 bytes
  recipe.reserve = 0;
  std::vector<uint8_t> file = test_sign(lld_arm64_dylib(), recipe);
  recipe.datasize = be32(file, signature_offset(file) + 4);  // no room to spare at all
  file = test_sign(file, recipe);
  REQUIRE(read_code_signature(parse(file))->has_identity);
  CHECK(contains(error_of([&] { replace_with_adhoc_signature(file, 0); }).problem(),
                 "does not fit in the LC_CODE_SIGNATURE space"));
}
