// The loader's rules (core/format/loader_rules.h, docs/loader-rules.md): one crafted file
// per rule, each breaking exactly that rule at a known offset; the SDK gates dyld
// applies; the rule list in the docs; and machofix refusing an input that breaks a
// rule, and an output that would.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/support/checked_options.h"
#include "core/format/fat.h"
#include "core/io/file_io.h"
#include "core/format/loader_rules.h"
#include "core/format/macho_format.h"
#include "core/rewrite/macho_repair.h"
#include "core/io/pte.h"
#include "core/io/pte_container.h"
#include "fuzz/sample_images.h"
#include "tests/support/macho_builder.h"
#include "tests/support/whole_file.h"

using namespace machofix;
using namespace machofix::test;
using namespace machofix::samples;

namespace {

constexpr uint32_t LC_BUILD_VERSION = 0x32;
constexpr uint32_t LC_VERSION_MIN_MACOSX = 0x24;
constexpr uint32_t PLATFORM_MACOS = 1;
constexpr uint32_t version(uint32_t major, uint32_t minor = 0) { return major << 16 | minor << 8; }

std::vector<uint8_t> build_version(uint32_t sdk, uint32_t platform = PLATFORM_MACOS) {
  std::vector<uint8_t> body;
  for (uint32_t value : {platform, version(11), sdk, 0u}) append_u32(body, value);  // platform, minos, sdk, ntools
  return body;
}

// An LC_RPATH's body: the path's offset (after cmd, cmdsize and itself), the path, padded.
std::vector<uint8_t> rpath_body(const std::string& path) {
  std::vector<uint8_t> body;
  append_u32(body, 12);
  body.insert(body.end(), path.begin(), path.end());
  do body.push_back(0);
  while ((body.size() + 8) % 8);
  return body;
}

std::vector<uint8_t> version_min(uint32_t sdk) {
  std::vector<uint8_t> body;
  append_u32(body, version(10, 9));
  append_u32(body, sdk);
  return body;
}

std::string listing(const std::vector<RuleViolation>& violations) {
  std::string out;
  for (const RuleViolation& violation : violations) out += "\n  " + describe(violation);
  return out.empty() ? "\n  (none)" : out;
}

std::set<std::string> rule_ids(const std::vector<RuleViolation>& violations) {
  std::set<std::string> ids;
  for (const RuleViolation& violation : violations) ids.insert(violation.rule);
  return ids;
}

bool breaks_at(const std::vector<RuleViolation>& violations, const std::string& rule, uint64_t offset) {
  for (const RuleViolation& violation : violations)
    if (violation.rule == rule && violation.offset == offset) return true;
  return false;
}

std::vector<RuleViolation> rules_of(const std::vector<uint8_t>& bytes) { return check_image_rules(Bytes(bytes)); }

// Segment command fields.
constexpr uint64_t kVmaddr = 24, kVmsize = 32, kFileoff = 40, kFilesize = 48, kInitprot = 60, kNsects = 64;

// The dyld-info sample (3 dylibs, bind, lazy bind, exports trie, symtab, dysymtab, UUID).
Image dylib() { return dyld_info_dylib().build(); }
uint64_t text_command(const Image& image) { return image.commands[0].offset; }
uint64_t linkedit_command(const Image& image) { return image.commands[1].offset; }

// An executable: __TEXT at 0x100000000, LC_LOAD_DYLINKER, LC_MAIN.
MachOBuilder executable() {
  BindStream bind;
  bind.bind(1, "_malloc").done();
  return MachOBuilder().filetype(macho::MH_EXECUTE).header_padding(64).dyld_info({{}, bind, {}, {}, {}}).load_dylib(kSystem).uuid().undefined("_malloc", 1);
}

// A chained-fixups image whose LC_DYLD_CHAINED_FIXUPS data has one real
// dyld_chained_starts_in_segment (for __LINKEDIT's index, 1): page size 16 KiB,
// DYLD_CHAINED_PTR_64_OFFSET, one page without fixups. The data, from its start:
//   0 header, 32 starts_in_image {seg_count 2, offsets 0, 16}, 48 starts_in_segment
//   {size 24, page_size @52, pointer_format @54, segment_offset, max_valid_pointer,
//   page_count @68, page_start[0] @70}, 72 imports (none) and symbols.
struct ChainedStarts {
  uint32_t seg_count = 2;
  uint16_t page_size = 0x4000, pointer_format = 6, page_start = 0xffff;
  uint32_t imports_count = 0, symbols_offset = 72, version = 0;
};

std::vector<uint8_t> chained_data(const ChainedStarts& spec) {
  std::vector<uint8_t> out;
  for (uint32_t value : {spec.version, 32u, 72u, spec.symbols_offset, spec.imports_count, 1u, 0u}) append_u32(out, value);
  out.resize(32, 0);
  for (uint32_t value : {spec.seg_count, 0u, 16u}) append_u32(out, value);
  out.resize(48, 0);
  append_u32(out, 24);
  append_u16(out, spec.page_size);
  append_u16(out, spec.pointer_format);
  append_u64(out, 0x4000);  // segment_offset
  append_u32(out, 0);       // max_valid_pointer
  append_u16(out, 1);       // page_count
  append_u16(out, spec.page_start);
  return out;
}

Image chained_image(const ChainedStarts& spec) {
  return MachOBuilder().load_dylib(kSystem).uuid().linkedit_data(macho::LC_DYLD_CHAINED_FIXUPS, chained_data(spec)).build();
}

uint64_t chained_blob(const Image& image) { return image.command(macho::LC_DYLD_CHAINED_FIXUPS).blobs[0].range.offset; }

// A crafted file that breaks `rule` at `offset` (and, when listed, the rules that
// necessarily break with it).
struct Broken {
  std::vector<uint8_t> bytes;
  uint64_t offset;
  std::set<std::string> also = {};
};

struct Crafted {
  const char* rule;
  const char* how;
  std::function<Broken()> make;
};

// ---------------------------------------------------------------- one per rule

std::vector<Crafted> crafted_files() {
  return {
      {"header-magic", "a big-endian magic", [] {
         Image image = dylib();
         return Broken{image.put32(0, macho::MH_CIGAM_64).bytes, 0};
       }},
      {"header-filetype", "MH_OBJECT", [] {
         Image image = dylib();
         return Broken{image.put32(12, MH_OBJECT).bytes, 12};
       }},
      {"lc-sizeofcmds", "sizeofcmds larger than the file", [] {
         Image image = dylib();
         return Broken{image.put32(20, static_cast<uint32_t>(image.size())).bytes, 20};
       }},
      {"lc-walk", "one command more than sizeofcmds holds", [] {
         Image image = dylib();
         return Broken{image.put32(16, image.ncmds + 1).bytes, image.load_commands_end()};
       }},
      {"lc-cmdsize-min", "LC_UUID of cmdsize 4", [] {
         Image image = dylib();
         uint64_t at = image.command(LC_UUID).offset + 4;
         return Broken{image.put32(at, 4).bytes, at};
       }},
      {"lc-cmdsize-align", "LC_UUID of cmdsize 20", [] {
         Image image = dylib();
         uint64_t at = image.command(LC_UUID).offset + 4;
         return Broken{image.put32(at, 20).bytes, at};
       }},
      {"lc-cmdsize-fits", "the last command running past sizeofcmds", [] {
         Image image = dylib();
         const CommandInfo& last = image.commands.back();
         return Broken{image.put32(last.offset + 4, last.size + 8).bytes, last.offset + 4};
       }},
      {"lc-cmdsize-exact", "__TEXT's cmdsize holding a section nsects does not count", [] {
         Image image = dylib();
         return Broken{image.put32(text_command(image) + kNsects, 0).bytes, text_command(image) + 4};
       }},
      {"lc-unknown-required", "an unknown command with LC_REQ_DYLD", [] {
         Image image = dylib();
         uint64_t at = image.command(LC_UUID).offset;
         return Broken{image.put32(at, 0x80000099).bytes, at};
       }},
      {"lc-unique", "two LC_UUID", [] {
         Image image = dyld_info_dylib().uuid().build();
         return Broken{image.bytes, image.command(LC_UUID, 1).offset};
       }},
      {"lc-dysymtab-needs-symtab", "LC_SYMTAB turned into an ignored command", [] {
         Image image = dylib();
         image.put32(image.command(macho::LC_SYMTAB).offset, 0x7e);
         return Broken{image.bytes, image.command(macho::LC_DYSYMTAB).offset};
       }},
      {"lc-string-offset", "a dylib name offset at the end of its command", [] {
         Image image = dylib();
         const CommandInfo& dylib_command = image.dylib(2);
         return Broken{image.put32(dylib_command.offset + 8, dylib_command.size).bytes, dylib_command.offset + 8};
       }},
      {"lc-string-terminated", "a dylib name without its NUL", [] {
         Image image = dylib();
         const CommandInfo& dylib_command = image.dylib(2);
         return Broken{image.fill(dylib_command.offset + 24, dylib_command.size - 24, 'x').bytes, dylib_command.offset + 24};
       }},
      {"platform-consistent", "built for macOS and for iOS", [] {
         Image image = dyld_info_dylib().command(LC_BUILD_VERSION, build_version(version(11)))
                           .command(LC_BUILD_VERSION, build_version(version(14), 2)).build();
         return Broken{image.bytes, image.command(LC_BUILD_VERSION, 1).offset};
       }},
      {"seg-in-file", "__LINKEDIT's filesize past the end of the file", [] {
         Image image = dylib();
         uint64_t at = linkedit_command(image);
         return Broken{image.put64(at + kFilesize, image.linkedit.size + 0x1000).bytes, at + kFileoff};
       }},
      {"seg-filesize-vmsize", "__LINKEDIT's vmsize below its filesize", [] {
         Image image = dylib();
         uint64_t at = linkedit_command(image);
         return Broken{image.put64(at + kVmsize, image.linkedit.size - 8).bytes, at + kFilesize};
       }},
      {"seg-vm-wrap", "__LINKEDIT's vm range wrapping", [] {
         Image image = dylib();
         uint64_t at = linkedit_command(image);
         return Broken{image.put64(at + kVmaddr, UINT64_MAX - 0x100).bytes, at + kVmaddr};
       }},
      {"seg-protection", "__TEXT writable", [] {
         Image image = dylib();
         uint64_t at = text_command(image) + kInitprot;
         return Broken{image.put32(at, 7).bytes, at};
       }},
      {"seg-text", "__TEXT not at file offset 0", [] {
         Image image = dylib();
         uint64_t at = text_command(image) + kFileoff;
         return Broken{image.put64(at, 0x10).bytes, at, {"seg-overlap"}};  // it now reaches into __LINKEDIT
       }},
      {"seg-linkedit", "no segment named __LINKEDIT", [] {
         Image image = dylib();
         image.bytes[linkedit_command(image) + 8 + 9] = 'X';  // __LINKEDIX
         return Broken{image.bytes, 16};
       }},
      {"seg-overlap", "__LINKEDIT mapped inside __TEXT", [] {
         Image image = dylib();
         uint64_t at = linkedit_command(image) + kVmaddr;
         return Broken{image.put64(at, 0x1000).bytes, at};
       }},
      {"seg-order", "an executable's __LINKEDIT mapped below __TEXT", [] {
         Image image = executable().build();
         uint64_t at = linkedit_command(image);
         return Broken{image.put64(at + kVmaddr, 0x10000).bytes, at};
       }},
      {"sect-in-segment", "__text starting before __TEXT", [] {
         Image image = executable().build();
         uint64_t section = text_command(image) + 72;
         return Broken{image.put64(section + 32, 0x1000).bytes, section + 32};
       }},
      {"linkedit-in-segment", "the string table reaching past __LINKEDIT", [] {
         Image image = dylib();
         uint64_t at = image.command(macho::LC_SYMTAB).offset;
         return Broken{image.put32(at + 20, static_cast<uint32_t>(image.size() - image.strings.offset + 8)).bytes, at + 16};
       }},
      {"linkedit-overlap", "the string table starting inside the symbol table", [] {
         Image image = dylib();
         uint64_t at = image.command(macho::LC_SYMTAB).offset + 16;
         return Broken{image.put32(at, static_cast<uint32_t>(image.symbols.offset + 16)).bytes, at};
       }},
      {"linkedit-align", "function starts at an odd offset", [] {
         Image image = dyld_info_dylib().linkedit_data(LC_FUNCTION_STARTS, {1, 2, 3}).build();
         const CommandInfo& starts = image.command(LC_FUNCTION_STARTS);
         return Broken{image.put32(starts.blobs[0].field_offset, static_cast<uint32_t>(starts.blobs[0].range.offset + 1)).bytes,
                       starts.blobs[0].field_offset};
       }},
      {"linkedit-info-present", "chained fixups without LC_DYSYMTAB", [] {
         Image image = chained_dylib().without_dysymtab().build();
         return Broken{image.bytes, 16};
       }},
      {"fixups-one-encoding", "LC_DYLD_INFO_ONLY and LC_DYLD_CHAINED_FIXUPS", [] {
         Image image = chained_dylib().dyld_info({}).build();
         return Broken{image.bytes, image.command(macho::LC_DYLD_CHAINED_FIXUPS).offset};
       }},
      {"symtab-limits", "0x10000001 indirect symbols", [] {
         Image image = dylib();
         uint64_t at = image.command(macho::LC_DYSYMTAB).offset + 56;  // indirectsymoff, nindirectsyms
         image.put32(at, static_cast<uint32_t>(image.size())).put32(at + 4, 0x10000001);
         return Broken{image.bytes, at + 4, {"linkedit-in-segment"}};  // they do not fit in the file either
       }},
      {"dysymtab-ranges", "more local symbols than symbols", [] {
         Image image = dylib();
         uint64_t at = image.command(macho::LC_DYSYMTAB).offset;
         return Broken{image.put32(at + 12, 1000).bytes, at + 8};
       }},
      {"uuid-present", "no LC_UUID, built with the macOS 12 SDK", [] {
         Image image = chained_dylib().command(LC_BUILD_VERSION, build_version(version(12))).build();
         return Broken{image.bytes, 16};
       }},
      {"dylib-id", "an MH_DYLIB without LC_ID_DYLIB", [] {
         Image image = dyld_info_dylib().without_id_dylib().build();
         std::vector<uint8_t> bytes = image.bytes;
         // The sample names its install name itself: drop that command's type too.
         write_u32(bytes, image.command(macho::LC_ID_DYLIB).offset, 0x7e);
         return Broken{bytes, 16};
       }},
      {"dylib-linked", "no dependent dylib, built with the macOS 12 SDK", [] {
         Image image = MachOBuilder().uuid().command(LC_BUILD_VERSION, build_version(version(12))).build();
         return Broken{image.bytes, 16};
       }},
      {"dylib-duplicate", "libSystem twice, built with the macOS 15 SDK", [] {
         Image image = MachOBuilder().load_dylib(kSystem).load_dylib(kSystem).uuid()
                           .command(LC_BUILD_VERSION, build_version(version(15))).build();
         return Broken{image.bytes, image.dylib(2).offset};
       }},
      {"rpath-duplicate", "@loader_path twice, built with the macOS 15.4 SDK", [] {
         Image image = MachOBuilder().load_dylib(kSystem).command(macho::LC_RPATH, rpath_body("@loader_path"))
                           .command(macho::LC_RPATH, rpath_body("@loader_path")).uuid()
                           .command(LC_BUILD_VERSION, build_version(version(15, 4))).build();
         return Broken{image.bytes, image.command(macho::LC_RPATH, 1).offset};
       }},
      {"exec-dynamic", "an executable without LC_LOAD_DYLINKER", [] {
         Image image = executable().build();
         return Broken{image.put32(image.command(LC_LOAD_DYLINKER).offset, 0x7e).bytes, 16};
       }},
      {"main-entry", "LC_MAIN pointing into __LINKEDIT", [] {
         Image image = executable().build();
         uint64_t at = image.command(LC_MAIN).offset + 8;
         uint64_t text_vmsize = read_u64(image.bytes, text_command(image) + kVmsize);  // __LINKEDIT is mapped right after
         return Broken{image.put64(at, text_vmsize).bytes, at};
       }},
      {"dylib-ordinal", "a bind to library ordinal 4 of 3", [] {
         Image image = dylib();
         return Broken{image.put8(image.bind.offset, 0x14).bytes, image.bind.offset};
       }},
      {"chained-header", "an unknown chained fixups version", [] {
         ChainedStarts spec;
         spec.version = 1;
         Image image = chained_image(spec);
         return Broken{image.bytes, chained_blob(image)};
       }},
      {"chained-seg-count", "starts for one segment of two", [] {
         ChainedStarts spec;
         spec.seg_count = 1;
         Image image = chained_image(spec);
         return Broken{image.bytes, chained_blob(image) + 32};
       }},
      {"chained-starts", "a page size of 8 KiB", [] {
         ChainedStarts spec;
         spec.page_size = 0x2000;
         Image image = chained_image(spec);
         return Broken{image.bytes, chained_blob(image) + 52};
       }},
      {"chained-imports-count", "65536 imports with 16-bit bind ordinals (DYLD_CHAINED_PTR_ARM64E)", [] {
         ChainedStarts spec;
         spec.pointer_format = 1;
         spec.imports_count = 0x10000;
         spec.symbols_offset = 72 + 4 * 0x10000;
         Image image = chained_image(spec);
         return Broken{image.bytes, chained_blob(image) + 16};
       }},
      {"fat-header", "50 fat_arch entries in a 256-byte file", [] {
         std::vector<uint8_t> fat = universal({{macho::CPU_TYPE_ARM64, 0, dylib().bytes}});
         put_be32_at(fat, 4, 50);
         fat.resize(256);
         return Broken{fat, 4};
       }},
      {"fat-slice-in-file", "a slice size past the end", [] {
         std::vector<uint8_t> fat = universal({{macho::CPU_TYPE_ARM64, 0, dylib().bytes}});
         put_be32_at(fat, 8 + 12, static_cast<uint32_t>(fat.size()));
         return Broken{fat, 8 + 8};
       }},
      {"fat-slice-aligned", "an arm64 slice on a 4 KiB page", [] {
         std::vector<uint8_t> fat = universal({{macho::CPU_TYPE_ARM64, 0, dylib().bytes}}, false, 12);
         return Broken{fat, 8 + 8};  // the only slice is at 0x1000
       }},
      {"fat-slice-arch", "an x86_64 entry for an arm64 slice", [] {
         std::vector<uint8_t> fat = universal({{macho::CPU_TYPE_X86_64, 3, dylib().bytes}}, false, 14);
         return Broken{fat, 8};
       }},
      {"fat-duplicate-arch", "arm64 twice", [] {
         std::vector<uint8_t> fat = universal({{macho::CPU_TYPE_ARM64, 0, dylib().bytes}, {macho::CPU_TYPE_ARM64, 0, dylib().bytes}});
         return Broken{fat, 8 + 20};
       }},
      {"fat-overlap", "the second slice inside the first", [] {
         std::vector<uint8_t> x86 = dyld_info_dylib(macho::CPU_TYPE_X86_64).build().bytes;
         std::vector<uint8_t> fat = universal({{macho::CPU_TYPE_ARM64, 0, dylib().bytes}, {macho::CPU_TYPE_X86_64, 3, x86}});
         put_be32_at(fat, 8 + 20 + 8, 0x4000 + 8);  // x86_64 inside arm64, which starts at 0x4000
         return Broken{fat, 8 + 20 + 8};
       }},
  };
}

}  // namespace

TEST_CASE("the images the tests build pass every loader rule") {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> images = {
      {"dyld-info dylib", dylib().bytes},
      {"dyld-info dylib, x86_64", dyld_info_dylib(macho::CPU_TYPE_X86_64).build().bytes},
      {"chained format 1", chained_dylib(macho::DYLD_CHAINED_IMPORT).build().bytes},
      {"chained format 2", chained_dylib(macho::DYLD_CHAINED_IMPORT_ADDEND).build().bytes},
      {"chained format 3", chained_dylib(macho::DYLD_CHAINED_IMPORT_ADDEND64).build().bytes},
      {"21 dylibs", many_dylibs().build().bytes},
      {"every dylib command kind", command_kinds().build().bytes},
      {"flat executable", flat_executable().build().bytes},
      {"executable", executable().build().bytes},
      {"chained starts", chained_image({}).bytes},
      {"signed", signed_copy(dylib().bytes)},
      {"universal", universal({{macho::CPU_TYPE_X86_64, 3, signed_copy(dyld_info_dylib(macho::CPU_TYPE_X86_64).build().bytes)},
                               {macho::CPU_TYPE_ARM64, 0, signed_copy(dylib().bytes)}})},
      {"universal, fat64", universal({{macho::CPU_TYPE_ARM64, 0, dylib().bytes}, {macho::CPU_TYPE_X86_64, 3, dyld_info_dylib(macho::CPU_TYPE_X86_64).build().bytes}}, true)},
  };
  for (const auto& [name, bytes] : images) {
    CAPTURE(name);
    std::vector<RuleViolation> violations = rules_of(bytes);
    INFO(listing(violations));
    CHECK(violations.empty());
  }
}

TEST_CASE("one crafted file per loader rule: it breaks that rule, at that offset, and no other") {
  std::set<std::string> crafted;
  for (const Crafted& file : crafted_files()) {
    std::string rule = file.rule, how = file.how;
    CAPTURE(rule);
    CAPTURE(how);
    crafted.insert(file.rule);
    Broken broken = file.make();
    std::vector<RuleViolation> violations = rules_of(broken.bytes);
    INFO(listing(violations));
    CHECK(breaks_at(violations, file.rule, broken.offset));
    std::set<std::string> expected = broken.also;
    expected.insert(file.rule);
    CHECK(rule_ids(violations) == expected);
  }
  std::set<std::string> catalog;
  for (const LoaderRule& rule : loader_rules()) catalog.insert(rule.id);
  CHECK(crafted == catalog);
}

TEST_CASE("fat-header: dyld reads at most a page of fat_arch entries") {
  std::vector<uint8_t> fat = universal({{macho::CPU_TYPE_ARM64, 0, dylib().bytes}});
  put_be32_at(fat, 4, 205);
  std::vector<RuleViolation> violations = check_universal_rules(Bytes(fat));
  INFO(listing(violations));
  CHECK(breaks_at(violations, "fat-header", 4));
  put_be32_at(fat, 4, 1);
  CHECK(check_universal_rules(Bytes(fat)).empty());
}

TEST_CASE("violations carry absolute file offsets: a slice at 0x4000 reports 0x4000 + its own offset") {
  Image image = dylib();
  image.put32(text_command(image) + kInitprot, 7);
  std::vector<RuleViolation> violations = check_loader_rules(Bytes(image.bytes.data(), image.size(), 0x4000));
  REQUIRE(violations.size() == 1);
  CHECK(violations[0].offset == 0x4000 + text_command(image) + kInitprot);
  CHECK(describe(violations[0]) == "loader rule seg-protection at offset " + hex(0x4000 + text_command(image) + kInitprot) +
                                       ": __TEXT segment permissions is not 'r-x'");
}

TEST_CASE("more than one violation of the same file: each is reported") {
  Image image = dylib();
  image.put32(text_command(image) + kInitprot, 7);
  image.put32(linkedit_command(image) + kInitprot, 3);
  CHECK(rule_ids(rules_of(image.bytes)) == std::set<std::string>{"seg-protection"});
  CHECK(rules_of(image.bytes).size() == 2);
}

TEST_CASE("the checks never throw: every truncation and single-byte mutation of the samples gives violations, not errors") {
  std::vector<std::vector<uint8_t>> images = {signed_copy(dylib().bytes), chained_dylib(macho::DYLD_CHAINED_IMPORT_ADDEND64).build().bytes,
                                              chained_image({}).bytes, executable().build().bytes,
                                              universal({{macho::CPU_TYPE_ARM64, 0, dylib().bytes}})};
  size_t checked = 0;
  for (const std::vector<uint8_t>& image : images) {
    for (uint64_t n = 0; n < image.size(); n += 7) {
      std::vector<uint8_t> cut(image.begin(), image.begin() + n);
      CHECK_NOTHROW(rules_of(cut));
    }
    for (uint64_t at = 0; at < std::min<uint64_t>(image.size(), 0x4400); ++at) {
      for (uint8_t value : {uint8_t(0x00), uint8_t(0xff), uint8_t(image[at] ^ 0x80)}) {
        std::vector<uint8_t> bytes = image;
        bytes[at] = value;
        try {
          rules_of(bytes);
        } catch (const std::exception& error) {
          FAIL_CHECK("byte " << hex(at) << " = " << hex(value) << ": " << error.what());
        }
        ++checked;
      }
    }
  }
  MESSAGE(checked << " mutations checked");
}

// ------------------------------------------------------------ what dyld tolerates

TEST_CASE("SDK gates: a rule dyld enforces only from some SDK on is not applied to older binaries") {
  SUBCASE("LC_UUID: required from the macOS 12 SDK") {
    CHECK(rules_of(chained_dylib().command(LC_BUILD_VERSION, build_version(version(11, 3))).build().bytes).empty());
    CHECK(rule_ids(rules_of(chained_dylib().command(LC_BUILD_VERSION, build_version(version(12))).build().bytes)) ==
          std::set<std::string>{"uuid-present"});
    // iOS from 15, watchOS from 8.
    CHECK(rules_of(chained_dylib().command(LC_BUILD_VERSION, build_version(version(14), 2)).build().bytes).empty());
    CHECK(!rules_of(chained_dylib().command(LC_BUILD_VERSION, build_version(version(15), 2)).build().bytes).empty());
    CHECK(!rules_of(chained_dylib().command(LC_BUILD_VERSION, build_version(version(8), 4)).build().bytes).empty());
  }
  SUBCASE("__TEXT protections: from macOS 10.15 (LC_VERSION_MIN_MACOSX)") {
    for (uint32_t sdk : {version(10, 14), version(10, 15)}) {
      Image image = dyld_info_dylib(macho::CPU_TYPE_X86_64).command(LC_VERSION_MIN_MACOSX, version_min(sdk)).build();
      image.put32(text_command(image) + kInitprot, 7);
      CHECK(rules_of(image.bytes).empty() == (sdk < version(10, 15)));
    }
  }
  SUBCASE("LINKEDIT alignment: from macOS 10.14; a binary without a platform is an old x86_64 one, or a macOS 11 arm64 one") {
    auto misaligned = [](MachOBuilder builder) {
      Image image = builder.linkedit_data(LC_FUNCTION_STARTS, {1, 2, 3}).build();
      const CommandInfo& starts = image.command(LC_FUNCTION_STARTS);
      return image.put32(starts.blobs[0].field_offset, static_cast<uint32_t>(starts.blobs[0].range.offset + 1)).bytes;
    };
    CHECK(rules_of(misaligned(dyld_info_dylib(macho::CPU_TYPE_X86_64).command(LC_VERSION_MIN_MACOSX, version_min(version(10, 13))))).empty());
    CHECK(!rules_of(misaligned(dyld_info_dylib(macho::CPU_TYPE_X86_64).command(LC_VERSION_MIN_MACOSX, version_min(version(10, 14))))).empty());
    CHECK(rules_of(misaligned(dyld_info_dylib(macho::CPU_TYPE_X86_64))).empty());
    CHECK(!rules_of(misaligned(dyld_info_dylib())).empty());
  }
  SUBCASE("segment order: from macOS 10.15") {
    Image image = executable().command(LC_BUILD_VERSION, build_version(version(10, 14))).build();
    image.put64(linkedit_command(image) + kVmaddr, 0x10000);
    CHECK(rules_of(image.bytes).empty());
  }
  SUBCASE("a dylib linked twice: from the fall 2024 SDKs (macOS 15)") {
    Image image = MachOBuilder().load_dylib(kSystem).load_dylib(kSystem).uuid().command(LC_BUILD_VERSION, build_version(version(14, 5))).build();
    CHECK(rules_of(image.bytes).empty());
  }
  SUBCASE("no dependent dylib: allowed for the dylibs of libSystem itself") {
    Image image = MachOBuilder().id_dylib("/usr/lib/system/libsystem_c.dylib").uuid().command(LC_BUILD_VERSION, build_version(version(12))).build();
    CHECK(rules_of(image.bytes).empty());
  }
}

// dyld3's MachOAnalyzer::enforceFormat, threshold by threshold: for each gated rule and
// each platform, the SDK from which it is enforced (0: always). iOS, tvOS and Mac
// Catalyst share a column; the duplicate-dylib rule goes by mach_o::Policy's fall 2024
// releases instead.
TEST_CASE("SDK gates: every gated rule, on macOS, iOS, tvOS, Mac Catalyst and watchOS, enforced from its SDK on") {
  constexpr uint32_t kMacOS = 1, kIOS = 2, kTVOS = 3, kWatchOS = 4, kCatalyst = 6;
  struct Gated {
    std::string what;
    const char* rule;
    uint32_t macos, ios, watchos;  // the first SDK that enforces it; 0: every SDK
    std::function<std::vector<uint8_t>(std::vector<uint8_t> platform_command)> build;
  };
  auto on = [](MachOBuilder builder, std::vector<uint8_t> platform) { return builder.command(LC_BUILD_VERSION, std::move(platform)); };
  std::vector<Gated> gates = {
      {"LINKEDIT content misaligned", "linkedit-align", version(10, 14), version(13), version(8), [&](auto platform) {
         Image image = on(dyld_info_dylib().linkedit_data(LC_FUNCTION_STARTS, {1, 2, 3}), platform).build();
         const CommandInfo& starts = image.command(LC_FUNCTION_STARTS);
         return image.put32(starts.blobs[0].field_offset, static_cast<uint32_t>(starts.blobs[0].range.offset + 1)).bytes;
       }},
      {"the code signature misaligned", "linkedit-align", version(10, 15), version(13), version(8), [&](auto platform) {
         Image image = on(dyld_info_dylib().linkedit_data(macho::LC_CODE_SIGNATURE, std::vector<uint8_t>(32, 0)), platform).build();
         const CommandInfo& signature = image.command(macho::LC_CODE_SIGNATURE);
         // dyld aligns it as every LINKEDIT blob, to the pointer size; its own gate relaxes it for older SDKs.
         return image.put32(signature.blobs[0].field_offset, static_cast<uint32_t>(signature.blobs[0].range.offset + 4)).bytes;
       }},
      {"local relocations beside LC_DYLD_INFO_ONLY", "fixups-one-encoding", version(10, 14), 0, 0, [&](auto platform) {
         Image image = on(dyld_info_dylib(), platform).build();
         return image.put32(image.command(macho::LC_DYSYMTAB).offset + 76, 1).bytes;  // nlocrel
       }},
      {"segments out of order", "seg-order", version(10, 15), version(13), version(8), [&](auto platform) {
         Image image = on(executable(), platform).build();
         return image.put64(linkedit_command(image) + kVmaddr, 0x10000).bytes;
       }},
      {"__TEXT not r-x", "seg-protection", version(10, 15), 0, 0, [&](auto platform) {
         Image image = on(dyld_info_dylib(), platform).build();
         return image.put32(text_command(image) + kInitprot, 7).bytes;
       }},
      {"__LINKEDIT not r--", "seg-protection", version(10, 15), version(13), version(8), [&](auto platform) {
         Image image = on(dyld_info_dylib(), platform).build();
         return image.put32(linkedit_command(image) + kInitprot, 3).bytes;
       }},
      {"a section that starts inside its segment and ends past it", "sect-in-segment", version(10, 16), version(14),
       version(8), [&](auto platform) {
         Image image = on(executable(), platform).build();
         uint64_t segment = text_command(image), section = segment + 72;
         uint64_t segment_end = read_u64(image.bytes, segment + kVmaddr) + read_u64(image.bytes, segment + kVmsize);
         return image.put64(section + 40, segment_end - read_u64(image.bytes, section + 32) + 1).bytes;
       }},
      {"no dependent dylib", "dylib-linked", version(12), version(15), version(8), [&](auto platform) {
         return on(MachOBuilder().id_dylib("/usr/lib/libalone.dylib").uuid(), platform).build().bytes;
       }},
      {"no LC_UUID", "uuid-present", version(12), version(15), version(8),
       [&](auto platform) { return on(chained_dylib(), platform).build().bytes; }},
      {"a dylib linked twice", "dylib-duplicate", version(15), version(18), version(11), [&](auto platform) {
         return on(MachOBuilder().load_dylib(kSystem).load_dylib(kSystem).uuid(), platform).build().bytes;
       }},
      // Spring releases (x.4): the epoch comes from the SDK's minor version too.
      {"an rpath twice", "rpath-duplicate", version(15, 4), version(18, 4), version(11, 4), [&](auto platform) {
         return on(MachOBuilder().load_dylib(kSystem).command(macho::LC_RPATH, rpath_body("@loader_path/x"))
                       .command(macho::LC_RPATH, rpath_body("@loader_path/x")).uuid(), platform).build().bytes;
       }},
  };
  for (const Gated& gated : gates) {
    for (uint32_t platform : {kMacOS, kIOS, kTVOS, kCatalyst, kWatchOS}) {
      uint32_t from = platform == kMacOS ? gated.macos : platform == kWatchOS ? gated.watchos : gated.ios;
      CAPTURE(gated.what);
      CAPTURE(platform);
      CAPTURE(from);
      auto broken_with_sdk = [&](uint32_t sdk) { return rule_ids(rules_of(gated.build(build_version(sdk, platform)))); };
      // The rule holds from its SDK on ...
      CHECK(broken_with_sdk(from ? from : version(1)).count(gated.rule));
      CHECK(broken_with_sdk(version(26)).count(gated.rule));
      // ... and not on the release just before (a minor release less, or a major one).
      if (from) CHECK(!broken_with_sdk(from - 0x100).count(gated.rule));
    }
  }
}

TEST_CASE("what dyld lets pass is not flagged") {
  SUBCASE("Go's __DWARF segment anywhere in the order") {
    Image image = executable().build();
    image.bytes[linkedit_command(image) + 8 + 2] = 'D';  // __LINKEDIT -> __DINKEDIT is no __DWARF: out of order
    image.put64(linkedit_command(image) + kVmaddr, 0x10000);
    CHECK(rule_ids(rules_of(image.bytes)).count("seg-order"));
    std::copy_n("__DWARF\0\0\0\0\0\0\0\0", 16, image.bytes.begin() + linkedit_command(image) + 8);
    CHECK(!rule_ids(rules_of(image.bytes)).count("seg-order"));
  }
  SUBCASE("chained starts covering all segments but a trailing __CTF") {
    ChainedStarts spec;
    spec.seg_count = 1;
    Image image = chained_image(spec);
    CHECK(rule_ids(rules_of(image.bytes)) == std::set<std::string>{"chained-seg-count"});
    std::copy_n("__CTF\0\0\0\0\0\0\0\0\0\0\0", 16, image.bytes.begin() + linkedit_command(image) + 8);  // the last segment
    CHECK(!rule_ids(rules_of(image.bytes)).count("chained-seg-count"));
  }
  SUBCASE("a zippered dylib: macOS and Mac Catalyst") {
    Image image = dyld_info_dylib().command(LC_BUILD_VERSION, build_version(version(11)))
                      .command(LC_BUILD_VERSION, build_version(version(14), 6)).build();
    CHECK(rules_of(image.bytes).empty());
  }
  SUBCASE("a zero-sized non-relocatable segment may have file content (the __LLVM bitcode segment)") {
    Image image = dylib();
    uint64_t at = linkedit_command(image);
    image.put64(at + kVmsize, 0);
    CHECK(rule_ids(rules_of(image.bytes)).count("seg-filesize-vmsize"));
    image.put32(at + 68, 0x4);  // SG_NORELOC
    CHECK(!rule_ids(rules_of(image.bytes)).count("seg-filesize-vmsize"));
  }
}

// ---------------------------------------------------------------- the rule list

TEST_CASE("docs/loader-rules.md lists exactly the rules the code checks") {
  std::filesystem::path doc = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "docs" / "loader-rules.md";
  auto read = test::read_whole_file(doc.string());
  REQUIRE(read.has_value());
  const std::string& text = *read;
  std::set<std::string> documented;
  std::regex heading(R"(^#### `([a-z0-9-]+)`)", std::regex::multiline);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), heading); it != std::sregex_iterator(); ++it)
    documented.insert((*it)[1]);
  std::set<std::string> catalog;
  for (const LoaderRule& rule : loader_rules()) catalog.insert(rule.id);
  CHECK(documented == catalog);
}

// ------------------------------------------------------- refusing, and proving

TEST_CASE("prune and sign refuse an input that breaks a loader rule, naming the rule and the offset") {
  Image image = dylib();
  uint64_t at = text_command(image) + kInitprot;
  image.put32(at, 7);
  for (auto rewrite : {prune_macho, sign_macho}) {
    try {
      rewrite(image.view(), test::checked());
      FAIL("no error");
    } catch (const Error& error) {
      CHECK(error.offset().value_or(0) == at);
      CHECK(error.problem() == "the input breaks the loader rule seg-protection: __TEXT segment permissions is not 'r-x'");
    }
  }
  // inspect (and so verify) reports it instead.
  MachOReport report = inspect_macho(image.view());
  REQUIRE(report.slices.size() == 1);
  REQUIRE(report.slices[0].loader_rules.size() == 1);
  CHECK(report.slices[0].loader_rules[0].rule == "seg-protection");
}

TEST_CASE("a universal input whose slices dyld would refuse is refused before any slice is rewritten") {
  std::vector<uint8_t> fat = universal({{macho::CPU_TYPE_ARM64, 0, dylib().bytes}}, false, 12);
  try {
    prune_macho(Bytes(fat), test::checked());
    FAIL("no error");
  } catch (const Error& error) {
    CHECK(error.offset().value_or(0) == 16);
    CHECK(error.kind() == ErrorKind::Refused);
    CHECK(error.problem().find("the input breaks the loader rule fat-slice-aligned") == 0);
  }
  CHECK(rule_ids(inspect_macho(Bytes(fat)).loader_rules) == std::set<std::string>{"fat-slice-aligned"});
}

TEST_CASE("a universal rewrite that lays slices out again keeps arm64 slices on 16 KiB pages") {
  // lipo writes align 14 for arm64; with a header saying 12, laying the slices out
  // again (here after signing both, which makes them grow) once put arm64 on a 4 KiB
  // page, where dyld refuses it: the output check refused the rewrite. Now the layout
  // keeps each slice on its architecture's page.
  std::vector<uint8_t> fat = universal({{macho::CPU_TYPE_X86_64, 3, dyld_info_dylib(macho::CPU_TYPE_X86_64).build().bytes},
                                        {macho::CPU_TYPE_ARM64, 0, dylib().bytes}});
  put_be32_at(fat, 8 + 20 + 16, 12);
  REQUIRE(check_image_rules(Bytes(fat)).empty());
  MachORepair signed_fat = sign_macho(Bytes(fat), test::checked());  // both slices grow by a signature
  REQUIRE(signed_fat.report.changed);
  Universal after = parse_universal(signed_fat.output.bytes());
  CHECK(after.slices[1].offset % 0x4000 == 0);
  CHECK(after.slices[1].align == 12);  // the header keeps what it said
  std::vector<RuleViolation> violations = check_image_rules(signed_fat.output.bytes());
  INFO(listing(violations));
  CHECK(violations.empty());
}

// ----------------------------------------------------- the ExecuTorch samples

namespace {

std::string samples_directory() {
  const char* configured = std::getenv("MACHOFIX_SAMPLES");
  std::string here = __FILE__;
  return configured ? configured : here.substr(0, here.rfind("/tests/unit/")) + "/../shared/samples";
}

// Every Mach-O blob of a .pte/.ptd, checked straight from the container's bytes.
std::vector<RuleViolation> blob_rules(const Bytes& file) {
  using namespace pte_internal;
  Container container = read_container(file);
  std::vector<RuleViolation> found;
  for (uint32_t index : macho_segments(container)) {
    std::vector<RuleViolation> blob = check_image_rules(container.segment_bytes(index));
    found.insert(found.end(), blob.begin(), blob.end());
  }
  return found;
}

}  // namespace

TEST_CASE("the ExecuTorch samples pass every loader rule, before and after prune" * doctest::test_suite("executorch-samples")) {
  for (const char* name : {"metal_hashkeys.pte", "metal_methodkeys.pte"}) {
    CAPTURE(name);
    MappedFile input(samples_directory() + "/" + name);
    PteReport report = inspect_pte(input.bytes());
    REQUIRE(!report.blobs.empty());
    for (const BlobReport& blob : report.blobs) {
      CHECK(blob.error == "");
      CHECK(blob.macho.loader_rules.empty());
      for (const SliceReport& slice : blob.macho.slices) CHECK(slice.loader_rules.empty());
    }
    CHECK(blob_rules(input.bytes()).empty());

    char pattern[] = "/tmp/machofix-rules-test-XXXXXX";
    std::string directory = mkdtemp(pattern);
    std::string output = directory + "/out.pte";
    PteReport pruned = repair_pte(input, output, test::checked(), false);  // prune
    CHECK(pruned.changed);  // libomp goes
    {
      MappedFile written(output);
      std::vector<RuleViolation> violations = blob_rules(written.bytes());
      INFO(listing(violations));
      CHECK(violations.empty());
    }
    std::filesystem::remove_all(directory);
  }
}
