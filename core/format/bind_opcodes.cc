// The one decoder of bind opcode streams (core/format/bind_opcodes.h).
#include "core/format/bind_opcodes.h"

#include "core/base/error.h"
#include "core/format/macho_format.h"

namespace machofix {

using namespace macho;

namespace {

BindOpcode make_step(BindStep kind, uint64_t at, uint8_t immediate = 0) {
  BindOpcode step;
  step.step = kind;
  step.at = at;
  step.immediate = immediate;
  return step;
}

BindOpcode ordinal_step(uint64_t at, OrdinalForm form, int64_t ordinal, uint64_t ordinal_at, uint64_t length) {
  BindOpcode step = make_step(BindStep::SetOrdinal, at);
  step.form = form;
  step.ordinal = ordinal;
  step.ordinal_at = ordinal_at;
  step.ordinal_length = length;
  return step;
}

// A bind whose last operand, `operand`, follows the opcode: reported once that is read,
// or, if it is malformed, reported as such before the error goes on.
void bind_then_operand(Cursor& cursor, BindOpcode bind, const char* operand,
                       const std::function<void(const BindOpcode&)>& visit) {
  try {
    cursor.uleb(operand);
  } catch (const Error&) {
    bind.operand_malformed = true;
    visit(bind);
    throw;
  }
  visit(bind);
}

}  // namespace

void walk_bind_opcodes(const Bytes& stream, bool lazy, const std::function<void(const BindOpcode&)>& visit) {
  Cursor cursor(stream);
  while (!cursor.at_end()) {
    uint64_t at = cursor.position();
    uint8_t byte = cursor.u8("bind opcode");
    uint8_t immediate = byte & BIND_IMMEDIATE_MASK;
    switch (byte & BIND_OPCODE_MASK) {
      case BIND_OPCODE_DONE:
        if (!lazy) return;
        visit(make_step(BindStep::Done, at, immediate));
        break;
      case BIND_OPCODE_SET_DYLIB_ORDINAL_IMM:
        visit(ordinal_step(at, OrdinalForm::Immediate, immediate, at, 1));
        break;
      case BIND_OPCODE_SET_DYLIB_ORDINAL_ULEB: {
        Leb leb = cursor.uleb("library ordinal");
        visit(ordinal_step(at, OrdinalForm::Uleb, static_cast<int64_t>(leb.value), at + 1, leb.length));
        break;
      }
      case BIND_OPCODE_SET_DYLIB_SPECIAL_IMM:
        // The immediate is a sign-extended 4-bit number: 0xd is -3, 0xe is -2, 0xf is -1.
        visit(ordinal_step(at, OrdinalForm::Special, immediate == 0 ? 0 : static_cast<int8_t>(BIND_OPCODE_MASK | immediate), at, 1));
        break;
      case BIND_OPCODE_SET_SYMBOL_TRAILING_FLAGS_IMM: {
        BindOpcode step = make_step(BindStep::SetSymbol, at, immediate);
        step.symbol = cursor.cstr("bind symbol name");
        visit(step);
        break;
      }
      case BIND_OPCODE_SET_TYPE_IMM:
        break;
      case BIND_OPCODE_SET_ADDEND_SLEB:
        cursor.sleb("bind addend");
        break;
      case BIND_OPCODE_SET_SEGMENT_AND_OFFSET_ULEB:
      case BIND_OPCODE_ADD_ADDR_ULEB:
        cursor.uleb("bind address");
        break;
      case BIND_OPCODE_DO_BIND_ULEB_TIMES_SKIPPING_ULEB: {
        BindOpcode bind = make_step(BindStep::Bind, at, immediate);
        bind.count = cursor.uleb("bind count").value;
        bind_then_operand(cursor, bind, "bind skip", visit);
        break;
      }
      case BIND_OPCODE_DO_BIND_ADD_ADDR_ULEB:
        bind_then_operand(cursor, make_step(BindStep::Bind, at, immediate), "bind address", visit);
        break;
      case BIND_OPCODE_DO_BIND:
      case BIND_OPCODE_DO_BIND_ADD_ADDR_IMM_SCALED:
        visit(make_step(BindStep::Bind, at, immediate));
        break;
      case BIND_OPCODE_THREADED:
        if (immediate == BIND_SUBOPCODE_THREADED_SET_BIND_ORDINAL_TABLE_SIZE_ULEB) cursor.uleb("threaded bind table size");
        visit(make_step(BindStep::Threaded, at, immediate));
        break;
      default:
        stream.fail_here(at, "unknown bind opcode " + hex(byte));
    }
  }
}

}  // namespace machofix
