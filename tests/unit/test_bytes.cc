// The bounds-checked reader: every way of reading past an end is an error that
// names the absolute offset, never undefined behaviour.
#include <doctest/doctest.h>

#include "core/base/bytes.h"
#include "core/format/macho_structs.h"

using namespace machofix;

namespace {

// The error message of running f, or "" if it did not throw.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& error) {
    return error.describe();
  }
  return "";
}

}  // namespace

TEST_CASE("fixed-size reads stay inside the view and report absolute offsets") {
  std::vector<uint8_t> data = {1, 2, 3, 4, 5, 6, 7, 8};
  Bytes bytes(data, 0x1000);
  CHECK(bytes.u32(0) == 0x04030201);
  CHECK(bytes.be32(0) == 0x01020304);
  CHECK(bytes.u64(0) == 0x0807060504030201ull);
  CHECK(error_of([&] { bytes.u32(5); }).find("offset 0x1005") != std::string::npos);
  CHECK(error_of([&] { bytes.u64(1); }) != "");
  CHECK(error_of([&] { bytes.u8(UINT64_MAX); }) != "");
  CHECK(error_of([&] { bytes.sub(4, UINT64_MAX - 2, "range"); }) != "");  // length overflow
}

TEST_CASE("sub-views keep absolute offsets") {
  std::vector<uint8_t> data(32, 0);
  Bytes inner = Bytes(data, 0x100).sub(16, 8, "inner");
  CHECK(inner.base() == 0x110);
  CHECK(error_of([&] { inner.u32(6); }).find("offset 0x116") != std::string::npos);
}

TEST_CASE("C strings must end inside the view") {
  std::vector<uint8_t> data = {'a', 'b', 0, 'c', 'd'};
  Bytes bytes(data);
  CHECK(bytes.cstr(0, "name") == "ab");
  CHECK(bytes.cstr(2, "name") == "");
  CHECK(error_of([&] { bytes.cstr(3, "name"); }).find("not NUL-terminated") != std::string::npos);
  CHECK(error_of([&] { bytes.cstr(5, "name"); }) != "");
}

TEST_CASE("ULEB128: minimal, padded, truncated and overlong") {
  std::vector<uint8_t> data = {0x05, 0x85, 0x00, 0xe5, 0x8e, 0x26, 0x80, 0x80, 0x80, 0x00};
  Bytes bytes(data);
  Cursor cursor(bytes);
  CHECK(cursor.uleb("v").value == 5);
  Leb padded = cursor.uleb("v");
  CHECK(padded.value == 5);
  CHECK(padded.length == 2);
  CHECK(cursor.uleb("v").value == 624485);
  Leb zero = cursor.uleb("v");
  CHECK(zero.value == 0);
  CHECK(zero.length == 4);
  CHECK(cursor.at_end());

  std::vector<uint8_t> truncated = {0x80, 0x80};
  Bytes truncated_bytes(truncated, 0x40);
  Cursor truncated_cursor(truncated_bytes);
  CHECK(error_of([&] { truncated_cursor.uleb("ordinal"); }).find("offset 0x40") != std::string::npos);

  std::vector<uint8_t> too_big(11, 0xff);
  too_big.back() = 0x7f;
  Bytes too_big_bytes(too_big);
  Cursor too_big_cursor(too_big_bytes);
  CHECK(error_of([&] { too_big_cursor.uleb("v"); }).find("64 bits") != std::string::npos);

  std::vector<uint8_t> max = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  Bytes max_bytes(max);
  Cursor max_cursor(max_bytes);
  CHECK(max_cursor.uleb("v").value == UINT64_MAX);
}

TEST_CASE("SLEB128") {
  std::vector<uint8_t> data = {0x7f, 0x80, 0x7f, 0x02};
  Bytes bytes(data);
  Cursor cursor(bytes);
  CHECK(cursor.sleb("v") == -1);
  CHECK(cursor.sleb("v") == -128);
  CHECK(cursor.sleb("v") == 2);
}

TEST_CASE("padded ULEB128 keeps its length and decodes back") {
  for (uint64_t length = 1; length <= 4; ++length) {
    for (uint64_t value : {0ull, 1ull, 15ull, 16ull, 127ull}) {
      std::vector<uint8_t> encoded = padded_uleb(value, length);
      CHECK(encoded.size() == length);
      Bytes bytes(encoded);
      Cursor cursor(bytes);
      Leb decoded = cursor.uleb("v");
      CHECK(decoded.value == value);
      CHECK(decoded.length == length);
    }
  }
  CHECK(padded_uleb(5, 2) == std::vector<uint8_t>{0x85, 0x00});
  CHECK(error_of([] { padded_uleb(128, 1); }) != "");
  CHECK(minimal_uleb(300) == std::vector<uint8_t>{0xac, 0x02});
}

TEST_CASE("checked arithmetic") {
  CHECK(checked_add(1, 2, 0, "x") == 3);
  CHECK(error_of([] { checked_add(UINT64_MAX, 1, 0x10, "end"); }).find("overflows") != std::string::npos);
  CHECK(error_of([] { checked_mul(UINT64_MAX / 2, 3, 0, "count"); }) != "");
  CHECK(fits(0, 0, 0));
  CHECK(!fits(1, UINT64_MAX, 10));
}

TEST_CASE("on-disk structures: the file's byte order, the declared layout, bounds-checked") {
  std::vector<uint8_t> file(64, 0);
  put_u32(file, 16, 7);      // mach_header_64.ncmds
  put_be32(file, 40, 0x1234);  // a fat_arch's offset, big-endian, at 32 + 8
  Bytes bytes(file);
  macho::MachHeader64 header = bytes.get<macho::MachHeader64>(0, "header");
  CHECK(header.ncmds == 7);
  header.sizeofcmds = 0x01020304;
  put(file, 0, header);
  CHECK(bytes.u32(20) == 0x01020304);
  CHECK(file[20] == 0x04);  // little-endian on disk
  macho::FatArch arch = bytes.get<macho::FatArch>(32, "fat_arch");
  CHECK(arch.offset == 0x1234);
  arch.size = 0xa0b0c0d0;
  put(file, 32, arch);
  CHECK(file[44] == 0xa0);  // big-endian on disk
  CHECK(bytes.be32(44) == 0xa0b0c0d0);
  CHECK_THROWS_WITH_AS(bytes.get<macho::SegmentCommand64>(8, "segment"), doctest::Contains("segment"), Error);
  CHECK_THROWS_AS(put(file, 40, header), Error);
}
