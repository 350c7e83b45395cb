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

// Bytes of pages hash_pages has hashed in this process so far (pages whose hash was
// known are not counted): what the tests hold a rewrite's hashing to.
uint64_t page_bytes_hashed();

// hash_pages' answer kept with what it was asked, for a second pass over the same
// pages: the check of a signature just written (add_adhoc_signature, or a renewal
// over an invalid one) need not hash again the pages no one can have changed since. A
// page is served only when it is the very page hashed (the same address, length, page
// size and hash type) and lies wholly in a registered read-only file mapping
// (core/base/mapped_pages.h: the code and data an OutputImage borrows from its
// input), so its bytes are the ones hashed. Any other page (the header, __LINKEDIT:
// the bytes the rewrite wrote) is hashed again, and so is every page of a signer that
// hashed another range, page size or type than the signature it wrote says. The check
// stays independent of the signer in what it reads and compares: which pages, where
// their hashes are stored, which type; it shares with the signer only the digest of a
// page nothing could change.
class HashedPages : public KnownPageHashes {
 public:
  // Hashes `code` (hash_pages, asking `known` first).
  HashedPages(const Bytes& code, uint64_t page_size, uint8_t hash_type, const KnownPageHashes* known = nullptr);
  const std::vector<uint8_t>& hashes() const { return hashes_; }
  const uint8_t* find(const uint8_t* page, uint64_t length, uint64_t index, uint64_t page_size,
                      uint8_t hash_type) const override;

 private:
  Bytes code_;
  uint64_t page_size_;
  uint8_t hash_type_;
  std::vector<uint8_t> hashes_;
};

// The HashedPages of each CodeDirectory a signer wrote (a renewal may write a SHA-1
// and a SHA-256 one): a page is served by the one hashed with its page size and type.
class HashedPagesList : public KnownPageHashes {
 public:
  void add(HashedPages hashed) { directories_.push_back(std::move(hashed)); }
  const uint8_t* find(const uint8_t* page, uint64_t length, uint64_t index, uint64_t page_size,
                      uint8_t hash_type) const override;

 private:
  std::vector<HashedPages> directories_;
};

}  // namespace machofix
