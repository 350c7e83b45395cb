// tool/json.cc (hand-written) and tool/json_text.cc (nlohmann-json) write the same
// bytes: every byte value, invalid UTF-8, numbers, and a document's structure.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

#include "tests/tool/old_writer.h"
#include "tool/json_text.h"

using machofix::cli::Json;
using machofix::cli::json_text;

namespace {

void same_string(const std::string& text) {
  CHECK(json_text(Json(text)) == old_writer::string_text(text));
}

}  // namespace

TEST_CASE("json writers: every byte value, alone and with others") {
  std::string all;
  for (int byte = 0; byte < 256; ++byte) {
    std::string one(1, static_cast<char>(byte));
    CAPTURE(byte);
    CHECK(json_text(Json(one)) == old_writer::string_text(one));
    CHECK(json_text(Json("a" + one + "b")) == old_writer::string_text("a" + one + "b"));
    all += one;
  }
  same_string(all);
  same_string(std::string(all.rbegin(), all.rend()));
}

TEST_CASE("json writers: invalid and valid UTF-8, escapes spelled out in the text") {
  for (const char* text : {"\x80", "\xc3", "\xc3\x28", "\xc0\xaf", "\xed\xa0\x80", "\xf5\x80\x80\x80", "\xff\xfe",
                           "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xe2\x82", "a/b", "\\b", "\\\\f", "\\u0041",
                           "\"", "\"\\\"", "", "/opt/llvm-openmp/lib/libomp.dylib"})
    same_string(text);
  same_string(std::string("nul\0inside", 10));
}

TEST_CASE("json writers: random byte strings") {
  std::mt19937 random(13);
  for (int i = 0; i < 2000; ++i) {
    std::string text(random() % 40, '\0');
    for (char& c : text) c = static_cast<char>(random() % 256);
    same_string(text);
  }
}

TEST_CASE("json writers: numbers") {
  for (double seconds : {0.0, -0.0, 0.5, 1.0, 3.0, 1e-5, 1e-7, 4e-7, 6e-7, 123.456789, 2.5e-3, 1e20, 0.1234565, 0.0000005,
                         1234.5678901, 0.012345678901234, 86400.25})
    CHECK(json_text(Json(seconds)) == old_writer::double_text(seconds));
  for (int64_t number : {int64_t{0}, int64_t{-1}, int64_t{42}, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()})
    CHECK(json_text(Json(number)) == old_writer::int_text(number));
  for (uint64_t number : {uint64_t{0}, uint64_t{1} << 40, std::numeric_limits<uint64_t>::max()})
    CHECK(json_text(Json(number)) == old_writer::uint_text(number));
  std::mt19937_64 random(7);
  for (int i = 0; i < 2000; ++i) {
    double seconds = std::ldexp(static_cast<double>(random() >> 11), -static_cast<int>(random() % 70));
    CHECK(json_text(Json(seconds)) == old_writer::double_text(seconds));
  }
}

TEST_CASE("json writers: a document's structure, key order and odd keys") {
  std::string odd_key = "k\x01\xff\"\\/\b\f";
  std::vector<std::string> strings{"", "\x7f", "\xc3\xa9", "tab\there"};
  Json document = {{"schema", "machofix-report"},
                   {"schema_version", 1},
                   {odd_key, strings},
                   {"empty", Json::array()},
                   {"object", {{"yes", true}, {"no", false}, {"none", nullptr}}},
                   {"nested",
                    {Json{{"seconds", 0.25}, {"offset", uint64_t{0xffffffffffffffff}}}, Json::object(), Json{int64_t{-5}, "x"}}}};
  CHECK(json_text(document) == old_writer::document(odd_key, strings, 0.25));
}
