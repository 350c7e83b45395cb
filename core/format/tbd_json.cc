// Version 5 of .tbd, JSON (LLVM's TextStubV5.cpp): a main library and an array of
// inlined ones. JSON keeps no line numbers once parsed, so a wrong value is named by
// its path in the file ("libraries[2]: exported_symbols[0]: text: global").
//
// Unknown keys are ignored, as LLVM ignores them. Where LLVM falls back to the
// library's targets for a section whose targets are malformed, and records every
// symbol section under the library's targets whatever the section says, machofix
// honours a section's own targets and refuses malformed ones: a symbol present for
// one architecture only must not be found for the other.
#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/format/tbd_internal.h"

namespace machofix::tbd {

namespace {

using nlohmann::json;

[[noreturn]] void fail_in(const std::string& where, const std::string& problem) { fail(where + ": " + problem); }

const json* member(const json& object, const char* key) {
  auto found = object.find(key);
  return found == object.end() ? nullptr : &*found;
}

const json& array_member(const json& object, const char* key, const std::string& where) {
  const json* value = member(object, key);
  if (!value) fail_in(where, std::string(key) + " is missing");
  if (!value->is_array()) fail_in(where, std::string(key) + " is not an array");
  return *value;
}

// An array of strings; absent is none.
std::vector<std::string> strings(const json& object, const char* key, const std::string& where) {
  std::vector<std::string> list;
  const json* value = member(object, key);
  if (!value) return list;
  if (!value->is_array()) fail_in(where, std::string(key) + " is not an array of strings");
  for (const json& item : *value) {
    if (!item.is_string()) fail_in(where, std::string(key) + " is not an array of strings");
    list.push_back(item.get<std::string>());
  }
  return list;
}

const json& object_at(const json& array, size_t index, const std::string& where) {
  if (!array[index].is_object()) fail_in(where, "not an object");
  return array[index];
}

std::vector<std::string> targets_in(const std::vector<std::string>& texts, const std::string& where) {
  std::vector<std::string> targets;
  for (const std::string& text : texts) {
    std::optional<std::string> target = normal_target(text);
    if (!target) fail_in(where, "'" + text + "' is not a target (ARCH-PLATFORM, as arm64-macos)");
    targets.push_back(*target);
  }
  return targets;
}

// A section's own targets, or the library's when it names none.
std::vector<std::string> section_targets(const json& section, const std::string& where, const std::vector<std::string>& library) {
  if (!member(section, "targets")) return library;
  return targets_in(strings(section, "targets", where), where + ": targets");
}

// The first entry's string `field` of an array of objects such as
// "install_names": [{"name": ...}] (LLVM reads the first only).
const json* first_field(const json& library, const char* key, const char* field, const std::string& where) {
  const json* entries = member(library, key);
  if (!entries) return nullptr;
  if (!entries->is_array()) fail_in(where, std::string(key) + " is not an array");
  if (entries->empty()) return nullptr;
  const json& first = object_at(*entries, 0, where + ": " + key + "[0]");
  const json* value = member(first, field);
  if (value && !value->is_string()) fail_in(where + ": " + key + "[0]", std::string(field) + " is not a string");
  return value;
}

uint32_t version_in(const json& library, const char* key, const std::string& where) {
  const json* value = first_field(library, key, "version", where);
  if (!value) return 0x10000;
  std::string text = value->get<std::string>();
  std::optional<uint32_t> packed = packed_version(text, 5);
  if (!packed) fail_in(where + ": " + key, "'" + text + "' is not a version X[.Y[.Z]] (X <= 65535, Y and Z <= 255)");
  return *packed;
}

// "text" and "data" of an exported_symbols or reexported_symbols entry.
void read_segment(const json& segment, const std::string& where, TbdSection& out) {
  if (!segment.is_object()) fail_in(where, "not an object");
  for (auto [key, list] : {std::pair{"global", &out.symbols}, {"weak", &out.weak_symbols}, {"thread_local", &out.thread_local_symbols},
                           {"objc_class", &out.objc_classes}, {"objc_eh_type", &out.objc_eh_types}, {"objc_ivar", &out.objc_ivars}}) {
    std::vector<std::string> names = strings(segment, key, where);
    list->insert(list->end(), names.begin(), names.end());
  }
}

void read_symbol_sections(const json& library, const char* key, bool reexported, const std::string& where,
                          TbdLibrary& out) {
  const json* sections = member(library, key);
  if (!sections) return;
  if (!sections->is_array()) fail_in(where, std::string(key) + " is not an array");
  for (size_t i = 0; i < sections->size(); ++i) {
    std::string at = where + ": " + key + "[" + std::to_string(i) + "]";
    const json& section = object_at(*sections, i, at);
    TbdSection symbols;
    symbols.reexported = reexported;
    symbols.targets = section_targets(section, at, out.targets);
    const json* text = member(section, "text");
    const json* data = member(section, "data");
    if (!text && !data) fail_in(at, "neither text nor data");
    if (text) read_segment(*text, at + ": text", symbols);
    if (data) read_segment(*data, at + ": data", symbols);
    out.sections.push_back(std::move(symbols));
  }
}

TbdLibrary read_library(const json& library, const std::string& where) {
  if (!library.is_object()) fail_in(where, "not an object");
  TbdLibrary out;
  const json& target_info = array_member(library, "target_info", where);
  for (size_t i = 0; i < target_info.size(); ++i) {
    std::string at = where + ": target_info[" + std::to_string(i) + "]";
    const json* target = member(object_at(target_info, i, at), "target");
    if (!target || !target->is_string()) fail_in(at, "target is not a string");
    out.targets.push_back(targets_in({target->get<std::string>()}, at).front());
  }
  array_member(library, "install_names", where);
  const json* name = first_field(library, "install_names", "name", where);
  if (!name) fail_in(where, "install_names has no name");
  out.install_name = name->get<std::string>();
  out.current_version = version_in(library, "current_versions", where);
  out.compatibility_version = version_in(library, "compatibility_versions", where);

  if (const json* reexported = member(library, "reexported_libraries")) {
    if (!reexported->is_array()) fail_in(where, "reexported_libraries is not an array");
    for (size_t i = 0; i < reexported->size(); ++i) {
      std::string at = where + ": reexported_libraries[" + std::to_string(i) + "]";
      const json& entry = object_at(*reexported, i, at);
      TbdSection libraries;
      libraries.targets = section_targets(entry, at, out.targets);
      libraries.reexported_libraries = strings(entry, "names", at);
      out.sections.push_back(std::move(libraries));
    }
  }
  read_symbol_sections(library, "exported_symbols", false, where, out);
  read_symbol_sections(library, "reexported_symbols", true, where, out);
  return out;
}

}  // namespace

TbdFile parse_json(std::string_view text) {
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception& error) {
    // Not parse_error alone: a number too large for a double (1e999) is out_of_range
    // 406, which escaped as no machofix::Error does (found writing fuzz_tbd).
    // "[json.exception.parse_error.101] parse error at line 3, column 5: ..." -> "line 3, column 5: ..."
    std::string message = error.what();
    size_t at = message.find(" at line ");
    fail(at == std::string::npos ? message : message.substr(at + 4));
  }
  try {
    if (!root.is_object()) fail("not a JSON object");
    const json* version = member(root, "tapi_tbd_version");
    if (!version || !version->is_number_integer() || version->get<int64_t>() != 5)
      fail("tapi_tbd_version is not 5, the one JSON version");
    const json* main = member(root, "main_library");
    if (!main) fail("main_library is missing");
    TbdFile file;
    file.libraries.push_back(read_library(*main, "main_library"));
    if (const json* libraries = member(root, "libraries")) {
      if (!libraries->is_array()) fail("libraries is not an array");
      for (size_t i = 0; i < libraries->size(); ++i)
        file.libraries.push_back(read_library((*libraries)[i], "libraries[" + std::to_string(i) + "]"));
    }
    return file;
  } catch (const json::exception& error) {  // a value used as what it is not: checked above, so a bug
    fail(std::string("unreadable JSON: ") + error.what());
  }
}

}  // namespace machofix::tbd
