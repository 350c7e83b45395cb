// The JSON report (schema 1, docs/json-report.md): one object per typed result,
// keys in the order the schema lists them, text from tool/report_text.cc.
#include <algorithm>

#include "core/format/macho.h"
#include "core/jobs/fix.h"
#include "tool/json_text.h"
#include "tool/report.h"
#include "tool/report_text.h"
#include "tool/rules.h"

namespace machofix::cli {

namespace {

constexpr size_t kJsonSymbolSample = 16;  // names listed per dylib (symbol_count has them all)

// A JSON array of to_json(item) for each item.
template <typename Item, typename ToJson>
Json array_of(const std::vector<Item>& items, ToJson to_json) {
  Json array = Json::array();
  for (const Item& item : items) array.push_back(to_json(item));
  return array;
}

Json optional_offset(const std::optional<uint64_t>& offset) { return offset ? Json(*offset) : Json(nullptr); }

Json signature_json(const SignatureReport& signature) {
  return {{"status", to_text(signature.status)},
          {"style", signature.style},
          {"identifier", signature.identifier},
          {"hash_types", signature.hash_types},
          {"page_size", signature.page_size},
          {"problems", describe(signature.findings.problems)},
          {"first_problem_offset", optional_offset(signature.findings.first_problem_at())},
          {"notes", describe(signature.findings.notes)}};
}

Json loader_rules_json(const std::vector<RuleViolation>& violations) {
  return array_of(violations, [](const RuleViolation& violation) -> Json {
    return {{"rule", violation.rule}, {"offset", violation.offset}, {"message", violation.message}};
  });
}

Json rpath_json(const RpathReport& rpath) { return {{"path", rpath.path}, {"command_offset", rpath.command_offset}}; }

// An LC_BUILD_VERSION or LC_VERSION_MIN_*; its offset from the start of the slice.
Json build_target_json(const BuildTarget& target) {
  return {{"platform", platform_name(target.platform)},
          {"min_os", version_text(target.min_os)},
          {"sdk", target.sdk ? Json(version_text(target.sdk)) : Json(nullptr)},
          {"command_offset", target.command_offset}};
}

Json dylib_json(const DylibReport& dylib) {
  size_t shown = std::min(kJsonSymbolSample, dylib.symbols.size());
  std::vector<std::string> sample(dylib.symbols.begin(), dylib.symbols.begin() + shown);
  return {{"ordinal", dylib.ordinal},
          {"install_name", dylib.install_name},
          {"kind", to_text(dylib.kind)},
          {"symbol_count", dylib.symbols.size()},
          {"symbols", sample},
          {"sources", dylib.sources},
          {"removable", dylib.removable()},
          {"removed", dylib.removed},
          {"reason", dylib.decision ? to_text(*dylib.decision) : ""},
          {"command_offset", dylib.command_offset}};
}

Json edit_json(const EditRecord& edit) {
  return {{"kind", to_text(edit.kind)}, {"old", edit.old_value}, {"new", edit.new_value}, {"status", to_text(edit.status)}};
}

Json slice_json(const SliceReport& slice) {
  return {{"arch", slice.arch},
          {"filetype", slice.filetype},
          {"offset", slice.offset},
          {"size", slice.size},
          {"install_name", slice.install_name},
          {"flags", slice.flags},
          {"dylibs", array_of(slice.dylibs, dylib_json)},
          {"rpaths", array_of(slice.rpaths, rpath_json)},
          {"build_targets", array_of(slice.build_targets, build_target_json)},
          {"flat_lookup_imports", slice.flat_lookup_imports},
          {"warnings", slice.warnings},
          {"left_unchanged_because", to_text(slice.left_as_is)},
          {"signature", signature_json(slice.signature)},
          {"changed", slice.changed},
          {"signature_after", slice.changed ? signature_json(slice.signature_after) : Json(nullptr)},
          {"loader_rules", loader_rules_json(slice.loader_rules)},
          {"edits", array_of(slice.edits, edit_json)}};
}

Json macho_json(const MachOReport& macho) {
  return {{"universal", macho.universal},
          {"fat64", macho.fat64},
          {"changed", macho.changed},
          {"loader_rules", loader_rules_json(macho.loader_rules)},
          {"slices", array_of(macho.slices, slice_json)}};
}

Json renewal_json(const KeyRenewal& renewal) {
  return {{"old_key", renewal.old_key}, {"new_key", renewal.new_key}, {"renewed_in", renewal.renewed_in}};
}

Json blob_json(const BlobReport& blob) {
  Json json = {{"keys", blob.keys},
               {"segment_index", blob.segment_index},
               {"offset", blob.offset},
               {"size", blob.size},
               {"new_size", blob.new_size},
               {"sha256", blob.sha256},
               {"new_sha256", blob.new_sha256},
               {"changed", blob.changed}};
  if (!blob.error.empty()) json["error"] = blob.error;
  json["key_renewals"] = array_of(blob.renewals, renewal_json);
  json["macho"] = macho_json(blob.macho);
  return json;
}

Json delegate_json(const DelegateReport& delegate) {
  Json json = {{"method", delegate.method},
               {"id", delegate.id},
               {"location", delegate.inline_data ? "inline" : "segment"},
               {"index", delegate.index},
               {"size", delegate.payload_size},
               {"keys", delegate.payload_keys},
               {"aoti", nullptr}};
  if (delegate.aoti)
    json["aoti"] = {{"so_key", delegate.aoti->so_key}, {"weights_key", delegate.aoti->weights_key},
                    {"weights_found", delegate.aoti->weights_found}};
  return json;
}

Json named_data_json(const NamedDataReport& entry) {
  return {{"key", entry.key},
          {"segment_index", entry.segment_index},
          {"offset", entry.offset},
          {"size", entry.size},
          {"kind", to_text(entry.kind)},
          {"content_hash_key", entry.content_hash_key}};
}

Json pte_json(const PteReport& pte) {
  return {{"container", to_text(pte.kind)},
          {"file_size", pte.file_size},
          {"output_size", pte.output_size},
          {"methods", pte.methods},
          {"delegates", array_of(pte.delegates, delegate_json)},
          {"named_data", array_of(pte.named_data, named_data_json)},
          {"blobs", array_of(pte.blobs, blob_json)},
          {"warnings", pte.warnings},
          {"changed", pte.changed},
          {"bytes_shared", pte.bytes_shared}};
}

Json fix_json(const FixOutcome& fix);

Json file_json(const FileReport& report) {
  Json json = {{"path", report.path}, {"kind", to_text(report.kind)}, {"status", to_text(report.status)}};
  if (!report.error.empty()) json["error"] = report.error;
  if (report.refused()) json["refused"] = true;
  if (report.error_kind) json["error_kind"] = to_text(*report.error_kind);
  if (report.skipped_filetype) json["skipped_because"] = skipped_because(*report.skipped_filetype);
  json["notes"] = report.notes;
  json["dylibs_removed"] = report.removed_count();
  json["dylibs_removable"] = report.removable_count();
  json["bytes_written"] = report.bytes_written;
  json["seconds"] = report.seconds;
  if (report.macho) json["macho"] = macho_json(*report.macho);
  if (report.pte) json["pte"] = pte_json(*report.pte);
  if (!report.members.empty()) json["members"] = array_of(report.members, file_json);
  if (report.fix) json["fix"] = fix_json(*report.fix);
  return json;
}

Json summary_json(const BatchSummary& summary) {
  return {{"files", summary.seen},
          {"changed", summary.changed},
          {"unchanged", summary.unchanged},
          {"skipped", summary.skipped},
          {"failed", summary.failed},
          {"dylibs_removed", summary.dylibs_removed},
          {"dylibs_removable", summary.dylibs_removable},
          {"bytes_written", summary.bytes_written}};
}

Json tried_json(const std::vector<TriedPath>& tried) {
  Json paths = Json::array();
  for (const TriedPath& path : tried) paths.push_back({{"path", path.path}, {"reason", path.reason}});
  return paths;
}

Json also_ids(const std::vector<Rule>& rules) {
  Json ids = Json::array();
  for (Rule rule : rules) ids.push_back(rule_id(rule));
  return ids;
}

Json finding_json(const Finding& finding) {
  return {{"file", finding.file},
          {"blob", finding.blob},
          {"arch", finding.arch},
          {"dylib", finding.dylib},
          {"rpath", finding.rpath},
          {"rule", rule_id(finding.rule)},
          {"level", level_name(finding.level)},
          {"message", finding_message(finding)},
          {"reason", rule_reason(finding.rule)},
          {"repair", repair_command(finding)},
          {"used", !finding.symbols.empty()},
          {"symbols", finding.symbols},
          {"offset", optional_offset(finding.offset)},
          {"member", finding.member},
          {"member_offset", optional_offset(finding.member_offset)},
          {"symbol", finding.symbol},
          {"expected_in", finding.expected_in},
          {"lazy", finding.lazy},
          {"needed_by", finding.needed_by},
          {"tried", tried_json(finding.tried)},
          {"min_macos", finding.min_macos ? Json(version_text(finding.min_macos)) : Json(nullptr)},
          {"required", finding.required_min_macos ? Json(version_text(finding.required_min_macos)) : Json(nullptr)},
          {"problem", finding.problem},
          {"loader_rule", finding.loader_rule},
          {"method", finding.method},
          {"backend", finding.backend},
          {"weights_key", finding.weights_key},
          {"looked_in", finding.looked_in},
          {"at_launch", finding.at_launch},
          {"also", also_ids(finding.also)},
          {"reported_with", finding.reported_with ? Json(rule_id(*finding.reported_with)) : Json(nullptr)}};
}

Json fix_json(const FixOutcome& fix) {
  Json edits = Json::array(), refusals = Json::array();
  for (const FixEdit& edit : fix.edits)
    edits.push_back({{"edit", fix_edit_name(edit.kind)},
                     {"old", edit.old_value},
                     {"new", edit.new_value},
                     {"removes", rule_id(edit.removes)},
                     {"blob", edit.blob},
                     {"member", edit.member},
                     {"arch", edit.arch}});
  for (const FixRefusal& refusal : fix.refusals)
    refusals.push_back({{"rule", rule_id(refusal.rule)},
                        {"subject", refusal.subject},
                        {"reason", refusal.reason},
                        {"blob", refusal.blob},
                        {"member", refusal.member},
                        {"arch", refusal.arch}});
  return {{"status", fix_status_name(fix.status)},
          {"edits", edits},
          {"refusals", refusals},
          {"remaining", array_of(fix.remaining, finding_json)}};
}

const char* verdict_text(BindVerdict verdict) {
  switch (verdict) {
    case BindVerdict::Bound: return "bound";
    case BindVerdict::Missing: return "missing";
    case BindVerdict::WeakMissing: return "weak-missing";
    case BindVerdict::NotLoaded: return "library-not-loaded";
    case BindVerdict::Unchecked: return "unchecked";
  }
  return "?";
}

Json app_check_json(const AppCheck& check) {
  Json json = {{"file", check.file}, {"blob", check.blob}, {"member", check.member}, {"arch", check.arch},
               {"loaded", check.load.has_value()}};
  Json dependencies = Json::array(), bindings = Json::array();
  if (check.load) {
    for (const DependencyOutcome& dependency : check.load->dependencies)
      dependencies.push_back({{"dylib", dependency.install_name},
                              {"ordinal", dependency.ordinal},
                              {"kind", dylib_kind_name(dependency.kind)},
                              {"resolved", dependency.resolved ? Json(*dependency.resolved) : Json(nullptr)},
                              {"system", dependency.system_assumed},
                              {"tried", tried_json(dependency.tried)}});
    for (const BindingOutcome& binding : check.load->bindings)
      bindings.push_back({{"symbol", binding.symbol},
                          {"ordinal", binding.ordinal},
                          {"dylib", binding.library},
                          {"weak", binding.weak},
                          {"lazy", binding.lazy},
                          {"verdict", verdict_text(binding.verdict)},
                          {"expected_in", binding.expected_in.empty() ? Json(nullptr) : Json(binding.expected_in)},
                          {"found_in", binding.found_in.empty() ? Json(nullptr) : Json(binding.found_in)},
                          {"importer", binding.importer == check.load->model_index
                                           ? Json(nullptr) : Json(check.load->image_paths[binding.importer])}});
  }
  json["dependencies"] = dependencies;
  json["bindings"] = bindings;
  return json;
}

}  // namespace

std::string json_document(const std::string& command, const std::vector<FileReport>& reports, const BatchSummary& summary,
                          const std::vector<Finding>* findings, const std::vector<std::string>* contracts,
                          const std::vector<AppCheck>* app_checks) {
  Json json = {{"schema", "machofix-report"},
               {"schema_version", kJsonSchemaVersion},
               {"machofix_version", MACHOFIX_VERSION},
               {"command", command}};
  json["files"] = array_of(reports, file_json);
  json["summary"] = summary_json(summary);
  if (findings) json["findings"] = array_of(*findings, finding_json);
  if (contracts) json["contracts"] = *contracts;
  if (app_checks) json["app_checks"] = array_of(*app_checks, app_check_json);
  return json_text(json) + "\n";
}

}  // namespace machofix::cli
