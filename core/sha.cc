#include "core/sha.h"

// OpenSSL 3 marks the per-algorithm functions deprecated in favour of EVP, but EVP
// first initialises the provider machinery: 1.5 ms per process, more than hashing
// a 1 MB file takes (`machofix verify` is measured against sha256sum, which starts
// in 2 ms). These functions run the same assembly (SHA-NI where present) at the
// same speed (bench/hash_bench.sh), with no set-up at all. (The one-shot SHA256()
// goes through EVP, hence Init/Update/Final.)
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <algorithm>
#include <exception>
#include <thread>

namespace machofix {

namespace {

void check_hash_type(uint8_t hash_type) {
  if (stored_hash_size(hash_type) == 0) fail("unknown code signature hash type " + std::to_string(hash_type));
}

// Below this many pages a second thread costs more than it saves.
constexpr uint64_t kPagesPerThreadMinimum = 256;

void hash_page_range(const Bytes& code, uint64_t page_size, uint8_t hash_type, uint64_t first, uint64_t end,
                     std::vector<uint8_t>& out) {
  Hasher hasher(hash_type);
  for (uint64_t page = first; page < end; ++page) {
    uint64_t start = page * page_size;
    uint64_t length = std::min(page_size, code.size() - start);
    hasher.hash(code.sub(start, length, "code page"), out.data() + page * hasher.size());
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
  uint8_t digest[SHA384_DIGEST_LENGTH];
  bool done = false;
  if (hash_type_ == kHashSha1) {
    SHA_CTX context;
    done = SHA1_Init(&context) && SHA1_Update(&context, data.data(), data.size()) && SHA1_Final(digest, &context);
  } else if (hash_type_ == kHashSha384) {
    SHA512_CTX context;
    done = SHA384_Init(&context) && SHA384_Update(&context, data.data(), data.size()) &&
           SHA384_Final(digest, &context);
  } else {
    SHA256_CTX context;
    done = SHA256_Init(&context) && SHA256_Update(&context, data.data(), data.size()) &&
           SHA256_Final(digest, &context);
  }
  if (!done) fail("OpenSSL digest failed");
  std::copy(digest, digest + size_, out);  // SHA-256 truncated keeps the first 20 bytes
}

std::vector<uint8_t> Hasher::hash(const Bytes& data) {
  std::vector<uint8_t> out(size_);
  hash(data, out.data());
  return out;
}

std::vector<uint8_t> hash_pages(const Bytes& code, uint64_t page_size, uint8_t hash_type, unsigned threads) {
  if (page_size == 0) fail("internal error: page size 0");
  uint64_t pages = code.size() / page_size + (code.size() % page_size != 0);
  std::vector<uint8_t> out(pages * stored_hash_size(hash_type));
  bool two_threads = threads == 0 ? pages >= 2 * kPagesPerThreadMinimum && std::thread::hardware_concurrency() >= 2
                                  : threads >= 2 && pages >= 2;
  if (!two_threads) {
    hash_page_range(code, page_size, hash_type, 0, pages, out);
    return out;
  }
  // Each thread writes its own slots of `out`; no page is shared.
  uint64_t middle = pages / 2;
  std::exception_ptr second_failure;
  std::thread second([&] {
    try {
      hash_page_range(code, page_size, hash_type, middle, pages, out);
    } catch (...) {
      second_failure = std::current_exception();
    }
  });
  std::exception_ptr first_failure;
  try {
    hash_page_range(code, page_size, hash_type, 0, middle, out);
  } catch (...) {
    first_failure = std::current_exception();
  }
  second.join();
  if (first_failure) std::rethrow_exception(first_failure);
  if (second_failure) std::rethrow_exception(second_failure);
  return out;
}

}  // namespace machofix
