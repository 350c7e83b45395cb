#include "tool/json.h"

#include <cstdio>

namespace machofix::cli {

std::string json_escape(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          // Names in Mach-O files are bytes, not necessarily UTF-8: keep them exact and valid.
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
          out += escaped;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

void Json::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ",";
    first_.back() = false;
  }
}

Json& Json::begin_object() {
  separate();
  out_ += "{";
  first_.push_back(true);
  return *this;
}

Json& Json::end_object() {
  first_.pop_back();
  out_ += "}";
  return *this;
}

Json& Json::begin_array() {
  separate();
  out_ += "[";
  first_.push_back(true);
  return *this;
}

Json& Json::end_array() {
  first_.pop_back();
  out_ += "]";
  return *this;
}

Json& Json::key(const std::string& name) {
  separate();
  out_ += json_escape(name) + ":";
  after_key_ = true;
  return *this;
}

Json& Json::value(const std::string& text) {
  separate();
  out_ += json_escape(text);
  return *this;
}

Json& Json::value(bool flag) {
  separate();
  out_ += flag ? "true" : "false";
  return *this;
}

Json& Json::value(int64_t number) {
  separate();
  out_ += std::to_string(number);
  return *this;
}

Json& Json::value(uint64_t number) {
  separate();
  out_ += std::to_string(number);
  return *this;
}

Json& Json::value(double number) {
  separate();
  char text[32];
  std::snprintf(text, sizeof text, "%.6f", number);
  out_ += text;
  return *this;
}

Json& Json::null() {
  separate();
  out_ += "null";
  return *this;
}

Json& Json::strings(const std::vector<std::string>& texts) {
  begin_array();
  for (const std::string& text : texts) value(text);
  return end_array();
}

}  // namespace machofix::cli
