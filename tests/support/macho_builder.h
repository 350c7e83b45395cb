// Synthetic 64-bit little-endian Mach-O images, for unit tests, fuzz seeds and the
// bad-input corpus. Test-only; header-only so that any test target can include it.
//
//   Image image = MachOBuilder()
//                     .load_dylib("/usr/lib/libSystem.B.dylib")
//                     .load_dylib("/usr/lib/libunused.dylib")
//                     .undefined("_malloc", 1)
//                     .build();
//
// Layout of what build() produces:
//   [mach_header_64][load commands, in the order they were added][header padding]
//   [__text contents (16-aligned)][LINKEDIT blobs, each 8-aligned]
// __TEXT (file offset 0, up to the LINKEDIT blobs, one __text section) and __LINKEDIT
// (the blobs) are the first two load commands unless without_segments() is used; an
// MH_DYLIB (the default file type) then gets an LC_ID_DYLIB unless it has one, an
// MH_EXECUTE an LC_LOAD_DYLINKER and an LC_MAIN.
// The blobs come in this order: LC_DYLD_INFO streams (rebase, bind, weak bind, lazy
// bind, export), chained fixups, exports trie, other linkedit_data blobs, symbol
// table, string table. LC_SYMTAB goes where symtab() was called, or last if symbols
// were added but symtab() never was; an LC_DYSYMTAB follows it. So built, an image
// passes the loader's rules (core/format/loader_rules.h) unless a test breaks one on purpose.
//
// The resulting Image reports the file offset of everything placed (commands, each
// blob, each nlist entry, each chained import, the data-offset field that points at
// each blob), so tests can check exact bytes and corrupt them on purpose. Header and
// cmdsize values can also be overridden at build time (override_*).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/base/bytes.h"
#include "core/base/util.h"  // align_up
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"

namespace machofix::test {

// Constants macho_format.h does not carry.
constexpr uint32_t MH_NOUNDEFS = 0x1;
constexpr uint32_t MH_DYLDLINK = 0x4;
constexpr uint32_t MH_OBJECT = 0x1;
constexpr uint32_t LC_UUID = 0x1b;
constexpr uint32_t LC_FUNCTION_STARTS = 0x26;
constexpr uint32_t LC_DATA_IN_CODE = 0x29;
constexpr uint32_t LC_SOURCE_VERSION = 0x2a;
constexpr uint32_t LC_LOAD_DYLINKER = 0xe;
constexpr uint32_t LC_MAIN = 0x80000028;
constexpr uint8_t N_SECT = 0x0e;
constexpr uint16_t N_WEAK_REF = 0x40;
constexpr uint16_t N_WEAK_DEF = 0x80;

// ----------------------------------------------------------------- byte helpers

inline void append_u8(std::vector<uint8_t>& out, uint8_t value) { out.push_back(value); }
inline void append_u16(std::vector<uint8_t>& out, uint16_t value) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}
inline void append_u32(std::vector<uint8_t>& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}
inline void append_u64(std::vector<uint8_t>& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}
inline void append_bytes(std::vector<uint8_t>& out, const std::vector<uint8_t>& bytes) {
  out.insert(out.end(), bytes.begin(), bytes.end());
}
// The characters of `text` and, unless told otherwise, a terminating NUL.
inline void append_cstr(std::vector<uint8_t>& out, const std::string& text, bool nul = true) {
  out.insert(out.end(), text.begin(), text.end());
  if (nul) out.push_back(0);
}
inline void append_fixed(std::vector<uint8_t>& out, const std::string& text, size_t length) {
  for (size_t i = 0; i < length; ++i) out.push_back(i < text.size() ? static_cast<uint8_t>(text[i]) : 0);
}
inline void pad_to(std::vector<uint8_t>& out, uint64_t alignment) { out.resize(align_up(out.size(), alignment), 0); }

// ULEB128 in `length` bytes (padded with 0x80 continuation bytes), or minimal when 0.
inline std::vector<uint8_t> uleb(uint64_t value, uint64_t length = 0) {
  return length == 0 ? minimal_uleb(value) : padded_uleb(value, length);
}

inline std::vector<uint8_t> sleb(int64_t value) {
  std::vector<uint8_t> out;
  for (bool more = true; more;) {
    uint8_t byte = value & 0x7f;
    value >>= 7;
    more = !((value == 0 && !(byte & 0x40)) || (value == -1 && (byte & 0x40)));
    out.push_back(more ? byte | 0x80 : byte);
  }
  return out;
}

inline void write_u8(std::vector<uint8_t>& out, uint64_t offset, uint8_t value) { out.at(offset) = value; }
inline void write_u16(std::vector<uint8_t>& out, uint64_t offset, uint16_t value) {
  for (int i = 0; i < 2; ++i) out.at(offset + i) = static_cast<uint8_t>(value >> (8 * i));
}
inline void write_u32(std::vector<uint8_t>& out, uint64_t offset, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.at(offset + i) = static_cast<uint8_t>(value >> (8 * i));
}
inline void write_u64(std::vector<uint8_t>& out, uint64_t offset, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.at(offset + i) = static_cast<uint8_t>(value >> (8 * i));
}
inline uint16_t read_u16(const std::vector<uint8_t>& in, uint64_t offset) {
  return static_cast<uint16_t>(in.at(offset) | in.at(offset + 1) << 8);
}
inline uint32_t read_u32(const std::vector<uint8_t>& in, uint64_t offset) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = value << 8 | in.at(offset + i);
  return value;
}
inline uint64_t read_u64(const std::vector<uint8_t>& in, uint64_t offset) {
  return uint64_t(read_u32(in, offset + 4)) << 32 | read_u32(in, offset);
}

// ------------------------------------------------------------- bind opcode streams

// A bind or lazy-bind opcode stream. Every ordinal operand written is recorded in
// ordinal_marks(): its offset in the stream (the opcode byte for IMM and SPECIAL, the
// first ULEB byte for ULEB) and its length.
class BindStream {
 public:
  struct Mark {
    uint64_t offset = 0;
    uint64_t length = 0;
  };

  // BIND_OPCODE_SET_DYLIB_ORDINAL_IMM: one byte, 0x10 | n (n <= 15).
  BindStream& ordinal_imm(unsigned n) {
    marks_.push_back({bytes_.size(), 1});
    bytes_.push_back(static_cast<uint8_t>(macho::BIND_OPCODE_SET_DYLIB_ORDINAL_IMM | (n & 0x0f)));
    return *this;
  }
  // BIND_OPCODE_SET_DYLIB_ORDINAL_ULEB: 0x20 and the ordinal in `length` bytes (minimal if 0).
  BindStream& ordinal_uleb(uint64_t n, uint64_t length = 0) {
    bytes_.push_back(macho::BIND_OPCODE_SET_DYLIB_ORDINAL_ULEB);
    std::vector<uint8_t> encoded = uleb(n, length);
    marks_.push_back({bytes_.size(), encoded.size()});
    append_bytes(bytes_, encoded);
    return *this;
  }
  // BIND_OPCODE_SET_DYLIB_SPECIAL_IMM: 0x30 | (ordinal & 0xf); 0 self, -1, -2, -3.
  BindStream& special(int ordinal) {
    marks_.push_back({bytes_.size(), 1});
    bytes_.push_back(static_cast<uint8_t>(macho::BIND_OPCODE_SET_DYLIB_SPECIAL_IMM | (ordinal & 0x0f)));
    return *this;
  }
  // The form ld64 picks: SPECIAL for <= 0, IMM up to 15, ULEB beyond.
  BindStream& ordinal(int n) {
    if (n <= 0) return special(n);
    if (n <= 15) return ordinal_imm(static_cast<unsigned>(n));
    return ordinal_uleb(static_cast<uint64_t>(n));
  }
  BindStream& symbol(const std::string& name, uint8_t flags = 0) {
    bytes_.push_back(static_cast<uint8_t>(macho::BIND_OPCODE_SET_SYMBOL_TRAILING_FLAGS_IMM | (flags & 0x0f)));
    append_cstr(bytes_, name);
    return *this;
  }
  BindStream& type_pointer() {
    bytes_.push_back(macho::BIND_OPCODE_SET_TYPE_IMM | 1);
    return *this;
  }
  BindStream& addend(int64_t value) {
    bytes_.push_back(macho::BIND_OPCODE_SET_ADDEND_SLEB);
    append_bytes(bytes_, sleb(value));
    return *this;
  }
  BindStream& segment_offset(unsigned segment, uint64_t offset) {
    bytes_.push_back(static_cast<uint8_t>(macho::BIND_OPCODE_SET_SEGMENT_AND_OFFSET_ULEB | (segment & 0x0f)));
    append_bytes(bytes_, uleb(offset));
    return *this;
  }
  BindStream& do_bind() {
    bytes_.push_back(macho::BIND_OPCODE_DO_BIND);
    return *this;
  }
  BindStream& done() {
    bytes_.push_back(macho::BIND_OPCODE_DONE);
    return *this;
  }
  BindStream& raw(const std::vector<uint8_t>& bytes) {
    append_bytes(bytes_, bytes);
    return *this;
  }

  // A regular bind: ordinal, symbol, pointer type, segment 0 + offset, DO_BIND.
  BindStream& bind(int ordinal_value, const std::string& name, uint64_t offset = 0, uint8_t flags = 0) {
    return ordinal(ordinal_value).symbol(name, flags).type_pointer().segment_offset(0, offset).do_bind();
  }
  // A lazy-bind entry as ld64 writes it: segment + offset, ordinal, symbol, DO_BIND,
  // DONE. Its start offset is recorded in entry_starts() (stub helpers point there).
  BindStream& lazy(int ordinal_value, const std::string& name, uint64_t offset = 0) {
    entries_.push_back(bytes_.size());
    return segment_offset(0, offset).ordinal(ordinal_value).symbol(name).do_bind().done();
  }

  uint64_t position() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  const std::vector<Mark>& ordinal_marks() const { return marks_; }
  const std::vector<uint64_t>& entry_starts() const { return entries_; }
  operator const std::vector<uint8_t>&() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
  std::vector<Mark> marks_;
  std::vector<uint64_t> entries_;
};

// ------------------------------------------------------------------ exports trie

struct TrieExport {
  std::string name;
  uint64_t flags = 0;           // EXPORT_SYMBOL_FLAGS_*; 0x08 = re-export
  uint64_t address = 0;         // regular exports
  uint64_t ordinal = 0;         // re-exports: library ordinal
  uint64_t ordinal_length = 0;  // its ULEB length (0: minimal)
  std::string import_name;      // re-exports: name in the other library ("" = same)
};

struct Trie {
  std::vector<uint8_t> bytes;
  std::vector<uint64_t> node_offsets;     // per export, its terminal node's offset in the trie
  std::vector<uint64_t> ordinal_offsets;  // per export, its re-export ordinal ULEB's offset (0 if none)
  std::vector<uint64_t> ordinal_lengths;
};

// A trie of depth one: the root has one edge per export (the whole name) to a
// terminal node without children. Child offsets are minimal ULEBs.
inline Trie make_trie(const std::vector<TrieExport>& exports) {
  std::vector<std::vector<uint8_t>> terminals;
  for (const TrieExport& entry : exports) {
    std::vector<uint8_t> terminal;
    append_bytes(terminal, uleb(entry.flags));
    if (entry.flags & macho::EXPORT_SYMBOL_FLAGS_REEXPORT) {
      append_bytes(terminal, uleb(entry.ordinal, entry.ordinal_length));
      append_cstr(terminal, entry.import_name);
    } else {
      append_bytes(terminal, uleb(entry.address));
    }
    terminals.push_back(std::move(terminal));
  }
  // The root's size depends on the ULEB lengths of the child offsets: iterate to a fixpoint.
  uint64_t root_size = 0;
  std::vector<uint64_t> child_offsets(exports.size());
  for (uint64_t guess = 2;;) {
    uint64_t at = guess;
    for (size_t i = 0; i < exports.size(); ++i) {
      child_offsets[i] = at;
      at += uleb(terminals[i].size()).size() + terminals[i].size() + 1;
    }
    root_size = 2;
    for (size_t i = 0; i < exports.size(); ++i) root_size += exports[i].name.size() + 1 + uleb(child_offsets[i]).size();
    if (root_size == guess) break;
    guess = root_size;
  }
  Trie trie;
  trie.bytes.push_back(0);  // root: no terminal
  trie.bytes.push_back(static_cast<uint8_t>(exports.size()));
  for (size_t i = 0; i < exports.size(); ++i) {
    append_cstr(trie.bytes, exports[i].name);
    append_bytes(trie.bytes, uleb(child_offsets[i]));
  }
  for (size_t i = 0; i < exports.size(); ++i) {
    trie.node_offsets.push_back(trie.bytes.size());
    append_bytes(trie.bytes, uleb(terminals[i].size()));
    uint64_t terminal_start = trie.bytes.size();
    append_bytes(trie.bytes, terminals[i]);
    trie.bytes.push_back(0);  // no children
    bool reexport = exports[i].flags & macho::EXPORT_SYMBOL_FLAGS_REEXPORT;
    uint64_t flags_length = uleb(exports[i].flags).size();
    trie.ordinal_offsets.push_back(reexport ? terminal_start + flags_length : 0);
    trie.ordinal_lengths.push_back(reexport ? uleb(exports[i].ordinal, exports[i].ordinal_length).size() : 0);
  }
  return trie;
}

// A trie with one re-export terminal: flags 0x08, the ordinal ULEB, the import name.
inline Trie reexport_trie(const std::string& name, uint64_t ordinal, const std::string& import_name = "",
                          uint64_t ordinal_length = 0) {
  return make_trie({{name, macho::EXPORT_SYMBOL_FLAGS_REEXPORT, 0, ordinal, ordinal_length, import_name}});
}

// ----------------------------------------------------------------- chained fixups

struct ChainedImport {
  int ordinal = 0;  // stored masked to the format's width: -3 -> 0xfd / 0xfffd
  std::string name;
  bool weak = false;
  int64_t addend = 0;  // formats 2 and 3
};

struct ChainedFixups {
  std::vector<uint8_t> bytes;
  uint64_t imports_offset = 0;  // in the blob
  uint64_t symbols_offset = 0;
  std::vector<uint64_t> import_offsets;  // each import entry, in the blob
  std::vector<uint64_t> name_offsets;    // each name, relative to symbols_offset
};

inline uint64_t chained_import_size(uint32_t format) {
  return format == macho::DYLD_CHAINED_IMPORT ? 4 : format == macho::DYLD_CHAINED_IMPORT_ADDEND ? 8 : 16;
}

// dyld_chained_fixups_header (version 0), a starts-in-image with one empty entry per
// segment (dyld requires seg_count to be the number of segments), the imports table
// in `format` (1, 2 or 3) and uncompressed names.
inline ChainedFixups make_chained_fixups(uint32_t format, const std::vector<ChainedImport>& imports,
                                         uint32_t segment_count = 0) {
  ChainedFixups fixups;
  const uint64_t starts_offset = 32;
  fixups.imports_offset = align_up(starts_offset + 4 + 4 * uint64_t(segment_count), 8);
  fixups.symbols_offset = fixups.imports_offset + imports.size() * chained_import_size(format);
  std::vector<uint8_t> names;
  for (const ChainedImport& import : imports) {
    fixups.name_offsets.push_back(names.size());
    append_cstr(names, import.name);
  }
  std::vector<uint8_t>& out = fixups.bytes;
  append_u32(out, 0);  // fixups_version
  append_u32(out, static_cast<uint32_t>(starts_offset));
  append_u32(out, static_cast<uint32_t>(fixups.imports_offset));
  append_u32(out, static_cast<uint32_t>(fixups.symbols_offset));
  append_u32(out, static_cast<uint32_t>(imports.size()));
  append_u32(out, format);
  append_u32(out, 0);  // symbols_format: uncompressed
  out.resize(starts_offset, 0);
  append_u32(out, segment_count);  // dyld_chained_starts_in_image.seg_count; every seg_info_offset 0: no fixups
  out.resize(fixups.imports_offset, 0);
  for (size_t i = 0; i < imports.size(); ++i) {
    const ChainedImport& import = imports[i];
    fixups.import_offsets.push_back(out.size());
    uint64_t name = fixups.name_offsets[i];
    if (format == macho::DYLD_CHAINED_IMPORT_ADDEND64) {
      uint64_t raw = (uint64_t(import.ordinal) & 0xffff) | uint64_t(import.weak) << 16 | name << 32;
      append_u64(out, raw);
      append_u64(out, static_cast<uint64_t>(import.addend));
    } else {
      uint32_t raw = (uint32_t(import.ordinal) & 0xff) | uint32_t(import.weak) << 8 | static_cast<uint32_t>(name) << 9;
      append_u32(out, raw);
      if (format == macho::DYLD_CHAINED_IMPORT_ADDEND) append_u32(out, static_cast<uint32_t>(import.addend));
    }
  }
  append_bytes(out, names);
  pad_to(out, 8);
  return fixups;
}

// ------------------------------------------------------------------ symbol table

struct Nlist {
  std::string name;
  uint8_t type = macho::N_EXT;  // N_UNDF | N_EXT
  uint8_t sect = 0;
  uint16_t desc = 0;
  uint64_t value = 0;
  std::optional<uint32_t> strx;  // overrides the string index the builder assigns
};

// The n_desc high byte ld64 writes for an ordinal: -1 -> 0xff, -2 -> 0xfe.
inline uint8_t ndesc_ordinal_byte(int ordinal) { return static_cast<uint8_t>(ordinal & 0xff); }

// ------------------------------------------------------------------------ image

struct Range {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t end() const { return offset + size; }
};

// A (dataoff, datasize)-style field of a load command and the blob it points at.
struct BlobField {
  std::string what;           // "bind", "symbols", "chained fixups", ...
  uint64_t field_offset = 0;  // file offset of the offset field in the load command
  Range range;                // the blob (size 0 and offset 0 for an empty stream)
};

struct CommandInfo {
  uint32_t cmd = 0;
  uint64_t offset = 0;  // file offset
  uint32_t size = 0;    // the real size (before any override_cmdsize)
  std::vector<BlobField> blobs;
};

struct Image {
  std::vector<uint8_t> bytes;
  std::vector<CommandInfo> commands;  // in file order
  uint32_t ncmds = 0;                 // real values, before any override
  uint32_t sizeofcmds = 0;
  Range text;      // __text contents
  Range linkedit;  // from the first blob to the end of the file
  // First LC_DYLD_INFO(_ONLY)'s streams.
  Range rebase, bind, weak_bind, lazy_bind, exports;
  Range chained_fixups;                          // first LC_DYLD_CHAINED_FIXUPS
  std::vector<uint64_t> chained_import_offsets;  // file offsets of its import entries
  uint64_t chained_symbols_offset = 0;           // file offset of its name pool
  Range exports_trie;                            // first LC_DYLD_EXPORTS_TRIE
  Range symbols, strings;
  std::vector<uint64_t> symbol_offsets;  // file offset of each nlist_64, in the order added
  std::vector<uint64_t> name_offsets;    // file offset of each symbol's name

  uint64_t load_commands_end() const { return sizeof(macho::MachHeader64) + sizeofcmds; }
  size_t size() const { return bytes.size(); }
  Bytes view(uint64_t base = 0) const { return Bytes(bytes, base); }

  // The nth command with this cmd value (file order).
  const CommandInfo& command(uint32_t cmd, size_t nth = 0) const {
    return commands.at(command_index(cmd, nth));
  }
  size_t command_index(uint32_t cmd, size_t nth = 0) const {
    for (size_t i = 0; i < commands.size(); ++i)
      if (commands[i].cmd == cmd && nth-- == 0) return i;
    throw std::out_of_range("no such load command in the built image");
  }
  // The load command of a dependent dylib, by its 1-based ordinal.
  const CommandInfo& dylib(int ordinal) const {
    int seen = 0;
    for (const CommandInfo& command : commands) {
      bool dependent = command.cmd == macho::LC_LOAD_DYLIB || command.cmd == macho::LC_LOAD_WEAK_DYLIB ||
                       command.cmd == macho::LC_REEXPORT_DYLIB || command.cmd == macho::LC_LOAD_UPWARD_DYLIB;
      if (dependent && ++seen == ordinal) return command;
    }
    throw std::out_of_range("no dylib with that ordinal in the built image");
  }

  // Corruption helpers (bounds-checked: out_of_range on a bad offset).
  Image& put8(uint64_t offset, uint8_t value) { return write_u8(bytes, offset, value), *this; }
  Image& put16(uint64_t offset, uint16_t value) { return write_u16(bytes, offset, value), *this; }
  Image& put32(uint64_t offset, uint32_t value) { return write_u32(bytes, offset, value), *this; }
  Image& put64(uint64_t offset, uint64_t value) { return write_u64(bytes, offset, value), *this; }
  Image& fill(uint64_t offset, uint64_t length, uint8_t value) {
    if (offset > bytes.size() || length > bytes.size() - offset) throw std::out_of_range("fill past the end");
    std::fill(bytes.begin() + offset, bytes.begin() + offset + length, value);
    return *this;
  }
  uint32_t get32(uint64_t offset) const { return read_u32(bytes, offset); }
  // The first `length` bytes: a truncated copy.
  std::vector<uint8_t> prefix(uint64_t length) const {
    return std::vector<uint8_t>(bytes.begin(), bytes.begin() + std::min<uint64_t>(length, bytes.size()));
  }
};

class MachOBuilder {
 public:
  MachOBuilder() = default;

  // ---- header
  MachOBuilder& filetype(uint32_t value) { return filetype_ = value, *this; }
  MachOBuilder& flags(uint32_t value) { return flags_ = value, *this; }
  MachOBuilder& cpu(uint32_t type, uint32_t subtype = 0) { return cputype_ = type, cpusubtype_ = subtype, *this; }
  // Zero bytes between the load commands and __text (room for new commands).
  MachOBuilder& header_padding(uint32_t bytes) { return header_padding_ = bytes, *this; }
  MachOBuilder& text(std::vector<uint8_t> contents) { return text_ = std::move(contents), *this; }
  // Alignment of the start of the LINKEDIT blobs (8; real linkers use the page size).
  MachOBuilder& linkedit_alignment(uint64_t alignment) { return linkedit_alignment_ = alignment, *this; }
  // No __TEXT / __LINKEDIT commands: blob ranges are then the only thing that checks placement.
  MachOBuilder& without_segments() { return segments_ = false, *this; }
  // An MH_DYLIB gets LC_ID_DYLIB "/usr/lib/libsynthetic.dylib" right after the segments
  // unless id_dylib() was called (dyld requires one); this turns that off.
  MachOBuilder& without_id_dylib() { return auto_id_ = false, *this; }
  // Linkers write LC_DYSYMTAB right after LC_SYMTAB (dyld refuses an image with neither
  // LC_DYLD_INFO nor LC_DYSYMTAB); so does build(), unless this turns it off.
  MachOBuilder& without_dysymtab() { return auto_dysymtab_ = false, *this; }
  // An MH_EXECUTE gets LC_LOAD_DYLINKER "/usr/lib/dyld" and an LC_MAIN pointing at
  // __text right after the segments (dyld requires both); this turns that off.
  MachOBuilder& without_entry() { return auto_entry_ = false, *this; }

  // ---- dylib commands
  MachOBuilder& dylib(uint32_t cmd, const std::string& name, uint32_t current_version = 0x10000,
                      uint32_t compatibility_version = 0x10000) {
    return pending_.push_back(dylib_pending(cmd, name, current_version, compatibility_version)), *this;
  }
  MachOBuilder& load_dylib(const std::string& name) { return dylib(macho::LC_LOAD_DYLIB, name); }
  MachOBuilder& weak_dylib(const std::string& name) { return dylib(macho::LC_LOAD_WEAK_DYLIB, name); }
  MachOBuilder& reexport_dylib(const std::string& name) { return dylib(macho::LC_REEXPORT_DYLIB, name); }
  MachOBuilder& upward_dylib(const std::string& name) { return dylib(macho::LC_LOAD_UPWARD_DYLIB, name); }
  MachOBuilder& lazy_load_dylib(const std::string& name) { return dylib(macho::LC_LAZY_LOAD_DYLIB, name); }
  MachOBuilder& id_dylib(const std::string& name) { return dylib(macho::LC_ID_DYLIB, name); }
  // n LC_LOAD_DYLIBs "/usr/lib/libNN.dylib", NN = first ... first + n - 1 (two digits).
  MachOBuilder& numbered_dylibs(int first, int n) {
    for (int i = first; i < first + n; ++i) load_dylib(numbered_dylib(i));
    return *this;
  }
  static std::string numbered_dylib(int n) {
    char name[40];
    std::snprintf(name, sizeof name, "/usr/lib/lib%02d.dylib", n);
    return name;
  }

  // ---- any other command, body after cmd/cmdsize (padded to 8)
  MachOBuilder& command(uint32_t cmd, std::vector<uint8_t> body) { return add(Pending::Plain, cmd, std::move(body)); }
  MachOBuilder& uuid() { return command(LC_UUID, std::vector<uint8_t>(16, 0xab)); }
  MachOBuilder& source_version() { return command(LC_SOURCE_VERSION, std::vector<uint8_t>(8, 0)); }

  // ---- symbol table
  MachOBuilder& symtab() { return add(Pending::Symtab, macho::LC_SYMTAB, {}); }
  // An undefined external symbol whose n_desc high byte holds `ordinal` (-1 -> 0xff,
  // -2 -> 0xfe); `desc_low` goes in the low byte (N_WEAK_REF, ...).
  MachOBuilder& undefined(const std::string& name, int ordinal, uint8_t desc_low = 0) {
    return nlist({name, macho::N_EXT, 0, static_cast<uint16_t>(ndesc_ordinal_byte(ordinal) << 8 | desc_low), 0, {}});
  }
  MachOBuilder& defined(const std::string& name, uint64_t value) {
    return nlist({name, static_cast<uint8_t>(N_SECT | macho::N_EXT), 1, 0, value, {}});
  }
  MachOBuilder& nlist(Nlist entry) { return symbols_.push_back(std::move(entry)), *this; }

  // ---- LC_DYLD_INFO(_ONLY)
  struct DyldInfoStreams {
    std::vector<uint8_t> rebase, bind, weak_bind, lazy_bind, exports;
  };
  MachOBuilder& dyld_info(DyldInfoStreams streams, uint32_t cmd = macho::LC_DYLD_INFO_ONLY) {
    Pending pending{Pending::DyldInfo, cmd, {}, {}};
    pending.blobs = {{"rebase", streams.rebase},
                     {"bind", streams.bind},
                     {"weak bind", streams.weak_bind},
                     {"lazy bind", streams.lazy_bind},
                     {"export", streams.exports}};
    return pending_.push_back(std::move(pending)), *this;
  }

  // ---- LC_DYLD_CHAINED_FIXUPS, LC_DYLD_EXPORTS_TRIE, other linkedit_data_commands
  MachOBuilder& chained_fixups(uint32_t format, const std::vector<ChainedImport>& imports) {
    // Made again by build(), which knows how many segments the starts must cover.
    Pending pending{Pending::LinkeditData, macho::LC_DYLD_CHAINED_FIXUPS, {}, {{"chained fixups", {}}}};
    pending.chained = make_chained_fixups(format, imports);
    pending.chained_request = {format, imports};
    return pending_.push_back(std::move(pending)), *this;
  }
  MachOBuilder& exports_trie(const std::vector<uint8_t>& trie) {
    return linkedit_data(macho::LC_DYLD_EXPORTS_TRIE, trie);
  }
  // A linkedit_data_command (dataoff, datasize) whose blob is placed in LINKEDIT as is.
  MachOBuilder& linkedit_data(uint32_t cmd, std::vector<uint8_t> blob) {
    const char* what = cmd == macho::LC_DYLD_CHAINED_FIXUPS ? "chained fixups"
                       : cmd == macho::LC_DYLD_EXPORTS_TRIE ? "exports trie"
                                                            : "linkedit data";
    pending_.push_back({Pending::LinkeditData, cmd, {}, {{what, std::move(blob)}}});
    return *this;
  }

  // ---- deliberate corruption (applied to the header / command after layout)
  MachOBuilder& override_ncmds(uint32_t value) { return ncmds_override_ = value, *this; }
  MachOBuilder& override_sizeofcmds(uint32_t value) { return sizeofcmds_override_ = value, *this; }
  // `index` is the command's index in Image::commands (file order: the segments, the
  // automatic LC_ID_DYLIB if any, then the commands in the order they were added).
  MachOBuilder& override_cmdsize(size_t index, uint32_t value) { return cmdsize_overrides_[index] = value, *this; }

  Image build() const {
    std::vector<Pending> pending;
    if (segments_) {
      pending.push_back({Pending::TextSegment, macho::LC_SEGMENT_64, {}, {}});
      pending.push_back({Pending::LinkeditSegment, macho::LC_SEGMENT_64, {}, {}});
    }
    bool has_id = std::any_of(pending_.begin(), pending_.end(), [](const Pending& p) { return p.cmd == macho::LC_ID_DYLIB; });
    if (filetype_ == macho::MH_DYLIB && auto_id_ && !has_id) pending.push_back(dylib_pending(macho::LC_ID_DYLIB, kDefaultInstallName));
    if (filetype_ == macho::MH_EXECUTE && auto_entry_) {
      pending.push_back(dylinker_pending());
      pending.push_back({Pending::Main, LC_MAIN, {}, {}});
    }
    pending.insert(pending.end(), pending_.begin(), pending_.end());
    for (Pending& p : pending) {
      if (!p.chained_request) continue;
      p.chained = make_chained_fixups(p.chained_request->first, p.chained_request->second, segments_ ? 2 : 0);
      p.blobs[0].second = p.chained->bytes;
    }
    // Without LC_DYLD_INFO, dyld needs LC_DYSYMTAB, which needs LC_SYMTAB, even when empty.
    bool opcodes = std::any_of(pending.begin(), pending.end(), [](const Pending& p) { return p.kind == Pending::DyldInfo; });
    bool has_symtab = std::any_of(pending.begin(), pending.end(), [](const Pending& p) { return p.kind == Pending::Symtab; });
    if ((!symbols_.empty() || (!opcodes && auto_dysymtab_)) && !has_symtab) {
      pending.push_back({Pending::Symtab, macho::LC_SYMTAB, {}, {}});
      has_symtab = true;
    }
    add_dysymtab(pending);

    // Load command sizes and offsets.
    Image image;
    uint64_t offset = sizeof(macho::MachHeader64);
    for (const Pending& p : pending) {
      image.commands.push_back({p.cmd, offset, static_cast<uint32_t>(command_size(p)), {}});
      offset += image.commands.back().size;
    }
    image.ncmds = static_cast<uint32_t>(pending.size());
    image.sizeofcmds = static_cast<uint32_t>(offset - sizeof(macho::MachHeader64));

    // File layout after the commands.
    image.text = {align_up(offset + header_padding_, 16), text_.size()};
    uint64_t at = align_up(image.text.end(), linkedit_alignment_);
    image.linkedit.offset = at;
    std::vector<std::vector<Range>> blob_ranges(pending.size());
    auto place = [&](const std::vector<uint8_t>& blob) {
      if (blob.empty()) return Range{0, 0};  // like ld64: an empty stream has offset 0
      at = align_up(at, 8);
      Range range{at, blob.size()};
      at += blob.size();
      return range;
    };
    for (size_t i = 0; i < pending.size(); ++i)
      for (const auto& blob : pending[i].blobs) blob_ranges[i].push_back(place(blob.second));
    // Symbol and string tables, shared by every LC_SYMTAB.
    std::vector<uint8_t> symbol_bytes, string_bytes{0};
    for (const Nlist& entry : symbols_) {
      uint32_t strx = static_cast<uint32_t>(string_bytes.size());
      append_cstr(string_bytes, entry.name);
      image.name_offsets.push_back(strx);  // made absolute below
      append_u32(symbol_bytes, entry.strx.value_or(strx));
      append_u8(symbol_bytes, entry.type);
      append_u8(symbol_bytes, entry.sect);
      append_u16(symbol_bytes, entry.desc);
      append_u64(symbol_bytes, entry.value);
    }
    if (has_symtab || !symbols_.empty()) {
      image.symbols = place(symbol_bytes);
      at = align_up(at, 8);
      image.strings = {at, string_bytes.size()};  // the size excludes the padding after it
      at += string_bytes.size();
    }
    uint64_t end = align_up(at, 8);
    image.linkedit.size = end - image.linkedit.offset;
    for (size_t i = 0; i < symbols_.size(); ++i) {
      image.symbol_offsets.push_back(image.symbols.offset + i * sizeof(macho::Nlist64));
      image.name_offsets[i] += image.strings.offset;
    }

    // Write everything.
    std::vector<uint8_t>& out = image.bytes;
    append_u32(out, macho::MH_MAGIC_64);
    append_u32(out, cputype_);
    append_u32(out, cpusubtype_);
    append_u32(out, filetype_);
    append_u32(out, ncmds_override_.value_or(image.ncmds));
    append_u32(out, sizeofcmds_override_.value_or(image.sizeofcmds));
    append_u32(out, flags_);
    append_u32(out, 0);  // reserved
    for (size_t i = 0; i < pending.size(); ++i) {
      const Pending& p = pending[i];
      CommandInfo& info = image.commands[i];
      std::vector<uint8_t> command;
      append_u32(command, p.cmd);
      append_u32(command, cmdsize_overrides_.count(i) ? cmdsize_overrides_.at(i) : info.size);
      auto blob_field = [&](const char* what, const Range& range) {
        info.blobs.push_back({what, info.offset + command.size(), range});
        append_u32(command, static_cast<uint32_t>(range.offset));
        append_u32(command, static_cast<uint32_t>(range.size));
      };
      switch (p.kind) {
        case Pending::Plain:
          append_bytes(command, p.body);
          break;
        case Pending::Main:
          append_u64(command, image.text.offset);  // entryoff
          append_u64(command, 0);                  // stacksize
          break;
        case Pending::TextSegment:
          segment(command, "__TEXT", 0, 0, image.linkedit.offset, 5, &image.text);
          break;
        case Pending::LinkeditSegment:
          segment(command, "__LINKEDIT", align_up(image.linkedit.offset, kPage), image.linkedit.offset,
                  image.linkedit.size, 1, nullptr);
          break;
        case Pending::Symtab:
          blob_field("symbols", {image.symbols.offset, symbols_.size()});
          blob_field("strings", image.strings);
          info.blobs[0].range.size = image.symbols.size;  // the field holds nsyms, the range bytes
          break;
        case Pending::DyldInfo:
        case Pending::LinkeditData:
          for (size_t b = 0; b < p.blobs.size(); ++b) blob_field(p.blobs[b].first.c_str(), blob_ranges[i][b]);
          break;
      }
      pad_to(command, 8);
      if (command.size() != info.size) throw std::logic_error("macho_builder: command size mismatch");
      append_bytes(out, command);
    }
    out.resize(image.text.offset, 0);
    append_bytes(out, text_);
    out.resize(end, 0);
    for (size_t i = 0; i < pending.size(); ++i)
      for (size_t b = 0; b < pending[i].blobs.size(); ++b)
        if (blob_ranges[i][b].size)
          std::copy(pending[i].blobs[b].second.begin(), pending[i].blobs[b].second.end(),
                    out.begin() + blob_ranges[i][b].offset);
    if (!symbol_bytes.empty()) std::copy(symbol_bytes.begin(), symbol_bytes.end(), out.begin() + image.symbols.offset);
    if (has_symtab || !symbols_.empty())
      std::copy(string_bytes.begin(), string_bytes.end(), out.begin() + image.strings.offset);

    // Convenience ranges of the first command of each kind.
    for (size_t i = 0; i < pending.size(); ++i) {
      const Pending& p = pending[i];
      const std::vector<Range>& ranges = blob_ranges[i];
      if (p.kind == Pending::DyldInfo && !seen(pending, i, Pending::DyldInfo)) {
        image.rebase = ranges[0], image.bind = ranges[1], image.weak_bind = ranges[2];
        image.lazy_bind = ranges[3], image.exports = ranges[4];
      }
      if (p.cmd == macho::LC_DYLD_CHAINED_FIXUPS && !seen_cmd(pending, i)) {
        image.chained_fixups = ranges[0];
        if (p.chained) {
          for (uint64_t entry : p.chained->import_offsets) image.chained_import_offsets.push_back(ranges[0].offset + entry);
          image.chained_symbols_offset = ranges[0].offset + p.chained->symbols_offset;
        }
      }
      if (p.cmd == macho::LC_DYLD_EXPORTS_TRIE && !seen_cmd(pending, i)) image.exports_trie = ranges[0];
    }
    return image;
  }

 private:
  static constexpr uint64_t kPage = 0x4000;
  static constexpr const char* kDefaultInstallName = "/usr/lib/libsynthetic.dylib";

  struct Pending {
    enum Kind { Plain, Main, TextSegment, LinkeditSegment, Symtab, DyldInfo, LinkeditData } kind;
    uint32_t cmd;
    std::vector<uint8_t> body;                                      // Plain
    std::vector<std::pair<std::string, std::vector<uint8_t>>> blobs;  // DyldInfo, LinkeditData
    std::optional<ChainedFixups> chained = {};
    std::optional<std::pair<uint32_t, std::vector<ChainedImport>>> chained_request = {};  // chained_fixups()'s arguments
  };

  static Pending dylib_pending(uint32_t cmd, const std::string& name, uint32_t current_version = 0x10000,
                               uint32_t compatibility_version = 0x10000) {
    std::vector<uint8_t> body;
    append_u32(body, 24);  // name offset
    append_u32(body, 2);   // timestamp
    append_u32(body, current_version);
    append_u32(body, compatibility_version);
    append_cstr(body, name);
    return {Pending::Plain, cmd, std::move(body), {}};
  }

  static Pending dylinker_pending() {
    std::vector<uint8_t> body;
    append_u32(body, 12);  // name offset
    append_cstr(body, "/usr/lib/dyld");
    return {Pending::Plain, LC_LOAD_DYLINKER, std::move(body), {}};
  }

  // dysymtab_command after cmd/cmdsize: the local, external-defined and undefined
  // symbol counts (in that order in the table when the symbols were added that way).
  std::vector<uint8_t> dysymtab_body() const {
    uint32_t locals = 0, defined = 0, undefined = 0;
    for (const Nlist& entry : symbols_) {
      if (!(entry.type & macho::N_EXT)) ++locals;
      else if ((entry.type & macho::N_TYPE) == macho::N_UNDF) ++undefined;
      else ++defined;
    }
    std::vector<uint8_t> body;
    for (uint32_t value : {0u, locals, locals, defined, locals + defined, undefined}) append_u32(body, value);
    body.resize(72, 0);  // no toc, modules, external references, indirect symbols or relocations
    return body;
  }

  void add_dysymtab(std::vector<Pending>& pending) const {
    auto symtab = std::find_if(pending.begin(), pending.end(), [](const Pending& p) { return p.kind == Pending::Symtab; });
    bool present = std::any_of(pending.begin(), pending.end(), [](const Pending& p) { return p.cmd == macho::LC_DYSYMTAB; });
    if (auto_dysymtab_ && symtab != pending.end() && !present)
      pending.insert(symtab + 1, {Pending::Plain, macho::LC_DYSYMTAB, dysymtab_body(), {}});
  }

  MachOBuilder& add(Pending::Kind kind, uint32_t cmd, std::vector<uint8_t> body) {
    pending_.push_back({kind, cmd, std::move(body), {}});
    return *this;
  }

  uint64_t command_size(const Pending& p) const {
    switch (p.kind) {
      case Pending::Plain: return align_up(8 + p.body.size(), 8);
      case Pending::Main: return 24;
      case Pending::TextSegment: return 72 + 80;
      case Pending::LinkeditSegment: return 72;
      case Pending::Symtab: return 24;
      case Pending::DyldInfo: return 48;
      case Pending::LinkeditData: return 16;
    }
    return 0;
  }

  // segment_command_64 after cmd/cmdsize; with one section (__text) when `section` is given.
  void segment(std::vector<uint8_t>& out, const std::string& name, uint64_t vmaddr, uint64_t fileoff,
               uint64_t filesize, uint32_t protection, const Range* section) const {
    uint64_t base = filetype_ == macho::MH_EXECUTE ? 0x100000000ull : 0;
    append_fixed(out, name, 16);
    append_u64(out, base + vmaddr);
    append_u64(out, align_up(std::max<uint64_t>(filesize, 1), kPage));  // vmsize
    append_u64(out, fileoff);
    append_u64(out, filesize);
    append_u32(out, protection);  // maxprot
    append_u32(out, protection);  // initprot
    append_u32(out, section ? 1 : 0);
    append_u32(out, 0);  // flags
    if (!section) return;
    append_fixed(out, "__text", 16);
    append_fixed(out, name, 16);
    append_u64(out, base + vmaddr + section->offset);
    append_u64(out, section->size);
    append_u32(out, static_cast<uint32_t>(section->offset));
    append_u32(out, 2);  // align 2^2
    append_u32(out, 0);  // reloff
    append_u32(out, 0);  // nreloc
    append_u32(out, 0x80000400);  // S_REGULAR | S_ATTR_PURE_INSTRUCTIONS | S_ATTR_SOME_INSTRUCTIONS
    append_u32(out, 0);
    append_u32(out, 0);
    append_u32(out, 0);
  }

  static bool seen(const std::vector<Pending>& pending, size_t index, Pending::Kind kind) {
    for (size_t i = 0; i < index; ++i)
      if (pending[i].kind == kind) return true;
    return false;
  }
  static bool seen_cmd(const std::vector<Pending>& pending, size_t index) {
    for (size_t i = 0; i < index; ++i)
      if (pending[i].cmd == pending[index].cmd) return true;
    return false;
  }

  uint32_t filetype_ = macho::MH_DYLIB;
  uint32_t flags_ = MH_DYLDLINK | macho::MH_TWOLEVEL;
  uint32_t cputype_ = macho::CPU_TYPE_ARM64;
  uint32_t cpusubtype_ = 0;
  uint32_t header_padding_ = 0;
  std::vector<uint8_t> text_ = {0x1f, 0x20, 0x03, 0xd5, 0x1f, 0x20, 0x03, 0xd5,   // nop, nop
                                0x1f, 0x20, 0x03, 0xd5, 0xc0, 0x03, 0x5f, 0xd6};  // nop, ret
  uint64_t linkedit_alignment_ = 8;
  bool segments_ = true;
  bool auto_id_ = true;
  bool auto_dysymtab_ = true;
  bool auto_entry_ = true;
  std::vector<Pending> pending_;
  std::vector<Nlist> symbols_;
  std::optional<uint32_t> ncmds_override_, sizeofcmds_override_;
  std::map<size_t, uint32_t> cmdsize_overrides_;
};

}  // namespace machofix::test
