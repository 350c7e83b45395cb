// Mach-O constants (from <mach-o/loader.h>, <mach-o/nlist.h>, <mach-o/fat.h>,
// <mach-o/fixup-chains.h>): every load command (load_commands.def), and of the other
// values the ones machofix needs.
#pragma once

#include <cstdint>

namespace machofix::macho {

constexpr uint32_t MH_MAGIC = 0xfeedface;
constexpr uint32_t MH_CIGAM = 0xcefaedfe;
constexpr uint32_t MH_MAGIC_64 = 0xfeedfacf;
constexpr uint32_t MH_CIGAM_64 = 0xcffaedfe;
constexpr uint32_t FAT_MAGIC = 0xcafebabe;     // as read big-endian
constexpr uint32_t FAT_MAGIC_64 = 0xcafebabf;  // as read big-endian
// 64-bit files keep each load command's cmdsize a multiple of 8. The structures
// themselves (field offsets, sizes) are in core/format/macho_structs.h.
constexpr uint32_t kCommandAlign64 = 8;

constexpr uint32_t MH_OBJECT = 0x1;
constexpr uint32_t MH_EXECUTE = 0x2;
constexpr uint32_t MH_FVMLIB = 0x3;
constexpr uint32_t MH_CORE = 0x4;
constexpr uint32_t MH_PRELOAD = 0x5;
constexpr uint32_t MH_DYLIB = 0x6;
constexpr uint32_t MH_DYLINKER = 0x7;
constexpr uint32_t MH_BUNDLE = 0x8;
constexpr uint32_t MH_DYLIB_STUB = 0x9;
constexpr uint32_t MH_DSYM = 0xa;
constexpr uint32_t MH_KEXT_BUNDLE = 0xb;
constexpr uint32_t MH_FILESET = 0xc;
constexpr uint32_t MH_GPU_EXECUTE = 0xd;
constexpr uint32_t MH_GPU_DYLIB = 0xe;

constexpr uint32_t MH_TWOLEVEL = 0x80;

// A segment's initprot and maxprot.
constexpr uint32_t VM_PROT_READ = 1, VM_PROT_WRITE = 2, VM_PROT_EXECUTE = 4;

constexpr uint32_t CPU_ARCH_ABI64 = 0x01000000;
constexpr uint32_t CPU_TYPE_X86_64 = 7 | CPU_ARCH_ABI64;
constexpr uint32_t CPU_TYPE_ARM64 = 12 | CPU_ARCH_ABI64;
constexpr uint32_t CPU_TYPE_ARM64_32 = 12 | 0x02000000;  // CPU_ARCH_ABI64_32

constexpr uint32_t LC_REQ_DYLD = 0x80000000;
#define MACHOFIX_LOAD_COMMAND(name, value) constexpr uint32_t name = value;
#include "core/format/load_commands.def"
#undef MACHOFIX_LOAD_COMMAND

// "LC_SYMTAB" for LC_SYMTAB; nullptr for a value <mach-o/loader.h> does not define.
constexpr const char* load_command_name(uint32_t cmd) {
  switch (cmd) {
#define MACHOFIX_LOAD_COMMAND(name, value) \
  case name:                               \
    return #name;
#include "core/format/load_commands.def"
#undef MACHOFIX_LOAD_COMMAND
  }
  return nullptr;
}

// A command that takes a library ordinal: the dependencies dyld numbers from 1, in
// load-command order (MachOFile::forEachDependentDylib).
constexpr bool takes_library_ordinal(uint32_t cmd) {
  return cmd == LC_LOAD_DYLIB || cmd == LC_LOAD_WEAK_DYLIB || cmd == LC_REEXPORT_DYLIB || cmd == LC_LOAD_UPWARD_DYLIB;
}

// A command naming a dependency by install name: those above and the obsolete
// LC_LAZY_LOAD_DYLIB, which takes no ordinal but whose name install_name_tool
// -change renames all the same.
constexpr bool names_a_dependency(uint32_t cmd) { return takes_library_ordinal(cmd) || cmd == LC_LAZY_LOAD_DYLIB; }

// nlist
constexpr uint8_t N_STAB = 0xe0;
constexpr uint8_t N_TYPE = 0x0e;
constexpr uint8_t N_EXT = 0x01;
constexpr uint8_t N_SECT = 0x0e;  // a symbol defined in a section (n_type & N_TYPE)
constexpr uint8_t N_UNDF = 0x0;
constexpr uint8_t N_PBUD = 0xc;
constexpr uint16_t N_WEAK_REF = 0x0040;   // n_desc of an undefined symbol: may be missing

// Special library ordinals as stored in n_desc's high byte.
constexpr uint8_t NDESC_SELF = 0x00;
constexpr uint8_t NDESC_DYNAMIC_LOOKUP = 0xfe;
constexpr uint8_t NDESC_EXECUTABLE = 0xff;
constexpr int kMaxNDescOrdinal = 253;

// Bind opcodes.
constexpr uint8_t BIND_OPCODE_MASK = 0xf0;
constexpr uint8_t BIND_IMMEDIATE_MASK = 0x0f;
constexpr uint8_t BIND_OPCODE_DONE = 0x00;
constexpr uint8_t BIND_OPCODE_SET_DYLIB_ORDINAL_IMM = 0x10;
constexpr uint8_t BIND_OPCODE_SET_DYLIB_ORDINAL_ULEB = 0x20;
constexpr uint8_t BIND_OPCODE_SET_DYLIB_SPECIAL_IMM = 0x30;
constexpr uint8_t BIND_OPCODE_SET_SYMBOL_TRAILING_FLAGS_IMM = 0x40;
constexpr uint8_t BIND_OPCODE_SET_TYPE_IMM = 0x50;
constexpr uint8_t BIND_OPCODE_SET_ADDEND_SLEB = 0x60;
constexpr uint8_t BIND_OPCODE_SET_SEGMENT_AND_OFFSET_ULEB = 0x70;
constexpr uint8_t BIND_OPCODE_ADD_ADDR_ULEB = 0x80;
constexpr uint8_t BIND_OPCODE_DO_BIND = 0x90;
constexpr uint8_t BIND_OPCODE_DO_BIND_ADD_ADDR_ULEB = 0xa0;
constexpr uint8_t BIND_OPCODE_DO_BIND_ADD_ADDR_IMM_SCALED = 0xb0;
constexpr uint8_t BIND_OPCODE_DO_BIND_ULEB_TIMES_SKIPPING_ULEB = 0xc0;
constexpr uint8_t BIND_OPCODE_THREADED = 0xd0;
constexpr uint8_t BIND_SUBOPCODE_THREADED_SET_BIND_ORDINAL_TABLE_SIZE_ULEB = 0x00;
constexpr uint8_t BIND_SUBOPCODE_THREADED_APPLY = 0x01;
constexpr uint8_t BIND_SYMBOL_FLAGS_WEAK_IMPORT = 0x1;

// Exports trie.
constexpr uint64_t EXPORT_SYMBOL_FLAGS_REEXPORT = 0x08;
constexpr uint64_t EXPORT_SYMBOL_FLAGS_STUB_AND_RESOLVER = 0x10;

// Chained fixups imports.
constexpr uint32_t DYLD_CHAINED_IMPORT = 1;
constexpr uint32_t DYLD_CHAINED_IMPORT_ADDEND = 2;
constexpr uint32_t DYLD_CHAINED_IMPORT_ADDEND64 = 3;
// The weak_import bit: bit 8 of DYLD_CHAINED_IMPORT(_ADDEND)'s first u32 (after the
// 8-bit lib_ordinal), bit 16 of DYLD_CHAINED_IMPORT_ADDEND64's first u64 (after the
// 16-bit one): bit 0 of the byte after the ordinal in both.
constexpr uint8_t kChainedWeakImportBit = 0x01;

// Special (negative) library ordinals, as dyld names them.
constexpr int BIND_SPECIAL_DYLIB_SELF = 0;
constexpr int BIND_SPECIAL_DYLIB_MAIN_EXECUTABLE = -1;
constexpr int BIND_SPECIAL_DYLIB_FLAT_LOOKUP = -2;
constexpr int BIND_SPECIAL_DYLIB_WEAK_LOOKUP = -3;

// The library ordinal an undefined symbol's n_desc names (GET_LIBRARY_ORDINAL: its
// high byte), with the two special bytes as dyld's special ordinals.
constexpr int ndesc_ordinal(uint16_t n_desc) {
  uint8_t stored = n_desc >> 8;
  return stored == NDESC_DYNAMIC_LOOKUP ? BIND_SPECIAL_DYLIB_FLAT_LOOKUP
         : stored == NDESC_EXECUTABLE   ? BIND_SPECIAL_DYLIB_MAIN_EXECUTABLE
                                        : stored;
}

// A chained import's lib_ordinal, 8 bits (DYLD_CHAINED_IMPORT, _ADDEND) or 16
// (_ADDEND64): values above 0xf0 / 0xfff0 are the special ordinals, sign-extended.
constexpr int chained_ordinal(uint8_t stored) { return stored > 0xf0 ? static_cast<int8_t>(stored) : stored; }
constexpr int chained_ordinal(uint16_t stored) { return stored > 0xfff0 ? static_cast<int16_t>(stored) : stored; }

}  // namespace machofix::macho
