// What verifying a code signature finds, as typed values: each problem (the signature
// is invalid) and each note (something this file alone cannot show, which does not
// make it invalid) is one kind with the numbers that place it. Decisions and tests use
// the kinds; describe() makes the text once, for the reports and for the refusals that
// quote a problem.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace machofix {

// Slice bytes [start, end).
struct SliceRange {
  uint64_t start = 0, end = 0;
};

namespace finding {

// Problems: the kernel or dyld would reject the signature.
struct NotSigned {};
struct Unreadable {  // the signature does not parse (codesign_read.cc's checks)
  std::string error;  // Error::describe() of the reading
};
struct DataoffUnaligned {
  uint64_t dataoff = 0;
};
struct NoLinkedit {};
struct OutsideLinkedit {
  SliceRange signature, linkedit;
};
struct CodeLimitNotSignatureOffset {
  uint64_t code_limit = 0, signature_offset = 0;
};
struct CodeLimitPastEnd {
  uint64_t code_limit = 0;
};
struct CodeSlotCount {
  uint64_t slots = 0, code_limit = 0, needed = 0;
};
struct PageHashMismatch {
  uint64_t page = 0;
  SliceRange bytes;
};
// The mismatching pages past those listed one by one (kMaxListedPages), counted.
struct MorePageHashMismatches {
  uint64_t unlisted = 0, mismatching = 0, checked = 0;
};
struct SlotHashWithoutBlob {
  uint32_t slot = 0;
  SliceRange hash;
};
struct SlotHashMismatch {
  uint32_t slot = 0;
  SliceRange blob;
};
struct UnsealedBlob {  // a blob in a special slot the CodeDirectory has no hash for
  uint32_t slot = 0, special_slots = 0;
};

// Notes: not checkable here.
struct ExternalSlotSealed {  // the hash of an Info.plist or of a bundle's resources
  uint32_t slot = 0;
};
struct IdentityNotChecked {};  // the CMS signature of an identity

}  // namespace finding

using FindingDetail =
    std::variant<finding::NotSigned, finding::Unreadable, finding::DataoffUnaligned, finding::NoLinkedit,
                 finding::OutsideLinkedit, finding::CodeLimitNotSignatureOffset, finding::CodeLimitPastEnd,
                 finding::CodeSlotCount, finding::PageHashMismatch, finding::MorePageHashMismatches,
                 finding::SlotHashWithoutBlob, finding::SlotHashMismatch, finding::UnsealedBlob,
                 finding::ExternalSlotSealed, finding::IdentityNotChecked>;

struct SignatureFinding {
  FindingDetail detail;
  std::string code_directory;  // the CodeDirectory it is about ("CodeDirectory sha256"); empty: the signature
  std::optional<uint64_t> at;  // the absolute file offset it points at, where there is one

  template <class Kind>
  bool is() const { return std::holds_alternative<Kind>(detail); }
  template <class Kind>
  const Kind& as() const { return std::get<Kind>(detail); }
};

std::string describe(const SignatureFinding& finding);
std::vector<std::string> describe(const std::vector<SignatureFinding>& findings);

}  // namespace machofix
