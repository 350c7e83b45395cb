// Every place a library ordinal is stored, and every import it serves.
//
// scan_imports() walks all sources listed in docs/macho-dylibs.md: undefined nlist
// n_desc, bind and lazy-bind opcodes, chained-fixups imports (three formats)
// and re-export entries of both exports tries. It produces
//  - sites: where an ordinal is written and how (the rewriter renumbers these),
//  - imports: which symbol each site serves (analysis and verification use these), and
//  - weak_marks: where each import's weak-import bit is stored (`--weak-link` sets these).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "core/format/macho.h"

namespace machofix {

enum class ImportSource { Symtab, Bind, LazyBind, ChainedFixups, ExportsTrie };
const char* import_source_name(ImportSource source);

enum class SiteEncoding {
  NDescHighByte,  // 1 byte: the high byte of n_desc
  OpcodeImm,      // low nibble of a BIND_OPCODE_SET_DYLIB_ORDINAL_IMM byte
  OpcodeUleb,     // ULEB128 after BIND_OPCODE_SET_DYLIB_ORDINAL_ULEB, `length` bytes
  OpcodeSpecial,  // BIND_OPCODE_SET_DYLIB_SPECIAL_IMM: never renumbered
  Chained8,       // lib_ordinal byte of DYLD_CHAINED_IMPORT(_ADDEND)
  Chained16,      // lib_ordinal u16 of DYLD_CHAINED_IMPORT_ADDEND64
  TrieUleb,       // re-export ordinal ULEB128 in an exports-trie terminal, `length` bytes
};

struct OrdinalSite {
  ImportSource source;
  SiteEncoding encoding;
  uint64_t offset = 0;  // from the start of the slice
  uint32_t length = 1;  // bytes of the encoding (ULEB forms)
  int ordinal = 0;      // signed: 0 self, -1 main executable, -2 flat lookup, -3 weak lookup
};

struct Import {
  ImportSource source;
  // Points into the slice's bytes, or into ImportScan::owned_names (re-export names,
  // which the trie spells out edge by edge): never one copy per bind.
  std::string_view symbol;
  int ordinal = 0;
  bool weak = false;
};

// One bit that says "this import may be missing" (N_WEAK_REF in n_desc,
// BIND_SYMBOL_FLAGS_WEAK_IMPORT in a SET_SYMBOL_TRAILING_FLAGS_IMM opcode, weak_import
// of a chained import). Exports-trie re-exports have none.
struct WeakMark {
  ImportSource source;
  uint64_t offset = 0;  // the byte holding the bit, from the start of the slice
  uint8_t bit = 0;      // its mask within that byte
  int ordinal = 0;      // the library of the import(s) it marks
  std::string_view symbol;
  bool weak = false;  // set in the scanned bytes
};

struct ImportScan {
  std::vector<OrdinalSite> sites;
  // One per stored bit and ordinal: a bind opcode naming a symbol that is then bound
  // from two libraries gives two marks with one offset.
  std::vector<WeakMark> weak_marks;
  // One per distinct (source, symbol, library, weak) in each stream: a bind stream
  // that binds one symbol at a million addresses yields one import, not a million.
  std::vector<Import> imports;
  // What dyld would do with the bind streams: how many addresses they bind (repeat
  // counts included, saturating) and the longest symbol name bound. A second reader
  // that expands every bind (LIEF) is given them only when these are bounded.
  uint64_t bound_addresses = 0;
  uint64_t longest_bound_name = 0;
  std::deque<std::string> owned_names;  // stable addresses, even when the scan is moved

  // Move-only: a copy would copy owned_names while `imports` still points into the
  // original's strings. (A vector of non-copyable elements moves them when it grows;
  // with a copy constructor available it copies them, since deque's move may throw.)
  ImportScan() = default;
  ImportScan(ImportScan&&) = default;
  ImportScan& operator=(ImportScan&&) = default;
  ImportScan(const ImportScan&) = delete;
  ImportScan& operator=(const ImportScan&) = delete;
};

ImportScan scan_imports(const MachO& image);

// One symbol dyld binds at load, from one library ordinal: what `check --app` binds
// (dyld's Fixups::forEachBindTarget). Weak when every bind of it may be missing (a
// weak import binds to 0); lazy when only the lazy-bind stream binds it (dlopen with
// RTLD_LAZY then succeeds and the first call aborts). Symbol-table entries count
// only where no bind stream names the symbol (images of classic relocations), and
// re-export entries of the trie are exports, not imports.
struct BoundImport {
  std::string symbol;
  int ordinal = 0;
  bool weak = true;
  bool lazy = true;
};
std::vector<BoundImport> bound_imports(const ImportScan& scan);

// "libfoo.dylib", "self", "main-executable", "flat-lookup", "weak-lookup": what an
// ordinal resolves to in `image`, used to check that a rewrite binds every import to
// the same library as before.
std::string resolve_ordinal(const MachO& image, int ordinal);

}  // namespace machofix
