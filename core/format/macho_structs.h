// The on-disk structures of Mach-O and universal files, declared once, as
// <mach-o/loader.h>, <mach-o/fat.h>, <mach-o/nlist.h> and <mach-o/fixup-chains.h>
// declare them, with explicit byte order (core/base/endian.h). Read with Bytes::get<T>,
// written with put<T>; a field's offset is offsetof(T, field). The numeric constants
// are in core/format/macho_format.h.
#pragma once

#include <cstddef>

#include "core/base/endian.h"

namespace machofix::macho {

struct MachHeader64 {  // mach_header_64
  ul32 magic, cputype, cpusubtype, filetype, ncmds, sizeofcmds, flags, reserved;
};

struct LoadCommand {  // load_command: the start of every command
  ul32 cmd, cmdsize;
};

struct SegmentCommand64 {  // segment_command_64, followed by nsects section_64
  ul32 cmd, cmdsize;
  char segname[16];
  ul64 vmaddr, vmsize, fileoff, filesize;
  ul32 maxprot, initprot, nsects, flags;
};

struct Section64 {  // section_64
  char sectname[16];
  char segname[16];
  ul64 addr, size;
  ul32 offset, align, reloff, nreloc, flags, reserved1, reserved2, reserved3;
};

struct DylibCommand {  // dylib_command: LC_LOAD_DYLIB, LC_ID_DYLIB, ... name follows
  ul32 cmd, cmdsize;
  ul32 name_offset;  // from the command's start
  ul32 timestamp, current_version, compatibility_version;
};

struct RpathCommand {  // rpath_command; the path follows
  ul32 cmd, cmdsize;
  ul32 path_offset;  // from the command's start
};

// The commands whose first field after cmdsize is an lc_str (dylinker_command,
// sub_framework_command, sub_client_command, ... as well as the two above).
struct StringCommand {
  ul32 cmd, cmdsize;
  ul32 string_offset;  // from the command's start
};

struct LinkeditDataCommand {  // linkedit_data_command: LC_CODE_SIGNATURE, LC_DYLD_CHAINED_FIXUPS, ...
  ul32 cmd, cmdsize, dataoff, datasize;
};

struct SymtabCommand {  // symtab_command
  ul32 cmd, cmdsize, symoff, nsyms, stroff, strsize;
};

struct DysymtabCommand {  // dysymtab_command
  ul32 cmd, cmdsize;
  ul32 ilocalsym, nlocalsym, iextdefsym, nextdefsym, iundefsym, nundefsym;
  ul32 tocoff, ntoc, modtaboff, nmodtab, extrefsymoff, nextrefsyms;
  ul32 indirectsymoff, nindirectsyms, extreloff, nextrel, locreloff, nlocrel;
};

struct DyldInfoCommand {  // dyld_info_command: LC_DYLD_INFO(_ONLY)
  ul32 cmd, cmdsize;
  ul32 rebase_off, rebase_size, bind_off, bind_size, weak_bind_off, weak_bind_size;
  ul32 lazy_bind_off, lazy_bind_size, export_off, export_size;
};

struct UuidCommand {  // uuid_command
  ul32 cmd, cmdsize;
  uint8_t uuid[16];
};

struct VersionMinCommand {  // version_min_command: LC_VERSION_MIN_*
  ul32 cmd, cmdsize, version, sdk;
};

struct BuildVersionCommand {  // build_version_command, followed by ntools build_tool_version
  ul32 cmd, cmdsize, platform, minos, sdk, ntools;
};

struct BuildToolVersion {  // build_tool_version
  ul32 tool, version;
};

struct EntryPointCommand {  // entry_point_command: LC_MAIN
  ul32 cmd, cmdsize;
  ul64 entryoff, stacksize;
};

struct EncryptionInfoCommand64 {  // encryption_info_command_64
  ul32 cmd, cmdsize, cryptoff, cryptsize, cryptid, pad;
};

struct ThreadCommand {  // thread_command: LC_UNIXTHREAD; (flavor, count, state[count]) entries follow
  ul32 cmd, cmdsize;
};

struct Nlist64 {  // nlist_64
  ul32 n_strx;
  uint8_t n_type, n_sect;
  ul16 n_desc;
  ul64 n_value;
};

struct RelocationInfo {  // relocation_info: r_address, then the packed symbolnum/pcrel/length/extern/type
  ul32 r_address, r_info;
};

struct FatHeader {  // fat_header: big-endian
  ub32 magic, nfat_arch;
};

struct FatArch {  // fat_arch
  ub32 cputype, cpusubtype, offset, size, align;
};

struct FatArch64 {  // fat_arch_64
  ub32 cputype, cpusubtype;
  ub64 offset, size;
  ub32 align, reserved;
};

struct ChainedFixupsHeader {  // dyld_chained_fixups_header
  ul32 fixups_version, starts_offset, imports_offset, symbols_offset, imports_count, imports_format, symbols_format;
};

struct ChainedStartsInSegment {  // dyld_chained_starts_in_segment, page_count u16 page_start follow
  ul32 size;
  ul16 page_size, pointer_format;
  ul64 segment_offset;
  ul32 max_valid_pointer;
  ul16 page_count;
};

static_assert(sizeof(MachHeader64) == 32 && sizeof(LoadCommand) == 8 && sizeof(SegmentCommand64) == 72);
static_assert(sizeof(Section64) == 80 && sizeof(DylibCommand) == 24 && sizeof(RpathCommand) == 12);
static_assert(sizeof(LinkeditDataCommand) == 16 && sizeof(SymtabCommand) == 24 && sizeof(DysymtabCommand) == 80);
static_assert(sizeof(DyldInfoCommand) == 48 && sizeof(UuidCommand) == 24 && sizeof(Nlist64) == 16);
static_assert(sizeof(FatHeader) == 8 && sizeof(FatArch) == 20 && sizeof(FatArch64) == 32);
static_assert(sizeof(ChainedFixupsHeader) == 28 && sizeof(ChainedStartsInSegment) == 22);
static_assert(sizeof(StringCommand) == 12 && sizeof(VersionMinCommand) == 16 && sizeof(BuildVersionCommand) == 24);
static_assert(sizeof(RelocationInfo) == 8 && sizeof(BuildToolVersion) == 8 && sizeof(EntryPointCommand) == 24 && sizeof(EncryptionInfoCommand64) == 24);
static_assert(offsetof(MachHeader64, ncmds) == 16 && offsetof(SegmentCommand64, fileoff) == 40);
static_assert(offsetof(Nlist64, n_desc) == 6 && offsetof(FatArch64, offset) == 8);

}  // namespace machofix::macho
