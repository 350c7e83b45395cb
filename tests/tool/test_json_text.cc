// The JSON report's text (tool/json_text.h): the escaping schema 1 has always had,
// which differs from nlohmann-json's own in three places (bytes that are not UTF-8,
// \b and \f, numbers with a fraction).
#include <doctest/doctest.h>

#include <cstdio>

#include "tool/json_text.h"

using machofix::cli::Json;
using machofix::cli::json_text;

namespace {

// The rule, byte by byte, as docs/json-report.md states it.
std::string expected_escape(unsigned char byte) {
  switch (byte) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
  }
  if (byte >= 0x20 && byte < 0x7f) return std::string(1, static_cast<char>(byte));
  char escaped[8];
  std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
  return escaped;
}

}  // namespace

TEST_CASE("json text: every byte value, alone and between others") {
  std::string all, all_expected;
  for (int value = 0; value < 256; ++value) {
    unsigned char byte = static_cast<unsigned char>(value);
    std::string one(1, static_cast<char>(byte));
    CAPTURE(value);
    CHECK(json_text(Json(one)) == "\"" + expected_escape(byte) + "\"");
    CHECK(json_text(Json("a" + one + "b")) == "\"a" + expected_escape(byte) + "b\"");
    all += one;
    all_expected += expected_escape(byte);
  }
  CHECK(json_text(Json(all)) == "\"" + all_expected + "\"");
}

TEST_CASE("json text: spelled out") {
  CHECK(json_text(Json("/opt/llvm-openmp/lib/libomp.dylib")) == "\"/opt/llvm-openmp/lib/libomp.dylib\"");
  CHECK(json_text(Json("\b\f\x7f")) == "\"\\u0008\\u000c\\u007f\"");  // nlohmann alone: "\b\f" and a raw DEL
  CHECK(json_text(Json("\\b\\f")) == "\"\\\\b\\\\f\"");                // a backslash and a letter stay that
  CHECK(json_text(Json("\xc3\xa9")) == "\"\\u00c3\\u00a9\"");          // UTF-8 é: its two bytes
  CHECK(json_text(Json("\xc3")) == "\"\\u00c3\"");                     // a truncated sequence: nlohmann alone throws
  CHECK(json_text(Json("\xed\xa0\x80\xff")) == "\"\\u00ed\\u00a0\\u0080\\u00ff\"");  // a surrogate, a byte never in UTF-8
  CHECK(json_text(Json(std::string("a\0b", 3))) == "\"a\\u0000b\"");
  CHECK(json_text(Json{{"k\xff", "v"}}) == "{\"k\\u00ff\":\"v\"}");  // keys too
}

TEST_CASE("json text: numbers") {
  CHECK(json_text(Json(0.0)) == "0.000000");
  CHECK(json_text(Json(0.5)) == "0.500000");      // nlohmann alone: 0.5
  CHECK(json_text(Json(1e-5)) == "0.000010");     // nlohmann alone: 1e-05
  CHECK(json_text(Json(4e-7)) == "0.000000");
  CHECK(json_text(Json(6e-7)) == "0.000001");
  CHECK(json_text(Json(1234.5678901)) == "1234.567890");
  CHECK(json_text(Json(1e20)) == "100000000000000000000.000000");
  CHECK(json_text(Json(int64_t{-5})) == "-5");
  CHECK(json_text(Json(uint64_t{18446744073709551615u})) == "18446744073709551615");
  CHECK(json_text(Json("1.5")) == "\"1.5\"");  // a string that looks like a number stays as it is
}

TEST_CASE("json text: structure, compact, keys in the order added") {
  Json document = {{"z", 1}, {"a", {true, false, nullptr}}, {"empty", Json::array()}, {"none", Json::object()},
                   {"seconds", 0.25}};
  CHECK(json_text(document) == "{\"z\":1,\"a\":[true,false,null],\"empty\":[],\"none\":{},\"seconds\":0.250000}");
}
