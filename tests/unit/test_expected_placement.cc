// MachORewrite::expected_placement, the plan the early copy follows
// (core/io/copy_ahead.h): it must say where run() then puts each slice. A wrong
// plan costs no bytes (test_macho_write.cc), only a second copy of what moved, so
// these tests are what tells a plan that stopped foreseeing a layout.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "core/base/copied_range.h"
#include "core/format/codesign.h"
#include "core/format/fat.h"
#include "core/format/macho.h"
#include "core/rewrite/macho_repair.h"
#include "fuzz/sample_images.h"
#include "tests/support/checked_options.h"

using namespace machofix;
using namespace machofix::samples;

namespace {

constexpr uint64_t kArm64Page = 0x4000;

// An unsigned x86_64 slice that ends `spare` bytes before the arm64 slice's page, so
// that a new signature pushes the arm64 slice to the next one, and a signed arm64 slice.
std::vector<uint8_t> fat_with_unsigned_x86_64(uint64_t spare) {
  uint64_t bare = dyld_info_dylib(macho::CPU_TYPE_X86_64).build().bytes.size();
  uint64_t room = kArm64Page - 0x1000 - bare - spare;  // the x86_64 slice is at 0x1000
  std::vector<uint8_t> x86_64 =
      dyld_info_dylib(macho::CPU_TYPE_X86_64).text(std::vector<uint8_t>(room / 16 * 16, 0x90)).build().bytes;
  std::vector<uint8_t> arm64_unsigned = dyld_info_dylib().build().bytes;
  std::vector<uint8_t> arm64 = add_adhoc_signature(parse_macho(Bytes(arm64_unsigned)), "libme.dylib");
  return universal({{macho::CPU_TYPE_X86_64, 3, x86_64}, {macho::CPU_TYPE_ARM64, 0, arm64}});
}

// Whether `plan` puts each slice of `before` where `after` has it.
void check_places_slices(const std::vector<CopiedRange>& plan, const Universal& before, const Universal& after) {
  for (size_t i = 0; i < before.slices.size(); ++i) {
    CAPTURE(i);
    const FatSlice& slice = before.slices[i];
    CHECK(held_by(plan, slice.offset, after.slices[i].offset, slice.size) == slice.size);
  }
}

}  // namespace

TEST_CASE("expected_placement: sign of a universal file whose first slice gains a signature, which moves the next") {
  std::vector<uint8_t> fat = fat_with_unsigned_x86_64(64);
  MachORewrite rewrite(Bytes(fat), test::checked(), RewriteKind::Sign);
  std::vector<CopiedRange> plan = rewrite.expected_placement();
  MachORepair result = rewrite.run();
  Universal before = parse_universal(Bytes(fat)), after = parse_universal(result.output.bytes());
  REQUIRE(after.slices[1].offset == before.slices[1].offset + kArm64Page);  // the case this is about
  REQUIRE(after.slices[0].size > before.slices[0].size);
  check_places_slices(plan, before, after);
}

TEST_CASE("expected_placement: a growth the slice's page absorbs, and rewrites that keep every size, keep all in place") {
  std::vector<uint8_t> roomy = fat_with_unsigned_x86_64(2048);
  MachORewrite signing(Bytes(roomy), test::checked(), RewriteKind::Sign);
  std::vector<CopiedRange> plan = signing.expected_placement();
  MachORepair signed_fat = signing.run();
  REQUIRE(parse_universal(signed_fat.output.bytes()).slices[1].offset == parse_universal(Bytes(roomy)).slices[1].offset);
  CHECK(plan == in_place_plan(roomy.size()));

  std::vector<uint8_t> fat = fat_with_unsigned_x86_64(64);
  for (RewriteKind kind : {RewriteKind::Prune, RewriteKind::Edit}) {  // the unsigned slice stays unsigned
    MachORewrite rewrite(Bytes(fat), test::checked(), kind);
    CHECK(rewrite.expected_placement() == in_place_plan(fat.size()));
  }
}
