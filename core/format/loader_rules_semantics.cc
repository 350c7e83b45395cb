// Loader rules on what the load commands say: install name and dependencies
// (dyld3 MachOAnalyzer::validEmbeddedPaths, mach_o::Header::validSemanticsLinkedDylibs),
// the entry point of an executable (validMain), LC_UUID (validLinkedit).
#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include "core/base/error.h"
#include "core/format/loader_rules_internal.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"

namespace machofix::rules {

using namespace macho;

namespace {

constexpr uint64_t kCommandsField = offsetof(MachHeader64, ncmds);  // where "missing X" is reported: the list of commands
// An LC_UNIXTHREAD's first thread state: after thread_command, its flavor and count (u32 each).
constexpr uint64_t kThreadState = sizeof(ThreadCommand) + 2 * sizeof(uint32_t);

bool driverkit(const Check& check) {
  for (const Platform& platform : check.platforms)
    if (platform.platform == PLATFORM_DRIVERKIT) return true;
  return false;
}

// The path of a dylib command whose string passed lc-string-*, else nullopt.
std::optional<std::string> path_of(const Check& check, const Command& command) {
  if (command.size < sizeof(StringCommand)) return std::nullopt;
  Bytes body = check.body(command);
  uint32_t at = body.get<StringCommand>(0, "load command").string_offset;
  if (at >= body.size() || !std::memchr(body.data() + at, 0, body.size() - at)) return std::nullopt;
  return std::string(reinterpret_cast<const char*>(body.data() + at));
}

bool dyld_managed(const Check& check) {
  return check.filetype == MH_DYLIB || check.filetype == MH_BUNDLE || (check.flags & MH_DYLDLINK);
}

void check_install_name(Check& check) {
  const Command* id = check.first(LC_ID_DYLIB);
  if (check.filetype == MH_DYLIB && !id) check.add("dylib-id", kCommandsField, "MH_DYLIB is missing LC_ID_DYLIB");
  if (check.filetype != MH_DYLIB && id) check.add("dylib-id", id->offset, "LC_ID_DYLIB found in non-MH_DYLIB");
}

void check_dependencies(Check& check) {
  std::set<std::string> seen;
  bool no_duplicates = check.enforced(Gate::NoDuplicateDylibs);
  for (const Command& command : check.commands) {
    if (!takes_library_ordinal(command.cmd)) continue;
    std::optional<std::string> path = path_of(check, command);
    if (path && !seen.insert(*path).second && no_duplicates)
      check.add("dylib-duplicate", command.offset, command_label(command) + ": duplicate linked dylib '" + *path + "'");
  }
  if (check.dependent_dylib_count() || !check.enforced(Gate::NoLinkedDylibs) || !dyld_managed(check)) return;
  // The dylibs that make up libSystem sit at the bottom and link with nothing.
  const char* system_dir = driverkit(check) ? "/System/DriverKit/usr/lib/system/" : "/usr/lib/system/";
  if (check.install_name().value_or("").rfind(system_dir, 0) != 0)
    check.add("dylib-linked", kCommandsField, "missing LC_LOAD_DYLIB (must link with at least libSystem.dylib)");
}

// dyld compares each LC_RPATH with the ones before it by strcmp (a trailing slash
// makes another path), and remembers only the first 64.
void check_rpaths(Check& check) {
  if (!check.enforced(Gate::NoDuplicateRPaths)) return;
  std::vector<std::string> seen;
  for (const Command* command : check.all(LC_RPATH)) {
    std::optional<std::string> path = path_of(check, *command);
    if (!path) continue;
    if (std::find(seen.begin(), seen.end(), *path) != seen.end()) {
      check.add("rpath-duplicate", command->offset, "duplicate LC_RPATH '" + *path + "'");
      return;  // dyld stops at the first
    }
    if (seen.size() < 64) seen.push_back(*path);
  }
}

// The entry address an LC_UNIXTHREAD sets (dyld3 MachOFile::entryAddrFromThreadCmd), or 0.
uint64_t thread_entry(const Check& check, const Command& command) {
  uint64_t pc_register = check.cputype == CPU_TYPE_X86_64 ? 16 : check.cputype == CPU_TYPE_ARM64 ? 32 : UINT64_MAX;
  if (pc_register == UINT64_MAX || command.size < kThreadState + sizeof(uint64_t) * (pc_register + 1)) return 0;
  return check.body(command).u64(kThreadState + sizeof(uint64_t) * pc_register);
}

const Segment* segment_at(const Check& check, uint64_t address) {
  for (const Segment& segment : check.segments)
    if (address >= segment.vmaddr && address - segment.vmaddr < segment.vmsize) return &segment;
  return nullptr;
}

void check_entry_address(Check& check, const Command& command, const Segment& text) {
  if (command.cmd == LC_MAIN) {
    // dyld reads entryoff from a command of 16 bytes or more (stacksize need not be there).
    if (command.size < offsetof(EntryPointCommand, stacksize)) return;
    uint64_t entry = check.body(command).u64(offsetof(EntryPointCommand, entryoff));
    if (entry < text.vmsize) return;
    const Segment* target = segment_at(check, text.vmaddr + entry);
    if (!target) check.add("main-entry", command.offset + offsetof(EntryPointCommand, entryoff), "LC_MAIN entryoff " + hex(entry) + " is out of range");
    else if (!target->executable()) check.add("main-entry", command.offset + offsetof(EntryPointCommand, entryoff), "LC_MAIN points to non-executable segment " + target->name);
    return;
  }
  uint64_t entry = thread_entry(check, command);
  if (entry == 0)
    check.add("main-entry", command.offset, "LC_UNIXTHREAD not valid for this architecture");
  else if (entry < text.vmaddr || entry - text.vmaddr >= text.vmsize)
    check.add("main-entry", command.offset, "LC_UNIXTHREAD entry " + hex(entry) + " not in __TEXT segment");
}

void check_entry(Check& check) {
  if (check.filetype != MH_EXECUTE) return;
  if (!check.first(LC_LOAD_DYLINKER)) check.add("exec-dynamic", kCommandsField, "it is a static executable (no LC_LOAD_DYLINKER)");
  std::vector<const Command*> entries;
  for (const Command& command : check.commands)
    if (command.cmd == LC_MAIN || command.cmd == LC_UNIXTHREAD) entries.push_back(&command);
  if (driverkit(check)) {
    if (!entries.empty()) check.add("main-entry", entries.front()->offset, "LC_MAIN not allowed for driverkit");
    return;
  }
  if (entries.empty()) check.add("main-entry", kCommandsField, "missing LC_MAIN or LC_UNIXTHREAD");
  if (entries.size() > 1) check.add("main-entry", entries[1]->offset, "only one LC_MAIN or LC_UNIXTHREAD is allowed");
  if (const Segment* text = check.segment("__TEXT"))
    for (const Command* command : entries) check_entry_address(check, *command, *text);
}

}  // namespace

void check_semantics(Check& check) {
  if (!check.first(LC_UUID) && check.enforced(Gate::NoUUID)) check.add("uuid-present", kCommandsField, "missing LC_UUID");
  check_install_name(check);
  check_dependencies(check);
  check_rpaths(check);
  check_entry(check);
}

}  // namespace machofix::rules
