#include "core/rewrite/macho_report.h"

#include "core/format/macho_format.h"

namespace machofix {

size_t MachOReport::removed_count() const {
  size_t count = 0;
  for (const SliceReport& slice : slices)
    for (const DylibReport& dylib : slice.dylibs) count += dylib.removed;
  return count;
}

size_t MachOReport::removable_count() const {
  size_t count = 0;
  for (const SliceReport& slice : slices)
    for (const DylibReport& dylib : slice.dylibs) count += dylib.removable();
  return count;
}

std::vector<std::string> slice_signature_failures(const SliceReport& slice) {
  std::vector<std::string> failures;
  if (!slice.handled) return failures;  // a 32-bit slice: not ours to judge
  if (slice.signature.status == SignatureStatus::Unsigned && slice.cputype == macho::CPU_TYPE_ARM64)
    failures.push_back("not signed (arm64 code must be signed to run)");
  for (const SignatureFinding& problem : slice.signature.findings.problems) failures.push_back(describe(problem));
  return failures;
}

std::vector<std::string> signature_failures(const MachOReport& report) {
  std::vector<std::string> failures;
  for (const SliceReport& slice : report.slices)
    for (const std::string& failure : slice_signature_failures(slice)) failures.push_back(slice.arch + ": " + failure);
  return failures;
}

}  // namespace machofix
