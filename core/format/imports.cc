#include "core/format/imports.h"

#include "core/format/bind_opcodes.h"
#include "core/format/exports.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace machofix {

using namespace macho;

const char* import_source_name(ImportSource source) {
  switch (source) {
    case ImportSource::Symtab: return "symtab";
    case ImportSource::Bind: return "bind";
    case ImportSource::LazyBind: return "lazy-bind";
    case ImportSource::ChainedFixups: return "chained-fixups";
    case ImportSource::ExportsTrie: return "reexport";
  }
  return "?";
}

std::string resolve_ordinal(const MachO& image, int ordinal) {
  switch (ordinal) {
    case BIND_SPECIAL_DYLIB_SELF: return "self";
    case BIND_SPECIAL_DYLIB_MAIN_EXECUTABLE: return "main-executable";
    case BIND_SPECIAL_DYLIB_FLAT_LOOKUP: return "flat-lookup";
    case BIND_SPECIAL_DYLIB_WEAK_LOOKUP: return "weak-lookup";
  }
  if (ordinal > 0 && static_cast<size_t>(ordinal) <= image.dylibs.size()) return image.dylibs[ordinal - 1].install_name;
  return "ordinal " + std::to_string(ordinal);
}

namespace {

// Symbol names are read from the file as views, but each one costs a scan for its
// NUL, and a hostile file can name one huge string a million times (n_strx pointing
// at a long string, a deep exports trie, ...). The bytes of names taken, summed, may
// not exceed this budget, far above what any real file needs.
uint64_t name_budget(const MachO& image) { return std::max<uint64_t>(64ull << 20, 8 * image.bytes.size()); }

class Scanner {
 public:
  explicit Scanner(const MachO& image) : image_(image), name_budget_(name_budget(image)) {}

  ImportScan scan() {
    if (image_.symtab.present) scan_symtab();
    if (image_.dyld_info.present) {
      scan_binds(image_.dyld_info.bind, ImportSource::Bind);
      scan_binds(image_.dyld_info.lazy_bind, ImportSource::LazyBind);
      scan_trie(image_.dyld_info.exports);
    }
    if (image_.chained_fixups.present) scan_chained_fixups();
    if (image_.exports_trie.present) scan_trie(image_.exports_trie);
    return std::move(result_);
  }

 private:
  // An ordinal naming a dylib that does not exist is malformed (dyld refuses it too).
  void check_ordinal(int ordinal, uint64_t offset) {
    if (!image_.two_level()) return;  // flat namespace: ordinals carry no meaning
    if (ordinal < BIND_SPECIAL_DYLIB_WEAK_LOOKUP)
      image_.bytes.fail_here(offset, "unknown special library ordinal " + std::to_string(ordinal));
    if (ordinal > static_cast<int>(image_.dylibs.size()))
      image_.bytes.fail_here(offset, "library ordinal " + std::to_string(ordinal) + " is beyond the " +
                                         std::to_string(image_.dylibs.size()) + " dependent dylibs");
  }

  void add_site(ImportSource source, SiteEncoding encoding, uint64_t offset, uint64_t length, int ordinal) {
    check_ordinal(ordinal, offset);
    result_.sites.push_back({source, encoding, offset, static_cast<uint32_t>(length), ordinal});
  }

  void scan_symtab() {
    const Symtab& symtab = image_.symtab;
    Bytes strings = image_.bytes.sub(symtab.strings_offset, symtab.strings_size, "string table");
    for (uint64_t index = 0; index < symtab.symbol_count; ++index) {
      uint64_t at = symtab.symbols_offset + index * sizeof(Nlist64);
      uint8_t type = image_.bytes.u8(at + offsetof(Nlist64, n_type), "n_type");
      uint16_t desc = image_.bytes.u16(at + offsetof(Nlist64, n_desc), "n_desc");
      uint64_t value = image_.bytes.u64(at + offsetof(Nlist64, n_value), "n_value");
      if (type & N_STAB || !(type & N_EXT)) continue;
      uint8_t kind = type & N_TYPE;
      // An undefined symbol with a value is a common symbol: n_desc then holds an alignment.
      if (!(kind == N_UNDF && value == 0) && kind != N_PBUD) continue;
      uint32_t name_index = image_.bytes.u32(at + offsetof(Nlist64, n_strx), "n_strx");
      if (name_index >= strings.size())
        image_.bytes.fail_here(at, "symbol " + std::to_string(index) + ": name index " + std::to_string(name_index) +
                                       " is outside the string table");
      int ordinal = ndesc_ordinal(desc);
      // The ordinal is n_desc's high byte (little-endian: the second of its two).
      add_site(ImportSource::Symtab, SiteEncoding::NDescHighByte, at + offsetof(Nlist64, n_desc) + 1, 1, ordinal);
      bool weak_ref = desc & N_WEAK_REF;
      std::string_view name = take_name(strings.cstr(name_index, "symbol name"), at);
      result_.imports.push_back({ImportSource::Symtab, name, ordinal, weak_ref});
      // N_WEAK_REF lies in n_desc's low byte (little-endian: the first of its two).
      result_.weak_marks.push_back({ImportSource::Symtab, at + offsetof(Nlist64, n_desc), static_cast<uint8_t>(N_WEAK_REF), ordinal,
                                    name, weak_ref});
    }
  }

  // What a bind binds: the values in force in the stream (reset at each lazy entry).
  struct BindState {
    explicit BindState(ImportSource from) : source(from) {}
    ImportSource source;
    int ordinal = 0;
    std::string_view symbol;
    uint64_t symbol_opcode = 0;  // slice offset of the SET_SYMBOL_TRAILING_FLAGS_IMM in force
    bool weak = false;
  };

  void scan_binds(const DataRange& range, ImportSource source) {
    Bytes stream = image_.bytes.sub(range.offset, range.size, "bind opcodes");
    BindState state(source);
    walk_bind_opcodes(stream, source == ImportSource::LazyBind, [&](const BindOpcode& step) {
      switch (step.step) {
        case BindStep::Done:
          // Each lazy-bind entry is entered on its own from the stub helper, with fresh state.
          state = BindState(source);
          break;
        case BindStep::SetOrdinal:
          set_ordinal(stream, range, step, state);
          break;
        case BindStep::SetSymbol:
          state.symbol_opcode = range.offset + step.at;
          state.symbol = take_name(step.symbol, state.symbol_opcode);
          state.weak = step.immediate & BIND_SYMBOL_FLAGS_WEAK_IMPORT;
          break;
        case BindStep::Bind:
          if (step.operand_malformed) break;  // the walk refuses the stream for that operand next
          add_import(stream, step.at, state);
          add_bound(step.count == 0 ? 0 : step.count - 1);  // add_import counted one
          break;
        case BindStep::Threaded:
          if (step.immediate != BIND_SUBOPCODE_THREADED_SET_BIND_ORDINAL_TABLE_SIZE_ULEB &&
              step.immediate != BIND_SUBOPCODE_THREADED_APPLY)
            stream.fail_here(step.at, "unknown threaded bind sub-opcode " + hex(BIND_OPCODE_THREADED | step.immediate));
          break;
      }
    });
  }

  void set_ordinal(const Bytes& stream, const DataRange& range, const BindOpcode& step, BindState& state) {
    SiteEncoding encoding = step.form == OrdinalForm::Immediate ? SiteEncoding::OpcodeImm
                            : step.form == OrdinalForm::Uleb    ? SiteEncoding::OpcodeUleb
                                                                : SiteEncoding::OpcodeSpecial;
    uint64_t stored = static_cast<uint64_t>(step.ordinal);
    if (step.form == OrdinalForm::Uleb && stored > 0xffff)
      stream.fail_here(step.ordinal_at, "library ordinal " + std::to_string(stored) + " is too large");
    state.ordinal = static_cast<int>(step.ordinal);
    add_site(state.source, encoding, range.offset + step.ordinal_at, step.ordinal_length, state.ordinal);
  }

  void add_bound(uint64_t count) {
    result_.bound_addresses = count > UINT64_MAX - result_.bound_addresses ? UINT64_MAX : result_.bound_addresses + count;
  }

  void add_import(const Bytes& stream, uint64_t at, const BindState& bind) {
    if (bind.symbol.empty()) stream.fail_here(at, "bind opcode before any symbol name");
    add_bound(1);
    result_.longest_bound_name = std::max<uint64_t>(result_.longest_bound_name, bind.symbol.size());
    // The weak bit lives in the symbol's opcode, whichever library it is bound from.
    if (weak_mark_keys_.insert({bind.symbol_opcode, bind.ordinal}).second)
      result_.weak_marks.push_back({bind.source, bind.symbol_opcode, BIND_SYMBOL_FLAGS_WEAK_IMPORT, bind.ordinal, bind.symbol,
                                    bind.weak});
    // Binding one symbol at many addresses is one import; the key is the name's
    // address in the file, so the check costs nothing however long the name.
    BindKey key{bind.source, bind.symbol.data(), bind.ordinal, bind.weak};
    if (!bind_keys_.insert(key).second) return;
    result_.imports.push_back({bind.source, bind.symbol, bind.ordinal, bind.weak});
  }

  void scan_chained_fixups() {
    const DataRange& range = image_.chained_fixups;
    Bytes blob = image_.bytes.sub(range.offset, range.size, "chained fixups");
    blob.require(0, sizeof(ChainedFixupsHeader), "chained fixups header");
    ChainedFixupsHeader header = blob.get<ChainedFixupsHeader>(0, "chained fixups header");
    uint32_t version = header.fixups_version;
    if (version != 0) blob.fail_here(offsetof(ChainedFixupsHeader, fixups_version), "unknown chained fixups version " + std::to_string(version));
    uint32_t imports_offset = header.imports_offset;
    uint32_t symbols_offset = header.symbols_offset;
    uint32_t count = header.imports_count;
    uint32_t format = header.imports_format;
    uint32_t symbols_format = header.symbols_format;
    uint64_t entry_size = format == DYLD_CHAINED_IMPORT          ? 4
                          : format == DYLD_CHAINED_IMPORT_ADDEND ? 8
                          : format == DYLD_CHAINED_IMPORT_ADDEND64 ? 16
                                                                  : 0;
    if (!entry_size) blob.fail_here(offsetof(ChainedFixupsHeader, imports_format), "unknown chained imports format " + std::to_string(format));
    if (!fits(imports_offset, count * entry_size, blob.size()))
      blob.fail_here(offsetof(ChainedFixupsHeader, imports_count), std::to_string(count) + " chained imports at " + hex(imports_offset) +
                             " run past the end of the chained fixups data");
    // Renumbering an import that overlays the header or the names would rewrite those.
    uint64_t imports_end = imports_offset + count * entry_size;
    if (count && imports_offset < sizeof(ChainedFixupsHeader))
      blob.fail_here(offsetof(ChainedFixupsHeader, imports_offset), "chained imports at " + hex(imports_offset) + " overlap the chained fixups header");
    if (count && symbols_offset > imports_offset && symbols_offset < imports_end)
      blob.fail_here(offsetof(ChainedFixupsHeader, symbols_offset), "chained import symbol names at " + hex(symbols_offset) + " overlap the imports table");
    for (uint64_t index = 0; index < count; ++index) {
      uint64_t at = imports_offset + index * entry_size;
      int ordinal;
      bool weak;
      uint64_t name_offset;
      uint64_t weak_bit_at;
      if (format == DYLD_CHAINED_IMPORT_ADDEND64) {
        uint64_t raw = blob.u64(at);
        uint16_t stored = raw & 0xffff;
        ordinal = chained_ordinal(stored);
        weak = (raw >> 16) & 1;
        name_offset = raw >> 32;
        add_site(ImportSource::ChainedFixups, SiteEncoding::Chained16, range.offset + at, sizeof(stored), ordinal);
        weak_bit_at = range.offset + at + sizeof(stored);  // the byte after the ordinal
      } else {
        uint32_t raw = blob.u32(at);
        uint8_t stored = raw & 0xff;
        ordinal = chained_ordinal(stored);
        weak = (raw >> 8) & 1;
        name_offset = raw >> 9;
        add_site(ImportSource::ChainedFixups, SiteEncoding::Chained8, range.offset + at, sizeof(stored), ordinal);
        weak_bit_at = range.offset + at + sizeof(stored);  // the byte after the ordinal
      }
      // Compressed symbol names (symbols_format 1) are not produced by any linker we know;
      // the ordinals are still correct without the names.
      std::string_view name = symbols_format == 0 ? import_name(blob, at, index, symbols_offset + name_offset)
                                                  : owned("import #" + std::to_string(index));
      result_.imports.push_back({ImportSource::ChainedFixups, name, ordinal, weak});
      result_.weak_marks.push_back({ImportSource::ChainedFixups, weak_bit_at, kChainedWeakImportBit, ordinal, name, weak});
    }
  }

  std::string_view import_name(const Bytes& blob, uint64_t entry_at, uint64_t index, uint64_t name_at) {
    if (name_at >= blob.size())
      blob.fail_here(entry_at, "chained import " + std::to_string(index) + ": its name offset lies outside the chained fixups data");
    return take_name(blob.cstr(name_at, "chained import symbol name"), blob.base() - image_.bytes.base() + entry_at);
  }

  // Counts a name against the budget; `at` (slice offset) names where it was taken.
  std::string_view take_name(std::string_view name, uint64_t at) {
    name_bytes_ += name.size() + 1;
    if (name_bytes_ > name_budget_)
      image_.bytes.fail_here(at, "symbol names add up to more than " + std::to_string(name_budget_ >> 20) +
                                     " MiB: the same names are used over and over, which no linker does");
    return name;
  }

  std::string_view owned(std::string name) {
    result_.owned_names.push_back(std::move(name));
    return result_.owned_names.back();
  }

  void scan_trie(const DataRange& range) {
    Bytes trie = image_.bytes.sub(range.offset, range.size, "exports trie");
    walk_exports_trie(trie, [&](const std::string& name, uint64_t, Cursor& terminal) {
      read_terminal(trie, range, terminal, name);
    });
  }

  void read_terminal(const Bytes& trie, const DataRange& range, Cursor& cursor, const std::string& name) {
    uint64_t flags = cursor.uleb("export flags").value;
    if (!(flags & EXPORT_SYMBOL_FLAGS_REEXPORT)) return;
    uint64_t ordinal_at = cursor.position();
    Leb ordinal = cursor.uleb("re-export library ordinal");
    if (ordinal.value > 0xffff) trie.fail_here(ordinal_at, "re-export library ordinal " + std::to_string(ordinal.value) + " is too large");
    cursor.cstr("re-exported symbol name");
    add_site(ImportSource::ExportsTrie, SiteEncoding::TrieUleb, range.offset + ordinal_at, ordinal.length,
             static_cast<int>(ordinal.value));
    std::string_view symbol = take_name(owned(name), range.offset + ordinal_at);
    result_.imports.push_back({ImportSource::ExportsTrie, symbol, static_cast<int>(ordinal.value), false});
  }

  struct BindKey {
    ImportSource source;
    const char* name;
    int ordinal;
    bool weak;
    bool operator<(const BindKey& other) const {
      return std::tie(source, name, ordinal, weak) < std::tie(other.source, other.name, other.ordinal, other.weak);
    }
  };

  const MachO& image_;
  ImportScan result_;
  std::set<BindKey> bind_keys_;
  std::set<std::pair<uint64_t, int>> weak_mark_keys_;  // (symbol opcode, ordinal) already marked
  uint64_t name_bytes_ = 0;
  uint64_t name_budget_;
};

}  // namespace

ImportScan scan_imports(const MachO& image) { return Scanner(image).scan(); }

std::vector<BoundImport> bound_imports(const ImportScan& scan) {
  std::map<std::pair<std::string_view, int>, BoundImport> by_target;
  std::set<std::pair<std::string_view, int>> bound_by_stream;
  for (const Import& import : scan.imports)
    if (import.source != ImportSource::Symtab && import.source != ImportSource::ExportsTrie)
      bound_by_stream.insert({import.symbol, import.ordinal});
  for (const Import& import : scan.imports) {
    if (import.source == ImportSource::ExportsTrie) continue;
    std::pair<std::string_view, int> key{import.symbol, import.ordinal};
    if (import.source == ImportSource::Symtab && bound_by_stream.count(key)) continue;
    BoundImport& bound = by_target.try_emplace(key, BoundImport{std::string(import.symbol), import.ordinal}).first->second;
    bound.weak &= import.weak;
    bound.lazy &= import.source == ImportSource::LazyBind;
  }
  std::vector<BoundImport> imports;
  for (auto& [key, bound] : by_target) imports.push_back(std::move(bound));
  return imports;
}

}  // namespace machofix
