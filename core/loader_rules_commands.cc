// Loader rules on the header and the load commands themselves: the walk dyld's
// MachOFile::forEachLoadCommand does, the fixed command sizes, strings inside their
// command, commands that must be unique.
#include <algorithm>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "core/loader_rules_internal.h"
#include "core/macho_format.h"

namespace machofix::rules {

using namespace macho;

namespace {

bool walk_commands(Check& check) {
  const Bytes& bytes = check.bytes;
  uint64_t end = kHeaderSize64 + check.sizeofcmds;
  uint64_t offset = kHeaderSize64;
  for (uint32_t number = 1; number <= check.ncmds; ++number) {
    std::string which = "load command #" + std::to_string(number) + " of " + std::to_string(check.ncmds);
    if (end - offset < 8) {
      check.add("lc-walk", offset, "malformed " + which + ": extends past sizeofcmds (" + hex(check.sizeofcmds) + ")");
      return false;
    }
    uint32_t size = bytes.u32(offset + 4);
    if (size < 8) {
      check.add("lc-cmdsize-min", offset + 4, "malformed " + which + ": size (" + hex(size) + ") too small");
      return false;
    }
    if (size % 8 != 0) {
      check.add("lc-cmdsize-align", offset + 4,
                "malformed " + which + ": size (" + hex(size) + ") is not a multiple of 8" +
                    (size % 4 ? " (not even of 4, which dyld requires)" : " (required of 64-bit load commands)"));
      return false;
    }
    if (size > end - offset) {
      check.add("lc-cmdsize-fits", offset + 4,
                "malformed " + which + ": size (" + hex(size) + ") is too large, load commands end at " + hex(end));
      return false;
    }
    check.commands.push_back({bytes.u32(offset), size, offset, number});
    offset += size;
  }
  return true;
}

// The size a command must have, when dyld insists on one.
std::optional<uint64_t> exact_size(const Check& check, const Command& command) {
  Bytes body = check.body(command);
  switch (command.cmd) {
    case LC_SYMTAB: return 24;
    case LC_DYSYMTAB: return 80;
    case LC_DYLD_INFO:
    case LC_DYLD_INFO_ONLY: return 48;
    case LC_CODE_SIGNATURE:
    case LC_DYLD_EXPORTS_TRIE:
    case LC_DYLD_CHAINED_FIXUPS:
    case LC_SEGMENT_SPLIT_INFO:
    case LC_FUNCTION_STARTS:
    case LC_DATA_IN_CODE:
    case LC_VERSION_MIN_MACOSX:
    case LC_VERSION_MIN_IPHONEOS:
    case LC_VERSION_MIN_TVOS:
    case LC_VERSION_MIN_WATCHOS: return 16;
    case LC_UUID:
    case LC_MAIN:
    case LC_ENCRYPTION_INFO_64: return 24;
    case LC_BUILD_VERSION: return body.size() < 24 ? 24 : 24 + 8 * uint64_t(body.u32(20));
    case LC_SEGMENT_64: return body.size() < 72 ? 72 : 72 + 80 * uint64_t(body.u32(64));
  }
  return std::nullopt;
}

void check_sizes(Check& check) {
  for (const Command& command : check.commands) {
    std::optional<uint64_t> expected = exact_size(check, command);
    if (expected && *expected != command.size)
      check.add("lc-cmdsize-exact", command.offset + 4,
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
    if (body.size() < 12) {
      check.add("lc-string-offset", command.offset + 4,
                command_label(command) + ": cmdsize " + std::to_string(command.size) + " leaves no room for its string offset");
      continue;
    }
    uint32_t string_offset = body.u32(8);
    if (string_offset >= body.size()) {
      check.add("lc-string-offset", command.offset + 8,
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
    if (command.cmd == LC_BUILD_VERSION && body.size() >= 24) {
      check.platforms.push_back({body.u32(8), body.u32(12), body.u32(16), command.offset});
      continue;
    }
    if (body.size() < 16) continue;
    uint32_t version = body.u32(8), sdk = body.u32(12);
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
  if (bytes.size() < kHeaderSize64 || bytes.u32(0) != MH_MAGIC_64) {
    check.add("header-magic", 0, "not a 64-bit little-endian Mach-O (no MH_MAGIC_64 header)");
    return false;
  }
  check.cputype = bytes.u32(4);
  check.filetype = bytes.u32(12);
  check.ncmds = bytes.u32(16);
  check.sizeofcmds = bytes.u32(20);
  check.flags = bytes.u32(24);
  if (check.filetype != MH_EXECUTE && check.filetype != MH_DYLIB && check.filetype != MH_BUNDLE) {
    check.add("header-filetype", 12, "not a dylib, bundle, or executable, filetype=" + hex(check.filetype));
    return false;
  }
  if (kHeaderSize64 + check.sizeofcmds > bytes.size()) {
    check.add("lc-sizeofcmds", 20, "load commands (" + hex(kHeaderSize64 + check.sizeofcmds) + " bytes with the header) exceed length of file (" +
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
