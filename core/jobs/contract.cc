#include "core/jobs/contract.h"

// toml++ header-only: no library to link or to stage for the macOS cross-build.
#define TOML_HEADER_ONLY 1
#define TOML_ENABLE_FORMATTERS 0
#include <toml++/toml.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/error.h"

namespace machofix {

namespace {

struct Key {
  const char* name;
  std::vector<std::string> CheckOptions::*list;
};

const Key kKeys[] = {
    {"provided", &CheckOptions::provided},          {"allow_prefix", &CheckOptions::allowed_prefixes},
    {"allowed_rpaths", &CheckOptions::allowed_rpaths}, {"forbid", &CheckOptions::forbidden},
    {"required", &CheckOptions::required},
};

std::string key_names() {
  std::string names;
  for (const Key& key : kKeys) names += std::string(names.empty() ? "" : ", ") + key.name;
  return names;
}

[[noreturn]] void fail_at_source(const std::string& path, const toml::source_region& where, const std::string& problem) {
  Error error(problem);
  error.in_file(path).in_part("line " + std::to_string(where.begin.line) + ", column " + std::to_string(where.begin.column));
  throw error;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_system("cannot read the contract file", path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error("cannot read the contract file").in_file(path);
  return text.str();
}

// One entry of a key's list: a non-empty string.
std::string entry(const std::string& path, const std::string& key, const toml::node& node) {
  const auto* text = node.as_string();
  if (!text) fail_at_source(path, node.source(), "key '" + key + "': every entry must be a string");
  if (text->get().empty()) fail_at_source(path, node.source(), "key '" + key + "': an entry is an empty string");
  if (key == "allow_prefix" && text->get()[0] != '/')
    fail_at_source(path, node.source(), "key 'allow_prefix': '" + text->get() + "' is not an absolute path prefix");
  return text->get();
}

void read_key(const std::string& path, const Key& key, const toml::node& value, CheckOptions& contract) {
  std::vector<std::string>& list = contract.*key.list;
  if (const auto* array = value.as_array()) {
    for (const toml::node& item : *array) list.push_back(entry(path, key.name, item));
  } else if (value.is_string()) {
    list.push_back(entry(path, key.name, value));
  } else {
    fail_at_source(path, value.source(), std::string("key '") + key.name + "' takes a string or an array of strings");
  }
}

}  // namespace

CheckOptions read_contract(const std::string& path) {
  std::string text = read_text(path);
  toml::table table;
  try {
    table = toml::parse(text, path);
  } catch (const toml::parse_error& error) {
    fail_at_source(path, error.source(), "not a valid TOML file: " + std::string(error.description()));
  }
  CheckOptions contract;
  contract.declared = true;
  for (const auto& [name, value] : table) {
    const Key* key = nullptr;
    for (const Key& known : kKeys)
      if (name.str() == known.name) key = &known;
    if (!key)
      fail_at_source(path, name.source(), "unknown key '" + std::string(name.str()) + "' (the keys are " + key_names() + ")");
    read_key(path, *key, value, contract);
  }
  return contract;
}

std::optional<std::string> find_contract(const std::string& model_path) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path start = model_path == "-" ? fs::current_path(error) : fs::absolute(model_path, error).parent_path();
  if (error) return std::nullopt;
  for (fs::path directory = start.lexically_normal();; directory = directory.parent_path()) {
    fs::path candidate = directory / kContractFileName;
    if (fs::is_regular_file(candidate, error)) return candidate.string();
    if (directory == directory.parent_path() || directory.empty()) return std::nullopt;
  }
}

CheckOptions combined(const CheckOptions& contract, const CheckOptions& extra) {
  CheckOptions all = contract;
  for (const Key& key : kKeys) {
    const std::vector<std::string>& more = extra.*key.list;
    (all.*key.list).insert((all.*key.list).end(), more.begin(), more.end());
  }
  all.declared = contract.declared || extra.declared;
  return all;
}

}  // namespace machofix
