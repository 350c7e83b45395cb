// Malformed input: every problem is a machofix::Error naming the absolute file offset
// and what is wrong there, never a crash, never another exception type.
//
// Inputs are valid synthetic images (tests/support/macho_builder.h) with one thing
// broken at a known offset. run() takes a slice through everything machofix does
// before writing (parse, scan, analyze, plan, apply, verify).
#include <doctest/doctest.h>

#include <optional>

#include "tests/support/checked_options.h"
#include "core/lief/lief_check.h"
#include "core/format/imports.h"
#include "core/format/macho.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"
#include "core/rewrite/macho_repair.h"
#include "core/rewrite/prune.h"
#include "fuzz/sample_images.h"
#include "tests/support/macho_builder.h"

using namespace machofix;
using namespace machofix::test;
using machofix::samples::kFoo;
using machofix::samples::kSystem;
using machofix::samples::kUnused;

namespace {

struct Outcome {
  bool ok = false;
  std::optional<uint64_t> offset;
  std::string problem;    // Error::problem()
  std::string described;  // Error::describe(), or "success"
  std::string foreign;    // what() of anything thrown that is not a machofix::Error
};

Outcome run(const std::vector<uint8_t>& bytes, uint64_t base = 0) {
  Outcome outcome;
  try {
    Bytes slice(bytes.data(), bytes.size(), base);
    MachO image = parse_macho(slice);
    ImportScan scan = scan_imports(image);
    SliceAnalysis analysis = analyze(image, scan);
    PrunePlan plan = plan_prune(image, analysis, {});
    std::vector<uint8_t> after = apply_prune(image, scan, plan);
    if (plan.removal_count()) verify_prune(image, scan, plan, Bytes(after), cross_check_with_lief);
    outcome.ok = true;
    outcome.described = "success";
  } catch (const Error& error) {
    outcome.offset = error.offset();
    outcome.problem = error.problem();
    outcome.described = error.describe();
  } catch (const std::exception& other) {
    outcome.foreign = other.what();
    outcome.described = std::string("foreign exception: ") + other.what();
  }
  return outcome;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

// The input fails with an Error at absolute offset `at` whose message contains `text`.
#define CHECK_MALFORMED(bytes, at, text)                                       \
  do {                                                                         \
    Outcome outcome_ = run(bytes);                                             \
    INFO("outcome: " << outcome_.described);                                   \
    CHECK_FALSE(outcome_.ok);                                                  \
    CHECK(outcome_.foreign == "");                                             \
    CHECK(outcome_.offset.value_or(UINT64_MAX) == uint64_t(at));               \
    CHECK(contains(outcome_.problem, text));                                   \
    CHECK(contains(outcome_.described, "offset " + hex(uint64_t(at)) + ": ")); \
  } while (0)

namespace {

// The shared sample images (fuzz/sample_images.h), without their header padding,
// so that the load commands end where the offsets below expect them.
// dyld-info: bind, lazy bind and an export trie with a re-export, a symbol table;
// libunused (2) is removable.
MachOBuilder dyld_info_builder() { return samples::dyld_info_dylib().header_padding(0); }

// Chained fixups (format 2 by default) with an LC_DYLD_EXPORTS_TRIE re-export.
MachOBuilder chained_builder(uint32_t format = macho::DYLD_CHAINED_IMPORT_ADDEND) {
  return samples::chained_dylib(format).header_padding(0);
}

// A three-dylib image whose only ordinals are in this bind stream.
Image with_bind(const BindStream& bind) {
  return MachOBuilder().load_dylib(kSystem).load_dylib(kUnused).load_dylib(kFoo).dyld_info({{}, bind, {}, {}, {}}).build();
}
Image with_lazy_bind(const BindStream& lazy) {
  return MachOBuilder().load_dylib(kSystem).load_dylib(kUnused).load_dylib(kFoo).dyld_info({{}, {}, {}, lazy, {}}).build();
}
Image with_trie(const std::vector<uint8_t>& trie) {
  return MachOBuilder().load_dylib(kSystem).load_dylib(kUnused).load_dylib(kFoo).exports_trie(trie).build();
}

// What parse_macho must say about the first `n` bytes of `image`.
struct Expected {
  bool ok = false;
  uint64_t offset = 0;
  std::string text;
};

Expected expected_for_truncation(const Image& image, uint64_t n) {
  if (n < 4) return {false, 0, "file too short for a Mach-O header"};
  if (n < sizeof(macho::MachHeader64)) return {false, 0, "Mach-O header (32 bytes) runs past the end"};
  if (n < image.load_commands_end()) return {false, 20, "runs past the end of the file"};
  for (const CommandInfo& command : image.commands) {
    if (command.cmd == macho::LC_SEGMENT_64) {
      uint64_t fileoff = read_u64(image.bytes, command.offset + 40), filesize = read_u64(image.bytes, command.offset + 48);
      if (fileoff + filesize > n) return {false, command.offset + 40, "runs past the end of the file"};
    }
    for (const BlobField& blob : command.blobs)
      if (blob.range.end() > n) return {false, blob.field_offset, "runs past the end of the file"};
  }
  return {true, 0, ""};
}

void check_every_truncation(const Image& image) {
  size_t successes = 0;
  for (uint64_t n = 0; n <= image.size(); ++n) {
    Expected expected = expected_for_truncation(image, n);
    Outcome outcome = run(image.prefix(n));
    CAPTURE(n);
    INFO("outcome: " << outcome.described);
    REQUIRE(outcome.foreign == "");
    CHECK(outcome.ok == expected.ok);
    if (expected.ok) {
      ++successes;
    } else {
      CHECK(outcome.offset.value_or(UINT64_MAX) == expected.offset);
      CHECK(contains(outcome.problem, expected.text));
    }
  }
  CHECK(successes >= 1);  // at least the whole file
}

uint64_t field(const Image& image, uint32_t cmd, uint64_t at, size_t nth = 0) { return image.command(cmd, nth).offset + at; }

}  // namespace

// =========================================================== truncation

TEST_CASE("truncation at every byte: a clean Error naming the structure cut off, or success if nothing needed is cut") {
  SUBCASE("dyld-info file with __TEXT/__LINKEDIT: the segment whose contents are cut") {
    check_every_truncation(dyld_info_builder().build());
  }
  SUBCASE("dyld-info file without segments: the command field pointing at the blob that is cut") {
    check_every_truncation(dyld_info_builder().without_segments().build());
  }
  SUBCASE("chained-fixups file with segments") { check_every_truncation(chained_builder().build()); }
  SUBCASE("chained-fixups file without segments") { check_every_truncation(chained_builder().without_segments().build()); }
}

TEST_CASE("truncation: the padding after the last LINKEDIT blob is not needed") {
  Image image = dyld_info_builder().without_segments().build();
  REQUIRE(image.strings.end() < image.size());  // the string table is followed by padding
  CHECK(run(image.prefix(image.strings.end())).ok);
  CHECK_MALFORMED(image.prefix(image.strings.end() - 1), field(image, macho::LC_SYMTAB, 16), "string table");
}

TEST_CASE("truncation: each LINKEDIT blob cut by one byte names its own load command field") {
  Image image = dyld_info_builder().without_segments().build();
  // Every blob moved to the end of a file cut just before its last byte.
  const CommandInfo& info = image.command(macho::LC_DYLD_INFO_ONLY);
  for (const BlobField& blob : info.blobs) {
    if (!blob.range.size) continue;
    CAPTURE(blob.what);
    std::vector<uint8_t> bytes = image.prefix(blob.range.end() - 1);
    CHECK_MALFORMED(bytes, blob.field_offset, blob.what + " info");
  }
}

TEST_CASE("offsets are absolute: a slice at file offset 0x4000 reports 0x4000 + its own offset") {
  Image image = dyld_info_builder().build();
  image.put32(image.symbol_offsets[2] + 6, 0x0900);  // n_desc ordinal 9 of 3
  Outcome outcome = run(image.bytes, 0x4000);
  CHECK(outcome.offset.value_or(0) == 0x4000 + image.symbol_offsets[2] + 7);
  CHECK(contains(outcome.described, "offset " + hex(0x4000 + image.symbol_offsets[2] + 7)));
}

TEST_CASE("a malformed slice of a universal file: the Error names the slice and the absolute offset") {
  Image image = dyld_info_builder().build();
  image.put8(image.symbol_offsets[2] + 7, 9);
  std::vector<uint8_t> fat(0x4000, 0);
  write_u32(fat, 0, __builtin_bswap32(macho::FAT_MAGIC));
  write_u32(fat, 4, __builtin_bswap32(1));
  write_u32(fat, 8, __builtin_bswap32(macho::CPU_TYPE_ARM64));
  write_u32(fat, 12, __builtin_bswap32(0));
  write_u32(fat, 16, __builtin_bswap32(0x4000));
  write_u32(fat, 20, __builtin_bswap32(static_cast<uint32_t>(image.size())));
  write_u32(fat, 24, __builtin_bswap32(14));
  append_bytes(fat, image.bytes);
  try {
    prune_macho(Bytes(fat), test::checked());
    FAIL("no error");
  } catch (const Error& error) {
    CHECK(error.offset().value_or(0) == 0x4000 + image.symbol_offsets[2] + 7);
    CHECK(contains(error.describe(), "slice arm64: offset " + hex(0x4000 + image.symbol_offsets[2] + 7)));
    CHECK(contains(error.problem(), "library ordinal 9 is beyond the 3 dependent dylibs"));
  }
}

// =============================================================== header

TEST_CASE("header: bad magic") {
  Image image = dyld_info_builder().build();
  SUBCASE("not Mach-O") { CHECK_MALFORMED(image.put32(0, 0x12345678).bytes, 0, "not a Mach-O file (magic 0x12345678)"); }
  SUBCASE("32-bit") { CHECK_MALFORMED(image.put32(0, macho::MH_MAGIC).bytes, 0, "32-bit Mach-O is not supported"); }
  SUBCASE("big-endian") { CHECK_MALFORMED(image.put32(0, macho::MH_CIGAM_64).bytes, 0, "big-endian Mach-O is not supported"); }
  SUBCASE("empty file") { CHECK_MALFORMED(std::vector<uint8_t>{}, 0, "file too short"); }
}

TEST_CASE("header: an unsupported file type (MH_OBJECT)") {
  Image image = dyld_info_builder().filetype(MH_OBJECT).build();
  CHECK_MALFORMED(image.bytes, 12, "a Mach-O object file (MH_OBJECT) is not supported");
}

TEST_CASE("header: sizeofcmds past the end of the file") {
  Image image = dyld_info_builder().build();
  uint32_t too_big = static_cast<uint32_t>(image.size());
  CHECK_MALFORMED(dyld_info_builder().override_sizeofcmds(too_big).build().bytes, 20,
                  "sizeofcmds " + std::to_string(too_big) + " runs past the end of the file");
  CHECK_MALFORMED(dyld_info_builder().override_sizeofcmds(UINT32_MAX).build().bytes, 20, "runs past the end of the file");
}

TEST_CASE("header: ncmds too large") {
  Image image = dyld_info_builder().build();
  SUBCASE("more than sizeofcmds can hold") {
    uint32_t ncmds = image.sizeofcmds / 8 + 1;
    CHECK_MALFORMED(dyld_info_builder().override_ncmds(ncmds).build().bytes, 16,
                    "ncmds " + std::to_string(ncmds) + " cannot fit in sizeofcmds " + std::to_string(image.sizeofcmds));
  }
  SUBCASE("UINT32_MAX") { CHECK_MALFORMED(dyld_info_builder().override_ncmds(UINT32_MAX).build().bytes, 16, "cannot fit"); }
  SUBCASE("one more than there are: the extra command starts at the end of sizeofcmds") {
    Image extra = dyld_info_builder().override_ncmds(image.ncmds + 1).build();
    CHECK_MALFORMED(extra.bytes, extra.load_commands_end(), "load command " + std::to_string(image.ncmds) + " runs past sizeofcmds");
  }
  SUBCASE("one more, with sizeofcmds covering zero padding: a command of size 0") {
    Image extra = dyld_info_builder().header_padding(16).override_ncmds(image.ncmds + 1)
                      .override_sizeofcmds(image.sizeofcmds + 16).build();
    CHECK_MALFORMED(extra.bytes, extra.load_commands_end() + 4, "has cmdsize 0");
  }
}

TEST_CASE("load commands: cmdsize 0, not a multiple of 8, past sizeofcmds") {
  Image image = dyld_info_builder().build();
  size_t index = image.command_index(macho::LC_LOAD_DYLIB, 1);
  uint64_t at = image.commands[index].offset + 4;
  std::string name = "load command " + std::to_string(index);
  SUBCASE("0") {
    CHECK_MALFORMED(dyld_info_builder().override_cmdsize(index, 0).build().bytes, at,
                    name + " has cmdsize 0 (must be a nonzero multiple of 8)");
  }
  SUBCASE("4 (below the 8-byte load_command)") {
    CHECK_MALFORMED(dyld_info_builder().override_cmdsize(index, 4).build().bytes, at, name + " has cmdsize 4");
  }
  SUBCASE("not a multiple of 8") {
    uint32_t odd = image.commands[index].size - 4;
    CHECK_MALFORMED(dyld_info_builder().override_cmdsize(index, odd).build().bytes, at,
                    name + " has cmdsize " + std::to_string(odd));
  }
  SUBCASE("the last command runs past sizeofcmds") {
    size_t last = image.commands.size() - 1;
    uint32_t size = image.commands[last].size + 8;
    CHECK_MALFORMED(dyld_info_builder().override_cmdsize(last, size).build().bytes, image.commands[last].offset + 4,
                    "load command " + std::to_string(last) + " (cmdsize " + std::to_string(size) + ") runs past sizeofcmds");
  }
  SUBCASE("a huge cmdsize") {
    CHECK_MALFORMED(dyld_info_builder().override_cmdsize(index, 0xfffffff8).build().bytes, at, "runs past sizeofcmds");
  }
  SUBCASE("sizeofcmds cuts the last command") {
    size_t last = image.commands.size() - 1;
    CHECK_MALFORMED(dyld_info_builder().override_sizeofcmds(image.sizeofcmds - 8).build().bytes,
                    image.commands[last].offset + 4, "runs past sizeofcmds");
  }
}

TEST_CASE("load commands: cmdsize smaller than the command's own structure") {
  // Each of these is a multiple of 8, so the problem is found by the command's reader.
  auto shrunk = [](uint32_t cmd, uint32_t size) {
    MachOBuilder builder = chained_builder();
    builder.dyld_info({});
    Image image = builder.build();
    size_t index = image.command_index(cmd);
    return std::pair{MachOBuilder(builder).override_cmdsize(index, size).build(), image.commands[index].offset};
  };
  SUBCASE("LC_SEGMENT_64") {
    auto [image, at] = shrunk(macho::LC_SEGMENT_64, 64);
    CHECK_MALFORMED(image.bytes, at, "LC_SEGMENT_64 (72 bytes) runs past the end of its container");
  }
  SUBCASE("LC_SYMTAB") {
    auto [image, at] = shrunk(macho::LC_SYMTAB, 16);
    CHECK_MALFORMED(image.bytes, at, "LC_SYMTAB (24 bytes) runs past");
  }
  SUBCASE("LC_DYLD_INFO_ONLY") {
    auto [image, at] = shrunk(macho::LC_DYLD_INFO_ONLY, 40);
    CHECK_MALFORMED(image.bytes, at, "LC_DYLD_INFO_ONLY (48 bytes) runs past");
  }
  SUBCASE("LC_DYLD_CHAINED_FIXUPS") {
    auto [image, at] = shrunk(macho::LC_DYLD_CHAINED_FIXUPS, 8);
    CHECK_MALFORMED(image.bytes, at, "LC_DYLD_CHAINED_FIXUPS (16 bytes) runs past");
  }
  SUBCASE("LC_LOAD_DYLIB") {
    auto [image, at] = shrunk(macho::LC_LOAD_DYLIB, 16);
    CHECK_MALFORMED(image.bytes, at, "dylib command (24 bytes) runs past");
  }
}

TEST_CASE("segments: contents past the end of the file, too many sections") {
  Image image = dyld_info_builder().build();
  SUBCASE("__LINKEDIT filesize") {
    uint64_t at = image.commands[1].offset;
    CHECK_MALFORMED(image.put64(at + 48, image.linkedit.size + 1).bytes, at + 40, "segment __LINKEDIT (fileoff");
  }
  SUBCASE("fileoff + filesize overflowing 64 bits") {
    uint64_t at = image.commands[1].offset;
    CHECK_MALFORMED(image.put64(at + 40, UINT64_MAX).bytes, at + 40, "runs past the end of the file");
  }
  SUBCASE("nsects") {
    uint64_t at = image.commands[0].offset;
    CHECK_MALFORMED(image.put32(at + 64, 2).bytes, at + 64, "segment __TEXT: 2 sections do not fit in cmdsize");
  }
}

// ======================================================== dylib commands

TEST_CASE("dylib commands: name offset outside the command") {
  Image image = dyld_info_builder().build();
  const CommandInfo& dylib = image.dylib(2);
  SUBCASE("past the end") {
    CHECK_MALFORMED(image.put32(dylib.offset + 8, dylib.size).bytes, dylib.offset + 8,
                    "dylib name offset " + std::to_string(dylib.size) + " lies outside its load command");
  }
  SUBCASE("far past the end") {
    CHECK_MALFORMED(image.put32(dylib.offset + 8, 0xffffffff).bytes, dylib.offset + 8, "lies outside its load command");
  }
  SUBCASE("inside the fixed part of the command") {
    CHECK_MALFORMED(image.put32(dylib.offset + 8, 8).bytes, dylib.offset + 8, "dylib name offset 8 lies outside");
  }
  SUBCASE("LC_ID_DYLIB") {
    const CommandInfo& id = image.command(macho::LC_ID_DYLIB);
    CHECK_MALFORMED(image.put32(id.offset + 8, 0x1000).bytes, id.offset + 8, "lies outside its load command");
  }
}

TEST_CASE("dylib commands: install name not NUL-terminated inside the command") {
  Image image = dyld_info_builder().build();
  SUBCASE("dependent dylib") {
    const CommandInfo& dylib = image.dylib(3);
    CHECK_MALFORMED(image.fill(dylib.offset + 24, dylib.size - 24, 'x').bytes, dylib.offset + 24,
                    "dylib install name is not NUL-terminated");
  }
  SUBCASE("LC_ID_DYLIB") {
    const CommandInfo& id = image.command(macho::LC_ID_DYLIB);
    CHECK_MALFORMED(image.fill(id.offset + 24, id.size - 24, 'x').bytes, id.offset + 24, "is not NUL-terminated");
  }
}

// ============================================================ duplicates

TEST_CASE("duplicate LC_SYMTAB") {
  Image image = dyld_info_builder().symtab().build();
  CHECK_MALFORMED(image.bytes, image.command(macho::LC_SYMTAB, 1).offset, "duplicate LC_SYMTAB");
}

TEST_CASE("duplicate LC_DYLD_INFO") {
  SUBCASE("two LC_DYLD_INFO_ONLY") {
    Image image = dyld_info_builder().dyld_info({}).build();
    CHECK_MALFORMED(image.bytes, image.command(macho::LC_DYLD_INFO_ONLY, 1).offset, "duplicate LC_DYLD_INFO");
  }
  SUBCASE("LC_DYLD_INFO_ONLY and LC_DYLD_INFO") {
    Image image = dyld_info_builder().dyld_info({}, macho::LC_DYLD_INFO).build();
    CHECK_MALFORMED(image.bytes, image.command(macho::LC_DYLD_INFO).offset, "duplicate LC_DYLD_INFO");
  }
}

TEST_CASE("duplicate LC_ID_DYLIB") {
  Image image = dyld_info_builder().id_dylib("/usr/lib/libother.dylib").build();
  CHECK_MALFORMED(image.bytes, image.command(macho::LC_ID_DYLIB, 1).offset, "duplicate LC_ID_DYLIB");
}

TEST_CASE("duplicate LC_DYLD_CHAINED_FIXUPS and LC_DYLD_EXPORTS_TRIE") {
  SUBCASE("chained fixups") {
    Image image = chained_builder().chained_fixups(macho::DYLD_CHAINED_IMPORT, {}).build();
    CHECK_MALFORMED(image.bytes, image.command(macho::LC_DYLD_CHAINED_FIXUPS, 1).offset, "duplicate LC_DYLD_CHAINED_FIXUPS");
  }
  SUBCASE("exports trie") {
    Image image = chained_builder().exports_trie(make_trie({}).bytes).build();
    CHECK_MALFORMED(image.bytes, image.command(macho::LC_DYLD_EXPORTS_TRIE, 1).offset, "duplicate LC_DYLD_EXPORTS_TRIE");
  }
}

// ========================================================== symbol table

TEST_CASE("symbol table: entries or strings past the end of the file") {
  Image image = dyld_info_builder().build();
  uint64_t symtab = image.command(macho::LC_SYMTAB).offset;
  SUBCASE("nsyms one too many") {
    uint32_t nsyms = image.get32(symtab + 12) + static_cast<uint32_t>((image.size() - image.symbols.offset) / 16) + 1;
    CHECK_MALFORMED(image.put32(symtab + 12, nsyms).bytes, symtab + 8,
                    "symbol table (" + std::to_string(nsyms) + " entries at " + hex(image.symbols.offset) + ") runs past");
  }
  SUBCASE("nsyms UINT32_MAX") { CHECK_MALFORMED(image.put32(symtab + 12, UINT32_MAX).bytes, symtab + 8, "symbol table"); }
  SUBCASE("symoff past the end") { CHECK_MALFORMED(image.put32(symtab + 8, 0xfffffff0).bytes, symtab + 8, "symbol table"); }
  SUBCASE("strsize") {
    CHECK_MALFORMED(image.put32(symtab + 20, static_cast<uint32_t>(image.size())).bytes, symtab + 16,
                    "string table (offset " + hex(image.strings.offset));
  }
}

TEST_CASE("symbol table: a string index outside the string table") {
  Image image = dyld_info_builder().build();
  uint32_t strsize = static_cast<uint32_t>(image.strings.size);
  SUBCASE("just past the end") {
    CHECK_MALFORMED(image.put32(image.symbol_offsets[2], strsize).bytes, image.symbol_offsets[2],
                    "symbol 2: name index " + std::to_string(strsize) + " is outside the string table");
  }
  SUBCASE("UINT32_MAX") {
    CHECK_MALFORMED(image.put32(image.symbol_offsets[1], UINT32_MAX).bytes, image.symbol_offsets[1], "is outside the string table");
  }
}

TEST_CASE("symbol table: the last name not NUL-terminated inside the string table") {
  Image image = dyld_info_builder().build();
  uint64_t symtab = image.command(macho::LC_SYMTAB).offset;
  image.put32(symtab + 20, static_cast<uint32_t>(image.strings.size - 1));  // cut "_foo"'s NUL
  CHECK_MALFORMED(image.bytes, image.name_offsets.back(), "symbol name is not NUL-terminated");
}

// ===================================================== ordinals out of range

TEST_CASE("ordinals beyond the dylib count") {
  SUBCASE("n_desc") {
    Image image = dyld_info_builder().build();
    uint64_t at = image.symbol_offsets[2] + 7;
    CHECK_MALFORMED(image.put8(at, 4).bytes, at, "library ordinal 4 is beyond the 3 dependent dylibs");
    CHECK_MALFORMED(image.put8(at, 0xfd).bytes, at, "library ordinal 253 is beyond the 3 dependent dylibs");
  }
  SUBCASE("bind SET_DYLIB_ORDINAL_IMM") {
    BindStream bind;
    bind.bind(1, "_malloc").bind(9, "_foo").done();
    Image image = with_bind(bind);
    CHECK_MALFORMED(image.bytes, image.bind.offset + bind.ordinal_marks()[1].offset, "library ordinal 9 is beyond the 3");
  }
  SUBCASE("bind SET_DYLIB_ORDINAL_ULEB") {
    BindStream bind;
    bind.ordinal_uleb(200, 2).symbol("_foo").do_bind().done();
    Image image = with_bind(bind);
    CHECK_MALFORMED(image.bytes, image.bind.offset + bind.ordinal_marks()[0].offset, "library ordinal 200 is beyond the 3");
  }
  SUBCASE("bind SET_DYLIB_ORDINAL_ULEB above 16 bits") {
    BindStream bind;
    bind.ordinal_uleb(70000).symbol("_foo").do_bind().done();
    Image image = with_bind(bind);
    CHECK_MALFORMED(image.bytes, image.bind.offset + bind.ordinal_marks()[0].offset, "library ordinal 70000 is too large");
  }
  SUBCASE("bind SET_DYLIB_SPECIAL_IMM below -3") {
    BindStream bind;
    bind.special(-4).symbol("_foo").do_bind().done();
    Image image = with_bind(bind);
    CHECK_MALFORMED(image.bytes, image.bind.offset, "unknown special library ordinal -4");
  }
  SUBCASE("lazy bind") {
    BindStream lazy;
    lazy.lazy(1, "_free").lazy(7, "_foo");
    Image image = with_lazy_bind(lazy);
    CHECK_MALFORMED(image.bytes, image.lazy_bind.offset + lazy.ordinal_marks()[1].offset, "library ordinal 7 is beyond");
  }
  SUBCASE("chained fixups, 8-bit") {
    for (uint32_t format : {macho::DYLD_CHAINED_IMPORT, macho::DYLD_CHAINED_IMPORT_ADDEND}) {
      CAPTURE(format);
      Image image = MachOBuilder().load_dylib(kSystem).chained_fixups(format, {{1, "_malloc"}, {7, "_foo"}}).build();
      CHECK_MALFORMED(image.bytes, image.chained_import_offsets[1], "library ordinal 7 is beyond the 1 dependent dylibs");
      Image special = MachOBuilder().load_dylib(kSystem).chained_fixups(format, {{-11, "_foo"}}).build();
      CHECK_MALFORMED(special.bytes, special.chained_import_offsets[0], "unknown special library ordinal -11");
    }
  }
  SUBCASE("chained fixups, 16-bit") {
    Image image = MachOBuilder().load_dylib(kSystem)
                      .chained_fixups(macho::DYLD_CHAINED_IMPORT_ADDEND64, {{1, "_malloc"}, {0x1234, "_foo"}}).build();
    CHECK_MALFORMED(image.bytes, image.chained_import_offsets[1], "library ordinal 4660 is beyond");
    Image special = MachOBuilder().load_dylib(kSystem)
                        .chained_fixups(macho::DYLD_CHAINED_IMPORT_ADDEND64, {{-11, "_foo"}}).build();
    CHECK_MALFORMED(special.bytes, special.chained_import_offsets[0], "unknown special library ordinal -11");
  }
  SUBCASE("exports trie re-export") {
    Trie trie = reexport_trie("_foo", 9);
    Image image = with_trie(trie.bytes);
    CHECK_MALFORMED(image.bytes, image.exports_trie.offset + trie.ordinal_offsets[0], "library ordinal 9 is beyond");
    Trie huge = reexport_trie("_foo", 70000);
    Image huge_image = with_trie(huge.bytes);
    CHECK_MALFORMED(huge_image.bytes, huge_image.exports_trie.offset + huge.ordinal_offsets[0],
                    "re-export library ordinal 70000 is too large");
  }
}

// ============================================================ bind opcodes

TEST_CASE("bind opcodes running past the end of their stream") {
  SUBCASE("ordinal ULEB cut off") {
    BindStream bind;
    bind.bind(1, "_malloc").raw({macho::BIND_OPCODE_SET_DYLIB_ORDINAL_ULEB, 0x81});
    Image image = with_bind(bind);
    CHECK_MALFORMED(image.bytes, image.bind.offset + bind.position() - 1,
                    "library ordinal: ULEB128 runs past the end of its stream");
  }
  SUBCASE("segment offset ULEB cut off") {
    BindStream bind;
    bind.bind(1, "_malloc").raw({macho::BIND_OPCODE_SET_SEGMENT_AND_OFFSET_ULEB, 0x80, 0x80});
    Image image = with_bind(bind);
    CHECK_MALFORMED(image.bytes, image.bind.offset + bind.position() - 2, "bind address: ULEB128 runs past");
  }
  SUBCASE("addend SLEB cut off") {
    BindStream bind;
    bind.bind(1, "_malloc").raw({macho::BIND_OPCODE_SET_ADDEND_SLEB, 0xff});
    Image image = with_bind(bind);
    CHECK_MALFORMED(image.bytes, image.bind.offset + bind.position() - 1, "bind addend: SLEB128 runs past");
  }
  SUBCASE("symbol name not NUL-terminated") {
    BindStream bind;
    bind.bind(1, "_malloc").raw({macho::BIND_OPCODE_SET_SYMBOL_TRAILING_FLAGS_IMM, '_', 'f', 'o', 'o'});
    Image image = with_bind(bind);
    CHECK_MALFORMED(image.bytes, image.bind.offset + bind.position() - 4, "bind symbol name is not NUL-terminated");
  }
  SUBCASE("DO_BIND_ULEB_TIMES_SKIPPING_ULEB without its second operand") {
    BindStream bind;
    bind.ordinal(1).symbol("_malloc").raw({macho::BIND_OPCODE_DO_BIND_ULEB_TIMES_SKIPPING_ULEB, 0x02});
    Image image = with_bind(bind);
    CHECK_MALFORMED(image.bytes, image.bind.offset + bind.position(), "bind skip");
  }
  SUBCASE("lazy bind: symbol name cut off") {
    BindStream lazy;
    lazy.lazy(1, "_free").raw({0x70, 0x00, 0x11, macho::BIND_OPCODE_SET_SYMBOL_TRAILING_FLAGS_IMM, '_', 'x'});
    Image image = with_lazy_bind(lazy);
    CHECK_MALFORMED(image.bytes, image.lazy_bind.offset + lazy.position() - 2, "bind symbol name is not NUL-terminated");
  }
}

TEST_CASE("bind opcodes: a stream ending without BIND_OPCODE_DONE after whole opcodes is accepted") {
  // dyld stops at the end of the stream too (old ld64 wrote such streams).
  BindStream bind;
  bind.bind(1, "_malloc").bind(3, "_foo");
  Outcome outcome = run(with_bind(bind).bytes);
  INFO(outcome.described);
  CHECK(outcome.ok);
}

TEST_CASE("bind opcodes: unknown opcodes and misuse") {
  SUBCASE("unknown opcode 0xe0") {
    BindStream bind;
    bind.bind(1, "_malloc").raw({0xe0}).done();
    Image image = with_bind(bind);
    CHECK_MALFORMED(image.bytes, image.bind.offset + bind.position() - 2, "unknown bind opcode 0xe0");
  }
  SUBCASE("unknown opcode 0xf7") {
    BindStream bind;
    bind.raw({0xf7}).done();
    Image image = with_bind(bind);
    CHECK_MALFORMED(image.bytes, image.bind.offset, "unknown bind opcode 0xf7");
  }
  SUBCASE("unknown threaded sub-opcode") {
    BindStream bind;
    bind.raw({0xd5}).done();
    Image image = with_bind(bind);
    CHECK_MALFORMED(image.bytes, image.bind.offset, "unknown threaded bind sub-opcode 0xd5");
  }
  SUBCASE("DO_BIND before any symbol") {
    BindStream bind;
    bind.ordinal(1).type_pointer().do_bind().done();
    Image image = with_bind(bind);
    CHECK_MALFORMED(image.bytes, image.bind.offset + 2, "bind opcode before any symbol name");
  }
  SUBCASE("an unknown opcode in the lazy-bind stream") {
    BindStream lazy;
    lazy.lazy(1, "_free").raw({0xe3});
    Image image = with_lazy_bind(lazy);
    CHECK_MALFORMED(image.bytes, image.lazy_bind.offset + lazy.position() - 1, "unknown bind opcode 0xe3");
  }
}

TEST_CASE("LC_DYLD_INFO ranges past the end of the file") {
  Image image = dyld_info_builder().build();
  uint64_t command = image.command(macho::LC_DYLD_INFO_ONLY).offset;
  SUBCASE("bind size") { CHECK_MALFORMED(image.put32(command + 20, 0x10000).bytes, command + 16, "bind info (offset"); }
  SUBCASE("lazy bind offset") { CHECK_MALFORMED(image.put32(command + 32, 0xfffffff0).bytes, command + 32, "lazy bind info"); }
  SUBCASE("export size") { CHECK_MALFORMED(image.put32(command + 44, 0xffffffff).bytes, command + 40, "export info"); }
}

// ========================================================= chained fixups

TEST_CASE("chained fixups: malformed header") {
  Image image = chained_builder().build();
  uint64_t blob = image.chained_fixups.offset;
  SUBCASE("header truncated") {
    Image small = MachOBuilder().load_dylib(kSystem).linkedit_data(macho::LC_DYLD_CHAINED_FIXUPS, std::vector<uint8_t>(20, 0)).build();
    CHECK_MALFORMED(small.bytes, small.chained_fixups.offset, "chained fixups header (28 bytes) runs past");
  }
  SUBCASE("empty blob") {
    Image empty = MachOBuilder().load_dylib(kSystem).linkedit_data(macho::LC_DYLD_CHAINED_FIXUPS, {}).build();
    CHECK_MALFORMED(empty.bytes, 0, "chained fixups header (28 bytes) runs past");
  }
  SUBCASE("unknown version") { CHECK_MALFORMED(image.put32(blob, 1).bytes, blob, "unknown chained fixups version 1"); }
  SUBCASE("unknown imports format") {
    CHECK_MALFORMED(image.put32(blob + 20, 4).bytes, blob + 20, "unknown chained imports format 4");
    CHECK_MALFORMED(image.put32(blob + 20, 0).bytes, blob + 20, "unknown chained imports format 0");
  }
  SUBCASE("range past the end of the file") {
    uint64_t command = image.command(macho::LC_DYLD_CHAINED_FIXUPS).offset;
    CHECK_MALFORMED(image.put32(command + 12, 0x100000).bytes, command + 8, "LC_DYLD_CHAINED_FIXUPS (offset");
  }
}

TEST_CASE("chained fixups: the imports table past the blob") {
  Image image = chained_builder().build();
  uint64_t blob = image.chained_fixups.offset;
  SUBCASE("imports_count too large") {
    // The imports follow the header (28 bytes, 32 with padding) and the starts of the two segments.
    CHECK_MALFORMED(image.put32(blob + 16, 1000).bytes, blob + 16,
                    "1000 chained imports at 0x30 run past the end of the chained fixups data");
  }
  SUBCASE("imports_count * 16 beyond 32 bits (format 3)") {
    Image wide = chained_builder(macho::DYLD_CHAINED_IMPORT_ADDEND64).build();
    uint64_t wide_blob = wide.chained_fixups.offset;
    CHECK_MALFORMED(wide.put32(wide_blob + 16, 0x40000000).bytes, wide_blob + 16, "1073741824 chained imports");
    CHECK_MALFORMED(wide.put32(wide_blob + 16, UINT32_MAX).bytes, wide_blob + 16, "run past the end of the chained fixups data");
  }
  SUBCASE("imports_offset past the blob") {
    CHECK_MALFORMED(image.put32(blob + 8, 0xfffffff0).bytes, blob + 16, "chained imports at 0xfffffff0 run past");
  }
}

TEST_CASE("chained fixups: an import's name outside the blob") {
  Image image = MachOBuilder().load_dylib(kSystem).chained_fixups(macho::DYLD_CHAINED_IMPORT, {{1, "_malloc"}}).build();
  uint64_t entry = image.chained_import_offsets[0];
  // The offset named is the import entry whose name cannot be found, not a point past the file.
  SUBCASE("name offset too large") {
    uint32_t name_offset = 0x7fffff;
    image.put32(entry, 1 | name_offset << 9);
    CHECK_MALFORMED(image.bytes, entry, "chained import 0: its name offset lies outside the chained fixups data");
  }
  SUBCASE("symbols_offset too large") {
    image.put32(image.chained_fixups.offset + 12, 0xfffffff0);
    CHECK_MALFORMED(image.bytes, entry, "chained import 0: its name offset lies outside");
  }
  SUBCASE("name not NUL-terminated in the blob") {
    image.fill(image.chained_symbols_offset, image.chained_fixups.end() - image.chained_symbols_offset, 'x');
    CHECK_MALFORMED(image.bytes, image.chained_symbols_offset, "chained import symbol name is not NUL-terminated");
  }
}

// =========================================================== exports trie

namespace {

// Hand-made trie nodes: terminal size 0, `children` edges (label, child offset).
std::vector<uint8_t> trie_node(const std::vector<std::pair<std::string, uint64_t>>& children) {
  std::vector<uint8_t> node{0, static_cast<uint8_t>(children.size())};
  for (const auto& [label, offset] : children) {
    append_cstr(node, label);
    append_bytes(node, uleb(offset));
  }
  return node;
}

}  // namespace

TEST_CASE("exports trie: loops") {
  SUBCASE("a child pointing back to the root") {
    std::vector<uint8_t> trie = trie_node({{"_a", 6}});  // 6 bytes: 00 01 '_' 'a' 00 06
    REQUIRE(trie.size() == 6);
    append_bytes(trie, trie_node({{"b", 0}}));
    Image image = with_trie(trie);
    CHECK_MALFORMED(image.bytes, image.exports_trie.offset, "exports trie node is reached twice (a loop)");
  }
  SUBCASE("a node that is its own child") {
    std::vector<uint8_t> trie = trie_node({{"_a", 6}});
    append_bytes(trie, trie_node({{"b", 6}}));
    Image image = with_trie(trie);
    CHECK_MALFORMED(image.bytes, image.exports_trie.offset + 6, "reached twice");
  }
  SUBCASE("the root its own child") {
    Image image = with_trie(trie_node({{"_a", 0}}));
    CHECK_MALFORMED(image.bytes, image.exports_trie.offset, "reached twice");
  }
}

TEST_CASE("exports trie: a child offset outside the trie") {
  std::vector<uint8_t> trie = trie_node({{"_foo", 0x100}});
  Image image = with_trie(trie);
  CHECK_MALFORMED(image.bytes, image.exports_trie.offset + 7, "exports trie child offset 0x100 is outside the trie");
}

TEST_CASE("exports trie: a terminal running past the end of the trie") {
  SUBCASE("terminal size") {
    Image image = with_trie({50, 0x08, 0x01, 0x00, 0x00});
    CHECK_MALFORMED(image.bytes, image.exports_trie.offset, "exports trie terminal runs past the end of the trie");
  }
  SUBCASE("terminal size ULEB cut off") {
    Image image = with_trie({0x80});
    CHECK_MALFORMED(image.bytes, image.exports_trie.offset, "trie terminal size: ULEB128 runs past");
  }
  SUBCASE("child count missing") {
    Image image = with_trie({0x00});
    CHECK_MALFORMED(image.bytes, image.exports_trie.offset + 1, "trie child count (1 bytes) runs past");
  }
  SUBCASE("edge label not NUL-terminated") {
    Image image = with_trie({0x00, 0x01, '_', 'f'});
    CHECK_MALFORMED(image.bytes, image.exports_trie.offset + 2, "trie edge label is not NUL-terminated");
  }
  SUBCASE("re-exported name not NUL-terminated inside the trie") {
    Image image = with_trie({0x04, 0x08, 0x01, '_', 'f'});
    CHECK_MALFORMED(image.bytes, image.exports_trie.offset + 3, "re-exported symbol name is not NUL-terminated");
  }
}

TEST_CASE("exports trie: a very deep trie is walked without recursion") {
  // 20000 nodes in a chain, each with one one-letter edge to the next.
  std::vector<uint8_t> trie;
  const int depth = 20000;
  for (int i = 0; i < depth; ++i) {
    uint64_t next = trie.size() + 5;
    next = trie.size() + 4 + uleb(next).size();
    next = trie.size() + 4 + uleb(next).size();  // fixpoint for the ULEB's own length
    append_bytes(trie, trie_node({{"a", next}}));
  }
  append_bytes(trie, {0x03, 0x08, 0x03, 0x00, 0x00});  // re-export from libfoo (3)
  Image image = with_trie(trie);
  Outcome outcome = run(image.bytes);
  INFO(outcome.described);
  CHECK(outcome.ok);
}

// Regression test, formerly a bug (core/format/imports.cc, Scanner::scan_trie / read_terminal): a terminal's
// contents are read without checking that they end inside its declared size. Here
// the root's terminal size is 1 (just the flags), but flags 0x08 make the scanner
// read a re-export ordinal at byte 2 and a name at byte 3: the very bytes that, by
// the terminal size, are the root's child count (3) and first edge label ("a").
// The file is accepted and pruning renumbers the "ordinal" 3 -> 2, which silently
// drops the export "_c" from the trie (verify_prune does not notice: the re-export
// import is unchanged). Expected: an Error at the node.
TEST_CASE("exports trie: terminal contents longer than the terminal size are an error") {
  std::vector<uint8_t> trie = {
      0x01, 0x08,          // terminal size 1: flags 0x08 (re-export)
      0x03,                // read as the re-export ordinal (libfoo); by size, the child count
      'a', 0x00, 12,       // read as the import name "a"; by size, edge "a" -> node 12
      'b', 0x00, 14,       // edge "b" -> node 14
      'c', 0x00, 16,       // edge "c" -> node 16
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00};  // three leaves without terminal or children
  Image image = with_trie(trie);
  CHECK_MALFORMED(image.bytes, image.exports_trie.offset, "terminal");
}

// ============================================ overlapping structures

TEST_CASE("sizeofcmds covering zero padding after the last command is accepted and pruned") {
  Image image = dyld_info_builder().header_padding(64).override_sizeofcmds(dyld_info_builder().build().sizeofcmds + 64).build();
  Outcome outcome = run(image.bytes);
  INFO(outcome.described);
  CHECK(outcome.ok);
}

// Regression test, formerly a bug (core/format/macho.cc, Reader::read_header/read_commands; core/rewrite/prune.cc,
// remove_commands): sizeofcmds may be larger than the load commands and reach into
// section or LINKEDIT data. remove_commands() then zero-fills the whole sizeofcmds
// area after the kept commands, wiping that data. verify_prune() catches it, but
// the Error has no offset and misleads ("the number of imports changed from 9 to
// 4"). Expected: parse_macho rejects load commands that overlap the first section
// or a LINKEDIT blob, at offset 20 (sizeofcmds).
TEST_CASE("sizeofcmds reaching into section data is an error naming sizeofcmds") {
  Image plain = dyld_info_builder().build();
  uint32_t sizeofcmds = static_cast<uint32_t>(plain.linkedit.offset + 16 - sizeof(macho::MachHeader64));  // __text and 16 bytes of LINKEDIT
  Image image = dyld_info_builder().override_sizeofcmds(sizeofcmds).build();
  CHECK_MALFORMED(image.bytes, 20, "sizeofcmds");
}

// Regression test, formerly a bug (core/format/macho.cc, Reader::read_symtab / range_at): LINKEDIT ranges are
// checked against the end of the file only, not against the load-command area. A
// string table (or symbol table, bind stream, ...) that overlaps the load commands
// is accepted; pruning shifts the commands under it and verify_prune then fails
// without an offset ("symtab import b/libfoo.dylib bound to ... before and to ...
// after"). Expected: an Error at the LC_SYMTAB stroff field.
TEST_CASE("a string table overlapping the load commands is an error") {
  Image image = dyld_info_builder().build();
  uint64_t symtab = image.command(macho::LC_SYMTAB).offset;
  image.put32(symtab + 16, static_cast<uint32_t>(image.dylib(3).offset + 24 - 1));  // names read from libfoo's command
  CHECK_MALFORMED(image.bytes, symtab + 16, "string table");
}

// Regression test, formerly a bug (same place): LINKEDIT ranges may overlap each other. Here the string
// table starts inside the symbol table, so symbol 2's name is read from its own
// n_desc high byte (ordinal 3); renumbering that byte renames the symbol and
// verify_prune fails without an offset. Expected: an Error at the stroff field
// (dyld rejects overlapping LINKEDIT content too).
TEST_CASE("a string table overlapping the symbol table is an error") {
  Image image = dyld_info_builder().build();
  uint64_t symtab = image.command(macho::LC_SYMTAB).offset;
  uint64_t strx = image.name_offsets[2] - image.strings.offset;
  image.put32(symtab + 16, static_cast<uint32_t>(image.symbol_offsets[2] + 7 - strx));
  CHECK_MALFORMED(image.bytes, symtab + 16, "string table");
}

// Regression test, formerly a bug (core/format/imports.cc, Scanner::scan_chained_fixups): imports_offset may point
// into the chained fixups header itself; an "import" then overlays imports_count,
// and renumbering its "ordinal" rewrites the count. verify_prune catches it without
// an offset ("the number of imports changed from 7 to 6"). Expected: an Error at
// the imports_offset field (blob + 8) for imports that overlap the header.
TEST_CASE("chained imports overlapping the chained fixups header are an error") {
  Image image = chained_builder().build();
  image.put32(image.chained_fixups.offset + 8, 0);
  CHECK_MALFORMED(image.bytes, image.chained_fixups.offset + 8, "imports");
}

// ===================================================== no crash, ever

namespace {

// Flips every byte of `image` to a few values. Every outcome must be success or an
// Error with an offset, except that verify_prune's own refusals (no offset: they
// are about the output) are tolerated and listed; the may_fail cases above are
// where they come from.
void check_single_byte_mutations(const Image& image) {
  size_t errors = 0, successes = 0;
  std::vector<std::string> refused_by_verification;
  for (uint64_t at = 0; at < image.size(); ++at) {
    uint8_t original = image.bytes[at];
    for (uint8_t value : {uint8_t(0x00), uint8_t(0xff), uint8_t(0x80), uint8_t(original ^ 0x01), uint8_t(original + 0x10)}) {
      if (value == original) continue;
      std::vector<uint8_t> bytes = image.bytes;
      bytes[at] = value;
      Outcome outcome = run(bytes);
      std::string what = "byte " + hex(at) + " = " + hex(value) + ": " + outcome.described;
      if (!outcome.foreign.empty()) FAIL_CHECK(what);
      bool verifier = contains(outcome.problem, "verification of the rewritten file failed") ||
                      contains(outcome.problem, "LIEF reads the rewritten slice differently");
      if (!outcome.ok && !outcome.offset) {
        if (verifier) refused_by_verification.push_back(what);
        else FAIL_CHECK("an Error without an offset: " << what);
      }
      (outcome.ok ? successes : errors) += 1;
    }
  }
  std::string list;
  for (const std::string& refusal : refused_by_verification) list += "\n  " + refusal;
  MESSAGE(successes << " mutations accepted, " << errors << " rejected, of which " << refused_by_verification.size()
                    << " only by verify_prune:" << list);
}

}  // namespace

TEST_CASE("single-byte mutations anywhere: success or an Error, never a crash or another exception") {
  SUBCASE("dyld-info file") { check_single_byte_mutations(dyld_info_builder().build()); }
  SUBCASE("chained-fixups file") { check_single_byte_mutations(chained_builder().build()); }
  SUBCASE("chained-fixups file, format 3") { check_single_byte_mutations(chained_builder(macho::DYLD_CHAINED_IMPORT_ADDEND64).build()); }
}
