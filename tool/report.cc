#include "tool/report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <sstream>

#include "core/format/macho.h"
#include "tool/report_text.h"
#include "tool/rules.h"

namespace machofix::cli {

namespace {

constexpr size_t kSymbolSample = 4;  // names shown per dylib in text

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// Long (mangled) names would bury the report: a few, each cut short.
std::string shortened(const std::string& name) { return name.size() <= 60 ? name : name.substr(0, 57) + "..."; }

std::string symbol_summary(const DylibReport& dylib) {
  if (dylib.symbols.empty()) return "supplies nothing";
  std::vector<std::string> sample;
  for (size_t i = 0; i < std::min(kSymbolSample, dylib.symbols.size()); ++i) sample.push_back(shortened(dylib.symbols[i]));
  std::string more = dylib.symbols.size() > sample.size() ? ", ..." : "";
  return std::to_string(dylib.symbols.size()) + (dylib.symbols.size() == 1 ? " symbol: " : " symbols: ") +
         join(sample, ", ") + more;
}

std::string signature_line(const SignatureReport& signature) {
  if (signature.status == SignatureStatus::Unsigned) return to_text(signature.status);
  std::ostringstream line;
  line << to_text(signature.status);
  if (!signature.style.empty()) line << ", " << signature.style;
  if (!signature.hash_types.empty()) line << ", " << join(signature.hash_types, "+");
  if (signature.page_size) line << ", " << signature.page_size << "-byte pages";
  if (!signature.identifier.empty()) line << ", identifier \"" << signature.identifier << "\"";
  return line.str();
}

// One line per edit: "change OLD -> NEW", "add-rpath P", "delete-rpath P", and how it went.
std::string edit_line(const EditRecord& edit) {
  std::string line = to_text(edit.kind);
  if (edit.new_value.empty() && !edit.old_value.empty()) line += " " + edit.old_value;
  else if (edit.old_value.empty() && !edit.new_value.empty()) line += " " + edit.new_value;
  else if (!edit.old_value.empty()) line += " " + edit.old_value + " -> " + edit.new_value;
  switch (edit.status) {
    case EditStatus::Applied: break;
    case EditStatus::Already: line += " (already so: nothing to do)"; break;
    case EditStatus::NoMatch: line += " (note: matches nothing in this file)"; break;
  }
  return line;
}

// "built for macOS 11.0 and later, SDK 14.0": what decides where the image loads.
std::string build_target_line(const BuildTarget& target) {
  std::string line = "built for " + platform_name(target.platform) + " " + version_text(target.min_os) + " and later";
  return line + (target.sdk ? ", SDK " + version_text(target.sdk) : ", no SDK recorded");
}

void slice_text(std::ostringstream& out, const SliceReport& slice, bool inspect, const std::string& indent) {
  out << indent << slice.arch << " " << slice.filetype;
  if (!slice.install_name.empty()) out << " " << slice.install_name;
  if (!slice.flags.empty()) out << " [" << join(slice.flags, ", ") << "]";
  out << "\n";
  for (const BuildTarget& target : slice.build_targets) out << indent << "  " << build_target_line(target) << "\n";
  out << indent << "  signature: " << signature_line(slice.signature) << "\n";
  for (const SignatureFinding& problem : slice.signature.findings.problems)
    out << indent << "    " << describe(problem) << "\n";
  for (const DylibReport& dylib : slice.dylibs) {
    char head[48];
    std::snprintf(head, sizeof head, "  %3d %-8s ", dylib.ordinal, to_text(dylib.kind));
    out << indent << head << dylib.install_name << "\n" << indent << "        " << symbol_summary(dylib);
    if (dylib.removed) out << " -> removed";
    else if (dylib.removable()) out << (inspect ? " -> unused: prune removes it" : " -> unused: would be removed");
    else if (dylib.decision && dylib.symbols.empty()) out << " -> " << to_text(*dylib.decision);
    out << "\n";
  }
  for (const RpathReport& rpath : slice.rpaths) out << indent << "  rpath " << rpath.path << "\n";
  for (const EditRecord& edit : slice.edits) out << indent << "  edit: " << edit_line(edit) << "\n";
  if (slice.flat_lookup_imports)
    out << indent << "  " << slice.flat_lookup_imports << (slice.flat_lookup_imports == 1 ? " symbol is" : " symbols are")
        << " looked up in the flat namespace at run time (-undefined dynamic_lookup)\n";
  if (slice.left_as_is != LeftAsIs::No) out << indent << "  left unchanged: " << to_text(slice.left_as_is) << "\n";
  for (const std::string& warning : slice.warnings) out << indent << "  warning: " << warning << "\n";
  if (slice.changed) out << indent << "  signature after: " << signature_line(slice.signature_after) << "\n";
  for (const RuleViolation& violation : slice.loader_rules) out << indent << "  breaks " << describe(violation) << "\n";
}

void macho_text(std::ostringstream& out, const MachOReport& macho, bool inspect, const std::string& indent) {
  for (const RuleViolation& violation : macho.loader_rules) out << indent << "breaks " << describe(violation) << "\n";
  for (const SliceReport& slice : macho.slices) slice_text(out, slice, inspect, indent);
}

void pte_text(std::ostringstream& out, const PteReport& pte, bool inspect) {
  out << "  methods: " << join(pte.methods, ", ") << "\n";
  for (const DelegateReport& delegate : pte.delegates) {
    out << "  delegate " << delegate.id << " (method " << delegate.method << "): "
        << (delegate.inline_data ? "inline data " : "segment ") << delegate.index << ", " << delegate.payload_size << " bytes";
    if (delegate.aoti) {
      out << ", loads " << delegate.aoti->so_key << " and " << delegate.aoti->weights_key;
      if (!delegate.aoti->weights_found) out << " (not in this file: the backend goes without)";
    } else if (!delegate.payload_keys.empty()) {
      out << ", names " << join(delegate.payload_keys, " and ");
    }
    out << "\n";
  }
  out << "  named data:\n";
  for (const NamedDataReport& entry : pte.named_data)
    out << "    " << entry.key << ": segment " << entry.segment_index << ", " << entry.size << " bytes, " << to_text(entry.kind) << "\n";
  for (const BlobReport& blob : pte.blobs) {
    out << "  Mach-O in segment " << blob.segment_index << " (" << join(blob.keys, ", ") << "):\n";
    if (!blob.error.empty()) out << "    cannot analyze: " << blob.error << "\n";
    macho_text(out, blob.macho, inspect, "    ");
    for (const KeyRenewal& renewal : blob.renewals)
      out << "    key renewed: " << renewal.old_key << " -> " << renewal.new_key << " (in " << join(renewal.renewed_in, ", ")
          << ")\n";
  }
  for (const std::string& warning : pte.warnings) out << "  warning: " << warning << "\n";
}

}  // namespace

std::string text_report(const FileReport& report, bool inspect) {
  if (report.status == FileStatus::Failed) return "";  // errors are printed on stderr
  std::ostringstream out;
  out << report.path << ": " << to_text(report.kind);
  if (report.macho && report.macho->fat64) out << " (fat64)";
  if (!inspect) out << ", " << to_text(report.status);
  out << "\n";
  for (const std::string& note : report.notes) out << "  note: " << note << "\n";
  if (report.macho) macho_text(out, *report.macho, inspect, "  ");
  if (report.pte) pte_text(out, *report.pte, inspect);
  for (const FileReport& member : report.members) {
    std::string inner = text_report(member, inspect);
    std::istringstream lines(inner);
    for (std::string line; std::getline(lines, line);) out << "  " << line << "\n";
  }
  return out.str();
}

// "--delete-rpath '/b/*' matches nothing" for each edit that was a note in a walk.
static void unmatched_edits(const FileReport& report, std::vector<std::string>& notes) {
  auto from = [&](const MachOReport& macho) {
    for (const SliceReport& slice : macho.slices)
      for (const EditRecord& edit : slice.edits)
        if (edit.status == EditStatus::NoMatch) notes.push_back(slice.arch + ": " + edit_line(edit));
  };
  if (report.macho) from(*report.macho);
  if (report.pte)
    for (const BlobReport& blob : report.pte->blobs) from(blob.macho);
}

std::string short_report(const FileReport& report) {
  if (report.status == FileStatus::Failed) return "";
  std::string line = report.path + ": " + to_text(report.status);
  size_t removed = report.removed_count(), removable = report.removable_count();
  auto dylibs = [](size_t count) { return std::to_string(count) + " dylib" + (count == 1 ? "" : "s"); };
  if (removed) line += ", " + dylibs(removed) + " removed";
  else if (removable && report.status == FileStatus::WouldChange) line += ", " + dylibs(removable) + " removable";
  std::vector<std::string> notes = report.notes;
  unmatched_edits(report, notes);
  for (const std::string& note : notes) line += "; " + note;
  return line + "\n";
}

std::string summary_line(const BatchSummary& summary, bool dry_run) {
  std::ostringstream line;
  line << summary.seen << " files: " << summary.changed << (dry_run ? " would change, " : " changed, ") << summary.unchanged
       << " unchanged, " << summary.skipped << " skipped, " << summary.failed << " failed; "
       << (dry_run ? summary.dylibs_removable : summary.dylibs_removed) << (dry_run ? " dylibs removable; " : " dylibs removed; ")
       << summary.bytes_written << " bytes written";
  return line.str();
}

namespace {

}  // namespace

std::string shortened_keys(const std::string& text) {
  static const std::regex key("\\b([0-9a-f]{6})[0-9a-f]{58}(_[A-Za-z0-9_]*blob)\\b");
  return std::regex_replace(text, key, "$1...$2");
}

std::string finding_line(const Finding& finding, bool with_repair) {
  // A finding of the file or its program (a universal header, a delegate's weights)
  // has no blob or slice to name.
  std::string where = finding.file + (finding.blob.empty() ? "" : ": " + shortened_keys(finding.blob)) +
                      (finding.arch.empty() ? "" : ": " + finding.arch);
  std::string message = shortened_keys(finding_message(finding));
  std::string line = where + ": " + level_name(finding.level) + ": " + message + " [" + rule_id(finding.rule) + "]";
  if (!finding.also.empty()) {  // the other rules of the same cause, whose findings the text does not repeat
    line += " (also:";
    for (size_t index = 0; index < finding.also.size(); ++index) line += (index ? ", " : " ") + std::string(rule_id(finding.also[index]));
    line += ")";
  }
  if (std::string repair = repair_command(finding); with_repair && !repair.empty()) line += "\n  repair: " + repair;
  // GitHub Actions turns this into an annotation on the file, of the finding's level.
  const char* command = finding.level == Level::Error ? "error" : finding.level == Level::Warning ? "warning" : "notice";
  if (const char* actions = std::getenv("GITHUB_ACTIONS"); actions && std::string(actions) == "true")
    line += "\n::" + std::string(command) + " file=" + finding.file + ",title=machofix " + rule_id(finding.rule) + "::" + message;
  return line;
}

std::vector<std::string> app_notes(const std::vector<AppCheck>& app_checks) {
  std::vector<std::string> notes;
  size_t assumed = 0, unchecked_without_sysroot = 0, unchecked_own = 0;
  std::vector<std::string> archs_not_run;
  for (const AppCheck& check : app_checks) {
    if (!check.load) {
      if (std::find(archs_not_run.begin(), archs_not_run.end(), check.arch) == archs_not_run.end()) archs_not_run.push_back(check.arch);
      continue;
    }
    for (const DependencyOutcome& dependency : check.load->dependencies) assumed += dependency.system_assumed;
    for (const BindingOutcome& binding : check.load->bindings)
      if (binding.verdict == BindVerdict::Unchecked) ++(check.sysroot ? unchecked_own : unchecked_without_sysroot);
  }
  auto imports = [](size_t count) { return std::to_string(count) + (count == 1 ? " import" : " imports"); };
  if (assumed || unchecked_without_sysroot)
    notes.push_back("no --sysroot: system libraries are taken as present and their symbols are not checked (" +
                    imports(unchecked_without_sysroot) + " unchecked)");
  if (unchecked_own)
    notes.push_back(imports(unchecked_own) + " not checked: bound to the model itself, whose exports check does not read");
  for (const std::string& arch : archs_not_run)
    notes.push_back("the application has no " + arch + " slice: the " + arch + " slices are not loaded in it");
  return notes;
}

std::string unfollowed_note(size_t count) {
  return std::to_string(count) + (count == 1 ? " dependency" : " dependencies") +
         " named through @rpath/, @loader_path/ or @executable_path/ not followed: nothing says where they are. "
         "To follow them, give the application (--app APP, or the .app itself as a PATH), or declare what it ships "
         "(--provided GLOB, a contract's provided)";
}

std::string check_summary(const std::vector<FileReport>& reports, const std::vector<Finding>& findings) {
  size_t checked = 0, failed = 0;
  for (const FileReport& report : reports) {
    checked += report.examined();
    failed += report.status == FileStatus::Failed;
  }
  // A file that could not be read was not checked: the summary says so beside the
  // error, so that "0 findings" is never read as a pass.
  // Each level counted once a finding is not an error: "3 findings (2 errors, 1 warning)".
  // The text prints a cause once (group_causes): so many findings it counts, and the
  // rules they break beside them when that is more.
  size_t counts[3] = {0, 0, 0};  // errors, warnings, notes
  size_t printed = 0;
  for (const Finding& finding : findings)
    if (!finding.reported_with) ++counts[static_cast<size_t>(finding.level)], ++printed;
  std::string levels;
  const char* words[3][2] = {{" error", " errors"}, {" warning", " warnings"}, {" note", " notes"}};
  if (counts[0] != printed)
    for (size_t level = 0; level < 3; ++level)
      if (counts[level]) levels += (levels.empty() ? " (" : ", ") + std::to_string(counts[level]) + words[level][counts[level] != 1];
  if (findings.size() != printed) levels += (levels.empty() ? " (" : "; ") + std::to_string(findings.size()) + " rule violations";
  if (!levels.empty()) levels += ")";
  return "machofix check: " + std::to_string(checked) + (checked == 1 ? " file" : " files") + " checked, " +
         std::to_string(printed) + (printed == 1 ? " finding" : " findings") + levels +
         (failed ? ", " + std::to_string(failed) + (failed == 1 ? " file" : " files") + " could not be checked" : "");
}

}  // namespace machofix::cli
