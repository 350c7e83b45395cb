// Bounds-checked access to untrusted bytes.
//
// Every read of input goes through Bytes (random access) or Cursor (a stream such
// as bind opcodes or a trie node). Nothing else in core/ does pointer arithmetic on
// input. A read past the end throws machofix::Error with the absolute file offset
// (Bytes::base() is the file offset of byte 0), naming what was being read.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/endian.h"
#include "core/base/error.h"

namespace machofix {

// a + b, or an error at `at` when it overflows 64 bits.
uint64_t checked_add(uint64_t a, uint64_t b, uint64_t at, const char* what);
uint64_t checked_mul(uint64_t a, uint64_t b, uint64_t at, const char* what);
// True when [offset, offset + length) lies inside [0, size), without overflow.
inline bool fits(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

class Bytes {
 public:
  Bytes() = default;
  Bytes(const uint8_t* data, uint64_t size, uint64_t base = 0) : data_(data), size_(size), base_(base) {}
  explicit Bytes(const std::vector<uint8_t>& v, uint64_t base = 0) : Bytes(v.data(), v.size(), base) {}
  // A view of a temporary would dangle as soon as the statement ends (a parsed MachO
  // keeps its Bytes): keep the vector in a variable.
  explicit Bytes(std::vector<uint8_t>&& v, uint64_t base = 0) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  uint64_t base() const { return base_; }  // absolute offset of byte 0, for messages

  // The range [offset, offset + length); an error naming `what` if it is not inside.
  Bytes sub(uint64_t offset, uint64_t length, const char* what) const;
  void require(uint64_t offset, uint64_t length, const char* what) const;

  uint8_t u8(uint64_t offset, const char* what = "byte") const { return read<uint8_t>(offset, what); }
  uint16_t u16(uint64_t offset, const char* what = "16-bit value") const { return read<uint16_t>(offset, what); }
  uint32_t u32(uint64_t offset, const char* what = "32-bit value") const { return read<uint32_t>(offset, what); }
  uint64_t u64(uint64_t offset, const char* what = "64-bit value") const { return read<uint64_t>(offset, what); }
  uint32_t be32(uint64_t offset, const char* what = "32-bit value") const { return __builtin_bswap32(u32(offset, what)); }
  uint64_t be64(uint64_t offset, const char* what = "64-bit value") const { return __builtin_bswap64(u64(offset, what)); }

  // An on-disk structure (core/base/endian.h, core/format/macho_structs.h) at `offset`, copied.
  template <typename T>
  T get(uint64_t offset, const char* what) const {
    static_assert(kOnDiskStructure<T>, "declare the structure with core/base/endian.h's integers");
    return read<T>(offset, what);
  }

  // A NUL-terminated string starting at offset and ending inside the view.
  std::string_view cstr(uint64_t offset, const char* what) const;
  // A fixed-size char field (segment names): up to the first NUL or `length` bytes.
  std::string fixed_string(uint64_t offset, uint64_t length, const char* what) const;

  [[noreturn]] void fail_here(uint64_t offset, const std::string& problem) const;

 private:
  template <typename T>
  T read(uint64_t offset, const char* what) const {
    require(offset, sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + offset, sizeof(T));  // little-endian host (core/base/endian.h)
    return value;
  }

  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t base_ = 0;
};

// An LEB128 value together with how many bytes encoded it (rewrites keep that length).
struct Leb {
  uint64_t value = 0;
  uint64_t length = 0;
};

// Sequential reading of a stream (opcodes, trie nodes) inside a Bytes view.
class Cursor {
 public:
  Cursor(const Bytes& bytes, uint64_t position = 0) : bytes_(bytes), pos_(position) {}

  bool at_end() const { return pos_ >= bytes_.size(); }
  uint64_t position() const { return pos_; }
  void seek(uint64_t position) { pos_ = position; }
  const Bytes& bytes() const { return bytes_; }

  uint8_t u8(const char* what);
  Leb uleb(const char* what);
  int64_t sleb(const char* what);
  std::string_view cstr(const char* what);
  void skip(uint64_t count, const char* what);

 private:
  const Bytes& bytes_;
  uint64_t pos_;
};

// Writes `value` as ULEB128 in exactly `length` bytes (padded with 0x80 continuation
// bytes), the form dyld accepts, so that a rewritten stream keeps every later offset.
// Fails if the value needs more than `length` bytes.
std::vector<uint8_t> padded_uleb(uint64_t value, uint64_t length);
std::vector<uint8_t> minimal_uleb(uint64_t value);

// The first offset in [start, end) at which `a` and `b` differ, if any. memcmp first:
// equal ranges, the usual case, cost one pass at memory speed. Both must hold `end` bytes.
// Parts that map the same bytes of the same file (an OutputImage's borrowed middle and the
// input it borrows from: core/base/mapped_pages.h) are equal without being read; the
// pages of a mapped input are let go behind the pass.
std::optional<uint64_t> first_difference(const uint8_t* a, const uint8_t* b, uint64_t start, uint64_t end);

// A buffer we own and write (the output being built): a vector, or the image of a
// slice being rewritten (core/base/output_image.h). A view: it does not resize.
class MutableBytes {
 public:
  MutableBytes(uint8_t* data, uint64_t size) : data_(data), size_(size) {}
  MutableBytes(std::vector<uint8_t>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT: a vector is such a buffer
  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  Bytes bytes(uint64_t base) const { return Bytes(data_, size_, base); }

 private:
  uint8_t* data_;
  uint64_t size_;
};

// Bounds-checked writes into a buffer we own (the output being built).
void put_u8(MutableBytes out, uint64_t offset, uint8_t value);
void put_u16(MutableBytes out, uint64_t offset, uint16_t value);
void put_u32(MutableBytes out, uint64_t offset, uint32_t value);
void put_u64(MutableBytes out, uint64_t offset, uint64_t value);
void put_be32(MutableBytes out, uint64_t offset, uint32_t value);
void put_be64(MutableBytes out, uint64_t offset, uint64_t value);
void put_bytes(MutableBytes out, uint64_t offset, const uint8_t* data, uint64_t length);
// An on-disk structure written whole at `offset`.
template <typename T>
void put(MutableBytes out, uint64_t offset, const T& value) {
  static_assert(kOnDiskStructure<T>, "declare the structure with core/base/endian.h's integers");
  put_bytes(out, offset, reinterpret_cast<const uint8_t*>(&value), sizeof value);
}

}  // namespace machofix
