// The bind and lazy-bind opcode streams of LC_DYLD_INFO, decoded once: which opcode
// takes which operands, how an ordinal is stored, where a lazy entry ends. The import
// scan (core/format/imports.cc) and the loader rules (core/format/loader_rules_fixups.cc)
// walk a stream through here and judge what it says, each in its own way: the scan
// refuses what machofix cannot rewrite, the rules report what dyld refuses.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "core/base/bytes.h"

namespace machofix {

enum class BindStep {
  SetOrdinal,  // SET_DYLIB_ORDINAL_IMM, SET_DYLIB_ORDINAL_ULEB or SET_DYLIB_SPECIAL_IMM
  SetSymbol,   // SET_SYMBOL_TRAILING_FLAGS_IMM
  Bind,        // DO_BIND, DO_BIND_ADD_ADDR_ULEB, _ADD_ADDR_IMM_SCALED, _ULEB_TIMES_SKIPPING_ULEB
  Threaded,    // THREADED, any sub-opcode (the table size's operand is read)
  Done,        // DONE in a lazy stream: one entry ends, the next starts afresh
};

// How a SetOrdinal stores its ordinal.
enum class OrdinalForm { Immediate, Uleb, Special };

// One step of a stream. Opcodes that only move the address or set the type or addend
// are read past but not reported: machofix edits ordinals and names, not addresses.
struct BindOpcode {
  BindStep step = BindStep::Bind;
  uint64_t at = 0;        // the opcode byte, from the start of the stream
  uint8_t immediate = 0;  // its low nibble: SetSymbol's flags, Threaded's sub-opcode

  // SetOrdinal. Specials are sign-extended (-1, -2, -3); a ULEB ordinal is the value
  // stored, however large (as a signed number, the way dyld takes it).
  OrdinalForm form = OrdinalForm::Immediate;
  int64_t ordinal = 0;
  uint64_t ordinal_at = 0;      // the opcode byte (Immediate, Special) or the ULEB after it
  uint64_t ordinal_length = 1;  // bytes there

  std::string_view symbol;  // SetSymbol: the name, in the stream's bytes

  // Bind: how many addresses it binds (DO_BIND_ULEB_TIMES_SKIPPING_ULEB's count, which
  // may be 0; 1 for the others). operand_malformed: an operand read after the count
  // (an address step, a skip) is malformed, and the walk throws for it right after this
  // step. dyld binds before it reads the address step, so the loader rules count such a
  // bind; the import scan waits for the error.
  uint64_t count = 1;
  bool operand_malformed = false;
};

// Calls `visit` with each step of `stream`, in order. A bind stream ends at its first
// DONE, a lazy one runs to its end (each entry ends with DONE); either may end without
// DONE, as dyld allows (old ld64 wrote such streams). Throws Error at the byte for an
// unknown opcode or an operand that is malformed or cut off by the end of the stream.
void walk_bind_opcodes(const Bytes& stream, bool lazy, const std::function<void(const BindOpcode&)>& visit);

}  // namespace machofix
