#include "core/format/exports.h"

#include <algorithm>
#include <vector>

#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"

namespace machofix {

using namespace macho;

void walk_exports_trie(const Bytes& trie, const ExportVisit& visit) {
  if (trie.size() == 0) return;
  struct Pending {
    uint64_t node;
    size_t parent_length;
    std::string_view edge;
  };
  std::vector<Pending> pending{{0, 0, {}}};
  std::vector<bool> visited(trie.size(), false);
  std::string prefix;
  while (!pending.empty()) {
    Pending next = pending.back();
    pending.pop_back();
    if (visited[next.node]) trie.fail_here(next.node, "exports trie node is reached twice (a loop)");
    visited[next.node] = true;
    prefix.resize(next.parent_length);
    prefix.append(next.edge);
    Cursor cursor(trie, next.node);
    uint64_t terminal_size = cursor.uleb("trie terminal size").value;
    uint64_t terminal_start = cursor.position();
    if (!fits(terminal_start, terminal_size, trie.size()))
      trie.fail_here(next.node, "exports trie terminal runs past the end of the trie");
    if (terminal_size) {
      visit(prefix, next.node, cursor);
      // Contents that run over the declared size would be read from the child list.
      if (cursor.position() > terminal_start + terminal_size)
        trie.fail_here(next.node, "exports trie terminal contents run past its declared size " + std::to_string(terminal_size));
    }
    cursor.seek(terminal_start + terminal_size);
    uint8_t children = cursor.u8("trie child count");
    for (uint8_t child = 0; child < children; ++child) {
      std::string_view edge = cursor.cstr("trie edge label");
      uint64_t child_at = cursor.position();
      uint64_t child_node = cursor.uleb("trie child offset").value;
      if (child_node >= trie.size()) trie.fail_here(child_at, "exports trie child offset " + hex(child_node) + " is outside the trie");
      pending.push_back({child_node, prefix.size(), edge});
    }
  }
}

const Export* ExportTable::find(std::string_view name) const {
  auto found = names.find(std::string(name));
  return found == names.end() ? nullptr : &found->second;
}

namespace {

// The trie's terminal: flags, then for a re-export the ordinal and the import name
// (MachOLoaded::trieWalk's reader in dyld). Other kinds need only their presence.
void read_trie(const MachO& image, const DataRange& range, ExportTable& table) {
  table.from_trie = true;
  Bytes trie = image.bytes.sub(range.offset, range.size, "exports trie");
  // Every name is kept, and a chain of nodes spells names quadratic in its length: a
  // 1.6 MB trie of 1,600 nodes with 1,000-byte edges names 1.3 GB (found writing
  // fuzz_exports, out of memory there). The names summed may not exceed the budget
  // scan_imports applies to the names it takes (core/format/imports.cc), far above any
  // real library's.
  const uint64_t budget = std::max<uint64_t>(64ull << 20, 8 * image.bytes.size());
  uint64_t name_bytes = 0;
  walk_exports_trie(trie, [&](const std::string& name, uint64_t node, Cursor& terminal) {
    name_bytes += name.size();
    if (name_bytes > budget)
      trie.fail_here(node, "exports trie names more than " + std::to_string(budget >> 20) + " MiB of symbol names");
    uint64_t flags = terminal.uleb("export flags").value;
    Export entry;
    if (flags & EXPORT_SYMBOL_FLAGS_REEXPORT) {
      uint64_t ordinal = terminal.uleb("re-export library ordinal").value;
      if (ordinal > 0xffff) trie.fail_here(terminal.position(), "re-export library ordinal " + std::to_string(ordinal) + " is too large");
      entry.reexport = true;
      entry.reexport_ordinal = static_cast<int>(ordinal);
      entry.import_name = std::string(terminal.cstr("re-exported symbol name"));
    }
    table.names.emplace(name, std::move(entry));
  });
}

// dyld without a trie: global symbols defined in a section (N_SECT with N_EXT).
void read_symbol_table(const MachO& image, ExportTable& table) {
  const Symtab& symtab = image.symtab;
  Bytes strings = image.bytes.sub(symtab.strings_offset, symtab.strings_size, "string table");
  for (uint64_t index = 0; index < symtab.symbol_count; ++index) {
    Nlist64 symbol = image.bytes.get<Nlist64>(symtab.symbols_offset + index * sizeof(Nlist64), "symbol table entry");
    if ((symbol.n_type & N_STAB) || (symbol.n_type & N_TYPE) != N_SECT || !(symbol.n_type & N_EXT)) continue;
    if (symbol.n_strx >= strings.size()) continue;  // dyld would match no name either
    table.names.emplace(std::string(strings.cstr(symbol.n_strx, "symbol name")), Export{});
  }
}

}  // namespace

ExportTable read_exports(const MachO& image) {
  ExportTable table;
  if (image.exports_trie.present) read_trie(image, image.exports_trie, table);
  else if (image.dyld_info.present && image.dyld_info.exports.size) read_trie(image, image.dyld_info.exports, table);
  else if (image.symtab.present) read_symbol_table(image, table);
  return table;
}

}  // namespace machofix
