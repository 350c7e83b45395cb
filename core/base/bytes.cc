#include "core/base/bytes.h"

#include <algorithm>

#include "core/base/mapped_pages.h"

namespace machofix {

uint64_t checked_add(uint64_t a, uint64_t b, uint64_t at, const char* what) {
  uint64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) fail_at(at, std::string(what) + " overflows 64 bits");
  return sum;
}

uint64_t checked_mul(uint64_t a, uint64_t b, uint64_t at, const char* what) {
  uint64_t product;
  if (__builtin_mul_overflow(a, b, &product)) fail_at(at, std::string(what) + " overflows 64 bits");
  return product;
}

void Bytes::fail_here(uint64_t offset, const std::string& problem) const {
  // base_ + offset cannot overflow for offsets inside a file; saturate for ones that lie.
  uint64_t absolute = offset > UINT64_MAX - base_ ? UINT64_MAX : base_ + offset;
  fail_at(absolute, problem);
}

void Bytes::require(uint64_t offset, uint64_t length, const char* what) const {
  if (!fits(offset, length, size_)) {
    fail_here(offset, std::string(what) + " (" + std::to_string(length) + " bytes) runs past the end of " +
                          "its container (" + std::to_string(size_) + " bytes from " + hex(base_) + ")");
  }
}

Bytes Bytes::sub(uint64_t offset, uint64_t length, const char* what) const {
  require(offset, length, what);
  return Bytes(data_ + offset, length, base_ + offset);
}

std::string_view Bytes::cstr(uint64_t offset, const char* what) const {
  require(offset, 1, what);
  const void* nul = std::memchr(data_ + offset, 0, size_ - offset);
  if (!nul) fail_here(offset, std::string(what) + " is not NUL-terminated");
  auto length = static_cast<const uint8_t*>(nul) - (data_ + offset);
  return {reinterpret_cast<const char*>(data_ + offset), static_cast<size_t>(length)};
}

std::string Bytes::fixed_string(uint64_t offset, uint64_t length, const char* what) const {
  require(offset, length, what);
  const char* text = reinterpret_cast<const char*>(data_ + offset);
  return std::string(text, strnlen(text, length));
}

uint8_t Cursor::u8(const char* what) {
  uint8_t value = bytes_.u8(pos_, what);
  pos_ += 1;
  return value;
}

Leb Cursor::uleb(const char* what) {
  uint64_t start = pos_;
  uint64_t value = 0;
  for (unsigned shift = 0;; shift += 7) {
    if (pos_ >= bytes_.size()) bytes_.fail_here(start, std::string(what) + ": ULEB128 runs past the end of its stream");
    uint8_t byte = bytes_.u8(pos_++, what);
    uint64_t bits = byte & 0x7f;
    // Padding bytes (0x80 ... 0x00) beyond 64 bits are allowed as long as they carry no bits.
    if (shift >= 64 ? bits != 0 : ((bits << shift) >> shift) != bits) {
      bytes_.fail_here(start, std::string(what) + ": ULEB128 value does not fit in 64 bits");
    }
    if (shift < 64) value |= bits << shift;
    if (!(byte & 0x80)) break;
    if (pos_ - start > 16) bytes_.fail_here(start, std::string(what) + ": ULEB128 longer than 16 bytes");
  }
  return {value, pos_ - start};
}

int64_t Cursor::sleb(const char* what) {
  uint64_t start = pos_;
  uint64_t value = 0;
  unsigned shift = 0;
  uint8_t byte;
  do {
    if (pos_ >= bytes_.size()) bytes_.fail_here(start, std::string(what) + ": SLEB128 runs past the end of its stream");
    if (pos_ - start >= 10) bytes_.fail_here(start, std::string(what) + ": SLEB128 longer than 10 bytes");
    byte = bytes_.u8(pos_++, what);
    if (shift < 64) value |= uint64_t(byte & 0x7f) << shift;
    shift += 7;
  } while (byte & 0x80);
  if (shift < 64 && (byte & 0x40)) value |= ~uint64_t(0) << shift;
  return static_cast<int64_t>(value);
}

std::string_view Cursor::cstr(const char* what) {
  std::string_view text = bytes_.cstr(pos_, what);
  pos_ += text.size() + 1;
  return text;
}

void Cursor::skip(uint64_t count, const char* what) {
  bytes_.require(pos_, count, what);
  pos_ += count;
}

std::vector<uint8_t> padded_uleb(uint64_t value, uint64_t length) {
  std::vector<uint8_t> out;
  for (uint64_t i = 0; i < length; ++i) {
    uint8_t byte = value & 0x7f;
    value >>= 7;
    if (i + 1 < length) byte |= 0x80;
    out.push_back(byte);
  }
  if (value != 0 || length == 0) fail("value does not fit in a " + std::to_string(length) + "-byte ULEB128");
  return out;
}

std::vector<uint8_t> minimal_uleb(uint64_t value) {
  std::vector<uint8_t> out;
  do {
    uint8_t byte = value & 0x7f;
    value >>= 7;
    out.push_back(value ? byte | 0x80 : byte);
  } while (value);
  return out;
}

void put_bytes(MutableBytes out, uint64_t offset, const uint8_t* data, uint64_t length) {
  if (!fits(offset, length, out.size())) fail_as(ErrorKind::Internal, "internal error: write past the end of the output", offset);
  if (length) std::memcpy(out.data() + offset, data, length);
}

void put_u8(MutableBytes out, uint64_t offset, uint8_t value) { put_bytes(out, offset, &value, 1); }
void put_u16(MutableBytes out, uint64_t offset, uint16_t value) { put_bytes(out, offset, reinterpret_cast<uint8_t*>(&value), 2); }
void put_u32(MutableBytes out, uint64_t offset, uint32_t value) { put_bytes(out, offset, reinterpret_cast<uint8_t*>(&value), 4); }
void put_u64(MutableBytes out, uint64_t offset, uint64_t value) { put_bytes(out, offset, reinterpret_cast<uint8_t*>(&value), 8); }
void put_be32(MutableBytes out, uint64_t offset, uint32_t value) { put_u32(out, offset, __builtin_bswap32(value)); }
void put_be64(MutableBytes out, uint64_t offset, uint64_t value) { put_u64(out, offset, __builtin_bswap64(value)); }

std::optional<uint64_t> first_difference(const uint8_t* a, const uint8_t* b, uint64_t start, uint64_t end) {
  constexpr uint64_t kChunk = uint64_t(8) << 20;
  for (uint64_t at = start, length = 0; at < end; at += length) {
    length = std::min({kChunk, mapping_uniform_extent(a + at, end - at), mapping_uniform_extent(b + at, end - at)});
    if (same_file_bytes(a + at, b + at, length)) continue;
    if (std::memcmp(a + at, b + at, length) != 0) {
      while (a[at] == b[at]) ++at;
      return at;
    }
    release_mapped_pages(a + at, length);  // a mapped input's pages go behind the pass
    release_mapped_pages(b + at, length);
  }
  return std::nullopt;
}

}  // namespace machofix
