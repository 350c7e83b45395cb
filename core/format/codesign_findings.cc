// The words of each signature finding: the one place they are written.
#include "core/format/codesign_findings.h"

#include "core/base/error.h"
#include "core/format/codesign_format.h"

namespace machofix {

namespace {

std::string slot_name(uint32_t slot) {
  switch (slot) {
    case cs::kSlotInfoPlist: return "special slot 1 (Info.plist)";
    case cs::kSlotRequirements: return "special slot 2 (requirements)";
    case cs::kSlotResources: return "special slot 3 (resources)";
    case 4: return "special slot 4 (application specific)";
    case cs::kSlotEntitlements: return "special slot 5 (entitlements)";
    case cs::kSlotDerEntitlements: return "special slot 7 (DER entitlements)";
  }
  return "special slot " + std::to_string(slot);
}

std::string slice_bytes(const SliceRange& range) { return "slice bytes " + hex(range.start) + "-" + hex(range.end); }

std::string words(const finding::NotSigned&) { return "not signed"; }
std::string words(const finding::Unreadable& f) { return f.error; }
std::string words(const finding::DataoffUnaligned& f) {
  return "LC_CODE_SIGNATURE dataoff " + hex(f.dataoff) + " is not 8-aligned";
}
std::string words(const finding::NoLinkedit&) {
  return "the signature is not inside __LINKEDIT: there is no __LINKEDIT segment";
}
std::string words(const finding::OutsideLinkedit& f) {
  return "the signature (" + slice_bytes(f.signature) + ") is not inside __LINKEDIT (" + hex(f.linkedit.start) + "-" +
         hex(f.linkedit.end) + ")";
}
std::string words(const finding::CodeLimitNotSignatureOffset& f) {
  return "codeLimit " + hex(f.code_limit) + " is not the signature offset " + hex(f.signature_offset);
}
std::string words(const finding::CodeLimitPastEnd& f) {
  return "codeLimit " + hex(f.code_limit) + " lies past the end of the slice";
}
std::string words(const finding::CodeSlotCount& f) {
  return std::to_string(f.slots) + " code slots, but codeLimit " + hex(f.code_limit) + " needs " +
         std::to_string(f.needed);
}
std::string words(const finding::PageHashMismatch& f) {
  return "page " + std::to_string(f.page) + " (" + slice_bytes(f.bytes) + ") hash mismatch";
}
std::string words(const finding::MorePageHashMismatches& f) {
  return std::to_string(f.unlisted) + " more pages with a hash mismatch (" + std::to_string(f.mismatching) + " of " +
         std::to_string(f.checked) + " in all)";
}
std::string words(const finding::SlotHashWithoutBlob& f) {
  return slot_name(f.slot) + " (" + slice_bytes(f.hash) + ") holds a hash but no blob is there";
}
std::string words(const finding::SlotHashMismatch& f) {
  return slot_name(f.slot) + " hash mismatch (its blob: " + slice_bytes(f.blob) + ")";
}
std::string words(const finding::UnsealedBlob& f) {
  return "the blob in " + slot_name(f.slot) + " is not sealed (only " + std::to_string(f.special_slots) +
         " special slots)";
}
std::string words(const finding::ExternalSlotSealed& f) {
  return slot_name(f.slot) + " seals a file outside the Mach-O (a bundle's); not checkable here";
}
std::string words(const finding::IdentityNotChecked&) { return "the CMS signature (identity) is not checked"; }

}  // namespace

std::string describe(const SignatureFinding& finding) {
  std::string text = std::visit([](const auto& detail) { return words(detail); }, finding.detail);
  return finding.code_directory.empty() ? text : finding.code_directory + ": " + text;
}

std::vector<std::string> describe(const std::vector<SignatureFinding>& findings) {
  std::vector<std::string> texts;
  texts.reserve(findings.size());
  for (const SignatureFinding& finding : findings) texts.push_back(describe(finding));
  return texts;
}

}  // namespace machofix
