// Adding a signature to an unsigned slice (add_adhoc_signature) and replacing one too
// malformed to read (replace_unreadable_signature): the result is what ld64.lld
// writes for the same layout, byte for byte.
#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/format/codesign.h"
#include "tests/support/codesign_fixtures.h"

using namespace machofix;
using namespace machofix::codesign_test;

// ---------------------------------------------------------------------------
// Adding a signature

namespace {

// Undoes what ld64.lld -adhoc_codesign adds: the last load command
// (LC_CODE_SIGNATURE), the signature, and __LINKEDIT's growth.
std::vector<uint8_t> strip_lld_signature(std::vector<uint8_t> file) {
  MachO image = parse(file);
  REQUIRE(image.code_signature_command == image.commands.size() - 1);
  uint64_t dataoff = image.code_signature.offset;
  const Segment* linkedit = image.segment("__LINKEDIT");
  uint64_t segment = image.commands[linkedit->command_index].offset;
  uint64_t command = image.commands.back().offset;
  std::fill(file.begin() + command, file.begin() + command + 16, 0);
  put_u32(file, 16, image.ncmds - 1);
  put_u32(file, 20, image.sizeofcmds - 16);
  put_u64(file, segment + 32, dataoff - linkedit->file_offset);
  put_u64(file, segment + 48, dataoff - linkedit->file_offset);
  file.resize(dataoff);
  return file;
}

}  // namespace

TEST_CASE("add_adhoc_signature writes exactly what ld64.lld writes for the same layout") {
  struct Case {
    std::vector<uint8_t> signed_by_lld;
    std::string identifier;
  };
  for (const Case& c :
       {Case{lld_x86_dylib_signed(), "lib_x86_64_signed.dylib"}, Case{lld_x86_exec_signed(), "main_x86_64_signed"},
        Case{lld_arm64_dylib(), "lib_arm64.dylib"}, Case{lld_arm64_exec(), "main_arm64"}}) {
    INFO(c.identifier);
    std::vector<uint8_t> unsigned_file = strip_lld_signature(c.signed_by_lld);
    CHECK(!read_code_signature(parse(unsigned_file)));
    std::vector<uint8_t> signed_file = add_adhoc_signature(parse(unsigned_file), c.identifier);
    CHECK(signed_file == c.signed_by_lld);
  }
}

TEST_CASE("replace_unreadable_signature: a corrupt lld signature becomes exactly what ld64.lld wrote") {
  struct Case {
    std::vector<uint8_t> signed_by_lld;
    std::string identifier;
  };
  for (const Case& c : {Case{lld_arm64_dylib(), "lib_arm64.dylib"}, Case{lld_x86_exec_signed(), "main_x86_64_signed"}}) {
    INFO(c.identifier);
    std::vector<uint8_t> corrupt = c.signed_by_lld;
    corrupt[signature_offset(corrupt) + kLldCd + 3] ^= 0x01;  // CodeDirectory magic
    CHECK_THROWS_AS(read_code_signature(parse(corrupt)), Error);
    CHECK(replace_unreadable_signature(parse(corrupt), c.identifier) == c.signed_by_lld);
  }
}

TEST_CASE("replace_unreadable_signature refuses a signature that does not end the slice") {
  std::vector<uint8_t> file = lld_arm64_dylib();
  file.resize(file.size() + 16, 0);  // bytes after the signature (and after __LINKEDIT)
  CHECK(contains(error_of([&] { replace_unreadable_signature(parse(file), "x"); }).problem(),
                 "does not end both __LINKEDIT and the slice"));
}

TEST_CASE("the first problem's file offset: the page, the malformed field; none when valid") {
  std::vector<uint8_t> file = lld_arm64_dylib();
  CHECK(!check_code_signature(parse(file)).first_problem_at());
  file[0x2345] ^= 0x40;
  file[0x3456] ^= 0x40;
  const uint64_t base = 0x10000;  // as in a universal file or a .pte: offsets are the file's
  CHECK(check_code_signature(parse_macho(Bytes(file.data(), file.size(), base))).first_problem_at() == base + 0x2000);
  std::vector<uint8_t> corrupt = lld_arm64_dylib();
  uint64_t cd_magic = signature_offset(corrupt) + kLldCd;
  corrupt[cd_magic + 3] ^= 0x01;
  SignatureCheck check = check_code_signature(parse_macho(Bytes(corrupt.data(), corrupt.size(), base)));
  CHECK(check.first_problem_at() == base + cd_magic);
}

TEST_CASE("add_adhoc_signature on lld's unsigned x86_64 link") {
  const std::vector<uint8_t> unsigned_file = lld_x86_dylib_unsigned();
  const std::vector<uint8_t> lld_signed = lld_x86_dylib_signed();
  std::vector<uint8_t> file = add_adhoc_signature(parse(unsigned_file), "lib_x86_64_signed.dylib");
  CHECK(verify(file).empty());
  CHECK(renewed(file) == file);
  std::optional<CodeSignature> ours = read_code_signature(parse(file));
  std::optional<CodeSignature> theirs = read_code_signature(parse(lld_signed));
  CHECK(ours->style() == "linker-signed (lld)");
  // Same size and place; lld's own link differs only because it laid the sections
  // out 16 bytes later (it reserved the load command before placing them), so the
  // page hashes differ and so do the section offsets in the header.
  CHECK(file.size() == lld_signed.size());
  CHECK(ours->offset == theirs->offset);
  CHECK(ours->size == theirs->size);
  const CodeDirectory& cd = ours->primary();
  uint64_t hashes = ours->offset + kLldCd + cd.hash_offset;
  CHECK(std::equal(file.begin() + ours->offset, file.begin() + hashes, lld_signed.begin() + ours->offset));
}

TEST_CASE("add_adhoc_signature refuses what it cannot do") {
  CHECK(contains(error_of([&] { add_adhoc_signature(parse(lld_arm64_dylib()), "x"); }).problem(), "already signed"));
  std::vector<uint8_t> no_room =
      Fixtures::get().link("lib_x86_64_nopad.dylib", "lib", "x86_64", "dylib", "-headerpad 0");
  CHECK(contains(error_of([&] { add_adhoc_signature(parse(no_room), "x"); }).problem(),
                 "no room in the header for LC_CODE_SIGNATURE"));
  CHECK_THROWS_AS(add_adhoc_signature(parse(lld_x86_dylib_unsigned()), ""), Error);
}

TEST_CASE("add_adhoc_signature: zero padding after __LINKEDIT joins it; other trailing data is refused") {
  // A .pte segment or a fat slice may end in the container's alignment padding.
  std::vector<uint8_t> padded = strip_lld_signature(lld_arm64_dylib());
  const uint64_t linkedit_end = padded.size();
  padded.resize(linkedit_end + 24, 0);
  std::vector<uint8_t> file = add_adhoc_signature(parse(padded), "lib_arm64.dylib");
  CHECK(verify(file).empty());
  MachO image = parse(file);
  CHECK(image.code_signature.offset == linkedit_end + 32);  // after the padding, 16-byte aligned
  const Segment* linkedit = image.segment("__LINKEDIT");
  CHECK(linkedit->file_offset + linkedit->file_size == file.size());
  const uint64_t content = image.first_section_offset();  // the header aside, the bytes and padding stay
  CHECK(std::equal(file.begin() + content, file.begin() + linkedit_end + 24, padded.begin() + content));

  std::vector<uint8_t> payload = padded;
  payload.back() = 'x';  // an appended payload, not padding
  CHECK(contains(error_of([&] { add_adhoc_signature(parse(payload), "x"); }).problem(),
                 "the bytes after it are not zero padding"));
}

TEST_CASE("default_identifier: the install name's leaf, else the file name") {
  CHECK(default_identifier(parse(lld_arm64_dylib()), "/tmp/whatever.so") == "liblib.dylib");
  CHECK(default_identifier(parse(lld_arm64_exec()), "/usr/local/bin/tool") == "tool");
  CHECK(default_identifier(parse(lld_arm64_exec()), "tool") == "tool");
}
