// Integers as they lie in a file: a byte array in the file's byte order. A structure
// declared with them has the on-disk layout exactly (no padding, alignment 1) on any
// host, and reading or writing a field converts it; mold's Mach-O tree does the same
// (ul32, ub32). Mach-O is little-endian; fat headers and code signatures big-endian.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace machofix {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "machofix assumes a little-endian host (x86_64, arm64)");

template <typename T, bool kBigEndian>
class OnDisk {
  static_assert(std::is_integral_v<T>);

 public:
  OnDisk() = default;
  OnDisk(T value) { *this = value; }  // NOLINT: converts like the integer it holds

  operator T() const {  // NOLINT
    T value;
    std::memcpy(&value, bytes_, sizeof value);
    return kBigEndian ? swapped(value) : value;
  }
  OnDisk& operator=(T value) {
    if (kBigEndian) value = swapped(value);
    std::memcpy(bytes_, &value, sizeof value);
    return *this;
  }

 private:
  static T swapped(T value) {
    if constexpr (sizeof(T) == 1) return value;
    if constexpr (sizeof(T) == 2) return static_cast<T>(__builtin_bswap16(static_cast<uint16_t>(value)));
    if constexpr (sizeof(T) == 4) return static_cast<T>(__builtin_bswap32(static_cast<uint32_t>(value)));
    if constexpr (sizeof(T) == 8) return static_cast<T>(__builtin_bswap64(static_cast<uint64_t>(value)));
  }

  uint8_t bytes_[sizeof(T)];
};

using ul16 = OnDisk<uint16_t, false>;
using ul32 = OnDisk<uint32_t, false>;
using ul64 = OnDisk<uint64_t, false>;
using il32 = OnDisk<int32_t, false>;
using ub16 = OnDisk<uint16_t, true>;
using ub32 = OnDisk<uint32_t, true>;
using ub64 = OnDisk<uint64_t, true>;

// What may be read from or written to bytes as a whole: declared with the types above.
template <typename T>
constexpr bool kOnDiskStructure = std::is_trivially_copyable_v<T> && alignof(T) == 1;

}  // namespace machofix
