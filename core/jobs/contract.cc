#include "core/jobs/contract.h"

// toml++ header-only: no library to link or to stage for the macOS cross-build.
#define TOML_HEADER_ONLY 1
#define TOML_ENABLE_FORMATTERS 0
#include <toml++/toml.h>

#include <algorithm>
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
    {"required", &CheckOptions::required},          {"arch", &CheckOptions::archs},
    {"ptd", &CheckOptions::ptd_files},
};

// Keys of one string: the application to load the models in (check --app), where
// the system's libraries are, and the oldest macOS the application supports.
const char* const kSingleKeys[] = {"app", "sysroot", "min_macos", "load_as"};

std::string key_names() {
  std::string names;
  for (const Key& key : kKeys) names += std::string(names.empty() ? "" : ", ") + key.name;
  for (const char* key : kSingleKeys) names += std::string(", ") + key;
  return names + ", warnings_as_errors, [levels], [[exempt]]";
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
  if (key == "arch" && !known_arch(text->get()))
    fail_at_source(path, node.source(), "key 'arch': '" + text->get() + "' is not an architecture (" + kArchNames + ")");
  return text->get();
}

// A path in the contract is relative to the contract's directory, not to wherever
// check runs: the contract travels with the models.
std::string contract_relative(const std::string& contract, const std::string& path) {
  std::filesystem::path value(path);
  if (value.is_absolute()) return path;
  return (std::filesystem::path(contract).parent_path() / value).lexically_normal().string();
}

void read_single_key(const std::string& path, const std::string& key, const toml::node& value, CheckOptions& contract) {
  const auto* text = value.as_string();
  if (!text || text->get().empty()) fail_at_source(path, value.source(), "key '" + key + "' takes a non-empty string");
  if (key == "app") contract.app = contract_relative(path, text->get());
  if (key == "sysroot") contract.sysroot = contract_relative(path, text->get());
  if (key == "load_as") {
    if (text->get() != "file" && text->get() != "blob")
      fail_at_source(path, value.source(), "key 'load_as': '" + text->get() + "' is neither \"file\" nor \"blob\"");
    contract.load_as = text->get() == "blob" ? LoadAs::Blob : LoadAs::File;
  }
  if (key == "min_macos") {
    contract.min_macos = parse_version(text->get());
    if (!contract.min_macos)
      fail_at_source(path, value.source(), "key 'min_macos': '" + text->get() + "' is not a version such as \"13.0\"");
  }
}

void read_key(const std::string& path, const Key& key, const toml::node& value, CheckOptions& contract) {
  std::vector<std::string>& list = contract.*key.list;
  size_t first_new = list.size();
  if (const auto* array = value.as_array()) {
    for (const toml::node& item : *array) list.push_back(entry(path, key.name, item));
  } else if (value.is_string()) {
    list.push_back(entry(path, key.name, value));
  } else {
    fail_at_source(path, value.source(), std::string("key '") + key.name + "' takes a string or an array of strings");
  }
  if (key.list == &CheckOptions::ptd_files)
    for (size_t i = first_new; i < list.size(); ++i) list[i] = contract_relative(path, list[i]);
}

// [levels]: rule id = "error" | "warning" | "note" | "off".
void read_levels(const std::string& path, const toml::node& value, CheckOptions& contract) {
  const auto* table = value.as_table();
  if (!table) fail_at_source(path, value.source(), "key 'levels' takes a table: [levels] RULE = \"LEVEL\"");
  for (const auto& [name, level] : *table) {
    std::optional<Rule> rule = rule_from_id(std::string(name.str()));
    if (!rule) fail_at_source(path, name.source(), "[levels]: '" + std::string(name.str()) + "' is not a rule of check");
    const auto* text = level.as_string();
    std::optional<Level> parsed = text ? level_from_name(text->get()) : std::nullopt;
    if (!parsed)
      fail_at_source(path, level.source(), "[levels] " + std::string(name.str()) + ": not a level (\"error\", \"warning\", "
                                           "\"note\" or \"off\")");
    contract.levels[*rule] = *parsed;
  }
}

// [[exempt]]: rule = RULE, dylib = GLOB; one dependency exempted from one rule.
void read_exemptions(const std::string& path, const toml::node& value, CheckOptions& contract) {
  const auto* array = value.as_array();
  if (!array) fail_at_source(path, value.source(), "key 'exempt' takes tables: [[exempt]] rule = ..., dylib = ...");
  for (const toml::node& item : *array) {
    const auto* table = item.as_table();
    if (!table) fail_at_source(path, item.source(), "[[exempt]]: every entry must be a table with rule and dylib");
    Exemption exemption;
    bool has_rule = false, has_dylib = false;
    for (const auto& [name, field] : *table) {
      const auto* text = field.as_string();
      if (name.str() == "rule") {
        std::optional<Rule> rule = text ? rule_from_id(text->get()) : std::nullopt;
        if (!rule) fail_at_source(path, field.source(), "[[exempt]] rule: not a rule of check");
        exemption.rule = *rule;
        has_rule = true;
      } else if (name.str() == "dylib") {
        exemption.dylib = entry(path, "exempt.dylib", field);
        has_dylib = true;
      } else {
        fail_at_source(path, name.source(), "[[exempt]]: unknown key '" + std::string(name.str()) + "' (rule, dylib)");
      }
    }
    if (!has_rule || !has_dylib) fail_at_source(path, item.source(), "[[exempt]]: needs both rule and dylib");
    contract.exempt.push_back(exemption);
  }
}

}  // namespace

bool known_arch(const std::string& arch) {
  return arch == "arm64" || arch == "arm64e" || arch == "x86_64" || arch == "x86_64h";
}

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
    if (name.str() == "levels") {
      read_levels(path, value, contract);
      continue;
    }
    if (name.str() == "exempt") {
      read_exemptions(path, value, contract);
      continue;
    }
    if (name.str() == "warnings_as_errors") {
      const auto* flag = value.as_boolean();
      if (!flag) fail_at_source(path, value.source(), "key 'warnings_as_errors' takes true or false");
      contract.warnings_as_errors = flag->get();
      continue;
    }
    if (std::find(std::begin(kSingleKeys), std::end(kSingleKeys), name.str()) != std::end(kSingleKeys)) {
      read_single_key(path, std::string(name.str()), value, contract);
      continue;
    }
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
  // The command line names one application, sysroot and minimum for every model.
  if (!extra.app.empty()) all.app = extra.app;
  if (!extra.sysroot.empty()) all.sysroot = extra.sysroot;
  if (extra.min_macos) all.min_macos = extra.min_macos;
  if (extra.load_as) all.load_as = extra.load_as;
  // The command line's levels over the contract's; either may make warnings errors.
  for (const auto& [rule, level] : extra.levels) all.levels[rule] = level;
  all.warnings_as_errors = contract.warnings_as_errors || extra.warnings_as_errors;
  all.exempt.insert(all.exempt.end(), extra.exempt.begin(), extra.exempt.end());
  return all;
}

}  // namespace machofix
