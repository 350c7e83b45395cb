#include "tool/sarif.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <iterator>

#include "tool/rules.h"

namespace machofix::cli {

namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kSchema = "https://json.schemastore.org/sarif-2.1.0.json";
constexpr const char* kInformationUri = "https://github.com/machofix/machofix";
constexpr const char* kBase = "%SRCROOT%";

// RFC 3986: everything but unreserved characters and '/' percent-encoded.
std::string uri_encoded(const std::string& path) {
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      char escape[4];
      std::snprintf(escape, sizeof escape, "%%%02X", c);
      out += escape;
    }
  }
  return out;
}

std::filesystem::path current_directory() {
  std::error_code error;
  return std::filesystem::current_path(error);
}

// The file relative to the root (against %SRCROOT%) when it lies below it, else as an
// absolute file: URI.
Json artifact_location(const std::string& file, const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path absolute = fs::absolute(file, error).lexically_normal();
  fs::path relative = absolute.lexically_relative(fs::path(root));
  if (!error && !relative.empty() && *relative.begin() != "..")
    return {{"uri", uri_encoded(relative.generic_string())}, {"uriBaseId", kBase}};
  return {{"uri", "file://" + uri_encoded(absolute.generic_string())}};
}

std::string rule_name(Rule rule) {  // "unused-dependency" -> "UnusedDependency"
  std::string name;
  bool upper = true;
  for (const char* c = rule_id(rule); *c; ++c) {
    if (*c == '-') {
      upper = true;
      continue;
    }
    name += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(*c))) : *c;
    upper = false;
  }
  return name;
}

Json rule_descriptor(Rule rule) {
  std::string help = rule_repair_hint(rule);
  if (rule_needs_contract(rule)) help += " (Runs only when a contract declares what the application ships.)";
  // GitHub code scanning requires a full description (its ingestion rule GH2012).
  return {{"id", rule_id(rule)},
          {"name", rule_name(rule)},
          {"shortDescription", {{"text", rule_reason(rule)}}},
          {"fullDescription", {{"text", std::string(rule_reason(rule)) + " Repair: " + help}}},
          {"help", {{"text", help}}},
          {"defaultConfiguration", {{"level", rule == Rule::AbsoluteRpath ? "warning" : rule == Rule::UncheckedSlice ? "note" : "error"}}}};
}

size_t rule_index(Rule rule) {
  for (size_t i = 0; i < std::size(kAllRules); ++i)
    if (kAllRules[i] == rule) return i;
  return 0;
}

Json location(const Finding& finding, const std::string& root) {
  Json physical = {{"artifactLocation", artifact_location(finding.file, root)}};
  if (finding.offset) physical["region"] = {{"byteOffset", *finding.offset}};
  // A slice is a module; a delegate's weights belong to its method; a finding of the
  // whole file (its universal header) has no logical location.
  if (finding.rule == Rule::MissingWeights) {
    Json logical = Json::array({{{"name", finding.method}, {"fullyQualifiedName", finding.method + "/" + finding.backend},
                                 {"kind", "function"}}});
    return {{"physicalLocation", physical}, {"logicalLocations", logical}};
  }
  if (finding.arch.empty()) return {{"physicalLocation", physical}};
  std::string qualified = finding.blob.empty() ? finding.arch : finding.blob + "/" + finding.arch;
  Json logical = Json::array({{{"name", finding.arch}, {"fullyQualifiedName", qualified}, {"kind", "module"}}});
  return {{"physicalLocation", physical}, {"logicalLocations", logical}};
}

Json result(const Finding& finding, const std::string& root) {
  std::string repair = repair_command(finding);
  std::string message = finding_message(finding);
  Json properties = {{"blob", finding.blob},       {"arch", finding.arch},   {"dylib", finding.dylib},
                     {"rpath", finding.rpath},     {"repair", repair},       {"used", !finding.symbols.empty()},
                     {"symbols", finding.symbols}, {"sliceOffset", finding.slice_offset}};
  // In an archive the region would not mean anything (members may be compressed): the
  // offset is given in the member's own bytes.
  if (!finding.member.empty()) {
    properties["member"] = finding.member;
    properties["memberOffset"] = finding.member_offset ? Json(*finding.member_offset) : Json(nullptr);
  }
  // Loaded in the application (--app): what dyld looked for, where, for whom.
  if (!finding.symbol.empty()) properties["symbol"] = finding.symbol;
  if (!finding.expected_in.empty()) properties["expectedIn"] = finding.expected_in;
  if (!finding.needed_by.empty()) properties["neededBy"] = finding.needed_by;
  if (!finding.tried.empty()) {
    Json tried = Json::array();
    for (const TriedPath& path : finding.tried) tried.push_back({{"path", path.path}, {"reason", path.reason}});
    properties["tried"] = tried;
  }
  // One cause, one finding: the rules the same dependency breaks, each still a result
  // of its own rule (filters by rule keep working), tied to the one that reports it.
  if (!finding.also.empty()) {
    Json also = Json::array();
    for (Rule rule : finding.also) also.push_back(rule_id(rule));
    properties["alsoBreaks"] = also;
  }
  if (finding.reported_with) properties["reportedWith"] = rule_id(*finding.reported_with);
  if (finding.rule == Rule::MissingWeights) {
    properties["method"] = finding.method;
    properties["backend"] = finding.backend;
    properties["weightsKey"] = finding.weights_key;
  }
  // A delegate's weights by its method: the key is a content hash, renewed on every export.
  std::string subject = finding.rule == Rule::MissingWeights ? finding.method + "|" + finding.backend
                        : finding.dylib.empty()               ? finding.rpath
                                                               : finding.dylib;
  if (!finding.symbol.empty()) subject += "|" + finding.symbol;
  if (!finding.needed_by.empty()) subject += "|" + finding.needed_by;
  return {{"ruleId", rule_id(finding.rule)},
          {"ruleIndex", rule_index(finding.rule)},
          {"level", finding.level == Level::Error ? "error" : finding.level == Level::Warning ? "warning" : "note"},
          {"message", {{"text", repair.empty() ? message : message + ". Repair: " + repair}}},
          {"locations", Json::array({location(finding, root)})},
          // What stays when the model is exported again: the blob's role, never its
          // content-hash key (renewed with every export).
          {"partialFingerprints",
           {{"machofixFinding/v2", std::string(rule_id(finding.rule)) + "|" + finding.blob_role + "|" + finding.arch + "|" + subject}}},
          {"properties", properties}};
}

// An edit of fix: a result of the rule it removes, passed (fixed) rather than failed.
Json edit_result(const FixedEdit& fixed, const std::string& root) {
  const FixEdit& edit = fixed.edit;
  std::string what = std::string(fix_edit_name(edit.kind)) + " " + edit.old_value + (edit.new_value.empty() ? "" : " -> " + edit.new_value);
  bool made = fixed.status == FixStatus::Fixed;
  std::string text = made ? "fixed by machofix fix: " + what
                     : fixed.status == FixStatus::WouldFix ? "machofix fix would make this edit (dry run): " + what
                                                            : "not written (the repaired file would still fail check): " + what;
  Finding where;
  where.file = fixed.file;
  where.blob = edit.blob;
  where.arch = edit.arch;
  where.rule = edit.removes;
  where.offset = edit.offset;
  Json properties = {{"edit", fix_edit_name(edit.kind)}, {"old", edit.old_value}, {"new", edit.new_value},
                     {"blob", edit.blob},                {"arch", edit.arch},     {"fixStatus", fix_status_name(fixed.status)}};
  if (!edit.member.empty()) properties["member"] = edit.member;
  return {{"ruleId", rule_id(edit.removes)},
          {"ruleIndex", rule_index(edit.removes)},
          {"kind", made || fixed.status == FixStatus::WouldFix ? "pass" : "informational"},
          {"level", "none"},
          {"message", {{"text", text}}},
          {"locations", Json::array({location(where, root)})},
          {"properties", properties}};
}

}  // namespace

std::string sarif_root(const std::string& given) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!given.empty()) return fs::absolute(given, error).lexically_normal().generic_string();
  fs::path here = current_directory();
  for (fs::path directory = here;; directory = directory.parent_path()) {
    if (fs::exists(directory / ".git", error)) return directory.generic_string();
    if (directory == directory.parent_path()) break;
  }
  return here.generic_string();
}

std::string sarif_document(const std::vector<Finding>& findings, const std::vector<std::string>& contracts,
                           const std::vector<InputFailure>& failures, const std::string& root,
                           const std::vector<FixedEdit>& edits) {
  Json rules = Json::array();
  for (Rule rule : kAllRules) rules.push_back(rule_descriptor(rule));
  Json results = Json::array();
  for (const Finding& finding : findings) results.push_back(result(finding, root));
  for (const FixedEdit& edit : edits) results.push_back(edit_result(edit, root));
  // Each input not checked, where code scanning shows it: the run did not succeed.
  Json notifications = Json::array();
  for (const InputFailure& failure : failures) {
    Json notification = {{"level", "error"}, {"message", {{"text", failure.error}}}};
    if (!failure.path.empty())
      notification["locations"] = Json::array({{{"physicalLocation", {{"artifactLocation", artifact_location(failure.path, root)}}}}});
    notifications.push_back(notification);
  }
  Json invocation = {{"executionSuccessful", failures.empty()}};
  if (!notifications.empty()) invocation["toolExecutionNotifications"] = notifications;
  invocation["properties"] = {{"contracts", contracts}};
  std::string base = root.empty() || root.back() != '/' ? root + "/" : root;
  Json run = {
      {"tool", {{"driver", {{"name", "machofix"}, {"version", MACHOFIX_VERSION}, {"semanticVersion", MACHOFIX_VERSION},
                            {"informationUri", kInformationUri}, {"rules", rules}}}}},
      {"originalUriBaseIds", {{kBase, {{"uri", "file://" + uri_encoded(base)}}}}},
      {"invocations", Json::array({invocation})},
      {"results", results}};
  Json document = {{"$schema", kSchema}, {"version", "2.1.0"}, {"runs", Json::array({run})}};
  // Install and symbol names are arbitrary bytes: invalid UTF-8 is replaced, never a throw.
  return document.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace machofix::cli
