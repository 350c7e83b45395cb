// core/rewrite/weak_link.h on built images: the exact bytes apply_weak_link writes (the input
// with the command word and each weak bit set at the offsets the builder reported,
// nothing else), the plan's refusals and no-ops, and verify_weak_link refusing an
// output that misses one site or changes anything else.
// tests/weak_link/test_weak_link.py compares real links with the linker's own
// -weak_library.
#include <doctest/doctest.h>

#include "tests/support/thrown.h"
#include "core/lief/lief_check.h"
#include "core/rewrite/edit.h"
#include "core/base/error.h"
#include "core/format/imports.h"
#include "core/format/macho.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"
#include "core/rewrite/weak_link.h"
#include "tests/support/macho_builder.h"

using namespace machofix;
using namespace machofix::test;

namespace {

const char* const kSystem = "/usr/lib/libSystem.B.dylib";
const char* const kFoo = "@rpath/libfoo.dylib";

std::string first_difference(const std::vector<uint8_t>& actual, const std::vector<uint8_t>& expected) {
  if (actual.size() != expected.size()) return "sizes differ";
  for (size_t i = 0; i < actual.size(); ++i)
    if (actual[i] != expected[i]) return "offset " + hex(i) + ": got " + hex(actual[i]) + ", expected " + hex(expected[i]);
  return "identical";
}

struct WeakLinked {
  MachO before;
  ImportScan scan;
  WeakLinkPlan plan;
  std::vector<uint8_t> after;
};

// plan (globs) -> apply -> verify, as `edit --weak-link` will.
WeakLinked weak_link(const Image& image, const std::vector<std::string>& globs) {
  WeakLinked result;
  result.before = parse_macho(image.view());
  result.scan = scan_imports(result.before);
  result.plan = plan_weak_link(result.before, result.scan, globs);
  result.after = apply_weak_link(result.before, result.scan, result.plan.ordinals());
  verify_weak_link(result.before, result.scan, result.plan.ordinals(), Bytes(result.after), cross_check_with_lief);
  return result;
}

void set_bit(std::vector<uint8_t>& bytes, uint64_t offset, uint8_t bit) { bytes.at(offset) |= bit; }

// A dyld-info image: libSystem (1) and libfoo (2), each with a bind, a lazy bind and
// undefined symbols. The offsets of libfoo's SET_SYMBOL opcodes are kept.
struct DyldInfoImage {
  Image image;
  uint64_t bind_foo = 0, lazy_foo = 0, bind_system = 0;  // file offsets of SET_SYMBOL opcodes
};

DyldInfoImage dyld_info_image(uint8_t foo_lazy_flags = 0) {
  BindStream bind, lazy;
  bind.ordinal(1);
  uint64_t system_at = bind.position();
  bind.symbol("_malloc").type_pointer().segment_offset(0, 0).do_bind();
  bind.ordinal(2);
  uint64_t foo_at = bind.position();
  bind.symbol("_foo_table").type_pointer().addend(16).segment_offset(0, 8).do_bind().done();
  lazy.lazy(1, "_printf", 16).segment_offset(0, 24).ordinal(2);
  uint64_t lazy_at = lazy.position();
  lazy.symbol("_foo_run", foo_lazy_flags).do_bind().done();
  DyldInfoImage result;
  result.image = MachOBuilder()
                     .load_dylib(kSystem)
                     .load_dylib(kFoo)
                     .dyld_info({{}, bind, {}, lazy, {}})
                     .undefined("_foo_run", 2, foo_lazy_flags ? N_WEAK_REF : 0)
                     .undefined("_foo_table", 2, foo_lazy_flags ? N_WEAK_REF : 0)
                     .undefined("_malloc", 1)
                     .undefined("_printf", 1)
                     .build();
  result.bind_foo = result.image.bind.offset + foo_at;
  result.lazy_foo = result.image.lazy_bind.offset + lazy_at;
  result.bind_system = result.image.bind.offset + system_at;
  return result;
}

// What a relink with -weak_library gives for libfoo, but the LC_UUID: the command word
// and every weak bit of libfoo's imports.
std::vector<uint8_t> expected_dyld_info(const DyldInfoImage& built) {
  std::vector<uint8_t> expected = built.image.bytes;
  write_u32(expected, built.image.dylib(2).offset, macho::LC_LOAD_WEAK_DYLIB);
  set_bit(expected, built.bind_foo, macho::BIND_SYMBOL_FLAGS_WEAK_IMPORT);
  set_bit(expected, built.lazy_foo, macho::BIND_SYMBOL_FLAGS_WEAK_IMPORT);
  set_bit(expected, built.image.symbol_offsets[0] + offsetof(macho::Nlist64, n_desc), N_WEAK_REF);
  set_bit(expected, built.image.symbol_offsets[1] + offsetof(macho::Nlist64, n_desc), N_WEAK_REF);
  return expected;
}

// Chained fixups in `format`: _printf from libSystem, _foo_run from libfoo, _wdef (a
// weak definition, ordinal -3) whose undefined symbol names libfoo, and _other (-3)
// whose symbol names libSystem.
Image chained_image(uint32_t format) {
  return MachOBuilder()
      .load_dylib(kSystem)
      .load_dylib(kFoo)
      .chained_fixups(format, {{1, "_printf", false, 0},
                               {2, "_foo_run", false, 8},
                               {macho::BIND_SPECIAL_DYLIB_WEAK_LOOKUP, "_wdef", false, 0},
                               {macho::BIND_SPECIAL_DYLIB_WEAK_LOOKUP, "_other", false, 0}})
      .undefined("_foo_run", 2)
      .undefined("_other", 1)
      .undefined("_printf", 1)
      .undefined("_wdef", 2)
      .build();
}

uint64_t chained_weak_byte(const Image& image, uint32_t format, size_t index) {
  return image.chained_import_offsets.at(index) + (format == macho::DYLD_CHAINED_IMPORT_ADDEND64 ? 2 : 1);
}

const WeakLinkDecision& only_decision(const WeakLinkPlan& plan) {
  REQUIRE(plan.decisions.size() == 1);
  return plan.decisions.front();
}

}  // namespace

TEST_SUITE("weak link") {
  TEST_CASE("dyld info: the command, the bind and lazy-bind flags and n_desc, nothing else") {
    DyldInfoImage built = dyld_info_image();
    WeakLinked linked = weak_link(built.image, {"libfoo.dylib"});
    const WeakLinkDecision& decision = only_decision(linked.plan);
    CHECK(decision.ordinal == 2);
    CHECK(decision.action == WeakLinkAction::MakeWeak);
    CHECK(decision.reason == "LC_LOAD_DYLIB -> LC_LOAD_WEAK_DYLIB; 2 imported symbols marked weak");
    CHECK(first_difference(linked.after, expected_dyld_info(built)) == "identical");

    MachO reread = parse_macho(Bytes(linked.after));
    CHECK(reread.dylibs[0].kind == DylibKind::Load);
    CHECK(reread.dylibs[1].kind == DylibKind::Weak);
    for (const Import& import : scan_imports(reread).imports) {
      CAPTURE(import.symbol);
      CHECK(import.weak == (import.ordinal == 2));
    }
  }

  TEST_CASE("chained fixups, every import format: weak_import of libfoo's imports and of its weak definitions") {
    for (uint32_t format : {macho::DYLD_CHAINED_IMPORT, macho::DYLD_CHAINED_IMPORT_ADDEND, macho::DYLD_CHAINED_IMPORT_ADDEND64}) {
      CAPTURE(format);
      Image image = chained_image(format);
      WeakLinked linked = weak_link(image, {"@rpath/libfoo.dylib"});
      std::vector<uint8_t> expected = image.bytes;
      write_u32(expected, image.dylib(2).offset, macho::LC_LOAD_WEAK_DYLIB);
      set_bit(expected, chained_weak_byte(image, format, 1), macho::kChainedWeakImportBit);  // _foo_run
      set_bit(expected, chained_weak_byte(image, format, 2), macho::kChainedWeakImportBit);  // _wdef, -3 from libfoo
      set_bit(expected, image.symbol_offsets[0] + offsetof(macho::Nlist64, n_desc), N_WEAK_REF);     // _foo_run
      set_bit(expected, image.symbol_offsets[3] + offsetof(macho::Nlist64, n_desc), N_WEAK_REF);     // _wdef
      CHECK(first_difference(linked.after, expected) == "identical");
    }
  }

  TEST_CASE("ULEB ordinals beyond 15: the ordinal's library is found wherever it is stored") {
    BindStream bind;
    bind.ordinal(18);
    uint64_t at = bind.position();
    bind.symbol("_fn18").type_pointer().segment_offset(0, 0).do_bind().done();
    Image image = MachOBuilder().numbered_dylibs(1, 20).dyld_info({{}, bind, {}, {}, {}}).undefined("_fn18", 18).build();
    WeakLinked linked = weak_link(image, {MachOBuilder::numbered_dylib(18)});
    std::vector<uint8_t> expected = image.bytes;
    write_u32(expected, image.dylib(18).offset, macho::LC_LOAD_WEAK_DYLIB);
    set_bit(expected, image.bind.offset + at, macho::BIND_SYMBOL_FLAGS_WEAK_IMPORT);
    set_bit(expected, image.symbol_offsets[0] + offsetof(macho::Nlist64, n_desc), N_WEAK_REF);
    CHECK(first_difference(linked.after, expected) == "identical");
  }

  TEST_CASE("nothing to do: already weak with every import marked; a second edit changes nothing") {
    DyldInfoImage built = dyld_info_image();
    WeakLinked once = weak_link(built.image, {"libfoo*"});
    Image again_image;
    again_image.bytes = once.after;
    WeakLinked twice = weak_link(again_image, {"libfoo*"});
    CHECK(only_decision(twice.plan).action == WeakLinkAction::NothingToDo);
    CHECK(twice.plan.ordinals().empty());
    CHECK(twice.after == once.after);
  }

  TEST_CASE("already LC_LOAD_WEAK_DYLIB but imports not marked: they are marked, the command stays") {
    Image image = MachOBuilder()
                      .load_dylib(kSystem)
                      .weak_dylib(kFoo)
                      .chained_fixups(macho::DYLD_CHAINED_IMPORT, {{2, "_foo_run", false, 0}, {2, "_foo_var", true, 0}})
                      .undefined("_foo_run", 2)
                      .undefined("_foo_var", 2, N_WEAK_REF)
                      .build();
    WeakLinked linked = weak_link(image, {"libfoo.dylib"});
    const WeakLinkDecision& decision = only_decision(linked.plan);
    CHECK(decision.action == WeakLinkAction::MarkImports);
    CHECK(decision.reason == "already LC_LOAD_WEAK_DYLIB; marks 1 imported symbol weak");
    std::vector<uint8_t> expected = image.bytes;
    set_bit(expected, chained_weak_byte(image, macho::DYLD_CHAINED_IMPORT, 0), macho::kChainedWeakImportBit);
    set_bit(expected, image.symbol_offsets[0] + offsetof(macho::Nlist64, n_desc), N_WEAK_REF);
    CHECK(first_difference(linked.after, expected) == "identical");
  }

  TEST_CASE("globs that match nothing are listed; dylibs nobody named are left alone") {
    DyldInfoImage built = dyld_info_image();
    MachO image = parse_macho(built.image.view());
    ImportScan scan = scan_imports(image);
    WeakLinkPlan plan = plan_weak_link(image, scan, {"libomp.dylib", "libfoo.dylib", "/usr/lib/*"});
    CHECK(plan.unmatched_globs == std::vector<std::string>{"libomp.dylib"});
    REQUIRE(plan.decisions.size() == 2);
    CHECK(plan.decisions[0].glob == "/usr/lib/*");
    CHECK(plan.decisions[1].glob == "libfoo.dylib");
    CHECK(plan.ordinals() == std::vector<int>{1, 2});
  }

  TEST_CASE("refusals: re-exported, upward, re-exported through the trie, flat namespace, lazy-load") {
    auto refusal = [](const Image& image, const std::string& glob) {
      MachO parsed = parse_macho(image.view());
      ImportScan scan = scan_imports(parsed);
      WeakLinkPlan plan = plan_weak_link(parsed, scan, {glob});
      REQUIRE(plan.decisions.size() == 1);
      CHECK(plan.refuses_any());
      CHECK(plan.ordinals().empty());
      // apply refuses the ordinal too, whatever plan said
      int ordinal = plan.decisions[0].ordinal;
      CHECK_THROWS_WITH_AS(apply_weak_link(parsed, scan, {ordinal}), doctest::Contains("cannot weak-link"), Error);
      return plan.decisions[0].reason + " | " + plan.slice_refused_because;
    };
    CHECK(refusal(MachOBuilder().load_dylib(kSystem).reexport_dylib(kFoo).build(), "libfoo*").find("re-exported (LC_REEXPORT_DYLIB)") == 0);
    CHECK(refusal(MachOBuilder().load_dylib(kSystem).upward_dylib(kFoo).build(), "libfoo*").find("upward") == 0);
    Trie trie = reexport_trie("_foo_alias", 2, "_foo_run");
    CHECK(refusal(MachOBuilder().load_dylib(kSystem).load_dylib(kFoo).exports_trie(trie.bytes).build(), "libfoo*")
              .find("the exports trie re-exports 1 symbol from it") == 0);
    CHECK(refusal(MachOBuilder().flags(MH_DYLDLINK).load_dylib(kSystem).load_dylib(kFoo).build(), "libfoo*")
              .find("flat namespace") == 0);
    CHECK(refusal(MachOBuilder().load_dylib(kSystem).lazy_load_dylib("/usr/lib/liblazy.dylib").load_dylib(kFoo).build(),
                  "libfoo*")
              .find("LC_LAZY_LOAD_DYLIB") == 0);
  }

  TEST_CASE("refusal: lld's LC_LOAD_DYLIB beside the LC_REEXPORT_DYLIB of one -reexport_library") {
    Image image = MachOBuilder().load_dylib(kSystem).load_dylib(kFoo).reexport_dylib(kFoo).build();
    MachO parsed = parse_macho(image.view());
    ImportScan scan = scan_imports(parsed);
    WeakLinkPlan plan = plan_weak_link(parsed, scan, {"libfoo.dylib"});
    REQUIRE(plan.decisions.size() == 2);
    for (const WeakLinkDecision& decision : plan.decisions) {
      CHECK(decision.action == WeakLinkAction::Refused);
      CHECK(decision.reason.find("re-exported (LC_REEXPORT_DYLIB)") == 0);
    }
  }

  TEST_CASE("refusal: one bind opcode names the symbol for libfoo and for libSystem") {
    BindStream bind;
    bind.symbol("_shared").type_pointer().ordinal(2).segment_offset(0, 0).do_bind().ordinal(1).do_bind().done();
    Image image = MachOBuilder().load_dylib(kSystem).load_dylib(kFoo).dyld_info({{}, bind, {}, {}, {}}).build();
    MachO parsed = parse_macho(image.view());
    ImportScan scan = scan_imports(parsed);
    WeakLinkPlan plan = plan_weak_link(parsed, scan, {"libfoo.dylib"});
    CHECK(only_decision(plan).action == WeakLinkAction::Refused);
    CHECK(only_decision(plan).reason ==
          "the bind opcode at offset " + hex(image.bind.offset) + " names _shared for it and for " + kSystem +
              ": its one weak flag cannot mark only one of them");
  }

  TEST_CASE("apply: an ordinal that names no dylib is an error") {
    DyldInfoImage built = dyld_info_image();
    MachO image = parse_macho(built.image.view());
    ImportScan scan = scan_imports(image);
    CHECK_THROWS_WITH_AS(apply_weak_link(image, scan, {3}), doctest::Contains("no dependent dylib has ordinal 3"), Error);
    CHECK_THROWS_WITH_AS(apply_weak_link(image, scan, {0}), doctest::Contains("no dependent dylib has ordinal 0"), Error);
  }

  TEST_CASE("malformed input is refused before any plan: a bind stream cut off inside a symbol name") {
    DyldInfoImage built = dyld_info_image();
    Image broken = built.image;
    // The bind stream's size is cut to end inside "_foo_table": the scan fails, naming where.
    const BlobField& bind_field = broken.command(macho::LC_DYLD_INFO_ONLY).blobs[1];
    broken.put32(bind_field.field_offset + 4, static_cast<uint32_t>(built.bind_foo - broken.bind.offset + 3));
    MachO image = parse_macho(broken.view());
    CHECK_THROWS_AS(scan_imports(image), Error);
  }

  TEST_CASE("verify refuses an output that misses any one site or changes anything else") {
    DyldInfoImage built = dyld_info_image();
    MachO image = parse_macho(built.image.view());
    ImportScan scan = scan_imports(image);
    std::vector<uint8_t> good = expected_dyld_info(built);
    verify_weak_link(image, scan, {2}, Bytes(good), cross_check_with_lief);

    auto refused = [&](std::vector<uint8_t> output, const char* why) {
      CAPTURE(why);
      CHECK_THROWS_WITH_AS(verify_weak_link(image, scan, {2}, Bytes(output), cross_check_with_lief), doctest::Contains("nothing written"), Error);
      test::thrown_as(ErrorKind::ProofFailed, [&] { verify_weak_link(image, scan, {2}, Bytes(output), cross_check_with_lief); });
    };
    std::vector<uint8_t> spoiled = good;
    spoiled[built.image.symbol_offsets[0] + offsetof(macho::Nlist64, n_desc)] &= ~N_WEAK_REF;
    refused(spoiled, "an n_desc not marked");
    spoiled = good;
    spoiled[built.lazy_foo] &= ~macho::BIND_SYMBOL_FLAGS_WEAK_IMPORT;
    refused(spoiled, "the lazy bind not marked");
    spoiled = good;
    spoiled[built.bind_foo] &= ~macho::BIND_SYMBOL_FLAGS_WEAK_IMPORT;
    refused(spoiled, "the bind not marked");
    spoiled = good;
    write_u32(spoiled, built.image.dylib(2).offset, macho::LC_LOAD_DYLIB);
    refused(spoiled, "the command not changed");
    spoiled = good;
    set_bit(spoiled, built.bind_system, macho::BIND_SYMBOL_FLAGS_WEAK_IMPORT);
    refused(spoiled, "libSystem's import marked too");
    spoiled = good;
    write_u32(spoiled, built.image.dylib(1).offset, macho::LC_LOAD_WEAK_DYLIB);
    refused(spoiled, "libSystem made weak too");
    spoiled = good;
    spoiled[built.image.text.offset] ^= 1;
    refused(spoiled, "a code byte changed");
    spoiled = good;
    spoiled.back() ^= 1;
    refused(spoiled, "the last byte (after every edit) changed");
    spoiled = good;
    spoiled[built.image.symbol_offsets[0] + offsetof(macho::Nlist64, n_desc)] |= 0x80;  // N_WEAK_DEF
    refused(spoiled, "another n_desc bit beside the weak one");
    spoiled = good;
    spoiled.push_back(0);
    refused(spoiled, "the slice grew");
    refused(built.image.bytes, "nothing done");
  }
}

TEST_SUITE("edit --weak-link: plan_weak_link_edit") {
  TEST_CASE("a record per matching dylib; 'already' on a second run; the ordinals to change") {
    DyldInfoImage built = dyld_info_image();
    MachO image = parse_macho(built.image.view());
    ImportScan scan = scan_imports(image);
    EditOptions options;
    options.weak_link = {"libfoo.dylib"};
    WeakLinkEdit stage = plan_weak_link_edit(image, scan, options);
    REQUIRE(stage.records.size() == 1);
    CHECK(stage.records[0].kind == EditKind::WeakLink);
    CHECK(stage.records[0].old_value == kFoo);
    CHECK(stage.records[0].status == EditStatus::Applied);
    CHECK(stage.ordinals == std::vector<int>{2});
    std::vector<uint8_t> after = apply_weak_link(image, scan, stage.ordinals);
    MachO again = parse_macho(Bytes(after.data(), after.size()));
    WeakLinkEdit second = plan_weak_link_edit(again, scan_imports(again), options);
    REQUIRE(second.records.size() == 1);
    CHECK(second.records[0].status == EditStatus::Already);
    CHECK(second.ordinals.empty());
  }

  TEST_CASE("a glob that matches nothing: an error, or a note (unmatched_is_note); the message says after --change") {
    DyldInfoImage built = dyld_info_image();
    MachO image = parse_macho(built.image.view());
    ImportScan scan = scan_imports(image);
    EditOptions options;
    options.weak_link = {"libnothere*"};
    CHECK_THROWS_WITH_AS(plan_weak_link_edit(image, scan, options),
                         "--weak-link 'libnothere*': no dependent dylib's install name matches 'libnothere*'", Error);
    options.change = {{"libfoo.dylib", "@rpath/libbar.dylib"}};
    CHECK_THROWS_WITH_AS(plan_weak_link_edit(image, scan, options), doctest::Contains("(after --change)"), Error);
    options.unmatched_is_note = true;
    WeakLinkEdit stage = plan_weak_link_edit(image, scan, options);
    REQUIRE(stage.records.size() == 1);
    CHECK(stage.records[0].old_value == "libnothere*");
    CHECK(stage.records[0].status == EditStatus::NoMatch);
    CHECK(stage.ordinals.empty());
  }

  TEST_CASE("a refused dylib is a refusal (exit 2) naming the glob, the dylib, its ordinal and why") {
    Image built = MachOBuilder().load_dylib(kSystem).upward_dylib(kFoo).build();
    MachO image = parse_macho(built.view());
    EditOptions options;
    options.weak_link = {"libfoo*"};
    options.unmatched_is_note = true;  // a refusal is never a note
    try {
      plan_weak_link_edit(image, scan_imports(image), options);
      FAIL("not refused");
    } catch (const Error& error) {
      CHECK(error.refusal());
      CHECK(std::string(error.what()).find("--weak-link 'libfoo*': cannot weak-link '@rpath/libfoo.dylib' (dylib ordinal 2): "
                                           "upward dependency") != std::string::npos);
    }
  }
}
