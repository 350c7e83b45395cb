// A small streaming JSON writer: enough for machofix's reports, with proper
// string escaping (install names and symbol names are arbitrary bytes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace machofix::cli {

class Json {
 public:
  Json& begin_object();
  Json& end_object();
  Json& begin_array();
  Json& end_array();
  Json& key(const std::string& name);
  Json& value(const std::string& text);
  Json& value(const char* text) { return value(std::string(text)); }
  Json& value(bool flag);
  Json& value(int64_t number);
  Json& value(uint64_t number);
  Json& value(int number) { return value(static_cast<int64_t>(number)); }
  Json& value(double number);
  Json& null();
  Json& strings(const std::vector<std::string>& texts);

  template <typename T>
  Json& field(const std::string& name, const T& content) {
    key(name);
    return value(content);
  }

  const std::string& text() const { return out_; }

 private:
  void separate();
  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written in it yet
  bool after_key_ = false;
};

std::string json_escape(const std::string& text);

}  // namespace machofix::cli
