// The LIEF cross-check through a skeleton of the slice (core/lief/lief_skeleton.h):
// LIEF reads the skeleton as it reads the whole slice; a changed load command, symbol
// or bind of the slice is still refused; a layout the skeleton cannot compact is read
// whole, and still checked. (tests/lief/lief_image_driver.cc does the same on every
// linked fixture: ctest lief_skeleton_fixtures.)
#include <doctest/doctest.h>

#include <cstring>

#include "core/format/imports.h"
#include "core/format/macho.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"
#include "core/lief/lief_check.h"
#include "core/lief/lief_skeleton.h"
#include "fuzz/sample_images.h"
#include "tests/support/macho_builder.h"

using namespace machofix;
using namespace machofix::test;

namespace {

constexpr uint32_t kLcNote = 0x31;  // note_command: (offset, size) anywhere in the file
constexpr uint32_t kLcFunctionStarts = 0x26;

LiefImage whole_slice(const Bytes& slice) {
  LiefImage image;
  image.tail = slice;
  image.whole_slice_because = "test";
  return image;
}

void check_same_reading(const Image& built) {
  LiefImage skeleton = lief_image(built.view());
  REQUIRE(skeleton.skeleton());
  LiefView whole = read_with_lief(whole_slice(built.view()));
  LiefView compact = read_with_lief(skeleton);
  CHECK(compact.commands == whole.commands);
  CHECK(compact.symbols == whole.symbols);
  CHECK(compact.binds == whole.binds);
  CHECK(!whole.commands.empty());
  CHECK(!whole.symbols.empty());
}

// The cross-check of `changed` against machofix's reading of `original`: the problem
// it reports ("" when it passes).
std::string cross_check_problem(const Image& original, const std::vector<uint8_t>& changed) {
  MachO ours = parse_macho(original.view());
  ImportScan scan = scan_imports(ours);
  try {
    cross_check_with_lief(Bytes(changed), ours, scan);
  } catch (const Error& error) {
    return error.problem();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The first ordinal site of `source` in `image`.
const OrdinalSite& site_of(const ImportScan& scan, ImportSource source) {
  for (const OrdinalSite& site : scan.sites)
    if (site.source == source) return site;
  throw std::out_of_range("no such ordinal site");
}

std::vector<uint8_t> with_byte(const Image& image, uint64_t offset, uint8_t value) {
  std::vector<uint8_t> changed = image.bytes;
  changed.at(offset) = value;
  return changed;
}

}  // namespace

TEST_CASE("LIEF reads the skeleton of a slice as it reads the whole slice") {
  SUBCASE("dyld-info: bind, lazy bind, exports trie, symbol table, arm64") { check_same_reading(samples::dyld_info_dylib().build()); }
  SUBCASE("dyld-info, x86_64") { check_same_reading(samples::dyld_info_dylib(macho::CPU_TYPE_X86_64).build()); }
  SUBCASE("chained fixups, the three import formats") {
    check_same_reading(samples::chained_dylib(macho::DYLD_CHAINED_IMPORT).build());
    check_same_reading(samples::chained_dylib(macho::DYLD_CHAINED_IMPORT_ADDEND).build());
    check_same_reading(samples::chained_dylib(macho::DYLD_CHAINED_IMPORT_ADDEND64).build());
  }
  SUBCASE("a weak bind stream") {
    BindStream weak;
    weak.symbol("_mine").type_pointer().segment_offset(0, 8).do_bind().done();
    BindStream bind;
    bind.bind(1, "_malloc").done();
    check_same_reading(MachOBuilder()
                           .load_dylib(samples::kSystem)
                           .dyld_info({{}, bind, weak, {}, {}})
                           .symtab()
                           .defined("_mine", 0x10)
                           .undefined("_malloc", 1)
                           .build());
  }
}

// The dyld-info sample with a code signature last in __LINKEDIT, where linkers put it
// (the builder puts the symbol table last: the signature is moved to after it).
Image signed_sample() {
  Image built = samples::dyld_info_dylib().linkedit_data(macho::LC_CODE_SIGNATURE, std::vector<uint8_t>(16, 0)).build();
  uint64_t signature_at = align_up(built.size(), 16);
  built.bytes.resize(signature_at + 64, 0xcc);
  uint64_t command = built.command(macho::LC_CODE_SIGNATURE).offset;
  built.put32(command + offsetof(macho::LinkeditDataCommand, dataoff), static_cast<uint32_t>(signature_at));
  built.put32(command + offsetof(macho::LinkeditDataCommand, datasize), 64);
  for (const CommandInfo& segment : built.commands)
    if (segment.cmd == macho::LC_SEGMENT_64 && built.view().fixed_string(segment.offset + 8, 16, "name") == "__LINKEDIT") {
      uint64_t fileoff = built.view().u64(segment.offset + offsetof(macho::SegmentCommand64, fileoff));
      built.put64(segment.offset + offsetof(macho::SegmentCommand64, filesize), built.size() - fileoff);
      built.put64(segment.offset + offsetof(macho::SegmentCommand64, vmsize), align_up(built.size() - fileoff, 0x4000));
    }
  parse_macho(built.view());  // still a valid image
  return built;
}

TEST_CASE("the skeleton: load commands in place, then __LINKEDIT before the signature, nothing else") {
  Image built = signed_sample();
  LiefImage image = lief_image(built.view());
  INFO(image.whole_slice_because);
  REQUIRE(image.skeleton());
  CHECK(image.head.size() == align_up(built.load_commands_end(), 16));
  CHECK(std::memcmp(image.head.data(), built.bytes.data(), 16) == 0);  // the header as it was
  // LINKEDIT is read where it lies, not copied, and ends where the signature starts.
  CHECK(image.tail.data() == built.bytes.data() + built.linkedit.offset);
  CHECK(image.tail.size() == built.size() - 64 - built.linkedit.offset);
  CHECK(image.size() < built.size());
  // Every segment has no file content; LINKEDIT's offsets are shifted with it.
  std::vector<uint8_t> joined = image.joined();
  Bytes bytes(joined);
  for (const CommandInfo& command : built.commands) {
    if (command.cmd == macho::LC_SEGMENT_64) {
      auto segment = bytes.get<macho::SegmentCommand64>(command.offset, "segment");
      CHECK(segment.filesize == 0);
      if (std::string(segment.segname) == "__LINKEDIT") CHECK(segment.fileoff == image.head.size());
    }
  }
  auto symtab = bytes.get<macho::SymtabCommand>(built.command(macho::LC_SYMTAB).offset, "LC_SYMTAB");
  CHECK(symtab.symoff == built.symbols.offset - built.linkedit.offset + image.head.size());
  auto info = bytes.get<macho::DyldInfoCommand>(built.command(macho::LC_DYLD_INFO_ONLY).offset, "LC_DYLD_INFO");
  CHECK(info.bind_off == built.bind.offset - built.linkedit.offset + image.head.size());
  CHECK(info.export_off == 0);
  CHECK(info.export_size == 0);
  auto code_signature = bytes.get<macho::LinkeditDataCommand>(built.command(macho::LC_CODE_SIGNATURE).offset, "signature");
  CHECK(code_signature.datasize == 0);
  CHECK(cross_check_problem(built, built.bytes) == "");
}

TEST_CASE("through the skeleton, the cross-check refuses a changed load command, symbol or bind") {
  Image built = samples::dyld_info_dylib().build();
  MachO ours = parse_macho(built.view());
  ImportScan scan = scan_imports(ours);
  REQUIRE(cross_check_problem(built, built.bytes) == "");

  SUBCASE("a dependent dylib's install name") {
    uint64_t name = built.dylib(3).offset + sizeof(macho::DylibCommand) + 10;
    std::vector<uint8_t> changed = with_byte(built, name, 'X');
    REQUIRE(lief_image(Bytes(changed)).skeleton());
    CHECK(contains(cross_check_problem(built, changed), "the dependent dylib lists differ"));
  }
  SUBCASE("a bind opcode's library ordinal") {
    const OrdinalSite& site = site_of(scan, ImportSource::Bind);
    REQUIRE(site.encoding == SiteEncoding::OpcodeImm);
    std::vector<uint8_t> changed = with_byte(built, site.offset, macho::BIND_OPCODE_SET_DYLIB_ORDINAL_IMM | 2);
    CHECK(contains(cross_check_problem(built, changed), "bind of _malloc from /usr/lib/libSystem.B.dylib is not read so by LIEF"));
  }
  SUBCASE("a lazy-bind opcode's library ordinal") {
    const OrdinalSite& site = site_of(scan, ImportSource::LazyBind);
    std::vector<uint8_t> changed = with_byte(built, site.offset, macho::BIND_OPCODE_SET_DYLIB_ORDINAL_IMM | 2);
    CHECK(contains(cross_check_problem(built, changed), "lazy-bind of _free from /usr/lib/libSystem.B.dylib is not read so by LIEF"));
  }
  SUBCASE("a bind made a weak import (a bind LIEF reads that machofix does not)") {
    // _malloc is bound twice, the second time through its own symbol opcode: LIEF reads
    // the second one weak, machofix (reading the original) strong only.
    BindStream bind;
    bind.bind(1, "_malloc").bind(1, "_malloc", 8).done();
    Image twice = MachOBuilder()
                      .load_dylib(samples::kSystem)
                      .dyld_info({{}, bind, {}, {}, {}})
                      .symtab()
                      .undefined("_malloc", 1)
                      .build();
    REQUIRE(cross_check_problem(twice, twice.bytes) == "");
    uint64_t second_symbol = twice.bind.offset;
    for (uint64_t at = twice.bind.end() - 1; at > twice.bind.offset; --at)
      if ((twice.bytes[at] & macho::BIND_OPCODE_MASK) == macho::BIND_OPCODE_SET_SYMBOL_TRAILING_FLAGS_IMM &&
          twice.bytes[at + 1] == '_') {
        second_symbol = at;
        break;
      }
    REQUIRE(second_symbol != twice.bind.offset);
    std::vector<uint8_t> changed = with_byte(twice, second_symbol, twice.bytes[second_symbol] | macho::BIND_SYMBOL_FLAGS_WEAK_IMPORT);
    CHECK(contains(cross_check_problem(twice, changed), "bind of _malloc from /usr/lib/libSystem.B.dylib (weak import) is read by LIEF only"));
  }
  SUBCASE("an undefined symbol's library ordinal (n_desc)") {
    const OrdinalSite& site = site_of(scan, ImportSource::Symtab);
    std::vector<uint8_t> changed = with_byte(built, site.offset, static_cast<uint8_t>(site.ordinal == 1 ? 2 : 1));
    CHECK(contains(cross_check_problem(built, changed), "undefined symbol"));
  }
  SUBCASE("a symbol's name") {
    std::vector<uint8_t> changed = with_byte(built, built.name_offsets.back() + 1, 'Z');
    CHECK(contains(cross_check_problem(built, changed), "undefined symbol"));
  }
  SUBCASE("a symbol table entry LIEF does not read (nsyms one less)") {
    uint64_t nsyms = built.command(macho::LC_SYMTAB).offset + offsetof(macho::SymtabCommand, nsyms);
    std::vector<uint8_t> changed = with_byte(built, nsyms, static_cast<uint8_t>(built.bytes[nsyms] - 1));
    CHECK(contains(cross_check_problem(built, changed), "symbol table entries, machofix"));
  }
}

TEST_CASE("a layout the skeleton cannot compact is read whole, and still checked") {
  SUBCASE("a load command the skeleton does not know (it may point at any file data)") {
    Image built = samples::dyld_info_dylib().command(kLcNote, std::vector<uint8_t>(32, 0)).build();
    LiefImage image = lief_image(built.view());
    CHECK_FALSE(image.skeleton());
    CHECK(contains(image.whole_slice_because, "is not one the skeleton knows"));
    CHECK(image.tail.data() == built.bytes.data());
    CHECK(image.tail.size() == built.size());
    CHECK(cross_check_problem(built, built.bytes) == "");
    MachO ours = parse_macho(built.view());
    ImportScan scan = scan_imports(ours);
    const OrdinalSite& site = site_of(scan, ImportSource::Bind);
    // LIEF reads a whole slice without its dyld-info streams: its deep parse of the
    // rebases and the exports trie, which only a skeleton leaves out, has no bound
    // (core/lief/lief_check.h). A renumbered bind is then machofix's own re-read's to
    // refuse (verify_prune, verify_edit, verify_weak_link: test_ordinals and others).
    std::vector<uint8_t> changed = with_byte(built, site.offset, macho::BIND_OPCODE_SET_DYLIB_ORDINAL_IMM | 2);
    CHECK(cross_check_problem(built, changed) == "");
    // The load commands are still LIEF's to compare.
    uint64_t name = built.command(kLcNote).offset;
    CHECK(contains(cross_check_problem(built, with_byte(built, name, 0x30)), "load command"));
  }
  SUBCASE("a LINKEDIT offset outside __LINKEDIT") {
    Image built = samples::dyld_info_dylib().linkedit_data(kLcFunctionStarts, {0x10, 0}).build();
    built.put32(built.command(kLcFunctionStarts).offset + offsetof(macho::LinkeditDataCommand, dataoff),
                static_cast<uint32_t>(built.text.offset));
    LiefImage image = lief_image(built.view());
    CHECK_FALSE(image.skeleton());
    CHECK(contains(image.whole_slice_because, "lies outside __LINKEDIT"));
    CHECK(cross_check_problem(built, built.bytes) == "");
  }
  SUBCASE("no __LINKEDIT segment") {
    Image built = samples::dyld_info_dylib().without_segments().build();
    CHECK(lief_image(built.view()).whole_slice_because == "no __LINKEDIT segment");
    CHECK(cross_check_problem(built, built.bytes) == "");
  }
  SUBCASE("a section with relocation entries") {
    Image built = samples::dyld_info_dylib().build();
    const CommandInfo& text = built.commands.at(0);
    REQUIRE(text.cmd == macho::LC_SEGMENT_64);
    built.put32(text.offset + sizeof(macho::SegmentCommand64) + offsetof(macho::Section64, nreloc), 1);
    CHECK(contains(lief_image(built.view()).whole_slice_because, "has relocation entries"));
  }
  SUBCASE("a slice too short for its load commands: LIEF gets it whole and refuses it") {
    Image built = samples::dyld_info_dylib().build();
    std::vector<uint8_t> cut = built.prefix(100);
    LiefImage image = lief_image(Bytes(cut));
    CHECK_FALSE(image.skeleton());
    CHECK(contains(cross_check_problem(built, cut), "LIEF"));
  }
}

TEST_CASE("LIEF is asked for binds only where its reading of them is bounded") {
  MachO image;
  image.symtab.present = true;
  image.symtab.symbol_count = 1000;
  ImportScan scan;
  scan.bound_addresses = 5000;
  scan.longest_bound_name = 200;
  CHECK(lief_reads_binds_in_bounded_time(image, scan));
  SUBCASE("a bound name no linker writes (the fuzzer's: 47,000 characters, bound 47,000 times)") {
    scan.longest_bound_name = 47000;
    CHECK_FALSE(lief_reads_binds_in_bounded_time(image, scan));
  }
  SUBCASE("bound addresses x symbols past 2^28 symbol comparisons") {
    scan.bound_addresses = (uint64_t(1) << 28) / 1001 + 1;
    CHECK_FALSE(lief_reads_binds_in_bounded_time(image, scan));
  }
  SUBCASE("more than 2^20 bound addresses, whatever the symbols") {
    image.symtab.symbol_count = 0;
    scan.bound_addresses = (uint64_t(1) << 20) + 1;
    CHECK_FALSE(lief_reads_binds_in_bounded_time(image, scan));
  }
}
