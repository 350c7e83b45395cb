#include "core/sha.h"

#include <openssl/evp.h>

#include <algorithm>
#include <exception>
#include <thread>

namespace machofix {

namespace {

// Fetching resolves the provider each time it is called: do it once per type and
// keep the result for the life of the process (function-local statics are
// initialised thread-safely).
const EVP_MD* fetch_digest(const char* name) {
  EVP_MD* md = EVP_MD_fetch(nullptr, name, nullptr);
  if (!md) fail(std::string("OpenSSL has no ") + name + " digest");
  return md;
}

const EVP_MD* digest_for(uint8_t hash_type) {
  static const EVP_MD* sha1 = fetch_digest("SHA1");
  static const EVP_MD* sha256 = fetch_digest("SHA256");
  static const EVP_MD* sha384 = fetch_digest("SHA384");
  switch (hash_type) {
    case kHashSha1: return sha1;
    case kHashSha256:
    case kHashSha256Truncated: return sha256;
    case kHashSha384: return sha384;
  }
  fail("unknown code signature hash type " + std::to_string(hash_type));
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

Hasher::Hasher(uint8_t hash_type)
    : md_(digest_for(hash_type)), context_(EVP_MD_CTX_new()), size_(stored_hash_size(hash_type)) {
  if (!context_) fail("OpenSSL: out of memory for a digest context");
}

Hasher::~Hasher() { EVP_MD_CTX_free(context_); }

void Hasher::hash(const Bytes& data, uint8_t* out) {
  uint8_t digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  if (EVP_DigestInit_ex2(context_, md_, nullptr) != 1 || EVP_DigestUpdate(context_, data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(context_, digest, &digest_size) != 1 || digest_size < size_)
    fail("OpenSSL digest failed");
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
