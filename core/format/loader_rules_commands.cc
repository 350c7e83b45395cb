// Loader rules on the header and the load commands themselves: the walk dyld's
// MachOFile::forEachLoadCommand does, the fixed command sizes, strings inside their
// command, commands that must be unique.
#include <algorithm>
#include <cstring>
#include <optional>

#include "core/base/error.h"
#include "core/format/loader_rules_internal.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"

namespace machofix::rules {

using namespace macho;

namespace {

bool walk_commands(Check& check) {
  const Bytes& bytes = check.bytes;
  uint64_t end = sizeof(MachHeader64) + check.sizeofcmds;
  uint64_t offset = sizeof(MachHeader64);
  for (uint32_t number = 1; number <= check.ncmds; ++number) {
    std::string which = "load command #" + std::to_string(number) + " of " + std::to_string(check.ncmds);
    if (end - offset < sizeof(macho::LoadCommand)) {
      check.add("lc-walk", offset, "malformed " + which + ": extends past sizeofcmds (" + hex(check.sizeofcmds) + ")");
      return false;
    }
    auto header = bytes.get<macho::LoadCommand>(offset, "load command");  // inside sizeofcmds, inside the file
    uint32_t size = header.cmdsize;
    uint64_t cmdsize_at = offset + offsetof(macho::LoadCommand, cmdsize);
    if (size < sizeof(macho::LoadCommand)) {
      check.add("lc-cmdsize-min", cmdsize_at, "malformed " + which + ": size (" + hex(size) + ") too small");
      return false;
    }
    if (size % kCommandAlign64 != 0) {
      check.add("lc-cmdsize-align", cmdsize_at,
                "malformed " + which + ": size (" + hex(size) + ") is not a multiple of 8" +
                    (size % 4 ? " (not even of 4, which dyld requires)" : " (required of 64-bit load commands)"));
      return false;
    }
    if (size > end - offset) {
      check.add("lc-cmdsize-fits", cmdsize_at,
                "malformed " + which + ": size (" + hex(size) + ") is too large, load commands end at " + hex(end));
      return false;
    }
    check.commands.push_back({header.cmd, size, offset, number});
    offset += size;
  }
  return true;
}

// The size a command must have, when dyld insists on one.
std::optional<uint64_t> exact_size(const Check& check, const Command& command) {
  Bytes body = check.body(command);
  switch (command.cmd) {
    case LC_SYMTAB: return sizeof(SymtabCommand);
    case LC_DYSYMTAB: return sizeof(DysymtabCommand);
    case LC_DYLD_INFO:
    case LC_DYLD_INFO_ONLY: return sizeof(DyldInfoCommand);
    case LC_CODE_SIGNATURE:
    case LC_DYLD_EXPORTS_TRIE:
    case LC_DYLD_CHAINED_FIXUPS:
    case LC_SEGMENT_SPLIT_INFO:
    case LC_FUNCTION_STARTS:
    case LC_DATA_IN_CODE: return sizeof(LinkeditDataCommand);
    case LC_VERSION_MIN_MACOSX:
    case LC_VERSION_MIN_IPHONEOS:
    case LC_VERSION_MIN_TVOS:
    case LC_VERSION_MIN_WATCHOS: return sizeof(VersionMinCommand);
    case LC_UUID: return sizeof(UuidCommand);
    case LC_MAIN: return sizeof(EntryPointCommand);
    case LC_ENCRYPTION_INFO_64: return sizeof(EncryptionInfoCommand64);
    case LC_BUILD_VERSION:
      if (body.size() < sizeof(BuildVersionCommand)) return sizeof(BuildVersionCommand);
      return sizeof(BuildVersionCommand) + sizeof(BuildToolVersion) * uint64_t(body.get<BuildVersionCommand>(0, "LC_BUILD_VERSION").ntools);
    case LC_SEGMENT_64:
      if (body.size() < sizeof(SegmentCommand64)) return sizeof(SegmentCommand64);
      return sizeof(SegmentCommand64) + sizeof(Section64) * uint64_t(body.get<SegmentCommand64>(0, "LC_SEGMENT_64").nsects);
  }
  return std::nullopt;
}

void check_sizes(Check& check) {
  for (const Command& command : check.commands) {
    std::optional<uint64_t> expected = exact_size(check, command);
    if (expected && *expected != command.size)
      check.add("lc-cmdsize-exact", command.offset + offsetof(macho::LoadCommand, cmdsize),
                command_label(command) + " size wrong: cmdsize " + std::to_string(command.size) + ", must be " +
                    std::to_string(*expected));
  }
}

bool known_required(uint32_t cmd) {
  switch (cmd) {
    case LC_LOAD_WEAK_DYLIB:
    case LC_REEXPORT_DYLIB:
    case LC_LOAD_UPWARD_DYLIB:
    case LC_RPATH:
    case LC_DYLD_INFO_ONLY:
    case LC_MAIN:
    case LC_DYLD_EXPORTS_TRIE:
    case LC_DYLD_CHAINED_FIXUPS:
    case LC_FILESET_ENTRY: return true;
  }
  return false;
}

void check_required(Check& check) {
  for (const Command& command : check.commands)
    if ((command.cmd & LC_REQ_DYLD) && !known_required(command.cmd))
      check.add("lc-unknown-required", command.offset,
                "load command #" + std::to_string(command.number) + " unknown required load command " + hex(command.cmd));
}

struct UniqueGroup {
  std::vector<uint32_t> cmds;
  const char* message;
};

void check_unique(Check& check) {
  static const std::vector<UniqueGroup> groups = {
      {{LC_DYLD_INFO, LC_DYLD_INFO_ONLY}, "multiple LC_DYLD_INFO load commands"},
      {{LC_DYLD_EXPORTS_TRIE}, "multiple LC_DYLD_EXPORTS_TRIE load commands"},
      {{LC_DYLD_CHAINED_FIXUPS}, "multiple LC_DYLD_CHAINED_FIXUPS load commands"},
      {{LC_SYMTAB}, "multiple LC_SYMTAB load commands"},
      {{LC_DYSYMTAB}, "multiple LC_DYSYMTAB load commands"},
      {{LC_SEGMENT_SPLIT_INFO}, "multiple LC_SEGMENT_SPLIT_INFO load commands"},
      {{LC_FUNCTION_STARTS}, "multiple LC_FUNCTION_STARTS load commands"},
      {{LC_DATA_IN_CODE}, "multiple LC_DATA_IN_CODE load commands"},
      {{LC_CODE_SIGNATURE}, "multiple LC_CODE_SIGNATURE load commands"},
      {{LC_UUID}, "multiple LC_UUID load commands"},
      {{LC_VERSION_MIN_MACOSX, LC_VERSION_MIN_IPHONEOS, LC_VERSION_MIN_TVOS, LC_VERSION_MIN_WATCHOS},
       "multiple LC_VERSION_MIN_* load commands"},
      {{LC_ENCRYPTION_INFO_64}, "multiple LC_ENCRYPTION_INFO_64 load commands"},
      {{LC_ID_DYLIB}, "multiple LC_ID_DYLIB found"},
      {{LC_MAIN}, "multiple LC_MAIN load commands"},
      {{LC_UNIXTHREAD}, "multiple LC_UNIXTHREAD load commands"},
  };
  for (const UniqueGroup& group : groups) {
    bool seen = false;
    for (const Command& command : check.commands) {
      if (std::find(group.cmds.begin(), group.cmds.end(), command.cmd) == group.cmds.end()) continue;
      if (seen) check.add("lc-unique", command.offset, command_label(command) + ": " + group.message);
      seen = true;
    }
  }
  if (check.first(LC_DYSYMTAB) && !check.first(LC_SYMTAB))
    check.add("lc-dysymtab-needs-symtab", check.first(LC_DYSYMTAB)->offset, "LC_DYSYMTAB but no LC_SYMTAB load command");
}

bool has_path_string(uint32_t cmd) {
  switch (cmd) {
    case LC_ID_DYLIB:
    case LC_LOAD_DYLIB:
    case LC_LOAD_WEAK_DYLIB:
    case LC_REEXPORT_DYLIB:
    case LC_LOAD_UPWARD_DYLIB:
    case LC_RPATH:
    case LC_SUB_UMBRELLA:
    case LC_SUB_CLIENT:
    case LC_SUB_LIBRARY: return true;
  }
  return false;
}

void check_strings(Check& check) {
  for (const Command& command : check.commands) {
    if (!has_path_string(command.cmd)) continue;
    Bytes body = check.body(command);
    if (body.size() < sizeof(StringCommand)) {
      check.add("lc-string-offset", command.offset + offsetof(StringCommand, cmdsize),
                command_label(command) + ": cmdsize " + std::to_string(command.size) + " leaves no room for its string offset");
      continue;
    }
    uint32_t string_offset = body.get<StringCommand>(0, "load command").string_offset;
    if (string_offset >= body.size()) {
      check.add("lc-string-offset", command.offset + offsetof(StringCommand, string_offset),
                command_label(command) + " string offset (" + std::to_string(string_offset) + ") outside its size (" +
                    std::to_string(command.size) + ")");
      continue;
    }
    const uint8_t* start = body.data() + string_offset;
    if (!std::memchr(start, 0, body.size() - string_offset))
      check.add("lc-string-terminated", command.offset + string_offset,
                command_label(command) + " string extends beyond end of load command");
  }
}

// dyld3 MachOFile::forEachSupportedPlatform: LC_BUILD_VERSION and the older
// LC_VERSION_MIN_* (x86_64 iOS/tvOS/watchOS ones are simulator binaries).
void collect_platforms(Check& check) {
  bool intel = check.cputype == CPU_TYPE_X86_64;
  for (const Command& command : check.commands) {
    Bytes body = check.body(command);
    if (command.cmd == LC_BUILD_VERSION && body.size() >= sizeof(BuildVersionCommand)) {
      BuildVersionCommand build = body.get<BuildVersionCommand>(0, "LC_BUILD_VERSION");
      check.platforms.push_back({build.platform, build.minos, build.sdk, command.offset});
      continue;
    }
    if (body.size() < sizeof(VersionMinCommand)) continue;
    VersionMinCommand version_min = body.get<VersionMinCommand>(0, "LC_VERSION_MIN");
    uint32_t version = version_min.version, sdk = version_min.sdk;
    switch (command.cmd) {
      case LC_VERSION_MIN_MACOSX: check.platforms.push_back({1, version, sdk ? sdk : version, command.offset}); break;
      case LC_VERSION_MIN_IPHONEOS: check.platforms.push_back({intel ? 7u : 2u, version, sdk, command.offset}); break;
      case LC_VERSION_MIN_TVOS: check.platforms.push_back({intel ? 8u : 3u, version, sdk, command.offset}); break;
      case LC_VERSION_MIN_WATCHOS: check.platforms.push_back({intel ? 9u : 4u, version, sdk, command.offset}); break;
    }
  }
}

// mach_o::PlatformAndVersions::zip: one platform, or macOS with Mac Catalyst (a
// "zippered" dylib); anything else is "incompatible platforms".
void check_platforms(Check& check) {
  constexpr uint32_t macos = 1, catalyst = 6;
  for (const Platform& platform : check.platforms) {
    const Platform& first = check.platforms.front();
    bool zippered = (first.platform == macos && platform.platform == catalyst) ||
                    (first.platform == catalyst && platform.platform == macos);
    if (platform.platform != first.platform && !zippered)
      check.add("platform-consistent", platform.at, "incompatible platforms: " + std::to_string(first.platform) + " - " +
                                                        std::to_string(platform.platform) + " (PLATFORM_* numbers)");
  }
}

}  // namespace

bool check_header_and_walk(Check& check) {
  const Bytes& bytes = check.bytes;
  if (bytes.size() < sizeof(MachHeader64) || bytes.get<MachHeader64>(0, "Mach-O header").magic != MH_MAGIC_64) {
    check.add("header-magic", 0, "not a 64-bit little-endian Mach-O (no MH_MAGIC_64 header)");
    return false;
  }
  MachHeader64 header = bytes.get<MachHeader64>(0, "Mach-O header");
  check.cputype = header.cputype;
  check.filetype = header.filetype;
  check.ncmds = header.ncmds;
  check.sizeofcmds = header.sizeofcmds;
  check.flags = header.flags;
  if (check.filetype != MH_EXECUTE && check.filetype != MH_DYLIB && check.filetype != MH_BUNDLE) {
    check.add("header-filetype", offsetof(MachHeader64, filetype), "not a dylib, bundle, or executable, filetype=" + hex(check.filetype));
    return false;
  }
  if (sizeof(MachHeader64) + check.sizeofcmds > bytes.size()) {
    check.add("lc-sizeofcmds", offsetof(MachHeader64, sizeofcmds), "load commands (" + hex(sizeof(MachHeader64) + check.sizeofcmds) + " bytes with the header) exceed length of file (" +
                                       hex(bytes.size()) + ")");
    return false;
  }
  return walk_commands(check);
}

void check_commands(Check& check) {
  check_sizes(check);
  check_required(check);
  check_unique(check);
  check_strings(check);
  collect_platforms(check);
  check_platforms(check);
}

}  // namespace machofix::rules
