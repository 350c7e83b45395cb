#include "tool/report.h"

#include <cstdio>
#include <sstream>

namespace machofix::cli {

namespace {

constexpr size_t kSymbolSample = 4;  // names shown per dylib in text
constexpr size_t kJsonSymbolSample = 16;

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

std::string symbol_summary(const DylibReport& dylib) {
  if (dylib.symbols.empty()) return "supplies nothing";
  std::vector<std::string> sample(dylib.symbols.begin(),
                                  dylib.symbols.begin() + std::min(kSymbolSample, dylib.symbols.size()));
  std::string more = dylib.symbols.size() > sample.size() ? ", ..." : "";
  return std::to_string(dylib.symbols.size()) + (dylib.symbols.size() == 1 ? " symbol: " : " symbols: ") +
         join(sample, ", ") + more;
}

std::string signature_line(const SignatureReport& signature) {
  if (signature.status == "unsigned") return "unsigned";
  std::ostringstream line;
  line << signature.status;
  if (!signature.style.empty()) line << ", " << signature.style;
  if (!signature.hash_types.empty()) line << ", " << join(signature.hash_types, "+");
  if (signature.page_size) line << ", " << signature.page_size << "-byte pages";
  if (!signature.identifier.empty()) line << ", identifier \"" << signature.identifier << "\"";
  return line.str();
}

void slice_text(std::ostringstream& out, const SliceReport& slice, bool inspect) {
  out << "  " << slice.arch << " " << slice.filetype;
  if (!slice.install_name.empty()) out << " " << slice.install_name;
  out << " [" << join(slice.flags, ", ") << "]\n";
  out << "    signature: " << signature_line(slice.signature) << "\n";
  for (const std::string& problem : slice.signature.problems) out << "      " << problem << "\n";
  for (const DylibReport& dylib : slice.dylibs) {
    char head[48];
    std::snprintf(head, sizeof head, "    %3d %-8s ", dylib.ordinal, dylib.kind.c_str());
    out << head << dylib.install_name << "\n          " << symbol_summary(dylib);
    if (dylib.removed) out << (inspect ? " -> unused: prune removes it" : " -> removed");
    else if (!dylib.reason.empty() && dylib.symbols.empty()) out << " -> " << dylib.reason;
    out << "\n";
  }
  if (slice.flat_lookup_imports)
    out << "    " << slice.flat_lookup_imports << " imports are looked up in the flat namespace at run time (-undefined dynamic_lookup)\n";
  if (!slice.left_unchanged_because.empty()) out << "    left unchanged: " << slice.left_unchanged_because << "\n";
  for (const std::string& warning : slice.warnings) out << "    warning: " << warning << "\n";
  if (slice.changed) out << "    signature after: " << signature_line(slice.signature_after) << "\n";
}

}  // namespace

std::string text_report(const FileReport& report, bool inspect) {
  std::ostringstream out;
  if (report.status == "failed") return "";  // errors are printed by the caller, on stderr
  out << report.path << ": " << file_kind_name(report.kind);
  if (report.macho && report.macho->universal) out << (report.macho->fat64 ? " (fat64)" : "");
  if (!inspect) out << ", " << report.status;
  out << "\n";
  if (report.macho)
    for (const SliceReport& slice : report.macho->slices) slice_text(out, slice, inspect);
  return out.str();
}

namespace {

void json_signature(Json& json, const SignatureReport& signature) {
  json.begin_object();
  json.field("status", signature.status);
  json.field("style", signature.style);
  json.field("identifier", signature.identifier);
  json.key("hash_types").strings(signature.hash_types);
  json.field("page_size", static_cast<uint64_t>(signature.page_size));
  json.key("problems").strings(signature.problems);
  json.end_object();
}

void json_dylib(Json& json, const DylibReport& dylib) {
  json.begin_object();
  json.field("ordinal", dylib.ordinal);
  json.field("install_name", dylib.install_name);
  json.field("kind", dylib.kind);
  json.field("symbol_count", static_cast<uint64_t>(dylib.symbols.size()));
  std::vector<std::string> sample(dylib.symbols.begin(),
                                  dylib.symbols.begin() + std::min(kJsonSymbolSample, dylib.symbols.size()));
  json.key("symbols").strings(sample);
  json.key("sources").strings(dylib.sources);
  json.field("removed", dylib.removed);
  json.field("reason", dylib.reason);
  json.end_object();
}

void json_slice(Json& json, const SliceReport& slice) {
  json.begin_object();
  json.field("arch", slice.arch);
  json.field("filetype", slice.filetype);
  json.field("offset", slice.offset);
  json.field("size", slice.size);
  json.field("install_name", slice.install_name);
  json.key("flags").strings(slice.flags);
  json.key("dylibs").begin_array();
  for (const DylibReport& dylib : slice.dylibs) json_dylib(json, dylib);
  json.end_array();
  json.field("flat_lookup_imports", static_cast<uint64_t>(slice.flat_lookup_imports));
  json.key("warnings").strings(slice.warnings);
  json.field("left_unchanged_because", slice.left_unchanged_because);
  json.key("signature");
  json_signature(json, slice.signature);
  json.field("changed", slice.changed);
  json.key("signature_after");
  if (slice.changed) json_signature(json, slice.signature_after);
  else json.null();
  json.end_object();
}

}  // namespace

void json_file_report(Json& json, const FileReport& report) {
  json.begin_object();
  json.field("path", report.path);
  json.field("kind", file_kind_name(report.kind));
  json.field("status", report.status);
  if (!report.error.empty()) json.field("error", report.error);
  json.field("bytes_written", report.bytes_written);
  json.field("seconds", report.seconds);
  if (report.macho) {
    json.key("macho").begin_object();
    json.field("universal", report.macho->universal);
    json.field("fat64", report.macho->fat64);
    json.key("slices").begin_array();
    for (const SliceReport& slice : report.macho->slices) json_slice(json, slice);
    json.end_array();
    json.end_object();
  }
  json.end_object();
}

std::string json_document(const std::string& command, const std::vector<FileReport>& reports) {
  Json json;
  json.begin_object();
  json.field("schema", "machofix-report");
  json.field("schema_version", kJsonSchemaVersion);
  json.field("command", command);
  json.key("files").begin_array();
  for (const FileReport& report : reports) json_file_report(json, report);
  json.end_array();
  json.end_object();
  return json.text() + "\n";
}

}  // namespace machofix::cli
