// `fix`'s text: per file what became of it, each edit with the finding it removes,
// each finding it could not remove and why, and the findings that remain.
#include <sstream>

#include "core/jobs/fix.h"
#include "tool/report.h"

namespace machofix::cli {

namespace {

// "blob KEY, member M, arm64": where in the file, when the file holds more than a slice.
std::string where(const std::string& blob, const std::string& arch) {
  std::string text = blob.empty() ? "" : shortened_keys(blob) + ", ";
  return arch.empty() ? text : text + arch;
}

std::string edit_text(const FixEdit& edit) {
  std::string line = std::string(fix_edit_name(edit.kind));
  if (edit.kind == FixEditKind::Change) line += " " + edit.old_value + " -> " + edit.new_value;
  else if (!edit.old_value.empty()) line += " " + edit.old_value;
  return line + " (" + rule_id(edit.removes) + "; " + where(edit.blob, edit.arch) + ")";
}

std::string status_text(const FixOutcome& fix, const FileReport& report) {
  size_t edits = fix.edits.size();
  std::string count = std::to_string(edits) + (edits == 1 ? " edit" : " edits");
  size_t errors = 0;
  for (const Finding& finding : fix.remaining) errors += finding.level == Level::Error && !finding.reported_with;
  switch (fix.status) {
    case FixStatus::NothingToFix: return "nothing to fix" + std::string(report.bytes_written ? " (copied as it is)" : "");
    case FixStatus::Fixed: return "fixed (" + count + ")";
    case FixStatus::WouldFix: return "would fix (" + count + ")";
    case FixStatus::NotWritten:
      return "not written: " + std::to_string(errors) + (errors == 1 ? " finding remains" : " findings remain") +
             (edits ? " after " + count : "");
    case FixStatus::Failed: return "failed";
  }
  return "?";
}

}  // namespace

std::string fix_text(const FileReport& report) {
  if (!report.fix) return "";
  const FixOutcome& fix = *report.fix;
  std::ostringstream out;
  out << report.path << ": " << status_text(fix, report) << "\n";
  const char* verb = fix.status == FixStatus::Fixed ? "" : "would ";
  for (const FixEdit& edit : fix.edits) out << "  " << verb << edit_text(edit) << "\n";
  for (const FixRefusal& refusal : fix.refusals)
    out << "  cannot fix " << rule_id(refusal.rule) << " " << refusal.subject << " (" << where(refusal.blob, refusal.arch)
        << "): " << shortened_keys(refusal.reason) << "\n";
  if (fix.status == FixStatus::NotWritten)
    for (const Finding& finding : fix.remaining)
      if (!finding.reported_with) out << "  " << finding_line(finding, /*with_repair=*/false) << "\n";
  return out.str();
}

}  // namespace machofix::cli
