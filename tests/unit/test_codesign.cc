// Code signatures: hashing, reading (every rule the kernel applies), verifying and
// renewing what ld64.lld and llvm-install-name-tool-16 write, and malformed
// signatures. Other producers' layouts: test_codesign_layouts.cc; adding a
// signature: test_codesign_add.cc; what re-signing costs: test_codesign_cost.cc.
// lld signs arm64 output itself; llvm-install-name-tool-16 re-signs as llvm-objcopy
// does: both are references machofix must agree with.
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
// Hashing

TEST_CASE("hash types: sizes, names, truncation") {
  CHECK(stored_hash_size(kHashSha1) == 20);
  CHECK(stored_hash_size(kHashSha256) == 32);
  CHECK(stored_hash_size(kHashSha256Truncated) == 20);
  CHECK(stored_hash_size(kHashSha384) == 48);
  CHECK(stored_hash_size(5) == 0);
  CHECK(hash_type_name(kHashSha256Truncated) == "sha256-truncated");
  std::vector<uint8_t> abc = {'a', 'b', 'c'};
  std::vector<uint8_t> sha256 = Hasher(kHashSha256).hash(Bytes(abc));
  CHECK(sha256[0] == 0xba);
  CHECK(sha256[31] == 0xad);
  std::vector<uint8_t> truncated = Hasher(kHashSha256Truncated).hash(Bytes(abc));
  CHECK(truncated == std::vector<uint8_t>(sha256.begin(), sha256.begin() + 20));
  CHECK(Hasher(kHashSha1).hash(Bytes(abc))[0] == 0xa9);
  CHECK(Hasher(kHashSha384).hash(Bytes(abc)).size() == 48);
  CHECK_THROWS_AS(Hasher(9), Error);
}

TEST_CASE("hash_pages: short last page, and two threads agree with one") {
  std::vector<uint8_t> data(3 * 1024 * 1024 + 100);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + (i >> 12));
  std::vector<uint8_t> one = hash_pages(Bytes(data), 4096, kHashSha256, 1);
  CHECK(one.size() == (data.size() / 4096 + 1) * 32);
  CHECK(hash_pages(Bytes(data), 4096, kHashSha256, 2) == one);
  CHECK(hash_pages(Bytes(data), 4096, kHashSha256) == one);
  std::vector<uint8_t> last = digest(2, data.data() + data.size() / 4096 * 4096, 100);
  CHECK(std::equal(last.begin(), last.end(), one.end() - 32));
  CHECK(hash_pages(Bytes(data.data(), 0), 4096, kHashSha256).empty());
}

// ---------------------------------------------------------------------------
// lld's signatures

TEST_CASE("verify accepts what ld64.lld signs, and renewing it changes nothing") {
  for (const auto& file : {lld_arm64_dylib(), lld_arm64_exec(), lld_x86_dylib_signed(), lld_x86_exec_signed()}) {
    MachO image = parse(file);
    std::optional<CodeSignature> signature = read_code_signature(image);
    REQUIRE(signature);
    CHECK(signature->style() == "linker-signed (lld)");
    CHECK(signature->linker_signed());
    CHECK(signature->hash_type_names() == std::vector<std::string>{"sha256"});
    CHECK(signature->page_size() == 4096);
    CHECK(!signature->has_cms);
    CHECK(check_code_signature(image).valid());
    CHECK(check_code_signature(image).notes.empty());
    CHECK(renewed(file) == file);
  }
  std::optional<CodeSignature> exec = read_code_signature(parse(lld_arm64_exec()));
  CHECK(exec->identifier() == "main_arm64");  // lld 16: the output file's name
  CHECK(exec->primary().exec_seg_flags == cs::kExecSegMainBinary);
  CHECK(read_code_signature(parse(lld_arm64_dylib()))->primary().exec_seg_flags == 0);
}

TEST_CASE("an unsigned slice") {
  std::vector<uint8_t> file = lld_x86_dylib_unsigned();
  CHECK(!read_code_signature(parse(file)));
  std::vector<SignatureFinding> problems = problems_of(file);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].is<finding::NotSigned>());
  CHECK(!problems[0].at);
  CHECK(verify(file) == std::vector<std::string>{"not signed"});
  CHECK(contains(error_of([&] { renew_code_signature(file, 0); }).problem(), "not signed"));
}

TEST_CASE("a changed byte is reported with its page and file range; renew re-seals it") {
  std::vector<uint8_t> file = lld_arm64_dylib();
  file[0x2345] ^= 0x40;
  std::vector<SignatureFinding> problems = problems_of(file);
  REQUIRE(problems.size() == 1);
  REQUIRE(problems[0].is<finding::PageHashMismatch>());
  CHECK(problems[0].as<finding::PageHashMismatch>().page == 2);
  CHECK(problems[0].as<finding::PageHashMismatch>().bytes.start == 0x2000);
  CHECK(problems[0].as<finding::PageHashMismatch>().bytes.end == 0x3000);
  CHECK(problems[0].at == 0x2000);
  CHECK(problems[0].code_directory == "CodeDirectory sha256");
  CHECK(verify(file) ==
        std::vector<std::string>{"CodeDirectory sha256: page 2 (slice bytes 0x2000-0x3000) hash mismatch"});
  std::vector<uint8_t> fixed = renewed(file);
  CHECK(verify(fixed).empty());
  CHECK(fixed[0x2345] == file[0x2345]);
}

TEST_CASE("zeroed or foreign code hashes: verify names every page, renew restores lld's bytes") {
  const std::vector<uint8_t> original = lld_arm64_dylib();
  uint64_t dataoff = signature_offset(original);
  const CodeDirectory cd = read_code_signature(parse(original))->primary();
  uint64_t hashes = dataoff + kLldCd + cd.hash_offset;

  SUBCASE("zeros") {
    std::vector<uint8_t> file = original;
    std::fill(file.begin() + hashes, file.begin() + hashes + cd.code_slots * 32, 0);
    std::vector<std::string> problems = verify(file);
    REQUIRE(problems.size() == cd.code_slots);
    CHECK(problems[0] == "CodeDirectory sha256: page 0 (slice bytes 0x0-0x1000) hash mismatch");
    CHECK(problems.back() == "CodeDirectory sha256: page " + std::to_string(cd.code_slots - 1) + " (slice bytes " +
                                 hex((cd.code_slots - 1) * 4096) + "-" + hex(dataoff) + ") hash mismatch");
    CHECK(renewed(file) == original);
  }
  SUBCASE("another file's hashes") {
    std::vector<uint8_t> other = lld_arm64_exec();
    const CodeDirectory other_cd = read_code_signature(parse(other))->primary();
    uint64_t other_hashes = signature_offset(other) + kLldCd + other_cd.hash_offset;
    uint64_t count = std::min(cd.code_slots, other_cd.code_slots);
    std::vector<uint8_t> file = original;
    std::copy(other.begin() + other_hashes, other.begin() + other_hashes + count * 32, file.begin() + hashes);
    std::vector<SignatureFinding> problems = problems_of(file);
    CHECK(!problems.empty());
    for (const SignatureFinding& problem : problems) CHECK(problem.is<finding::PageHashMismatch>());
    CHECK(renewed(file) == original);
  }
}

TEST_CASE("many mismatching pages are listed up to a limit, then counted (large file, two threads)") {
  const std::vector<uint8_t> original = Fixtures::get().link("large_arm64.dylib", "large", "arm64", "dylib");
  CHECK(verify(original).empty());
  const CodeDirectory cd = read_code_signature(parse(original))->primary();
  REQUIRE(cd.code_slots > 600);
  std::vector<uint8_t> file = original;
  uint64_t hashes = signature_offset(file) + kLldCd + cd.hash_offset;
  std::fill(file.begin() + hashes, file.begin() + hashes + cd.code_slots * 32, 0);
  std::vector<std::string> problems = verify(file);
  REQUIRE(problems.size() == 33);
  CHECK(problems.back() == "CodeDirectory sha256: " + std::to_string(cd.code_slots - 32) +
                               " more pages with a hash mismatch (" + std::to_string(cd.code_slots) + " of " +
                               std::to_string(cd.code_slots) + " in all)");
  const SignatureFinding rest = problems_of(file).back();
  REQUIRE(rest.is<finding::MorePageHashMismatches>());
  CHECK(rest.as<finding::MorePageHashMismatches>().unlisted == cd.code_slots - 32);
  CHECK(rest.as<finding::MorePageHashMismatches>().mismatching == cd.code_slots);
  CHECK(!rest.at);  // the counted rest points nowhere; the first problem does
  CHECK(renewed(file) == original);
}

TEST_CASE("llvm-install-name-tool's re-signed output verifies, and renewing it is a no-op") {
  fs::path path = Fixtures::get().dir() / "rpath.dylib";
  write_file(path, lld_arm64_dylib());
  run("llvm-install-name-tool-16 -add_rpath @loader_path/../lib " + path.string());
  std::vector<uint8_t> file = read_file(path);
  CHECK(file != lld_arm64_dylib());
  CHECK(verify(file).empty());
  CHECK(read_code_signature(parse(file))->identifier() == "rpath.dylib");  // objcopy: the output name
  CHECK(read_code_signature(parse(file))->style() == "linker-signed (lld)");
  CHECK(renewed(file) == file);
}

TEST_CASE("codeLimit and placement are checked") {
  std::vector<uint8_t> file = lld_arm64_dylib();
  uint64_t dataoff = signature_offset(file);
  SUBCASE("codeLimit short of the signature") {
    set_be32(file, dataoff + kLldCd + 32, static_cast<uint32_t>(dataoff - 0x10));
    std::vector<std::string> problems = verify(file);
    REQUIRE(!problems.empty());
    CHECK(problems[0] ==
          "CodeDirectory sha256: codeLimit " + hex(dataoff - 0x10) + " is not the signature offset " + hex(dataoff));
    const SignatureFinding first = problems_of(file).front();
    REQUIRE(first.is<finding::CodeLimitNotSignatureOffset>());
    CHECK(first.as<finding::CodeLimitNotSignatureOffset>().code_limit == dataoff - 0x10);
    CHECK(first.at == dataoff + kLldCd + 32);
    CHECK(renewed(file) == lld_arm64_dylib());  // renew puts codeLimit back
  }
  SUBCASE("signature outside __LINKEDIT") {
    MachO image = parse(file);
    uint64_t segment = image.commands[image.segment("__LINKEDIT")->command_index].offset;
    put_u64(file, segment + 48, dataoff - image.segment("__LINKEDIT")->file_offset);  // filesize ends at dataoff
    // The reader itself refuses LINKEDIT data outside __LINKEDIT, naming the dataoff field.
    Error error = error_of([&] { parse(file); });
    CHECK(contains(error.problem(), "LC_CODE_SIGNATURE at " + hex(dataoff) + " lies outside __LINKEDIT"));
    CHECK(error.offset() == image.commands[*image.code_signature_command].offset + 8);
  }
}

// ---------------------------------------------------------------------------
// Malformed signatures: an Error with the absolute offset of the bad field.

TEST_CASE("malformed signatures are errors naming the offset") {
  const std::vector<uint8_t> original = lld_arm64_dylib();
  const uint64_t dataoff = signature_offset(original);
  const uint64_t cd = dataoff + kLldCd;
  const uint32_t datasize = static_cast<uint32_t>(parse(original).code_signature.size);
  std::vector<uint8_t> file = original;
  auto read_error = [&] { return error_of([&] { read_code_signature(parse(file)); }); };

  SUBCASE("SuperBlob length larger than datasize") {
    set_be32(file, dataoff + 4, datasize + 0x10);
    Error error = read_error();
    CHECK(error.problem() == "SuperBlob length " + hex(datasize + 0x10) + " exceeds datasize " + hex(datasize));
    CHECK(error.offset() == dataoff + 4);
    // verify reports it as a problem instead of throwing
    std::vector<SignatureFinding> problems = problems_of(file);
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].is<finding::Unreadable>());
    CHECK(problems[0].at == dataoff + 4);
    CHECK(verify(file) == std::vector<std::string>{error.describe()});
  }
  SUBCASE("bad magic") {
    set_be32(file, dataoff, 0xfade0c02);
    CHECK(read_error().offset() == dataoff);
  }
  SUBCASE("count too big for the length") {
    set_be32(file, dataoff + 8, 1000);
    Error error = read_error();
    CHECK(contains(error.problem(), "SuperBlob count 1000"));
    CHECK(error.offset() == dataoff + 8);
  }
  SUBCASE("blob offset outside the SuperBlob") {
    set_be32(file, dataoff + 16, datasize);
    CHECK(read_error().offset() == dataoff + 16);
  }
  SUBCASE("blob length past the SuperBlob") {
    set_be32(file, cd + 4, datasize);
    Error error = read_error();
    CHECK(contains(error.problem(), "runs past the SuperBlob length"));
    CHECK(error.offset() == cd + 4);
  }
  SUBCASE("hashOffset out of range") {
    set_be32(file, cd + 16, be32(file, cd + 4) + 4);
    Error error = read_error();
    CHECK(contains(error.problem(), "hashOffset"));
    CHECK(error.offset() == cd + 16);
  }
  SUBCASE("code slots past the end") {
    set_be32(file, cd + 28, be32(file, cd + 28) + 1);
    Error error = read_error();
    CHECK(contains(error.problem(), "code slots do not fit"));
    CHECK(error.offset() == cd + 28);
  }
  SUBCASE("special slots before hashOffset") {
    set_be32(file, cd + 24, 4);  // 4 * 32 > hashOffset 0x68
    CHECK(read_error().offset() == cd + 24);
  }
  SUBCASE("special slots overlapping the header") {
    set_be32(file, cd + 24, 1);  // hashOffset 0x68 - 32 reaches into the 88-byte header
    Error error = read_error();
    CHECK(contains(error.problem(), "overlap the 88-byte header"));
    CHECK(error.offset() == cd + 16);
  }
  SUBCASE("unknown hash type") {
    file[cd + 37] = 9;
    Error error = read_error();
    CHECK(error.problem() == "CodeDirectory in slot 0x0: unknown hash type 9");
    CHECK(error.offset() == cd + 37);
  }
  SUBCASE("hash size does not match the type") {
    file[cd + 36] = 20;
    Error error = read_error();
    CHECK(error.problem() == "CodeDirectory sha256: hash size 20 does not match sha256 (32)");
    CHECK(error.offset() == cd + 36);
  }
  SUBCASE("page size the kernel rejects") {
    file[cd + 39] = 16;
    CHECK(read_error().offset() == cd + 39);
  }
  SUBCASE("identifier not NUL-terminated") {
    uint32_t length = be32(file, cd + 4);
    set_be32(file, cd + 20, length - 4);
    std::fill(file.begin() + cd + length - 4, file.begin() + cd + length, 'x');
    Error error = read_error();
    CHECK(error.problem() == "CodeDirectory identifier is not NUL-terminated");
    CHECK(error.offset() == cd + length - 4);
  }
  SUBCASE("unsupported version") {
    set_be32(file, cd + 8, 0x10000);
    CHECK(read_error().offset() == cd + 8);
  }
  SUBCASE("datasize too small for a SuperBlob header") {
    MachO image = parse(file);
    put_u32(file, image.commands[*image.code_signature_command].offset + 12, 8);
    CHECK(read_error().offset() == dataoff);
  }
}

TEST_CASE("malformed SuperBlobs built by hand") {
  const std::vector<uint8_t> lld = lld_arm64_dylib();
  SUBCASE("two CodeDirectories with one hash type") {
    Recipe recipe;
    recipe.directories.push_back(CdSpec{});  // sha256 again, in slot 0x1000
    std::vector<uint8_t> file = test_sign(lld, recipe);
    uint64_t dataoff = signature_offset(file);
    Error error = error_of([&] { read_code_signature(parse(file)); });
    CHECK(error.problem() == "CodeDirectories in slots 0x0 and 0x1000 both use sha256");
    CHECK(error.offset() == dataoff + be32(file, dataoff + 24));  // the second CD
  }
  SUBCASE("a CodeDirectory outside the CodeDirectory slots") {
    Recipe recipe;
    recipe.blobs[3] = blob(cs::kCodeDirectoryMagic, std::string(100, '\0'));
    std::vector<uint8_t> file = test_sign(lld, recipe);
    CHECK(contains(error_of([&] { read_code_signature(parse(file)); }).problem(),
                   "only slots 0 and 0x1000-0x1004 hold CodeDirectories"));
  }
  SUBCASE("a blob with the wrong magic for its slot") {
    Recipe recipe;
    recipe.blobs[cs::kSlotEntitlements] = kEmptyRequirements;
    std::vector<uint8_t> file = test_sign(lld, recipe);
    CHECK(contains(error_of([&] { read_code_signature(parse(file)); }).problem(),
                   "has magic 0xfade0c01 instead of 0xfade7171"));
  }
  SUBCASE("no CodeDirectory in slot 0") {
    std::vector<uint8_t> file = test_sign(lld, Recipe{});
    set_be32(file, signature_offset(file) + 12, 0x1000);  // move it to an alternate slot
    CHECK(contains(error_of([&] { read_code_signature(parse(file)); }).problem(), "no CodeDirectory in slot 0"));
  }
}


TEST_CASE("random corruption of a signature gives an Error or a verdict, never anything else") {
  const std::vector<uint8_t> originals[] = {lld_arm64_dylib(), test_sign(lld_arm64_dylib(), identity_recipe())};
  uint64_t state = 0x9e3779b97f4a7c15ull;  // fixed seed: failures reproduce
  auto next = [&state] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  for (const std::vector<uint8_t>& original : originals) {
    const uint64_t dataoff = signature_offset(original);
    const uint64_t length = be32(original, dataoff + 4);
    for (int round = 0; round < 1500; ++round) {
      std::vector<uint8_t> file = original;
      // Mostly the headers, where the structure lives; sometimes anywhere in the SuperBlob.
      uint64_t span = round % 4 == 0 ? length : std::min<uint64_t>(length, 160);
      for (uint64_t flips = 1 + next() % 3; flips > 0; --flips) file[dataoff + next() % span] = next() & 0xff;
      try {
        check_code_signature(parse(file));
        std::vector<uint8_t> renewed_file = file;
        renew_code_signature(renewed_file, 0);
        std::vector<uint8_t> replaced = file;
        replace_with_adhoc_signature(replaced, 0);
        CHECK(verify(replaced).empty());
      } catch (const Error&) {
      }
    }
  }
}
