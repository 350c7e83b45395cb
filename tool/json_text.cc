#include "tool/json_text.h"

#include <cstdio>
#include <cstdlib>

namespace machofix::cli {

namespace {

// The bytes read as Latin-1: byte b becomes code point U+00bb (in UTF-8), which
// nlohmann's ensure_ascii writes as \u00bb; any byte sequence is valid this way.
std::string latin1_to_utf8(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (unsigned char byte : bytes) {
    if (byte < 0x80) {
      out += static_cast<char>(byte);
    } else {
      out += static_cast<char>(0xc0 | (byte >> 6));
      out += static_cast<char>(0x80 | (byte & 0x3f));
    }
  }
  return out;
}

Json as_code_points(const Json& value) {
  if (value.is_string()) return latin1_to_utf8(value.get_ref<const std::string&>());
  if (value.is_array()) {
    Json array = Json::array();
    for (const Json& item : value) array.push_back(as_code_points(item));
    return array;
  }
  if (value.is_object()) {
    Json object = Json::object();
    for (const auto& [key, item] : value.items()) object[latin1_to_utf8(key)] = as_code_points(item);
    return object;
  }
  return value;
}

// nlohmann writes the shortest text that reads back as the same double ("0.5",
// "1e-05"); the report has six decimals. Reading it back gives the exact double.
std::string six_decimals(const std::string& number) {
  char text[64];
  std::snprintf(text, sizeof text, "%.6f", std::strtod(number.c_str(), nullptr));
  return text;
}

bool is_number_char(char c) { return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'; }

// From nlohmann's compact ASCII dump to the report's text: inside strings \b and \f
// become \u0008 and \u000c (nlohmann's short forms); outside them, numbers with a
// fraction or an exponent get six decimals.
std::string report_spelling(const std::string& dumped) {
  std::string out;
  out.reserve(dumped.size());
  bool in_string = false;
  for (size_t i = 0; i < dumped.size(); ++i) {
    char c = dumped[i];
    if (in_string) {
      if (c == '\\') {
        char escaped = dumped[++i];
        out += escaped == 'b' ? "\\u0008" : escaped == 'f' ? "\\u000c" : std::string{'\\', escaped};
        continue;
      }
      in_string = c != '"';
      out += c;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t end = i;
      while (end < dumped.size() && is_number_char(dumped[end])) ++end;
      std::string number = dumped.substr(i, end - i);
      out += number.find_first_of(".eE") == std::string::npos ? number : six_decimals(number);
      i = end - 1;
    } else {
      in_string = c == '"';
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string json_text(const Json& document) {
  return report_spelling(as_code_points(document).dump(-1, ' ', /*ensure_ascii=*/true));
}

}  // namespace machofix::cli
