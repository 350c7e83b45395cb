// What an image exports: the names dyld finds in it when it binds another image's
// imports (dyld's Loader::hasExportedSymbol).
//
// walk_exports_trie() is the one reader of exports tries (LC_DYLD_EXPORTS_TRIE, or
// the export part of LC_DYLD_INFO): imports.cc walks it for the re-export entries
// whose ordinals a prune renumbers, read_exports() for every name. An image with no
// trie exports its N_SECT | N_EXT symbol-table entries, as dyld reads old images.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/base/bytes.h"
#include "core/format/macho.h"

namespace machofix {

// Calls visit(name, node_offset, terminal) for every node with a terminal (an
// exported name): `terminal` is positioned at its flags. Without recursion and with
// one prefix buffer, so a deep or looping trie (an error) costs neither stack nor
// quadratic memory.
using ExportVisit = std::function<void(const std::string& name, uint64_t node, Cursor& terminal)>;
void walk_exports_trie(const Bytes& trie, const ExportVisit& visit);

struct Export {
  // A re-export: dyld looks `import_name` up in dependency `reexport_ordinal` (1-based,
  // into the exporting image's dylib list) instead; an empty name means the same name.
  bool reexport = false;
  int reexport_ordinal = 0;
  std::string import_name;
};

struct ExportTable {
  bool from_trie = false;  // else from the symbol table
  std::unordered_map<std::string, Export> names;
  const Export* find(std::string_view name) const;
};

// Throws Error (offset) for a malformed trie or symbol table.
ExportTable read_exports(const MachO& image);

}  // namespace machofix
