// Shared state of one loader-rules check of a thin slice (core/loader_rules*.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/base/bytes.h"
#include "core/format/loader_rules.h"
#include "core/format/macho_format.h"
#include "core/format/segments.h"

namespace machofix::rules {

// The rules name load commands as dyld's source does, unqualified.
using namespace macho;

// Values the rules need beyond core/format/macho_format.h.
constexpr uint32_t MH_DYLDLINK = 0x4;
constexpr uint32_t SG_NORELOC = 0x4;
// LC_BUILD_VERSION's platforms (<mach-o/loader.h>), declared once for every rules file.
constexpr uint32_t PLATFORM_MACOS = 1, PLATFORM_IOS = 2, PLATFORM_TVOS = 3, PLATFORM_WATCHOS = 4,
                   PLATFORM_BRIDGEOS = 5, PLATFORM_MACCATALYST = 6, PLATFORM_IOSSIMULATOR = 7,
                   PLATFORM_TVOSSIMULATOR = 8, PLATFORM_WATCHOSSIMULATOR = 9, PLATFORM_DRIVERKIT = 10,
                   PLATFORM_VISIONOS = 11, PLATFORM_VISIONOSSIMULATOR = 12;

// What dyld3's MachOAnalyzer::enforceFormat(Malformed::...) gates on the SDK the
// binary was built with (and, for one rule, mach_o::Policy's enforcement epoch).
enum class Gate {
  Always,
  LinkeditAlignment,       // Malformed::linkeditAlignment
  DyldInfoAndLocalRelocs,  // Malformed::dyldInfoAndlocalRelocs
  SegmentOrder,            // Malformed::segmentOrder
  TextPermissions,         // Malformed::textPermissions
  LinkeditPermissions,     // Malformed::linkeditPermissions
  CodeSigAlignment,        // Malformed::codeSigAlignment
  SectionsInSegment,       // Malformed::sectionsAddrRangeWithinSegment
  NoLinkedDylibs,          // Malformed::noLinkedDylibs
  NoUUID,                  // Malformed::noUUID
  NoDuplicateDylibs,       // mach_o::Policy::enforceNoDuplicateDylibs (fall 2024 SDKs)
  NoDuplicateRPaths,       // mach_o::Policy::enforceNoDuplicateRPaths (spring 2025 SDKs: macOS 15.4, iOS 18.4)
};

struct Platform {
  uint32_t platform = 0;  // PLATFORM_MACOS = 1, ...
  uint32_t min_os = 0;    // xxxx.yy.zz nibbles, as in the load command
  uint32_t sdk = 0;
  uint64_t at = 0;        // its load command (0: implied)
};

struct Command {
  uint32_t cmd = 0;
  uint32_t size = 0;
  uint64_t offset = 0;  // in the slice
  uint32_t number = 0;  // 1-based, as dyld numbers them in messages
};

// A (dataoff, datasize) LINKEDIT blob and the load-command field that placed it.
struct Blob {
  const char* name;
  uint64_t alignment;
  uint64_t offset, size;
  uint64_t field;  // in the slice
  bool code_signature = false;
};

class Check {
 public:
  explicit Check(const Bytes& slice) : bytes(slice) {}

  const Bytes& bytes;
  std::vector<RuleViolation> found;

  uint32_t cputype = 0, filetype = 0, flags = 0, ncmds = 0, sizeofcmds = 0;
  std::vector<Command> commands;  // only once the walk succeeded
  std::vector<Segment> segments;  // the LC_SEGMENT_64s of whole size, in order; sections that fit
  std::vector<Platform> platforms;

  void add(const char* rule, uint64_t offset_in_slice, std::string message) {
    found.push_back({rule, bytes.base() + offset_in_slice, std::move(message)});
  }
  bool enforced(Gate gate) const;
  std::vector<const Command*> all(uint32_t cmd) const;
  const Command* first(uint32_t cmd) const;
  const Segment* segment(const std::string& name) const;
  size_t dependent_dylib_count() const;
  std::optional<std::string> install_name() const;
  // The bytes of a command (inside the load-command area once the walk succeeded).
  Bytes body(const Command& command) const { return bytes.sub(command.offset, command.size, "load command"); }

 private:
  mutable std::optional<size_t> dylib_count_;  // once `commands` is complete
};

// Stages, in order; each file holds one family of rules.
bool check_header_and_walk(Check& check);  // false: later stages cannot run
void check_commands(Check& check);         // sizes, strings, uniqueness, platforms
void check_segments(Check& check);
void check_linkedit(Check& check);
void check_semantics(Check& check);        // dylibs, entry point, UUID
void check_fixups(Check& check);           // ordinals, chained fixups headers
// loader_rules_chained.cc; `fixups` is the LC_DYLD_CHAINED_FIXUPS data.
void check_chained_fixups(Check& check, const Bytes& fixups);
void check_chained_ordinal(Check& check, int64_t ordinal, uint64_t offset_in_slice);

std::string command_label(const Command& command);  // "load command #3 (LC_SYMTAB)"
const char* command_name(uint32_t cmd);

}  // namespace machofix::rules
