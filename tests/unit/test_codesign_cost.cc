// What re-signing costs: a rewrite's new signature and its check take the hashes
// they can trust (a verified input signature's, VerifiedInputHashes; the signer's own
// for pages nothing can have changed, HashedPages) and hash the rest; and no page
// is ever served a hash of other bytes.
#include <doctest/doctest.h>

#include <atomic>
#include <optional>
#include <vector>

#include "core/format/codesign.h"
#include "core/base/sha.h"
#include "tests/support/codesign_fixtures.h"
#include "core/io/file_io.h"
#include "core/rewrite/macho_repair.h"
#include "tests/support/checked_options.h"

using namespace machofix;
using namespace machofix::codesign_test;

// ---------------------------------------------------------------------------
// Re-signing a rewrite hashes what changed: VerifiedInputHashes

namespace {

// Counts the pages whose hash VerifiedInputHashes gives.
class CountingHashes : public KnownPageHashes {
 public:
  explicit CountingHashes(const KnownPageHashes& inner) : inner_(inner) {}
  const uint8_t* find(const uint8_t* page, uint64_t length, uint64_t index, uint64_t page_size,
                      uint8_t hash_type) const override {
    const uint8_t* found = inner_.find(page, length, index, page_size, hash_type);
    found_ += found != nullptr;
    return found;
  }
  uint64_t found() const { return found_; }

 private:
  const KnownPageHashes& inner_;
  mutable std::atomic<uint64_t> found_{0};
};

}  // namespace

TEST_CASE("a verified input's hashes serve the pages an output borrows from it, and no other") {
  Fixtures::get().link("large_arm64.dylib", "large", "arm64", "dylib");  // lld signs arm64 ad hoc
  MappedFile file((Fixtures::get().dir() / "large_arm64.dylib").string());
  MachO input = parse_macho(file.bytes());
  std::optional<CodeSignature> signature = read_code_signature(input);
  REQUIRE(signature);
  REQUIRE(check_code_signature(input).problems.empty());
  const Segment* linkedit = input.segment("__LINKEDIT");
  REQUIRE(linkedit);
  OutputImage output = OutputImage::borrowing(file.bytes(), 4096, linkedit->file_offset, 0);
  REQUIRE(output.borrowed_size() > 2000000);
  VerifiedInputHashes verified(input, *signature);
  CountingHashes counting(verified);
  uint64_t code_limit = signature->primary().code_limit;

  // Borrowed pages take the stored hashes, which equal what hashing them gives.
  Bytes code = output.bytes().sub(0, code_limit, "code");
  CHECK(hash_pages(code, 4096, kHashSha256, 0, &counting) == hash_pages(code, 4096, kHashSha256));
  CHECK(counting.found() == output.borrowed_size() / 4096);

  // A copy of the same bytes is hashed: only pages that map the input's very bytes count.
  std::vector<uint8_t> copy = output.to_vector();
  CountingHashes on_copy(verified);
  hash_pages(Bytes(copy).sub(0, code_limit, "code"), 4096, kHashSha256, 0, &on_copy);
  CHECK(on_copy.found() == 0);

  // A renewal with them after the head changed: page 0 is hashed again, and the
  // signature checks without any help.
  output.data()[input.load_commands_end()] ^= 0x01;  // header padding
  renew_code_signature(output, 0, &verified);
  MachO renewed = parse_macho(output.bytes());
  CHECK(check_code_signature(renewed).problems.empty());
  CHECK(check_code_signature(renewed, &verified).problems.empty());
}

// ---------------------------------------------------------------------------
// Checking a new signature hashes again what the signer's hashing cannot vouch for:
// HashedPages

namespace {

// lld leaves x86_64 unsigned: `sign` adds a signature to it.
MappedFile large_unsigned_dylib() {
  Fixtures::get().link("large_x86_64.dylib", "large", "x86_64", "dylib");
  return MappedFile((Fixtures::get().dir() / "large_x86_64.dylib").string());
}

// What `sign` reports of the one slice of `file`, and the bytes of pages it hashed.
struct SignCost {
  SliceReport slice;
  uint64_t hashed;
};

SignCost sign_cost(const MappedFile& file, const RepairOptions& options) {
  uint64_t before = page_bytes_hashed();
  MachORepair repair = sign_macho(file.bytes(), options);
  uint64_t hashed = page_bytes_hashed() - before;
  REQUIRE(repair.report.slices.size() == 1);
  return {repair.report.slices[0], hashed};
}

}  // namespace

TEST_CASE("a new signature's own hashes serve its check for the borrowed pages, and no other") {
  MappedFile file = large_unsigned_dylib();
  MachO input = parse_macho(file.bytes());
  REQUIRE(!input.code_signature.present);
  const Segment* linkedit = input.segment("__LINKEDIT");
  REQUIRE(linkedit);
  OutputImage output = OutputImage::borrowing(file.bytes(), 4096, linkedit->file_offset,
                                              adhoc_signature_room(file.bytes().size(), "large"));
  REQUIRE(output.borrowed_size() > 2000000);
  HashedPages hashed = add_adhoc_signature(output, 0, "large");
  MachO signed_image = parse_macho(output.bytes());

  // The borrowed pages take the signer's hashes; the header page and __LINKEDIT are hashed.
  CountingHashes counting(hashed);
  CHECK(check_code_signature(signed_image, &counting).problems.empty());
  CHECK(counting.found() == output.borrowed_size() / 4096);

  // Only the very page hashed, as it was hashed.
  const uint8_t* page = output.bytes().data() + 2 * 4096;  // borrowed
  CHECK(hashed.find(page, 4096, 2, 4096, kHashSha256) != nullptr);
  CHECK(hashed.find(page, 4096, 3, 4096, kHashSha256) == nullptr);         // another index
  CHECK(hashed.find(page + 4096, 4096, 2, 4096, kHashSha256) == nullptr);  // another page at that index
  CHECK(hashed.find(page, 2048, 2, 4096, kHashSha256) == nullptr);         // another length
  CHECK(hashed.find(page, 4096, 2, 4096, kHashSha1) == nullptr);           // another type
  const uint8_t* page_1 = output.bytes().data() + 4096;  // borrowed too
  CHECK(hashed.find(page_1, 4096, 1, 4096, kHashSha256) != nullptr);
  CHECK(hashed.find(page_1, 4096, 1, 16384, kHashSha256) == nullptr);  // another page size

  // A copy of the same bytes is hashed: it is not what the signer hashed.
  std::vector<uint8_t> copy = output.to_vector();
  CountingHashes on_copy(hashed);
  CHECK(check_code_signature(parse_macho(Bytes(copy)), &on_copy).problems.empty());
  CHECK(on_copy.found() == 0);

  // A private page written after the signer hashed it is hashed again.
  uint8_t* padding = output.data() + signed_image.load_commands_end();
  *padding ^= 0x01;
  CHECK(check_code_signature(parse_macho(output.bytes()), &hashed).first_problem_at() == 0);
  *padding ^= 0x01;

  // A wrong hash stored for a borrowed page is found: the check compares what the
  // signature stores with the page's hash.
  std::optional<CodeSignature> signature = read_code_signature(signed_image);
  REQUIRE(signature);
  const CodeDirectory& directory = signature->primary();
  output.data()[signature->offset + directory.offset + directory.hash_offset + 2 * directory.hash_size] ^= 0x01;
  CHECK(check_code_signature(parse_macho(output.bytes()), &hashed).first_problem_at() == 2 * 4096);
}

TEST_CASE("sign of an unsigned slice hashes its code once, and again only what it does not borrow") {
  MappedFile file = large_unsigned_dylib();
  RepairOptions options = test::checked();
  options.sign_unsigned = true;
  SignCost cost = sign_cost(file, options);
  CHECK(cost.slice.signature_after.status == SignatureStatus::Added);
  uint64_t size = file.bytes().size();
  CHECK(cost.hashed >= size);           // the signer hashed every page
  CHECK(cost.hashed < size + size / 8);  // the check hashed the header page and __LINKEDIT again, not the code
}

TEST_CASE("re-signing over an invalid signature (--resign-invalid) hashes the code once more, not twice") {
  Fixtures::get().link("large_arm64.dylib", "large", "arm64", "dylib");  // lld signs arm64 ad hoc
  std::vector<uint8_t> data = read_file(Fixtures::get().dir() / "large_arm64.dylib");
  data[data.size() / 2] ^= 0x01;  // in the large table: that page no longer matches its hash
  fs::path tampered = Fixtures::get().dir() / "large_arm64_tampered.dylib";
  write_file(tampered, data);
  MappedFile file(tampered.string());
  std::optional<CodeSignature> signature = read_code_signature(parse_macho(file.bytes()));
  REQUIRE(signature);
  uint64_t code_limit = signature->primary().code_limit;
  RepairOptions options = test::checked();
  options.resign_invalid = true;
  SignCost cost = sign_cost(file, options);
  CHECK(cost.slice.signature.status == SignatureStatus::Invalid);
  CHECK(cost.slice.signature_after.status == SignatureStatus::Renewed);
  CHECK(cost.hashed >= 2 * code_limit);                   // the input's verification, then the signer: every page
  CHECK(cost.hashed < 2 * code_limit + code_limit / 8);  // the check: the header page and __LINKEDIT again
}
