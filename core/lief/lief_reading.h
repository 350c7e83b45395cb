// LIEF's reading of an image (core/lief/lief_skeleton.h), through the plugin
// (core/lief/lief_plugin_abi.h): what it saw, as plain data, for the comparison in
// core/lief/lief_check.cc and for tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/lief/lief_skeleton.h"

namespace machofix {

struct LiefCommand {
  uint32_t cmd;
  uint64_t offset;
  uint32_t size;
  std::optional<std::string> dylib_name;
  bool operator==(const LiefCommand&) const = default;
};

// One LC_SYMTAB entry.
struct LiefSymbol {
  std::string name;
  uint8_t type;
  uint16_t description;
  uint64_t value;
  bool operator==(const LiefSymbol&) const = default;
};

enum class LiefBindClass { Standard, Weak, Lazy };

// One bound address of a dyld-info bind stream.
struct LiefBind {
  LiefBindClass bind_class;
  int ordinal;
  std::optional<std::string> symbol;  // none when LIEF ties the bind to no symbol-table entry
  bool weak_import;
  bool operator==(const LiefBind&) const = default;
};

struct LiefView {
  std::vector<LiefCommand> commands;
  std::vector<LiefSymbol> symbols;
  std::vector<LiefBind> binds;
};

// LIEF's reading of `image`; throws Error ("LIEF reads the rewritten slice
// differently, nothing written: ...") when LIEF cannot read it at all, and when the
// plugin cannot be loaded.
// read_binds false: LIEF reads no dyld-info stream (LiefView::binds stays empty).
LiefView read_with_lief(const LiefImage& image, bool read_binds = true);

// The message every disagreement of LIEF with machofix starts with.
[[noreturn]] void lief_disagrees(const std::string& problem);

}  // namespace machofix
