// The one decoder of bind opcode streams (core/format/bind_opcodes.h): the steps it
// reports, where it stops, and what the import scan and the loader rules each make of
// a bind whose operand is cut off.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/format/bind_opcodes.h"
#include "core/format/imports.h"
#include "core/format/loader_rules.h"
#include "core/format/macho.h"
#include "core/format/macho_format.h"
#include "tests/support/macho_builder.h"
#include "tests/support/thrown.h"

using namespace machofix;
using namespace machofix::test;

namespace {

std::vector<BindOpcode> steps(const std::vector<uint8_t>& stream, bool lazy) {
  std::vector<BindOpcode> seen;
  walk_bind_opcodes(Bytes(stream.data(), stream.size()), lazy, [&](const BindOpcode& step) { seen.push_back(step); });
  return seen;
}

}  // namespace

TEST_CASE("bind opcodes: each ordinal form, with where it is stored") {
  BindStream stream;
  stream.ordinal_imm(3).ordinal_uleb(300, 3).special(-3).special(0);
  std::vector<BindOpcode> seen = steps(stream.bytes(), false);
  REQUIRE(seen.size() == 4);
  CHECK(seen[0].form == OrdinalForm::Immediate);
  CHECK(seen[0].ordinal == 3);
  CHECK((seen[0].ordinal_at == 0 && seen[0].ordinal_length == 1));
  CHECK(seen[1].form == OrdinalForm::Uleb);
  CHECK(seen[1].ordinal == 300);
  CHECK((seen[1].at == 1 && seen[1].ordinal_at == 2 && seen[1].ordinal_length == 3));
  CHECK(seen[2].form == OrdinalForm::Special);
  CHECK(seen[2].ordinal == -3);
  CHECK(seen[3].ordinal == 0);
}

TEST_CASE("bind opcodes: symbols, binds and their counts; a bind stream ends at DONE") {
  BindStream stream;
  stream.bind(1, "_malloc", 8, macho::BIND_SYMBOL_FLAGS_WEAK_IMPORT)
      .raw({macho::BIND_OPCODE_DO_BIND_ULEB_TIMES_SKIPPING_ULEB, 3, 8})
      .raw({macho::BIND_OPCODE_THREADED | macho::BIND_SUBOPCODE_THREADED_APPLY})
      .done()
      .bind(2, "_free");  // after DONE: not part of the stream
  std::vector<BindOpcode> seen = steps(stream.bytes(), false);
  REQUIRE(seen.size() == 5);
  CHECK(seen[1].step == BindStep::SetSymbol);
  CHECK(seen[1].symbol == "_malloc");
  CHECK(seen[1].immediate == macho::BIND_SYMBOL_FLAGS_WEAK_IMPORT);
  CHECK((seen[2].step == BindStep::Bind && seen[2].count == 1));
  CHECK((seen[3].step == BindStep::Bind && seen[3].count == 3 && !seen[3].operand_malformed));
  CHECK((seen[4].step == BindStep::Threaded && seen[4].immediate == macho::BIND_SUBOPCODE_THREADED_APPLY));
}

TEST_CASE("bind opcodes: a lazy stream runs past DONE, reporting where each entry ends") {
  BindStream stream;
  stream.lazy(1, "_malloc").lazy(2, "_free");
  std::vector<BindOpcode> seen = steps(stream.bytes(), true);
  int binds = 0, dones = 0;
  for (const BindOpcode& step : seen) binds += step.step == BindStep::Bind, dones += step.step == BindStep::Done;
  CHECK(binds == 2);
  CHECK(dones == 2);
}

TEST_CASE("bind opcodes: an unknown opcode is an error at its byte") {
  std::vector<uint8_t> stream{macho::BIND_OPCODE_SET_DYLIB_ORDINAL_IMM | 1, 0xe0};
  std::optional<Error> error = thrown([&] { steps(stream, false); });
  REQUIRE(error);
  CHECK(error->offset() == 1u);
}

// dyld binds before it reads the address step that follows DO_BIND_ADD_ADDR_ULEB: the
// loader rules judge that bind (here: no ordinal set before it); the reader refuses
// the cut-off operand.
TEST_CASE("bind opcodes: a bind whose address step is cut off") {
  BindStream stream;
  stream.symbol("_malloc");
  uint64_t bind_at = stream.position();
  stream.raw({macho::BIND_OPCODE_DO_BIND_ADD_ADDR_ULEB, 0x80});
  std::vector<BindOpcode> seen;
  std::optional<Error> error = thrown([&] {
    walk_bind_opcodes(Bytes(stream.bytes().data(), stream.bytes().size()), false, [&](const BindOpcode& step) { seen.push_back(step); });
  });
  REQUIRE(error);
  CHECK(error->offset() == stream.bytes().size() - 1);  // the ULEB
  REQUIRE(!seen.empty());
  CHECK((seen.back().step == BindStep::Bind && seen.back().operand_malformed));

  Image image = MachOBuilder().load_dylib("/usr/lib/libSystem.B.dylib").dyld_info({{}, stream, {}, {}, {}}).build();
  Bytes bytes = image.view();
  std::vector<RuleViolation> violations = check_loader_rules(bytes);
  REQUIRE(violations.size() == 1);
  CHECK(violations[0].rule == "dylib-ordinal");
  CHECK(violations[0].offset == image.bind.offset + bind_at);
  std::optional<Error> refused = thrown([&] { scan_imports(parse_macho(bytes)); });
  REQUIRE(refused);
  CHECK(refused->offset() == image.bind.offset + stream.bytes().size() - 1);
}
