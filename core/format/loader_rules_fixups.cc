// Loader rules on fixups: every library ordinal in bind opcodes, exports-trie
// re-exports and chained-fixup imports names a dylib (dyld3 invalidBindState,
// validChainedFixupsInfo, MachOLoaded::findExportedSymbol), and the chained fixups
// header and starts are what mach_o::ChainedFixups::valid accepts.
//
// A stream too malformed to walk is not judged here: machofix's reader refuses it
// with its own message. These walks stop quietly where the bytes end. The bind
// opcodes are decoded by core/format/bind_opcodes.cc, as for the reader, but what is
// judged (ordinal ranges, a bind with no ordinal) is written here apart from
// core/format/imports.cc: a proof that shared the scanner's checks would share its
// mistakes.
#include <set>

#include "core/base/error.h"
#include "core/format/bind_opcodes.h"
#include "core/format/loader_rules_internal.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"

namespace machofix::rules {

using namespace macho;

namespace {

// dyld counts dependent dylibs with an implicit libSystem when there is none.
int64_t dylib_count(const Check& check) { return std::max<int64_t>(1, check.dependent_dylib_count()); }

bool ordinal_ok(const Check& check, int64_t ordinal) {
  return ordinal <= dylib_count(check) && ordinal >= BIND_SPECIAL_DYLIB_WEAK_LOOKUP;
}

void check_ordinal(Check& check, int64_t ordinal, uint64_t at, const std::string& where) {
  if (ordinal > dylib_count(check))
    check.add("dylib-ordinal", at, where + " has library ordinal too large (" + std::to_string(ordinal) + ") max (" +
                                       std::to_string(dylib_count(check)) + ")");
  else if (ordinal < BIND_SPECIAL_DYLIB_WEAK_LOOKUP)
    check.add("dylib-ordinal", at, where + " has unknown library special ordinal (" + std::to_string(ordinal) + ")");
}

// The library ordinal in force at each bind of a bind or lazy-bind stream.
class BindWalk {
 public:
  BindWalk(Check& check, const Bytes& stream, const char* name) : check_(check), stream_(stream), name_(name) {}

  void run(bool lazy) {
    try {
      walk_bind_opcodes(stream_, lazy, [this](const BindOpcode& step) { take(step); });
    } catch (const Error&) {  // an unknown opcode or a malformed operand: the reader reports it
    }
  }

 private:
  void take(const BindOpcode& step) {
    switch (step.step) {
      case BindStep::Done: ordinal_.reset(); break;  // the stub helper enters each lazy entry on its own, with fresh state
      case BindStep::SetOrdinal: set(step.ordinal, step.at); break;
      // A bind followed by a malformed operand still counts: dyld binds before reading it.
      case BindStep::Bind: if (step.count) bind(step.at); break;
      case BindStep::SetSymbol:
      case BindStep::Threaded: break;
    }
  }

  void set(int64_t ordinal, uint64_t at) {
    ordinal_ = ordinal;
    ordinal_at_ = at;
  }

  void bind(uint64_t at) {
    if (!ordinal_) {
      if (reported_.insert(at).second)
        check_.add("dylib-ordinal", stream_.base() - check_.bytes.base() + at,
                   std::string(name_) + " bind missing preceding BIND_OPCODE_SET_DYLIB_ORDINAL");
      return;
    }
    // One report per ordinal operand, however many binds use it.
    if (ordinal_ok(check_, *ordinal_) || !reported_.insert(ordinal_at_).second) return;
    check_ordinal(check_, *ordinal_, stream_.base() - check_.bytes.base() + ordinal_at_, name_);
  }

  Check& check_;
  const Bytes& stream_;
  const char* name_;
  std::optional<int64_t> ordinal_;
  uint64_t ordinal_at_ = 0;
  std::set<uint64_t> reported_;
};

// Re-exports in an exports trie: each node's terminal, then its children.
void check_trie(Check& check, const Bytes& trie) {
  std::vector<uint64_t> pending{0};
  std::vector<bool> visited(trie.size(), false);  // a node reached twice is a loop: the reader refuses it
  try {
    while (!pending.empty()) {
      uint64_t node = pending.back();
      pending.pop_back();
      if (node >= trie.size() || visited[node]) continue;
      visited[node] = true;
      Cursor cursor(trie, node);
      uint64_t terminal = cursor.uleb("terminal size").value;
      uint64_t children_at = cursor.position() + terminal;
      if (terminal && (cursor.uleb("flags").value & EXPORT_SYMBOL_FLAGS_REEXPORT)) {
        uint64_t at = cursor.position();
        uint64_t ordinal = cursor.uleb("re-export ordinal").value;
        if (ordinal == 0 || ordinal > uint64_t(dylib_count(check)))
          check.add("dylib-ordinal", trie.base() - check.bytes.base() + at,
                    "exports trie: re-export ordinal " + std::to_string(ordinal) + " out of range (" +
                        std::to_string(check.dependent_dylib_count()) + " dependent dylibs)");
      }
      cursor.seek(children_at);
      for (uint8_t count = cursor.u8("child count"); count; --count) {
        cursor.cstr("edge label");
        pending.push_back(cursor.uleb("child offset").value);
      }
    }
  } catch (const Error&) {  // a malformed trie: the reader reports it
  }
}

// The (dataoff, datasize) of a linkedit_data or dyld_info field, if inside the slice:
// `field` is the offset of a pair of u32.
std::optional<Bytes> blob(const Check& check, const Command& command, uint64_t field) {
  if (command.size < field + 2 * sizeof(uint32_t)) return std::nullopt;
  Bytes body = check.body(command);
  uint64_t offset = body.u32(field), size = body.u32(field + sizeof(uint32_t));
  if (!size || !fits(offset, size, check.bytes.size())) return std::nullopt;
  return check.bytes.sub(offset, size, "LINKEDIT blob");
}

void check_opcode_ordinals(Check& check) {
  for (const Command& command : check.commands) {
    if (command.cmd == LC_DYLD_INFO || command.cmd == LC_DYLD_INFO_ONLY) {
      if (std::optional<Bytes> bind = blob(check, command, offsetof(DyldInfoCommand, bind_off))) BindWalk(check, *bind, "bind opcodes").run(false);
      if (std::optional<Bytes> lazy = blob(check, command, offsetof(DyldInfoCommand, lazy_bind_off))) BindWalk(check, *lazy, "lazy bind opcodes").run(true);
      if (std::optional<Bytes> trie = blob(check, command, offsetof(DyldInfoCommand, export_off))) check_trie(check, *trie);
    }
    if (command.cmd == LC_DYLD_EXPORTS_TRIE)
      if (std::optional<Bytes> trie = blob(check, command, offsetof(LinkeditDataCommand, dataoff))) check_trie(check, *trie);
  }
}

}  // namespace

void check_fixups(Check& check) {
  check_opcode_ordinals(check);
  if (const Command* chained = check.first(LC_DYLD_CHAINED_FIXUPS))
    if (std::optional<Bytes> fixups = blob(check, *chained, offsetof(LinkeditDataCommand, dataoff))) check_chained_fixups(check, *fixups);
}

void check_chained_ordinal(Check& check, int64_t ordinal, uint64_t at) { check_ordinal(check, ordinal, at, "chained import"); }

}  // namespace machofix::rules
