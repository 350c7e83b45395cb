#include "core/base/sha.h"

#include "core/base/mapped_pages.h"
#include "core/base/progress.h"
#include "core/base/util.h"

#if defined(__APPLE__)
// macOS: CommonCrypto, part of libSystem, so there is no crypto library to ship.
#include <CommonCrypto/CommonDigest.h>
#else
// OpenSSL 3 marks the per-algorithm functions deprecated in favour of EVP, but EVP
// first initialises the provider machinery: 1.5 ms per process, more than hashing
// a 1 MB file takes (`machofix verify` is measured against sha256sum, which starts
// in 2 ms). These functions run the same assembly (SHA-NI where present) at the
// same speed (bench/hash_bench.sh), with no set-up at all. (The one-shot SHA256()
// goes through EVP, hence Init/Update/Final.)
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#endif

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

namespace machofix {

namespace {

void check_hash_type(uint8_t hash_type) {
  if (stored_hash_size(hash_type) == 0) fail("unknown code signature hash type " + std::to_string(hash_type));
}

// Pages are hashed a chunk at a time; those of a file mapping are read into a buffer
// (bytes_to_read, core/base/mapped_pages.h). 256 KiB: the buffer stays in the core's
// cache between the copy and the hashing, and costs 64 page faults to set up instead
// of 256 (verify of 10 MB: 9.9 -> 7.5 ms with 1 MiB -> 256 KiB; 211 MB the same).
constexpr uint64_t kChunkBytes = uint64_t(256) << 10;

std::atomic<uint64_t> bytes_hashed{0};  // page_bytes_hashed()

constexpr const char* kFileShrank = "the file changed while it was read (it is shorter than when it was opened)";

// Whether a range to hash, `size` bytes in all, is hashed where it lies rather than
// read a chunk at a time (bytes_to_read): one chunk at most. Reading it would first
// fault in a buffer as large as itself, page by page, where a mapping's pages come in
// 16 at a time (the kernel's fault-around): most of a .pte blob's signature check
// (BENCHMARKS.md).
bool hashed_where_it_lies(uint64_t size) { return size <= kChunkBytes; }

// Calls `consume(part, length)` for data[0, size) in order, in parts CommonCrypto's
// 32-bit lengths can take; false as soon as it does. In a large range (a .pte blob's
// key hashes the whole blob, perhaps an OutputImage whose middle maps the input), the
// parts that lie in a file mapping are read with pread into one buffer, never touched
// through the mapping (bytes_to_read).
template <typename Consume>
bool for_each_part(const uint8_t* data, size_t size, Consume consume) {
  constexpr size_t kPart = kChunkBytes;
  std::vector<uint8_t> buffer;
  for (size_t done = 0, part = 0; done < size; done += part) {
    part = std::min(size - done, kPart);
    const uint8_t* bytes = data + done;
    if (!hashed_where_it_lies(size)) {
      part = std::min<size_t>(part, mapping_uniform_extent(bytes, part));
      bytes = bytes_to_read(bytes, part, buffer);
      if (!bytes) fail(kFileShrank);
    }
    if (!consume(bytes, part)) return false;
  }
  return true;
}

// The digest of data[0, size) into `out` (the hash type's full digest); false if the
// library failed. Init/Update/Final of one algorithm, with the library's types.
template <typename Context, typename Length, typename Init, typename Update, typename Final>
bool digest_with(const uint8_t* data, size_t size, uint8_t* out, Init init, Update update, Final final) {
  Context context;
  if (init(&context) != 1) return false;
  bool updated = for_each_part(data, size, [&](const uint8_t* part, size_t length) {
    return update(&context, part, static_cast<Length>(length)) == 1;
  });
  return updated && final(out, &context) == 1;
}

bool digest(uint8_t hash_type, const uint8_t* data, size_t size, uint8_t* out) {
#if defined(__APPLE__)
  if (hash_type == kHashSha1)
    return digest_with<CC_SHA1_CTX, CC_LONG>(data, size, out, CC_SHA1_Init, CC_SHA1_Update, CC_SHA1_Final);
  if (hash_type == kHashSha384)
    return digest_with<CC_SHA512_CTX, CC_LONG>(data, size, out, CC_SHA384_Init, CC_SHA384_Update, CC_SHA384_Final);
  return digest_with<CC_SHA256_CTX, CC_LONG>(data, size, out, CC_SHA256_Init, CC_SHA256_Update, CC_SHA256_Final);
#else
  if (hash_type == kHashSha1) return digest_with<SHA_CTX, size_t>(data, size, out, SHA1_Init, SHA1_Update, SHA1_Final);
  if (hash_type == kHashSha384)
    return digest_with<SHA512_CTX, size_t>(data, size, out, SHA384_Init, SHA384_Update, SHA384_Final);
  return digest_with<SHA256_CTX, size_t>(data, size, out, SHA256_Init, SHA256_Update, SHA256_Final);
#endif
}

// Below this many pages a second thread costs more than it saves.
constexpr uint64_t kPagesPerThreadMinimum = 256;

// The page before which half of the `to_hash` pages to hash lie (`stored`:
// known_hashes).
uint64_t split_point(const std::vector<const uint8_t*>& stored, uint64_t pages, uint64_t to_hash) {
  if (stored.empty()) return pages / 2;
  uint64_t seen = 0;
  for (uint64_t page = 0; page < pages; ++page)
    if (!stored[page] && ++seen > to_hash / 2) return page;
  return pages / 2;
}

// The stored hashes `known` gives for each page of `code` (nullptr: to be hashed).
std::vector<const uint8_t*> known_hashes(const Bytes& code, uint64_t pages, uint64_t page_size, uint8_t hash_type,
                                         const KnownPageHashes* known) {
  std::vector<const uint8_t*> stored(known ? pages : 0, nullptr);
  for (uint64_t page = 0; page < stored.size(); ++page) {
    uint64_t at = page * page_size, length = std::min(page_size, code.size() - at);
    stored[page] = known->find(code.data() + at, length, page, page_size, hash_type);
  }
  return stored;
}

// Hashes pages [first, end) of `code`, a chunk at a time, except those with a hash in
// `stored` (known_hashes; empty: none), which are copied; `progress` hears of each
// chunk. A chunk of a file mapping is read only when one of its pages is hashed.
void hash_page_range(const Bytes& code, uint64_t page_size, uint8_t hash_type, uint64_t first, uint64_t end,
                     std::vector<uint8_t>& out, ProgressMeter* progress, const std::vector<const uint8_t*>& stored) {
  Hasher hasher(hash_type);
  const uint64_t pages_per_chunk = std::max<uint64_t>(1, kChunkBytes / page_size);
  auto stored_hash = [&](uint64_t page) { return stored.empty() ? nullptr : stored[page]; };
  const bool reads = !hashed_where_it_lies(code.size());
  std::vector<uint8_t> buffer;
  for (uint64_t chunk = first; chunk < end; chunk += pages_per_chunk) {
    uint64_t chunk_end = std::min(end, chunk + pages_per_chunk);
    uint64_t from = chunk * page_size, to = std::min(chunk_end * page_size, code.size());
    Bytes bytes = code.sub(from, to - from, "code pages");
    bool hashes_any = false;
    for (uint64_t page = chunk; page < chunk_end && !hashes_any; ++page) hashes_any = !stored_hash(page);
    const uint8_t* read = hashes_any && reads ? bytes_to_read(bytes.data(), bytes.size(), buffer) : bytes.data();
    if (!read) code.fail_here(from, kFileShrank);
    uint64_t hashed = 0;
    for (uint64_t page = chunk; page < chunk_end; ++page) {
      uint64_t at = page * page_size - from, length = std::min(page_size, bytes.size() - at);
      if (const uint8_t* hash = stored_hash(page)) {
        std::copy(hash, hash + hasher.size(), out.data() + page * hasher.size());
      } else {
        hasher.hash(Bytes(read + at, length), out.data() + page * hasher.size());
        hashed += length;
      }
    }
    bytes_hashed.fetch_add(hashed, std::memory_order_relaxed);
    if (progress) progress->add(bytes.size());
  }
}

}  // namespace

uint8_t stored_hash_size(uint8_t hash_type) {
  switch (hash_type) {
    case kHashSha1: return 20;
    case kHashSha256: return 32;
    case kHashSha256Truncated: return 20;
    case kHashSha384: return 48;
  }
  return 0;
}

std::string hash_type_name(uint8_t hash_type) {
  switch (hash_type) {
    case kHashSha1: return "sha1";
    case kHashSha256: return "sha256";
    case kHashSha256Truncated: return "sha256-truncated";
    case kHashSha384: return "sha384";
  }
  return "hash type " + std::to_string(hash_type);
}

Hasher::Hasher(uint8_t hash_type) : hash_type_(hash_type), size_(stored_hash_size(hash_type)) {
  check_hash_type(hash_type);
}

void Hasher::hash(const Bytes& data, uint8_t* out) {
  uint8_t full[kMaxHashSize];
  if (!digest(hash_type_, data.data(), data.size(), full)) fail("the " + hash_type_name(hash_type_) + " digest failed");
  std::copy(full, full + size_, out);  // SHA-256 truncated keeps the first 20 bytes
}

std::vector<uint8_t> Hasher::hash(const Bytes& data) {
  std::vector<uint8_t> out(size_);
  hash(data, out.data());
  return out;
}

std::vector<uint8_t> hash_pages(const Bytes& code, uint64_t page_size, uint8_t hash_type, unsigned threads,
                                const KnownPageHashes* known) {
  if (page_size == 0) fail_as(ErrorKind::Internal, "internal error: page size 0");
  uint64_t pages = page_count(code.size(), page_size);
  std::vector<uint8_t> out(pages * stored_hash_size(hash_type));
  ProgressMeter* progress = ProgressScope::current();  // the second thread has none of its own
  std::vector<const uint8_t*> stored = known_hashes(code, pages, page_size, hash_type, known);
  uint64_t hashed = stored.empty() ? pages : static_cast<uint64_t>(std::count(stored.begin(), stored.end(), nullptr));
  bool two_threads = threads == 0 ? hashed >= 2 * kPagesPerThreadMinimum && std::thread::hardware_concurrency() >= 2
                                  : threads >= 2 && pages >= 2;
  if (!two_threads) {
    hash_page_range(code, page_size, hash_type, 0, pages, out, progress, stored);
    return out;
  }
  // Each thread writes its own slots of `out`; no page is shared. The pages to hash
  // are split evenly (the known ones cost next to nothing).
  uint64_t middle = split_point(stored, pages, hashed);
  std::exception_ptr second_failure;
  std::thread second([&] {
    try {
      hash_page_range(code, page_size, hash_type, middle, pages, out, progress, stored);
    } catch (...) {
      second_failure = std::current_exception();
    }
  });
  std::exception_ptr first_failure;
  try {
    hash_page_range(code, page_size, hash_type, 0, middle, out, progress, stored);
  } catch (...) {
    first_failure = std::current_exception();
  }
  second.join();
  if (first_failure) std::rethrow_exception(first_failure);
  if (second_failure) std::rethrow_exception(second_failure);
  return out;
}

HashedPages::HashedPages(const Bytes& code, uint64_t page_size, uint8_t hash_type, const KnownPageHashes* known)
    : code_(code),
      page_size_(page_size),
      hash_type_(hash_type),
      hashes_(hash_pages(code, page_size, hash_type, 0, known)) {}

const uint8_t* HashedPages::find(const uint8_t* page, uint64_t length, uint64_t index, uint64_t page_size,
                                 uint8_t hash_type) const {
  if (page_size != page_size_ || hash_type != hash_type_ || index >= page_count(code_.size(), page_size_)) return nullptr;
  uint64_t at = index * page_size_;
  if (page != code_.data() + at || length != std::min(page_size_, code_.size() - at)) return nullptr;
  if (!file_behind(page, length)) return nullptr;  // a private page: it may have been written since
  return hashes_.data() + index * stored_hash_size(hash_type_);
}

const uint8_t* HashedPagesList::find(const uint8_t* page, uint64_t length, uint64_t index, uint64_t page_size,
                                     uint8_t hash_type) const {
  for (const HashedPages& hashed : directories_)
    if (const uint8_t* found = hashed.find(page, length, index, page_size, hash_type)) return found;
  return nullptr;
}

uint64_t page_bytes_hashed() { return bytes_hashed.load(std::memory_order_relaxed); }

std::string sha256_hex(const Bytes& bytes) {
  std::vector<uint8_t> digest = Hasher(kHashSha256).hash(bytes);
  return hex_bytes(digest.data(), digest.size());
}

}  // namespace machofix
