// A thin 64-bit Mach-O image, read into a plain model.
//
// parse_macho() validates everything later stages rely on (header, every load
// command's size and placement, the ranges of LINKEDIT data it points at), so that
// analysis and rewriting work on known-good offsets. All offsets in the model are
// relative to the start of the slice; Bytes::base() turns them into file offsets
// for messages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/base/bytes.h"
#include "core/format/segments.h"

namespace machofix {

enum class DylibKind { Load, Weak, Reexport, Upward };
const char* dylib_kind_name(DylibKind kind);

struct LoadCommand {
  uint32_t cmd = 0;
  uint32_t size = 0;
  uint64_t offset = 0;  // from the start of the slice
};

struct Dylib {
  int ordinal = 0;  // 1-based, in load-command order
  DylibKind kind = DylibKind::Load;
  std::string install_name;
  size_t command_index = 0;  // into MachO::commands
  uint32_t current_version = 0;
  uint32_t compatibility_version = 0;
};

// An LC_RPATH: a directory dyld searches for @rpath/ install names.
struct Rpath {
  std::string path;
  size_t command_index = 0;  // into MachO::commands
};

// A platform the image is built for (LC_BUILD_VERSION, or an LC_VERSION_MIN_* of an
// older linker): the minimum OS it declares and the SDK it was linked against.
// Versions are packed as in the load commands: X.Y.Z = X << 16 | Y << 8 | Z.
struct BuildTarget {
  uint32_t platform = 0;  // PLATFORM_MACOS = 1, PLATFORM_MACCATALYST = 6, ...
  uint32_t min_os = 0;
  uint32_t sdk = 0;
  uint64_t command_offset = 0;  // of its load command, from the start of the slice
};
// "14.0", "13.2.1": a packed version as dyld and otool print it.
std::string version_text(uint32_t packed);
// The name dyld gives a platform of LC_BUILD_VERSION: "macOS", "iOS", "Mac Catalyst", ...
std::string platform_name(uint32_t platform);
// The packed version of "14", "14.2" or "14.2.1"; nullopt for anything else.
std::optional<uint32_t> parse_version(const std::string& text);

// A (dataoff, datasize) pair of a LINKEDIT blob.
struct DataRange {
  uint64_t offset = 0;
  uint64_t size = 0;
  bool present = false;
};

struct Symtab {
  uint64_t symbols_offset = 0;
  uint64_t symbol_count = 0;
  uint64_t strings_offset = 0;
  uint64_t strings_size = 0;
  bool present = false;
};

struct DyldInfo {
  DataRange rebase, bind, weak_bind, lazy_bind, exports;
  bool present = false;
};

struct MachO {
  Bytes bytes;  // the whole slice
  uint32_t cputype = 0;
  uint32_t cpusubtype = 0;
  uint32_t filetype = 0;
  uint32_t ncmds = 0;
  uint32_t sizeofcmds = 0;
  uint32_t flags = 0;

  std::vector<LoadCommand> commands;
  std::vector<Dylib> dylibs;  // dependent dylibs, ordinal = index + 1
  std::vector<Rpath> rpaths;  // in load-command order, duplicates kept
  std::vector<Segment> segments;
  std::vector<BuildTarget> build_targets;  // in load-command order
  std::optional<std::string> id_name;  // LC_ID_DYLIB
  std::optional<size_t> id_command;    // its index into commands
  Symtab symtab;
  DyldInfo dyld_info;
  DataRange chained_fixups;
  DataRange exports_trie;
  DataRange code_signature;
  std::optional<size_t> code_signature_command;  // index into commands
  bool has_lazy_load_dylib = false;

  bool two_level() const;
  std::string arch() const;
  std::string filetype_name() const;
  const Segment* segment(const std::string& name) const;
  // The first byte after the load commands, and the lowest file offset of section
  // data: the room between them is where a new load command could go.
  uint64_t load_commands_end() const;
  uint64_t first_section_offset() const;
};

// Reads and validates a thin Mach-O. `bytes` is the slice (base = its file offset).
MachO parse_macho(const Bytes& bytes);

// Cheap content checks used to decide what a file is.
bool looks_like_thin_macho(const Bytes& bytes);
bool looks_like_universal(const Bytes& bytes);

// Mach-O file types. machofix rewrites linked images that load dylibs: dylibs,
// bundles and executables; object files, dSYMs, core files, kexts, filesets and
// the rest are what the description names, e.g. "Mach-O object file (MH_OBJECT)".
bool rewritable_filetype(uint32_t filetype);
std::string filetype_description(uint32_t filetype);
// The file type in the header of a 64-bit little-endian Mach-O slice, if it has one.
std::optional<uint32_t> header_filetype(const Bytes& slice);

std::string cpu_name(uint32_t cputype, uint32_t cpusubtype);

}  // namespace machofix
