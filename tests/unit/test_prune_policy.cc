// The prune policy (plan_prune): which dependent dylibs go, which stay and why, and
// when a file is left alone. Inputs are synthetic images (tests/support/macho_builder.h)
// read by the real parser and scanner.
#include <doctest/doctest.h>

#include "tests/support/checked_options.h"
#include "core/lief/lief_check.h"
#include "core/format/imports.h"
#include "core/format/macho.h"
#include "core/format/macho_format.h"
#include "core/rewrite/macho_repair.h"
#include "core/rewrite/prune.h"
#include "tests/support/macho_builder.h"

using namespace machofix;
using namespace machofix::test;

namespace {

const char* const kSystem = "/usr/lib/libSystem.B.dylib";
const char* const kFoo = "/usr/lib/libfoo.dylib";
const char* const kOmp = "/opt/homebrew/opt/libomp/lib/libomp.dylib";
const char* const kCxx = "/usr/lib/libc++.1.dylib";

struct Planned {
  MachO image;
  ImportScan scan;
  SliceAnalysis analysis;
  PrunePlan plan;

  const DylibDecision& decision(const std::string& install_name) const {
    for (size_t i = 0; i < image.dylibs.size(); ++i)
      if (image.dylibs[i].install_name == install_name) return plan.decisions.at(i);
    throw std::out_of_range("no dylib " + install_name);
  }
  bool removes(const std::string& install_name) const { return decision(install_name).remove(); }
  DylibVerdict verdict(const std::string& install_name) const { return decision(install_name).verdict; }
};

Planned plan_for(const Image& image, const PruneOptions& options = {}) {
  Planned planned;
  planned.image = parse_macho(image.view());
  planned.scan = scan_imports(planned.image);
  planned.analysis = analyze(planned.image, planned.scan);
  planned.plan = plan_prune(planned.image, planned.analysis, options);
  return planned;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// libSystem supplies _malloc; every other dylib of `builder` supplies nothing.
Image with_system_used(MachOBuilder builder) { return builder.undefined("_malloc", 1).build(); }

MachOBuilder system_then(std::initializer_list<const char*> names) {
  MachOBuilder builder;
  builder.load_dylib(kSystem);
  for (const char* name : names) builder.load_dylib(name);
  return builder;
}

}  // namespace

// --------------------------------------------------------------- default policy

TEST_CASE("default policy: a dylib that supplies a symbol is kept, with how many it supplies") {
  Image image = MachOBuilder().load_dylib(kSystem).load_dylib(kFoo)
                    .undefined("_malloc", 1).undefined("_free", 1).undefined("_foo", 2).build();
  Planned planned = plan_for(image);
  CHECK(planned.plan.removal_count() == 0);
  CHECK(planned.verdict(kSystem) == DylibVerdict::Supplies);
  CHECK(planned.decision(kSystem).symbols == 2);
  CHECK(planned.verdict(kFoo) == DylibVerdict::Supplies);
  CHECK(planned.decision(kFoo).symbols == 1);
  CHECK(planned.plan.warnings.empty());
  CHECK(planned.plan.left_as_is == LeftAsIs::No);
}

TEST_CASE("default policy: unused LC_LOAD_DYLIB and LC_LOAD_WEAK_DYLIB are removed") {
  Image image = with_system_used(MachOBuilder()
                                     .load_dylib(kSystem)
                                     .load_dylib("/usr/lib/libunused.dylib")
                                     .weak_dylib("/usr/lib/libweakunused.dylib"));
  Planned planned = plan_for(image);
  CHECK(planned.removes("/usr/lib/libunused.dylib"));
  CHECK(planned.removes("/usr/lib/libweakunused.dylib"));
  CHECK(planned.verdict("/usr/lib/libunused.dylib") == DylibVerdict::Unused);
  CHECK_FALSE(planned.removes(kSystem));
}

TEST_CASE("default policy: an unused LC_REEXPORT_DYLIB is kept (part of this library's interface)") {
  Image image = with_system_used(MachOBuilder().load_dylib(kSystem).reexport_dylib("/usr/lib/libreexp.dylib"));
  Planned planned = plan_for(image);
  CHECK_FALSE(planned.removes("/usr/lib/libreexp.dylib"));
  CHECK(planned.verdict("/usr/lib/libreexp.dylib") == DylibVerdict::Reexported);
}

TEST_CASE("default policy: an unused LC_LOAD_UPWARD_DYLIB is kept") {
  Image image = with_system_used(MachOBuilder().load_dylib(kSystem).upward_dylib("/usr/lib/libupward.dylib"));
  Planned planned = plan_for(image);
  CHECK_FALSE(planned.removes("/usr/lib/libupward.dylib"));
  CHECK(planned.verdict("/usr/lib/libupward.dylib") == DylibVerdict::Upward);
}

TEST_CASE("default policy: kept re-exported and upward dylibs are renumbered around a removal") {
  Image image = MachOBuilder()
                    .load_dylib(kSystem)
                    .load_dylib("/usr/lib/libunused.dylib")
                    .reexport_dylib("/usr/lib/libreexp.dylib")
                    .upward_dylib("/usr/lib/libupward.dylib")
                    .load_dylib(kFoo)
                    .undefined("_malloc", 1)
                    .undefined("_foo", 5)
                    .build();
  Planned planned = plan_for(image);
  std::vector<uint8_t> after = apply_prune(planned.image, planned.scan, planned.plan);
  verify_prune(planned.image, planned.scan, planned.plan, Bytes(after), cross_check_with_lief);
  MachO reread = parse_macho(Bytes(after));
  REQUIRE(reread.dylibs.size() == 4);
  CHECK(reread.dylibs[1].kind == DylibKind::Reexport);
  CHECK(reread.dylibs[2].kind == DylibKind::Upward);
  CHECK(after[image.symbol_offsets[1] + 7] == 4);
}

TEST_CASE("default policy: never removes the last dependency") {
  SUBCASE("libSystem is preferred, wherever it is") {
    Image image = MachOBuilder().load_dylib("/usr/lib/liba.dylib").load_dylib(kSystem).load_dylib("/usr/lib/libb.dylib").build();
    Planned planned = plan_for(image);
    CHECK(planned.plan.removal_count() == 2);
    CHECK_FALSE(planned.removes(kSystem));
    CHECK(planned.verdict(kSystem) == DylibVerdict::LastDependency);
  }
  SUBCASE("without libSystem, the first dylib stays") {
    Image image = MachOBuilder().load_dylib("/usr/lib/liba.dylib").load_dylib("/usr/lib/libb.dylib").build();
    Planned planned = plan_for(image);
    CHECK(planned.plan.removal_count() == 1);
    CHECK_FALSE(planned.removes("/usr/lib/liba.dylib"));
    CHECK(planned.removes("/usr/lib/libb.dylib"));
  }
  SUBCASE("a single unused dylib stays") {
    Image image = MachOBuilder().load_dylib(kSystem).build();
    Planned planned = plan_for(image);
    CHECK(planned.plan.removal_count() == 0);
    CHECK(planned.verdict(kSystem) == DylibVerdict::LastDependency);
  }
  SUBCASE("a kept upward dylib counts as a remaining dependency") {
    Image image = MachOBuilder().load_dylib(kSystem).upward_dylib("/usr/lib/libupward.dylib").build();
    Planned planned = plan_for(image);
    CHECK(planned.removes(kSystem));
    CHECK_FALSE(planned.removes("/usr/lib/libupward.dylib"));
  }
  SUBCASE("the pruned file still has a dependent dylib") {
    Image image = MachOBuilder().load_dylib("/usr/lib/liba.dylib").load_dylib(kSystem).build();
    Planned planned = plan_for(image);
    std::vector<uint8_t> after = apply_prune(planned.image, planned.scan, planned.plan);
    verify_prune(planned.image, planned.scan, planned.plan, Bytes(after), cross_check_with_lief);
    MachO reread = parse_macho(Bytes(after));
    REQUIRE(reread.dylibs.size() == 1);
    CHECK(reread.dylibs[0].install_name == kSystem);
  }
}

// ----------------------------------------------------------- --keep and --only

TEST_CASE("install_name_matches: a glob matches the full install name or its last component") {
  CHECK(install_name_matches("/usr/lib/libfoo.dylib", "/usr/lib/libfoo.dylib"));
  CHECK(install_name_matches("libfoo.dylib", "/usr/lib/libfoo.dylib"));
  CHECK(install_name_matches("libfoo*", "/usr/lib/libfoo.1.dylib"));
  CHECK(install_name_matches("*libomp*", kOmp));
  CHECK(install_name_matches("*/libomp/*", kOmp));
  CHECK(install_name_matches("libc++*", kCxx));
  CHECK(install_name_matches("@rpath/libtorch.dylib", "@rpath/libtorch.dylib"));
  CHECK(install_name_matches("libtorch.dylib", "@rpath/libtorch.dylib"));
  CHECK_FALSE(install_name_matches("libfoo", "/usr/lib/libfoo.dylib"));
  CHECK_FALSE(install_name_matches("lib/libfoo.dylib", "/usr/lib/libfoo.dylib"));
  CHECK_FALSE(install_name_matches("libbar*", "/usr/lib/libfoo.dylib"));
}

TEST_CASE("--keep: an unused dylib matching a glob is kept, with the glob as the reason") {
  Image image = with_system_used(system_then({kFoo, kOmp, kCxx}));
  SUBCASE("full install name") {
    Planned planned = plan_for(image, {{kFoo}, {}});
    CHECK_FALSE(planned.removes(kFoo));
    CHECK(planned.verdict(kFoo) == DylibVerdict::KeptByGlob);
    CHECK(planned.decision(kFoo).glob == kFoo);
    CHECK(planned.removes(kOmp));
    CHECK(planned.removes(kCxx));
  }
  SUBCASE("leaf name") {
    Planned planned = plan_for(image, {{"libfoo.dylib"}, {}});
    CHECK_FALSE(planned.removes(kFoo));
    CHECK(planned.removes(kOmp));
  }
  SUBCASE("'*libomp*'") {
    Planned planned = plan_for(image, {{"*libomp*"}, {}});
    CHECK_FALSE(planned.removes(kOmp));
    CHECK(planned.verdict(kOmp) == DylibVerdict::KeptByGlob);
    CHECK(planned.decision(kOmp).glob == "*libomp*");
    CHECK(planned.removes(kFoo));
  }
  SUBCASE("several globs") {
    Planned planned = plan_for(image, {{"*libomp*", "libc++*"}, {}});
    CHECK_FALSE(planned.removes(kOmp));
    CHECK_FALSE(planned.removes(kCxx));
    CHECK(planned.removes(kFoo));
  }
  SUBCASE("a glob matching nothing changes nothing") {
    Planned planned = plan_for(image, {{"libnothing.dylib"}, {}});
    CHECK(planned.plan.removal_count() == 3);
  }
}

TEST_CASE("--only: only unused dylibs matching a glob are removed") {
  Image image = with_system_used(system_then({kFoo, kOmp, kCxx}));
  SUBCASE("'*libomp*'") {
    Planned planned = plan_for(image, {{}, {"*libomp*"}});
    CHECK(planned.removes(kOmp));
    CHECK_FALSE(planned.removes(kFoo));
    CHECK(planned.verdict(kFoo) == DylibVerdict::NotSelected);
    CHECK_FALSE(planned.removes(kCxx));
  }
  SUBCASE("full install name and leaf") {
    Planned planned = plan_for(image, {{}, {kFoo, "libc++.1.dylib"}});
    CHECK(planned.removes(kFoo));
    CHECK(planned.removes(kCxx));
    CHECK_FALSE(planned.removes(kOmp));
  }
  SUBCASE("--only never removes a used dylib") {
    Planned planned = plan_for(image, {{}, {"libSystem*"}});
    CHECK(planned.plan.removal_count() == 0);
    CHECK(planned.verdict(kSystem) == DylibVerdict::Supplies);
  }
  SUBCASE("--only never removes a re-exported dylib") {
    Image reexporting = with_system_used(MachOBuilder().load_dylib(kSystem).reexport_dylib(kOmp));
    Planned planned = plan_for(reexporting, {{}, {"*libomp*"}});
    CHECK_FALSE(planned.removes(kOmp));
  }
  SUBCASE("--keep wins over --only") {
    Planned planned = plan_for(image, {{"*libomp*"}, {"*libomp*", "libfoo*"}});
    CHECK_FALSE(planned.removes(kOmp));
    CHECK(planned.verdict(kOmp) == DylibVerdict::KeptByGlob);
    CHECK(planned.decision(kOmp).glob == "*libomp*");
    CHECK(planned.removes(kFoo));
  }
}

// ------------------------------------------------------- files left unchanged

TEST_CASE("flat namespace (MH_TWOLEVEL clear): the file is left unchanged, with the reason") {
  Image image = MachOBuilder()
                    .filetype(macho::MH_EXECUTE)
                    .flags(MH_DYLDLINK | MH_NOUNDEFS)
                    .load_dylib(kSystem)
                    .load_dylib("/usr/lib/libunused.dylib")
                    .undefined("_malloc", 0)
                    .build();
  Planned planned = plan_for(image);
  CHECK(planned.plan.left_as_is == LeftAsIs::FlatNamespace);
  CHECK(planned.plan.removal_count() == 0);
  CHECK(planned.verdict("/usr/lib/libunused.dylib") == DylibVerdict::SliceLeftAsIs);
  CHECK(apply_prune(planned.image, planned.scan, planned.plan) == image.bytes);

  MachORepair repair = prune_macho(image.view(), test::checked());
  CHECK(repair.output.to_vector() == image.bytes);
  CHECK_FALSE(repair.report.changed);
  REQUIRE(repair.report.slices.size() == 1);
  CHECK(repair.report.slices[0].left_as_is == LeftAsIs::FlatNamespace);
  CHECK(repair.report.slices[0].flags.front() == "flat-namespace");
}

TEST_CASE("flat namespace: ordinals are not checked (they carry no meaning)") {
  // Go-style flat executables may hold anything in n_desc's high byte.
  Image image = MachOBuilder().flags(MH_DYLDLINK).load_dylib(kSystem).undefined("_malloc", 9).build();
  Planned planned = plan_for(image);
  CHECK(planned.plan.left_as_is == LeftAsIs::FlatNamespace);
}

TEST_CASE("LC_LAZY_LOAD_DYLIB: the file is left unchanged, with the reason") {
  Image image = MachOBuilder()
                    .load_dylib(kSystem)
                    .lazy_load_dylib("/usr/lib/liblazy.dylib")
                    .load_dylib("/usr/lib/libunused.dylib")
                    .undefined("_malloc", 1)
                    .build();
  Planned planned = plan_for(image);
  CHECK(planned.plan.left_as_is == LeftAsIs::LazyLoadDylib);
  CHECK(planned.plan.removal_count() == 0);
  CHECK(apply_prune(planned.image, planned.scan, planned.plan) == image.bytes);

  MachORepair repair = prune_macho(image.view(), test::checked());
  CHECK(repair.output.to_vector() == image.bytes);
  CHECK_FALSE(repair.report.changed);
  CHECK(repair.report.slices.at(0).left_as_is == LeftAsIs::LazyLoadDylib);
}

// ------------------------------------------------------------ runtime lookups

TEST_CASE("runtime lookup by name: importing it gives a warning when something is removed") {
  const char* const lookups[] = {"_dlsym", "_objc_getClass", "_objc_lookUpClass", "_NSClassFromString"};
  SUBCASE("imported through n_desc") {
    for (const char* lookup : lookups) {
      CAPTURE(lookup);
      Image image = MachOBuilder()
                        .load_dylib(kSystem)
                        .load_dylib("/usr/lib/libunused.dylib")
                        .undefined("_malloc", 1)
                        .undefined(lookup, 1)
                        .build();
      Planned planned = plan_for(image);
      CHECK(planned.plan.removal_count() == 1);
      CHECK(planned.analysis.runtime_lookups == std::vector<std::string>{lookup});
      REQUIRE(planned.plan.warnings.size() == 1);
      CHECK(contains(planned.plan.warnings[0], lookup));
      CHECK(contains(planned.plan.warnings[0], "--keep"));
    }
  }
  SUBCASE("imported through chained fixups") {
    for (const char* lookup : lookups) {
      CAPTURE(lookup);
      Image image = MachOBuilder()
                        .load_dylib(kSystem)
                        .load_dylib("/usr/lib/libunused.dylib")
                        .chained_fixups(macho::DYLD_CHAINED_IMPORT, {{1, "_malloc"}, {1, lookup}})
                        .build();
      Planned planned = plan_for(image);
      REQUIRE(planned.plan.warnings.size() == 1);
      CHECK(contains(planned.plan.warnings[0], lookup));
    }
  }
  SUBCASE("all of them are named in one warning") {
    MachOBuilder builder;
    builder.load_dylib(kSystem).load_dylib("/usr/lib/libunused.dylib");
    for (const char* lookup : lookups) builder.undefined(lookup, 1);
    Planned planned = plan_for(builder.build());
    REQUIRE(planned.plan.warnings.size() == 1);
    for (const char* lookup : lookups) CHECK(contains(planned.plan.warnings[0], lookup));
  }
}

TEST_CASE("runtime lookup by name: no warning when nothing is removed") {
  Image image = MachOBuilder().load_dylib(kSystem).undefined("_dlsym", 1).build();
  Planned planned = plan_for(image);
  CHECK(planned.analysis.runtime_lookups == std::vector<std::string>{"_dlsym"});
  CHECK(planned.plan.warnings.empty());
}

TEST_CASE("runtime lookup by name: the warning reaches prune_macho's report") {
  Image image = MachOBuilder()
                    .cpu(macho::CPU_TYPE_X86_64, 3)
                    .load_dylib(kSystem)
                    .load_dylib("/usr/lib/libunused.dylib")
                    .undefined("_objc_getClass", 1)
                    .build();
  MachORepair repair = prune_macho(image.view(), test::checked());
  REQUIRE(repair.report.slices.size() == 1);
  REQUIRE(repair.report.slices[0].warnings.size() == 1);
  CHECK(contains(repair.report.slices[0].warnings[0], "_objc_getClass"));
  CHECK(repair.report.removed_count() == 1);
}

// ------------------------------------------------- -undefined dynamic_lookup

TEST_CASE("-undefined dynamic_lookup: flat-lookup imports (ordinal -2) do not make a dylib used") {
  const char* const kTorch = "@rpath/libtorch_cpu.dylib";
  SUBCASE("n_desc 0xfe") {
    Image image = MachOBuilder()
                      .filetype(macho::MH_BUNDLE)
                      .load_dylib(kSystem)
                      .load_dylib(kTorch)
                      .undefined("_malloc", 1)
                      .undefined("_at_tensor", macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP)
                      .build();
    Planned planned = plan_for(image);
    CHECK(planned.removes(kTorch));
    CHECK(planned.analysis.flat_lookup_imports == 1);
  }
  SUBCASE("bind opcodes SET_DYLIB_SPECIAL_IMM -2, with n_desc 0xfe") {
    BindStream bind, lazy;
    bind.bind(1, "_malloc").bind(macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP, "_at_tensor").done();
    lazy.lazy(macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP, "_at_empty");
    Image image = MachOBuilder()
                      .filetype(macho::MH_BUNDLE)
                      .load_dylib(kSystem)
                      .load_dylib(kTorch)
                      .dyld_info({{}, bind, {}, lazy, {}})
                      .undefined("_malloc", 1)
                      .undefined("_at_tensor", macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP)
                      .undefined("_at_empty", macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP)
                      .build();
    Planned planned = plan_for(image);
    CHECK(planned.removes(kTorch));
    CHECK(planned.analysis.flat_lookup_imports == 2);  // _at_tensor and _at_empty, each found twice (bind + n_desc)
    std::vector<uint8_t> after = apply_prune(planned.image, planned.scan, planned.plan);
    verify_prune(planned.image, planned.scan, planned.plan, Bytes(after), cross_check_with_lief);
  }
  SUBCASE("chained fixups 0xfe and 0xfffe") {
    for (uint32_t format : {macho::DYLD_CHAINED_IMPORT, macho::DYLD_CHAINED_IMPORT_ADDEND64}) {
      CAPTURE(format);
      Image image = MachOBuilder()
                        .filetype(macho::MH_BUNDLE)
                        .load_dylib(kSystem)
                        .load_dylib(kTorch)
                        .chained_fixups(format, {{1, "_malloc"}, {macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP, "_at_tensor"}})
                        .build();
      Planned planned = plan_for(image);
      CHECK(planned.removes(kTorch));
      CHECK(planned.analysis.flat_lookup_imports == 1);
    }
  }
  SUBCASE("the same symbol bound through the dylib makes it used") {
    Image image = MachOBuilder()
                      .filetype(macho::MH_BUNDLE)
                      .load_dylib(kSystem)
                      .load_dylib(kTorch)
                      .undefined("_malloc", 1)
                      .undefined("_at_tensor", 2)
                      .undefined("_at_empty", macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP)
                      .build();
    Planned planned = plan_for(image);
    CHECK_FALSE(planned.removes(kTorch));
  }
}

TEST_CASE("prune_macho: per-dylib report of kind, symbols, sources, decision and reason") {
  BindStream bind;
  bind.bind(1, "_malloc").done();
  Image image = MachOBuilder()
                    .cpu(macho::CPU_TYPE_X86_64, 3)
                    .id_dylib("/usr/lib/libme.dylib")
                    .load_dylib(kSystem)
                    .weak_dylib("/usr/lib/libweak.dylib")
                    .reexport_dylib("/usr/lib/libreexp.dylib")
                    .upward_dylib("/usr/lib/libupward.dylib")
                    .dyld_info({{}, bind, {}, {}, {}})
                    .undefined("_malloc", 1)
                    .build();
  MachORepair repair = prune_macho(image.view(), test::checked());
  REQUIRE(repair.report.slices.size() == 1);
  const SliceReport& slice = repair.report.slices[0];
  CHECK(slice.install_name == "/usr/lib/libme.dylib");
  CHECK(slice.filetype == "dylib");
  REQUIRE(slice.dylibs.size() == 4);
  CHECK(slice.dylibs[0].kind == DylibKind::Load);
  CHECK(slice.dylibs[0].sources == std::vector<std::string>{"symtab", "bind"});
  CHECK(slice.dylibs[1].kind == DylibKind::Weak);
  CHECK(slice.dylibs[1].removed);
  CHECK(slice.dylibs[2].kind == DylibKind::Reexport);
  CHECK_FALSE(slice.dylibs[2].removed);
  CHECK(slice.dylibs[3].kind == DylibKind::Upward);
  CHECK_FALSE(slice.dylibs[3].removed);
  CHECK(repair.report.removed_count() == 1);
}

TEST_CASE("report: inspect says what prune removes (removable) and removes nothing; prune reports both") {
  Image image = with_system_used(MachOBuilder().cpu(macho::CPU_TYPE_X86_64, 3).load_dylib(kSystem).load_dylib("/usr/lib/libunused.dylib"));
  MachOReport inspected = inspect_macho(image.view());
  REQUIRE(inspected.slices.size() == 1);
  REQUIRE(inspected.slices[0].dylibs.size() == 2);
  CHECK(inspected.slices[0].dylibs[1].removable());
  CHECK_FALSE(inspected.slices[0].dylibs[1].removed);
  CHECK(inspected.removable_count() == 1);
  CHECK(inspected.removed_count() == 0);
  MachORepair pruned = prune_macho(image.view(), test::checked());
  CHECK(pruned.report.slices[0].dylibs[1].removable());
  CHECK(pruned.report.slices[0].dylibs[1].removed);
  CHECK(pruned.report.removed_count() == 1);
  CHECK_FALSE(pruned.report.slices[0].dylibs[0].removed);
}
