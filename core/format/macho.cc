#include "core/format/macho.h"

#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"

#include <algorithm>
#include <cstring>

namespace machofix {

using namespace macho;

const char* dylib_kind_name(DylibKind kind) {
  switch (kind) {
    case DylibKind::Load: return "load";
    case DylibKind::Weak: return "weak";
    case DylibKind::Reexport: return "reexport";
    case DylibKind::Upward: return "upward";
  }
  return "?";
}

std::string cpu_name(uint32_t cputype, uint32_t cpusubtype) {
  uint32_t subtype = cpusubtype & 0x00ffffff;  // high bits are capability flags (ptrauth ABI)
  switch (cputype) {
    case CPU_TYPE_ARM64: return subtype == 2 ? "arm64e" : "arm64";
    case CPU_TYPE_X86_64: return subtype == 8 ? "x86_64h" : "x86_64";
    case 7: return "i386";
    case 12: return subtype == 9 ? "armv7" : subtype == 11 ? "armv7s" : subtype == 12 ? "armv7k" : "arm";
    case 12 | 0x02000000: return "arm64_32";
    case 18: return "ppc";
    case 18 | CPU_ARCH_ABI64: return "ppc64";
  }
  return "cputype " + std::to_string(cputype);
}

bool MachO::two_level() const { return flags & MH_TWOLEVEL; }

std::string MachO::arch() const { return cpu_name(cputype, cpusubtype); }

std::string MachO::filetype_name() const {
  switch (filetype) {
    case MH_EXECUTE: return "executable";
    case MH_DYLIB: return "dylib";
    case MH_BUNDLE: return "bundle";
  }
  return "filetype " + std::to_string(filetype);
}

bool rewritable_filetype(uint32_t filetype) {
  return filetype == MH_EXECUTE || filetype == MH_DYLIB || filetype == MH_BUNDLE;
}

std::string filetype_description(uint32_t filetype) {
  switch (filetype) {
    case MH_OBJECT: return "Mach-O object file (MH_OBJECT)";
    case MH_EXECUTE: return "Mach-O executable (MH_EXECUTE)";
    case MH_FVMLIB: return "Mach-O fixed VM shared library (MH_FVMLIB)";
    case MH_CORE: return "Mach-O core file (MH_CORE)";
    case MH_PRELOAD: return "Mach-O preloaded executable (MH_PRELOAD)";
    case MH_DYLIB: return "Mach-O dylib (MH_DYLIB)";
    case MH_DYLINKER: return "Mach-O dynamic linker (MH_DYLINKER)";
    case MH_BUNDLE: return "Mach-O bundle (MH_BUNDLE)";
    case MH_DYLIB_STUB: return "Mach-O dylib stub (MH_DYLIB_STUB)";
    case MH_DSYM: return "dSYM debug-symbols file (MH_DSYM)";
    case MH_KEXT_BUNDLE: return "kernel extension (MH_KEXT_BUNDLE)";
    case MH_FILESET: return "Mach-O fileset, e.g. a kernel collection (MH_FILESET)";
    case MH_GPU_EXECUTE: return "GPU program (MH_GPU_EXECUTE)";
    case MH_GPU_DYLIB: return "GPU library (MH_GPU_DYLIB)";
  }
  return "Mach-O file of unknown type " + std::to_string(filetype);
}

std::optional<uint32_t> header_filetype(const Bytes& slice) {
  if (slice.size() < sizeof(MachHeader64)) return std::nullopt;
  MachHeader64 header = slice.get<MachHeader64>(0, "Mach-O header");
  if (header.magic != MH_MAGIC_64) return std::nullopt;
  return header.filetype;
}

std::string version_text(uint32_t packed) {
  std::string text = std::to_string(packed >> 16) + "." + std::to_string((packed >> 8) & 0xff);
  if (packed & 0xff) text += "." + std::to_string(packed & 0xff);
  return text;
}

std::string platform_name(uint32_t platform) {
  static const char* const names[] = {"unknown", "macOS", "iOS", "tvOS", "watchOS", "bridgeOS", "Mac Catalyst",
                                      "iOS Simulator", "tvOS Simulator", "watchOS Simulator", "DriverKit",
                                      "visionOS", "visionOS Simulator"};
  return platform < std::size(names) ? names[platform] : "platform " + std::to_string(platform);
}

std::optional<uint32_t> parse_version(const std::string& text) {
  uint32_t parts[3] = {0, 0, 0};
  size_t part = 0, digits = 0;
  for (char c : text) {
    if (c == '.') {
      if (digits == 0 || ++part == 3) return std::nullopt;
      digits = 0;
    } else if (c >= '0' && c <= '9' && digits < 5) {
      parts[part] = parts[part] * 10 + static_cast<uint32_t>(c - '0');
      ++digits;
    } else {
      return std::nullopt;
    }
  }
  if (digits == 0 || parts[0] > 0xffff || parts[1] > 0xff || parts[2] > 0xff) return std::nullopt;
  return parts[0] << 16 | parts[1] << 8 | parts[2];
}

const Segment* MachO::segment(const std::string& name) const { return segment_named(segments, name); }

uint64_t MachO::load_commands_end() const { return sizeof(MachHeader64) + sizeofcmds; }

uint64_t MachO::first_section_offset() const {
  uint64_t lowest = bytes.size();
  for (const Segment& segment : segments)
    for (const Section& section : segment.sections)
      // Zero-fill sections have no file content; their offset field means nothing.
      if (section.file_offset != 0 && (section.flags & 0xff) != 0x1 && (section.flags & 0xff) != 0xc &&
          (section.flags & 0xff) != 0x12)
        lowest = std::min<uint64_t>(lowest, section.file_offset);
  return lowest;
}

bool looks_like_thin_macho(const Bytes& bytes) {
  if (bytes.size() < sizeof(uint32_t)) return false;  // the magic
  uint32_t magic = bytes.u32(offsetof(MachHeader64, magic));
  return magic == MH_MAGIC_64 || magic == MH_MAGIC || magic == MH_CIGAM || magic == MH_CIGAM_64;
}

bool looks_like_universal(const Bytes& bytes) {
  if (bytes.size() < sizeof(FatHeader)) return false;
  FatHeader header = bytes.get<FatHeader>(0, "fat header");
  // Java class files share 0xcafebabe; their next word (version) is far above any arch count.
  return (header.magic == FAT_MAGIC || header.magic == FAT_MAGIC_64) && header.nfat_arch > 0 && header.nfat_arch < 64;
}

namespace {

const char* command_name(uint32_t cmd) {
  const char* name = load_command_name(cmd);
  return name ? name : "load command";
}

// The loader rule a refusal mirrors (docs/loader-rules.md), for the message.
std::string rule(const char* id) { return std::string(" (loader rule ") + id + ")"; }

// Like Bytes::require, naming the loader rule: dyld wants these commands whole.
void require_command_size(const Bytes& body, uint64_t size, const char* what) {
  if (body.size() < size)
    body.fail_here(0, std::string(what) + " (" + std::to_string(size) + " bytes) runs past the end of its container (" +
                          std::to_string(body.size()) + " bytes from " + hex(body.base()) + ")" + rule("lc-cmdsize-exact"));
}

class Reader {
 public:
  explicit Reader(const Bytes& bytes) : bytes_(bytes) { image_.bytes = bytes; }

  MachO read() {
    read_header();
    read_commands();
    check_layout();
    return std::move(image_);
  }

 private:
  void read_header() {
    if (bytes_.size() < sizeof(uint32_t)) bytes_.fail_here(0, "file too short for a Mach-O header");
    uint32_t magic = bytes_.u32(offsetof(MachHeader64, magic), "Mach-O magic");
    if (magic == MH_MAGIC || magic == MH_CIGAM) bytes_.fail_here(0, "32-bit Mach-O is not supported (only 64-bit arm64 and x86_64)");
    if (magic == MH_CIGAM_64) bytes_.fail_here(0, "big-endian Mach-O is not supported");
    if (magic != MH_MAGIC_64) bytes_.fail_here(0, "not a Mach-O file (magic " + hex(magic) + ")");
    MachHeader64 header = bytes_.get<MachHeader64>(0, "Mach-O header");
    image_.cputype = header.cputype;
    image_.cpusubtype = header.cpusubtype;
    image_.filetype = header.filetype;
    image_.ncmds = header.ncmds;
    image_.sizeofcmds = header.sizeofcmds;
    image_.flags = header.flags;
    if (!rewritable_filetype(image_.filetype))
      bytes_.fail_here(offsetof(MachHeader64, filetype), "a " + filetype_description(image_.filetype) + " is not supported (only dylibs, bundles and executables)");
    if (!fits(sizeof(MachHeader64), image_.sizeofcmds, bytes_.size()))
      bytes_.fail_here(offsetof(MachHeader64, sizeofcmds), "sizeofcmds " + std::to_string(image_.sizeofcmds) + " runs past the end of the file" + rule("lc-sizeofcmds"));
    if (image_.ncmds > image_.sizeofcmds / sizeof(macho::LoadCommand))  // each command is 8 bytes or more
      bytes_.fail_here(offsetof(MachHeader64, ncmds), "ncmds " + std::to_string(image_.ncmds) + " cannot fit in sizeofcmds " +
                               std::to_string(image_.sizeofcmds) + rule("lc-walk"));
  }

  void read_commands() {
    uint64_t end = sizeof(MachHeader64) + image_.sizeofcmds;
    uint64_t offset = sizeof(MachHeader64);
    for (uint32_t index = 0; index < image_.ncmds; ++index) {
      if (end - offset < sizeof(macho::LoadCommand))
        bytes_.fail_here(offset, "load command " + std::to_string(index) + " runs past sizeofcmds" + rule("lc-walk"));
      auto header = bytes_.get<macho::LoadCommand>(offset, "load command");
      machofix::LoadCommand command{header.cmd, header.cmdsize, offset};
      uint64_t cmdsize_at = offset + offsetof(macho::LoadCommand, cmdsize);
      if (command.size < sizeof(macho::LoadCommand) || command.size % kCommandAlign64 != 0)
        bytes_.fail_here(cmdsize_at, "load command " + std::to_string(index) + " has cmdsize " +
                                         std::to_string(command.size) + " (must be a nonzero multiple of 8)" +
                                         rule(command.size < sizeof(macho::LoadCommand) ? "lc-cmdsize-min" : "lc-cmdsize-align"));
      if (command.size > end - offset)
        bytes_.fail_here(cmdsize_at, "load command " + std::to_string(index) + " (cmdsize " +
                                         std::to_string(command.size) + ") runs past sizeofcmds" + rule("lc-cmdsize-fits"));
      image_.commands.push_back(command);
      read_command(command, image_.commands.size() - 1);
      offset += command.size;
    }
  }

  void read_command(const machofix::LoadCommand& command, size_t index) {
    Bytes body = bytes_.sub(command.offset, command.size, "load command");
    switch (command.cmd) {
      case LC_LOAD_DYLIB: return read_dylib(body, index, DylibKind::Load);
      case LC_LOAD_WEAK_DYLIB: return read_dylib(body, index, DylibKind::Weak);
      case LC_REEXPORT_DYLIB: return read_dylib(body, index, DylibKind::Reexport);
      case LC_LOAD_UPWARD_DYLIB: return read_dylib(body, index, DylibKind::Upward);
      case LC_LAZY_LOAD_DYLIB: image_.has_lazy_load_dylib = true; return;
      case LC_ID_DYLIB: return read_id_dylib(body, index);
      case LC_RPATH: return read_rpath(body, index);
      case LC_SEGMENT_64: return read_segment(body, index);
      case LC_SYMTAB: return read_symtab(body);
      case LC_DYLD_INFO:
      case LC_DYLD_INFO_ONLY: return read_dyld_info(body, command.cmd);
      case LC_DYLD_CHAINED_FIXUPS: return read_data_range(body, command.cmd, image_.chained_fixups);
      case LC_DYLD_EXPORTS_TRIE: return read_data_range(body, command.cmd, image_.exports_trie);
      case LC_BUILD_VERSION: return read_build_version(body);
      case LC_VERSION_MIN_MACOSX:
      case LC_VERSION_MIN_IPHONEOS:
      case LC_VERSION_MIN_TVOS:
      case LC_VERSION_MIN_WATCHOS: return read_version_min(body, command.cmd);
      case LC_CODE_SIGNATURE:
        image_.code_signature_command = index;
        return read_data_range(body, command.cmd, image_.code_signature);
    }
  }

  // The lc_str of a command whose fixed part is `fixed_size` bytes, its offset at `field`.
  std::string command_string(const Bytes& body, uint32_t fixed_size, uint64_t field, const char* offset_what,
                             const char* what, const char* command) {
    require_command_size(body, fixed_size, command);
    uint32_t string_offset = body.u32(field);
    if (string_offset < fixed_size || string_offset >= body.size())
      body.fail_here(field, std::string(offset_what) + " offset " + std::to_string(string_offset) + " lies outside its load command" +
                                rule("lc-string-offset"));
    if (!std::memchr(body.data() + string_offset, 0, body.size() - string_offset))
      body.fail_here(string_offset, std::string(what) + " is not NUL-terminated" + rule("lc-string-terminated"));
    return std::string(body.cstr(string_offset, what));
  }

  std::string dylib_name(const Bytes& body) {
    return command_string(body, sizeof(DylibCommand), offsetof(DylibCommand, name_offset), "dylib name", "dylib install name",
                          "dylib command");
  }

  void read_rpath(const Bytes& body, size_t index) {
    image_.rpaths.push_back({command_string(body, sizeof(RpathCommand), offsetof(RpathCommand, path_offset), "rpath", "rpath", "LC_RPATH"), index});
  }

  void read_dylib(const Bytes& body, size_t index, DylibKind kind) {
    Dylib dylib;
    dylib.install_name = dylib_name(body);
    dylib.kind = kind;
    dylib.command_index = index;
    DylibCommand command = body.get<DylibCommand>(0, "dylib command");  // dylib_name checked its size
    dylib.current_version = command.current_version;
    dylib.compatibility_version = command.compatibility_version;
    dylib.ordinal = static_cast<int>(image_.dylibs.size()) + 1;
    image_.dylibs.push_back(std::move(dylib));
  }

  void read_build_version(const Bytes& body) {
    require_command_size(body, sizeof(BuildVersionCommand), "LC_BUILD_VERSION");
    BuildVersionCommand command = body.get<BuildVersionCommand>(0, "LC_BUILD_VERSION");
    image_.build_targets.push_back({command.platform, command.minos, command.sdk, body.base() - bytes_.base()});
  }

  // The platform numbers dyld gives the older commands (MachOFile::forEachSupportedPlatform):
  // an x86_64 iOS, tvOS or watchOS image is a simulator's.
  void read_version_min(const Bytes& body, uint32_t cmd) {
    require_command_size(body, sizeof(VersionMinCommand), command_name(cmd));
    VersionMinCommand command = body.get<VersionMinCommand>(0, "LC_VERSION_MIN");
    bool intel = image_.cputype == CPU_TYPE_X86_64;
    uint32_t platform = cmd == LC_VERSION_MIN_MACOSX     ? 1
                        : cmd == LC_VERSION_MIN_IPHONEOS ? (intel ? 7 : 2)
                        : cmd == LC_VERSION_MIN_TVOS     ? (intel ? 8 : 3)
                                                         : (intel ? 9 : 4);
    uint32_t sdk = command.sdk;
    if (cmd == LC_VERSION_MIN_MACOSX && sdk == 0) sdk = command.version;  // old linkers left it 0
    image_.build_targets.push_back({platform, command.version, sdk, body.base() - bytes_.base()});
  }

  void read_id_dylib(const Bytes& body, size_t index) {
    if (image_.id_name) body.fail_here(0, "duplicate LC_ID_DYLIB" + rule("lc-unique"));
    image_.id_name = dylib_name(body);
    image_.id_command = index;
  }

  void read_segment(const Bytes& body, size_t index) {
    require_command_size(body, sizeof(SegmentCommand64), "LC_SEGMENT_64");
    Segment segment = read_segment_command(body, image_.commands[index].offset, index);
    uint32_t section_count = declared_section_count(body);
    if (section_count > section_room(body))
      body.fail_here(offsetof(SegmentCommand64, nsects), "segment " + segment.name + ": " + std::to_string(section_count) + " sections do not fit in cmdsize" +
                             rule("lc-cmdsize-exact"));
    if (!fits(segment.file_offset, segment.file_size, bytes_.size()))
      body.fail_here(offsetof(SegmentCommand64, fileoff), "segment " + segment.name + " (fileoff " + hex(segment.file_offset) + ", filesize " +
                             hex(segment.file_size) + ") runs past the end of the file" + rule("seg-in-file"));
    read_sections(body, section_count, segment);  // inside: nsects was checked above
    image_.segments.push_back(std::move(segment));
  }

  // Checks that the range lies in the slice; later stages then read it freely. `field`
  // is the offset of a (u32 offset, u32 size) pair in the command, which is whole.
  DataRange range_at(const Bytes& body, uint64_t field, const char* what) {
    DataRange range{body.u32(field), body.u32(field + sizeof(uint32_t)), true};
    if (!fits(range.offset, range.size, bytes_.size()))
      body.fail_here(field, std::string(what) + " (offset " + hex(range.offset) + ", size " + hex(range.size) +
                                ") runs past the end of the file" + rule("linkedit-in-segment"));
    placed_.push_back({what, body.base() - bytes_.base() + field, range.offset, range.size});
    return range;
  }

  // Rewriting shifts load commands and edits LINKEDIT bytes in place: both are only
  // sound if nothing overlaps (dyld refuses overlapping LINKEDIT content as well).
  void check_layout() {
    uint64_t commands_end = image_.load_commands_end();
    uint64_t first_section = image_.first_section_offset();
    if (commands_end > first_section)
      bytes_.fail_here(offsetof(MachHeader64, sizeofcmds), "sizeofcmds " + std::to_string(image_.sizeofcmds) + " reaches into section data at " +
                               hex(first_section));
    std::vector<Placed> ranges;
    for (const Placed& range : placed_)
      if (range.size) ranges.push_back(range);
    std::sort(ranges.begin(), ranges.end(), [](const Placed& a, const Placed& b) { return a.offset < b.offset; });
    const Segment* linkedit = image_.segment("__LINKEDIT");
    for (size_t i = 0; i < ranges.size(); ++i) {
      if (ranges[i].offset < commands_end)
        bytes_.fail_here(ranges[i].field, std::string(ranges[i].what) + " at " + hex(ranges[i].offset) +
                                              " overlaps the load commands (which end at " + hex(commands_end) + ")" +
                                              rule("linkedit-in-segment"));
      // dyld refuses LINKEDIT data outside its segment; so do we, before editing it.
      if (linkedit && (ranges[i].offset < linkedit->file_offset ||
                       ranges[i].offset + ranges[i].size > linkedit->file_offset + linkedit->file_size))
        bytes_.fail_here(ranges[i].field, std::string(ranges[i].what) + " at " + hex(ranges[i].offset) +
                                              " lies outside __LINKEDIT (file offsets " + hex(linkedit->file_offset) +
                                              "-" + hex(linkedit->file_offset + linkedit->file_size) + ")" +
                                              rule("linkedit-in-segment"));
      if (i && ranges[i - 1].offset + ranges[i - 1].size > ranges[i].offset)
        bytes_.fail_here(ranges[i].field, std::string(ranges[i].what) + " at " + hex(ranges[i].offset) + " overlaps " +
                                              ranges[i - 1].what + rule("linkedit-overlap"));
    }
  }

  void read_data_range(const Bytes& body, uint32_t cmd, DataRange& into) {
    if (into.present) body.fail_here(0, std::string("duplicate ") + command_name(cmd) + rule("lc-unique"));
    require_command_size(body, sizeof(LinkeditDataCommand), command_name(cmd));
    into = range_at(body, offsetof(LinkeditDataCommand, dataoff), command_name(cmd));
  }

  void read_symtab(const Bytes& body) {
    if (image_.symtab.present) body.fail_here(0, "duplicate LC_SYMTAB" + rule("lc-unique"));
    require_command_size(body, sizeof(SymtabCommand), "LC_SYMTAB");
    SymtabCommand command = body.get<SymtabCommand>(0, "LC_SYMTAB");
    Symtab& symtab = image_.symtab;
    symtab.present = true;
    symtab.symbols_offset = command.symoff;
    symtab.symbol_count = command.nsyms;
    symtab.strings_offset = command.stroff;
    symtab.strings_size = command.strsize;
    if (!fits(symtab.symbols_offset, symtab.symbol_count * sizeof(Nlist64), bytes_.size()))
      body.fail_here(offsetof(SymtabCommand, symoff), "symbol table (" + std::to_string(symtab.symbol_count) + " entries at " +
                            hex(symtab.symbols_offset) + ") runs past the end of the file" + rule("linkedit-in-segment"));
    if (!fits(symtab.strings_offset, symtab.strings_size, bytes_.size()))
      body.fail_here(offsetof(SymtabCommand, stroff), "string table (offset " + hex(symtab.strings_offset) + ", size " +
                             hex(symtab.strings_size) + ") runs past the end of the file" + rule("linkedit-in-segment"));
    uint64_t at = body.base() - bytes_.base();
    placed_.push_back({"symbol table", at + offsetof(SymtabCommand, symoff), symtab.symbols_offset,
                       symtab.symbol_count * sizeof(Nlist64)});
    placed_.push_back({"string table", at + offsetof(SymtabCommand, stroff), symtab.strings_offset, symtab.strings_size});
  }

  void read_dyld_info(const Bytes& body, uint32_t cmd) {
    if (image_.dyld_info.present) body.fail_here(0, "duplicate LC_DYLD_INFO" + rule("lc-unique"));
    require_command_size(body, sizeof(DyldInfoCommand), command_name(cmd));
    DyldInfo& info = image_.dyld_info;
    info.present = true;
    info.rebase = range_at(body, offsetof(DyldInfoCommand, rebase_off), "rebase info");
    info.bind = range_at(body, offsetof(DyldInfoCommand, bind_off), "bind info");
    info.weak_bind = range_at(body, offsetof(DyldInfoCommand, weak_bind_off), "weak bind info");
    info.lazy_bind = range_at(body, offsetof(DyldInfoCommand, lazy_bind_off), "lazy bind info");
    info.exports = range_at(body, offsetof(DyldInfoCommand, export_off), "export info");
  }

  // A LINKEDIT range and the load-command field that placed it (for messages).
  struct Placed {
    const char* what;
    uint64_t field;
    uint64_t offset;
    uint64_t size;
  };

  const Bytes& bytes_;
  MachO image_;
  std::vector<Placed> placed_;
};

}  // namespace

MachO parse_macho(const Bytes& bytes) { return Reader(bytes).read(); }

}  // namespace machofix
