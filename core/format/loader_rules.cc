// Entry points of the loader rules, the rule catalog, and the SDK gates dyld uses
// to enforce some rules only on binaries built with a recent SDK.
#include "core/format/loader_rules.h"

#include "core/base/error.h"
#include "core/format/loader_rules_internal.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"

namespace machofix {

const std::vector<LoaderRule>& loader_rules() {
  static const std::vector<LoaderRule> catalog = {
      {"header-magic", "the slice starts with MH_MAGIC_64", "MachOAnalyzer::validMachOForArchAndPlatform"},
      {"header-filetype", "the file type is one dyld loads: executable, dylib, bundle", "MachOAnalyzer::validMachOForArchAndPlatform"},
      {"lc-sizeofcmds", "header + sizeofcmds fit in the slice", "MachOAnalyzer::validLoadCommands"},
      {"lc-walk", "each of the ncmds load commands starts inside sizeofcmds", "MachOFile::forEachLoadCommand"},
      {"lc-cmdsize-min", "cmdsize >= 8", "MachOFile::forEachLoadCommand"},
      {"lc-cmdsize-align", "cmdsize a multiple of 8 (64-bit); dyld refuses one not a multiple of 4", "MachOFile::forEachLoadCommand, <mach-o/loader.h>"},
      {"lc-cmdsize-fits", "each load command ends inside sizeofcmds", "MachOFile::forEachLoadCommand"},
      {"lc-cmdsize-exact", "fixed-size load commands have exactly their size", "MachOLoaded::getLinkEditLoadCommands, mach_o::Header::validStructureLoadCommands, xnu load_code_signature"},
      {"lc-unknown-required", "no unknown load command with LC_REQ_DYLD set", "mach_o::Header::validStructureLoadCommands"},
      {"lc-unique", "at most one of each load command that must be unique", "MachOLoaded::getLinkEditLoadCommands, mach_o::Header::validSemanticsInstallName, MachOAnalyzer::validMain"},
      {"lc-dysymtab-needs-symtab", "LC_DYSYMTAB only with LC_SYMTAB", "MachOLoaded::getLinkEditLoadCommands"},
      {"lc-string-offset", "a path string's offset lies inside its load command", "MachOAnalyzer::validEmbeddedPaths, mach_o::Header::validStructureLoadCommands"},
      {"lc-string-terminated", "a path string ends (NUL) inside its load command", "MachOAnalyzer::validEmbeddedPaths, mach_o::Header::validStructureLoadCommands"},
      {"platform-consistent", "the platform load commands name one platform (or macOS with Mac Catalyst)", "mach_o::Header::validSemanticsPlatform"},
      {"seg-in-file", "each segment's file range lies in the slice", "MachOAnalyzer::validSegments"},
      {"seg-filesize-vmsize", "a segment's filesize does not exceed its vmsize", "MachOAnalyzer::validSegments"},
      {"seg-vm-wrap", "vmaddr + vmsize does not wrap", "MachOAnalyzer::validSegments"},
      {"seg-protection", "__TEXT r-x, __LINKEDIT r--, no unknown protection bits", "MachOAnalyzer::validSegments"},
      {"seg-text", "__TEXT exists, starts at file offset 0 and holds the load commands", "MachOAnalyzer::validLoadCommands, mach_o::Header::validSemanticsSegments"},
      {"seg-linkedit", "__LINKEDIT exists", "MachOAnalyzer::validSegments"},
      {"seg-overlap", "no two segments overlap, in memory or in the file", "MachOAnalyzer::validSegments"},
      {"seg-order", "segments ascend in vmaddr and file offset in load-command order", "MachOAnalyzer::validSegments"},
      {"sect-in-segment", "each section lies inside its segment", "MachOAnalyzer::validSegments"},
      {"linkedit-in-segment", "every LINKEDIT blob lies inside __LINKEDIT", "MachOAnalyzer::validLinkeditLayout"},
      {"linkedit-overlap", "no two LINKEDIT blobs overlap", "MachOAnalyzer::validLinkeditLayout"},
      {"linkedit-align", "LINKEDIT blobs aligned: pointer size, indirect symbols 4, strings 1", "MachOAnalyzer::validLinkeditLayout"},
      {"linkedit-info-present", "LC_DYLD_INFO or LC_DYSYMTAB present, and some LINKEDIT content", "MachOAnalyzer::validLinkeditLayout"},
      {"fixups-one-encoding", "one fixup encoding: not opcodes with relocations, not opcodes with chained fixups", "MachOAnalyzer::validLinkeditLayout, mach_o::Image::validStructureLinkedit"},
      {"symtab-limits", "at most 0x10000000 symbols and indirect symbols", "MachOAnalyzer::validLinkeditLayout"},
      {"dysymtab-ranges", "LC_DYSYMTAB's symbol ranges lie in the symbol table", "MachOAnalyzer::validLinkeditLayout"},
      {"uuid-present", "LC_UUID present (recent SDKs)", "MachOAnalyzer::validLinkedit"},
      {"dylib-id", "a dylib has LC_ID_DYLIB; nothing else has one", "MachOAnalyzer::validEmbeddedPaths"},
      {"dylib-linked", "at least one dependent dylib (recent SDKs)", "MachOAnalyzer::validEmbeddedPaths"},
      {"dylib-duplicate", "no dependent dylib path twice (fall 2024 SDKs)", "mach_o::Header::validSemanticsLinkedDylibs"},
      {"rpath-duplicate", "no LC_RPATH path twice, compared byte for byte (spring 2025 SDKs: macOS 15.4, iOS 18.4)",
       "mach_o::Header::validSemanticsRPath, mach_o::Policy::enforceNoDuplicateRPaths"},
      {"exec-dynamic", "an executable has LC_LOAD_DYLINKER", "MachOAnalyzer::validMachOForArchAndPlatform"},
      {"main-entry", "an executable has one LC_MAIN or LC_UNIXTHREAD, pointing at code", "MachOAnalyzer::validMain"},
      {"dylib-ordinal", "every library ordinal names a dependent dylib or a special ordinal", "MachOAnalyzer::invalidBindState, validChainedFixupsInfo, MachOLoaded::findExportedSymbol"},
      {"chained-header", "dyld_chained_fixups_header: version, offsets, formats", "mach_o::ChainedFixups::valid"},
      {"chained-seg-count", "the chained starts cover exactly the segments", "mach_o::ChainedFixups::valid"},
      {"chained-starts", "per-segment starts: size, page size, pointer format, page starts", "mach_o::ChainedFixups::valid"},
      {"chained-imports-count", "the imports fit the pointer format's bind ordinal", "mach_o::ChainedFixups::valid"},
      {"fat-header", "the fat_arch table fits in the file and is not too long", "mach_o::Universal::valid, FatFile::forEachSlice"},
      {"fat-slice-in-file", "each slice lies inside the file", "mach_o::Universal::valid"},
      {"fat-slice-aligned", "each slice starts on a page (16 KiB for arm64)", "mach_o::Universal::validSlice"},
      {"fat-slice-arch", "each slice's header has the fat_arch's cputype and subtype", "mach_o::Universal::validSlice"},
      {"fat-duplicate-arch", "no architecture twice", "mach_o::Universal::valid"},
      {"fat-overlap", "no two slices overlap", "mach_o::Universal::valid"},
  };
  return catalog;
}

std::string describe(const RuleViolation& violation) {
  return "loader rule " + violation.rule + " at offset " + hex(violation.offset) + ": " + violation.message;
}

namespace {

Error broken_rule(const std::vector<RuleViolation>& violations, const std::string& what) {
  const RuleViolation& first = violations.front();
  std::string more = violations.size() > 1 ? " (and " + std::to_string(violations.size() - 1) + " more)" : "";
  return Error(what + " breaks the loader rule " + first.rule + ": " + first.message + more, first.offset);
}

}  // namespace

void require_loader_rules(const std::vector<RuleViolation>& violations, const std::string& what) {
  if (!violations.empty()) throw broken_rule(violations, what).as(ErrorKind::ProofFailed);
}

void refuse_breaking_loader_rules(const std::vector<RuleViolation>& violations) {
  if (!violations.empty()) throw broken_rule(violations, "the input").as_refusal();
}

std::vector<RuleViolation> check_loader_rules(const Bytes& slice) {
  rules::Check check(slice);
  if (!rules::check_header_and_walk(check)) return check.found;
  rules::check_commands(check);
  rules::check_segments(check);
  rules::check_linkedit(check);
  rules::check_semantics(check);
  rules::check_fixups(check);
  return check.found;
}

namespace rules {

namespace {

constexpr uint32_t version(uint32_t major, uint32_t minor = 0) { return major << 16 | minor << 8; }

// dyld3 MachOAnalyzer::enforceFormat: per platform, the SDK from which a kind of
// malformation is an error. 0: always enforced.
uint32_t macos_sdk_from(Gate gate) {
  switch (gate) {
    case Gate::LinkeditAlignment:
    case Gate::DyldInfoAndLocalRelocs: return version(10, 14);
    case Gate::SegmentOrder:
    case Gate::TextPermissions:
    case Gate::LinkeditPermissions:
    case Gate::CodeSigAlignment: return version(10, 15);
    case Gate::SectionsInSegment: return version(10, 16);
    default: return version(12);
  }
}

uint32_t ios_sdk_from(Gate gate) {
  switch (gate) {
    case Gate::DyldInfoAndLocalRelocs:
    case Gate::TextPermissions: return 0;
    case Gate::LinkeditAlignment:
    case Gate::SegmentOrder:
    case Gate::LinkeditPermissions:
    case Gate::CodeSigAlignment: return version(13);
    case Gate::SectionsInSegment: return version(14);
    default: return version(15);
  }
}

uint32_t watchos_sdk_from(Gate gate) {
  return gate == Gate::DyldInfoAndLocalRelocs || gate == Gate::TextPermissions ? 0 : version(8);
}

bool dyld3_enforces(Gate gate, const Platform& platform) {
  switch (platform.platform) {
    case PLATFORM_MACOS: return platform.sdk >= macos_sdk_from(gate);
    case PLATFORM_IOS:
    case PLATFORM_TVOS:
    case PLATFORM_MACCATALYST: return platform.sdk >= ios_sdk_from(gate);
    case PLATFORM_WATCHOS: return platform.sdk >= watchos_sdk_from(gate);
    default: return true;  // driverKit, simulators and newer platforms: always
  }
}

// mach_o::Platform epochs: the calendar year of an OS release (fall releases).
uint32_t release_year(const Platform& platform) {
  uint32_t major = platform.sdk >> 16, minor = (platform.sdk >> 8) & 0xff;
  switch (platform.platform) {
    case PLATFORM_MACOS: return major >= 11 ? 2009 + major : 2004 + minor;
    case PLATFORM_IOS: case PLATFORM_TVOS: case PLATFORM_MACCATALYST:
    case PLATFORM_IOSSIMULATOR: case PLATFORM_TVOSSIMULATOR: return 2006 + major;
    case PLATFORM_WATCHOS: case PLATFORM_WATCHOSSIMULATOR: return 2013 + major;
    case PLATFORM_BRIDGEOS: return 2015 + major;
    case PLATFORM_DRIVERKIT: return 2000 + major;
    case PLATFORM_VISIONOS: case PLATFORM_VISIONOSSIMULATOR: return 2022 + major;
  }
  return 0;
}

// mach_o::Platform::Epoch of an SDK, ordered: fall of a year is its major release,
// spring (x.4, macOS 11-13 and bridgeOS up to 8: x.3) the next calendar year's first
// half, so fall 2024 < spring 2025 < fall 2025 (PlatformInfo::yearForMajorVersion).
uint32_t sdk_epoch(const Platform& platform) {
  uint32_t major = platform.sdk >> 16, minor = (platform.sdk >> 8) & 0xff;
  uint32_t year = release_year(platform);
  uint32_t spring_minor = 4;
  if (platform.platform == PLATFORM_MACOS && major <= 13) spring_minor = 3;
  if (platform.platform == PLATFORM_BRIDGEOS && major <= 8) spring_minor = 3;
  if ((platform.platform == PLATFORM_VISIONOS || platform.platform == PLATFORM_VISIONOSSIMULATOR) && major == 1) spring_minor = 1;
  bool spring = !(platform.platform == PLATFORM_MACOS && major < 11) && minor >= spring_minor;
  return spring ? 2 * (year + 1) : 2 * year + 1;
}

constexpr uint32_t kSpring2025 = 2 * 2025;

}  // namespace

bool Check::enforced(Gate gate) const {
  if (gate == Gate::Always) return true;
  std::vector<Platform> list = platforms;
  // dyld3 MachOFile::forEachSupportedPlatform: a binary without a platform load
  // command is taken for an old macOS one (the Go linker writes arm64 ones like that).
  if (list.empty() && cputype == macho::CPU_TYPE_X86_64) list.push_back({PLATFORM_MACOS, version(10, 5), version(10, 5)});
  if (list.empty() && cputype == macho::CPU_TYPE_ARM64) list.push_back({PLATFORM_MACOS, version(11), version(11)});
  for (const Platform& platform : list) {
    if (gate == Gate::NoDuplicateDylibs ? release_year(platform) >= 2024
        : gate == Gate::NoDuplicateRPaths ? sdk_epoch(platform) >= kSpring2025
                                          : dyld3_enforces(gate, platform))
      return true;
  }
  return false;
}

std::vector<const Command*> Check::all(uint32_t cmd) const {
  std::vector<const Command*> matching;
  for (const Command& command : commands)
    if (command.cmd == cmd) matching.push_back(&command);
  return matching;
}

const Command* Check::first(uint32_t cmd) const {
  for (const Command& command : commands)
    if (command.cmd == cmd) return &command;
  return nullptr;
}

const Segment* Check::segment(const std::string& name) const { return segment_named(segments, name); }

size_t Check::dependent_dylib_count() const {
  if (dylib_count_) return *dylib_count_;  // asked once per bind
  size_t count = 0;
  for (const Command& command : commands)
    count += macho::takes_library_ordinal(command.cmd);
  dylib_count_ = count;
  return count;
}

std::optional<std::string> Check::install_name() const {
  const Command* id = first(macho::LC_ID_DYLIB);
  if (!id || id->size < sizeof(macho::StringCommand)) return std::nullopt;
  Bytes command = body(*id);
  uint32_t name_offset = command.get<macho::StringCommand>(0, "LC_ID_DYLIB").string_offset;
  std::string name;
  for (uint64_t at = name_offset; at < command.size() && command.u8(at); ++at) name += static_cast<char>(command.u8(at));
  return name;
}

std::string command_label(const Command& command) {
  const char* name = macho::load_command_name(command.cmd);
  return "load command #" + std::to_string(command.number) + " (" + (name ? std::string(name) : hex(command.cmd)) + ")";
}

}  // namespace rules

}  // namespace machofix
