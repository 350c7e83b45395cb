// The hand-written writer tool/json.cc as it was, for test_json_writers.cc (deleted
// with it).
#include "tests/tool/old_writer.h"

#include "tool/json.h"

namespace old_writer {

std::string string_text(const std::string& text) { return machofix::cli::json_escape(text); }

std::string double_text(double number) { return machofix::cli::Json().value(number).text(); }

std::string int_text(int64_t number) { return machofix::cli::Json().value(number).text(); }

std::string uint_text(uint64_t number) { return machofix::cli::Json().value(number).text(); }

std::string document(const std::string& odd_key, const std::vector<std::string>& strings, double seconds) {
  machofix::cli::Json json;
  json.begin_object();
  json.field("schema", "machofix-report");
  json.field("schema_version", 1);
  json.key(odd_key).strings(strings);
  json.key("empty").begin_array().end_array();
  json.key("object").begin_object().field("yes", true).field("no", false).key("none").null().end_object();
  json.key("nested").begin_array();
  json.begin_object().field("seconds", seconds).field("offset", uint64_t{0xffffffffffffffff}).end_object();
  json.begin_object().end_object();
  json.begin_array().value(int64_t{-5}).value("x").end_array();
  json.end_array();
  json.end_object();
  return json.text();
}

}  // namespace old_writer
