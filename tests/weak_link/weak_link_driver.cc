// Test driver for core/rewrite/weak_link.h: plan, apply and verify a weak link of the
// dependencies the globs name, on one thin Mach-O file, the way `edit --weak-link`
// will; no re-signing (the reference test compares everything but the signature).
//
//   weak_link_driver IN OUT GLOB...
//
// Prints one line per matching dylib ("ordinal action install-name: reason") and one
// per glob that matches nothing. Exit 0 with OUT written (equal to IN when there is
// nothing to do); exit 2 with nothing written when a dylib or the slice is refused,
// a glob matches nothing, or the input is malformed.
#include <fstream>
#include <iostream>

#include "core/lief/lief_check.h"
#include "core/base/error.h"
#include "core/format/imports.h"
#include "core/format/macho.h"
#include "core/rewrite/weak_link.h"
#include "tests/support/whole_file.h"

using namespace machofix;

namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  auto bytes = test::read_whole_file<std::vector<uint8_t>>(path);
  if (!bytes) fail("cannot read " + path);
  return *bytes;
}

int run(const std::string& input, const std::string& output, const std::vector<std::string>& globs) {
  std::vector<uint8_t> bytes = read_file(input);
  MachO image = parse_macho(Bytes(bytes));
  ImportScan scan = scan_imports(image);
  WeakLinkPlan plan = plan_weak_link(image, scan, globs);
  for (const WeakLinkDecision& decision : plan.decisions)
    std::cout << decision.ordinal << " " << weak_link_action_name(decision.action) << " " << decision.install_name << ": "
              << decision.reason << "\n";
  for (const std::string& glob : plan.unmatched_globs) std::cout << "no dependent dylib matches '" << glob << "'\n";
  if (plan.refuses_any() || !plan.unmatched_globs.empty()) return 2;
  std::vector<int> ordinals = plan.ordinals();
  std::vector<uint8_t> after = apply_weak_link(image, scan, ordinals);
  verify_weak_link(image, scan, ordinals, Bytes(after), cross_check_with_lief);
  std::ofstream out(output, std::ios::binary);
  out.write(reinterpret_cast<const char*>(after.data()), static_cast<std::streamsize>(after.size()));
  if (!out.flush()) fail("cannot write " + output);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: weak_link_driver IN OUT GLOB...\n";
    return 2;
  }
  try {
    return run(argv[1], argv[2], std::vector<std::string>(argv + 3, argv + argc));
  } catch (Error& error) {
    std::cerr << "weak_link_driver: " << error.in_file(argv[1]).describe() << "\n";
    return 2;
  }
}
