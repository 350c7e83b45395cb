// Hashing for code signatures: the four CodeDirectory hash types, with OpenSSL
// (CommonCrypto on macOS).
//
// A signature hashes every 4 or 16 KiB page of the code, so the per-page cost
// matters as much as the throughput: the digests are OpenSSL's per-algorithm
// functions (CommonCrypto's on macOS), with no per-call or per-process set-up
// (core/base/sha.cc). hash_pages() splits large inputs across two threads (see
// bench/hash_bench.sh for the numbers behind that choice).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/bytes.h"

namespace machofix {

// CodeDirectory hashType values (cs_blobs.h).
constexpr uint8_t kHashSha1 = 1;
constexpr uint8_t kHashSha256 = 2;
constexpr uint8_t kHashSha256Truncated = 3;
constexpr uint8_t kHashSha384 = 4;
constexpr size_t kMaxHashSize = 48;

// Bytes a CodeDirectory stores per hash of this type (20, 32, 20, 48); 0 if unknown.
uint8_t stored_hash_size(uint8_t hash_type);
// "sha1", "sha256", "sha256-truncated", "sha384", or "hash type N".
std::string hash_type_name(uint8_t hash_type);

// SHA-256 of the bytes, lowercase hex (a .pte's content-hash keys).
std::string sha256_hex(const Bytes& bytes);

class Hasher {
 public:
  explicit Hasher(uint8_t hash_type);  // an Error for an unknown type
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  uint8_t size() const { return size_; }  // bytes written by hash(): the stored size
  // Writes the (possibly truncated) digest of `data` to `out`, size() bytes.
  void hash(const Bytes& data, uint8_t* out);
  std::vector<uint8_t> hash(const Bytes& data);

 private:
  uint8_t hash_type_;
  uint8_t size_;
};

// How many pages of `page_size` bytes cover `size` bytes, the last one possibly
// short: the number of hashes hash_pages writes, a CodeDirectory's nCodeSlots.
constexpr uint64_t page_count(uint64_t size, uint64_t page_size) { return size / page_size + (size % page_size != 0); }

// Page hashes that need not be computed again (core/format/codesign.h:
// VerifiedInputHashes: a verified signature's hash of a page whose bytes are the
// very bytes it sealed).
class KnownPageHashes {
 public:
  virtual ~KnownPageHashes() = default;
  // The stored hash of the `length` bytes at `page`, page `index` of `page_size`
  // bytes hashed with `hash_type`; nullptr when it must be computed.
  virtual const uint8_t* find(const uint8_t* page, uint64_t length, uint64_t index, uint64_t page_size,
                              uint8_t hash_type) const = 0;
};

// The hashes of [0, page), [page, 2*page), ... of `code`, the last page short,
// concatenated (stored_hash_size bytes each). threads: 0 = automatic (two for
// large inputs on a machine with two cores or more), else at most that many.
// `known`, if given, is asked first for each page.
std::vector<uint8_t> hash_pages(const Bytes& code, uint64_t page_size, uint8_t hash_type, unsigned threads = 0,
                                const KnownPageHashes* known = nullptr);

}  // namespace machofix
