#include "core/check.h"

#include <algorithm>

#include "core/prune.h"

namespace machofix {

namespace {

const char* const kSystemPrefixes[] = {"/usr/lib/", "/System/Library/"};

bool allowed(const std::string& install_name, const CheckOptions& options) {
  if (install_name.empty() || install_name[0] != '/') return true;  // @rpath/..., @loader_path/...: relocatable
  for (const char* prefix : kSystemPrefixes)
    if (install_name.rfind(prefix, 0) == 0) return true;
  for (const std::string& prefix : options.allowed_prefixes)
    if (install_name.rfind(prefix, 0) == 0) return true;
  return false;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// How the load command ties the slice to the dylib, as a verb phrase.
std::string dependency_phrase(const DylibReport& dylib) {
  if (dylib.kind == "weak") return "weakly depends on " + dylib.install_name;
  if (dylib.kind == "reexport") return "re-exports " + dylib.install_name;
  if (dylib.kind == "upward") return "has an upward dependency on " + dylib.install_name;
  return "depends on " + dylib.install_name;
}

std::string symbol_list(const std::vector<std::string>& symbols) {
  constexpr size_t kShown = 5;
  std::string list;
  for (size_t i = 0; i < symbols.size() && i < kShown; ++i) list += (i ? ", " : "") + symbols[i];
  if (symbols.size() > kShown) list += ", and " + std::to_string(symbols.size() - kShown) + " more";
  return list;
}

// The forbidden dependency's finding: what removal would do, or why it is not the repair.
std::string forbidden_message(const DylibReport& dylib, const std::string& glob) {
  std::string message = dependency_phrase(dylib) + ", which --forbid '" + glob + "' forbids";
  size_t count = dylib.symbols.size();
  if (count)
    return message + "; it is used (" + std::to_string(count) + (count == 1 ? " symbol: " : " symbols: ") +
           symbol_list(dylib.symbols) + "), so removing it is not the repair: rebuild without it";
  if (dylib.removable) return message + "; it supplies no symbol, and `machofix prune` removes it";
  return message + "; it supplies no symbol, but prune keeps it (" + dylib.reason + ")";
}

void check_macho(const MachOReport& macho, const std::string& file, const std::string& blob,
                 const CheckOptions& options, std::vector<Finding>& findings) {
  for (const SliceReport& slice : macho.slices) {
    for (const DylibReport& dylib : slice.dylibs) {
      auto add = [&](const char* rule, std::string message) {
        findings.push_back({file, blob, slice.arch, dylib.install_name, rule, std::move(message), dylib.symbols});
      };
      if (dylib.removable)
        add("unused-dependency", dependency_phrase(dylib) + ", which supplies no symbol; `machofix prune` removes it");
      if (!allowed(dylib.install_name, options))
        add("absolute-install-name", dependency_phrase(dylib) +
                                         ", an absolute path outside /usr/lib and /System/Library that users' machines will not have");
      auto forbidding = std::find_if(options.forbidden.begin(), options.forbidden.end(),
                                     [&](const std::string& glob) { return install_name_matches(glob, dylib.install_name); });
      if (forbidding != options.forbidden.end()) add("forbidden-dependency", forbidden_message(dylib, *forbidding));
    }
  }
}

}  // namespace

std::vector<Finding> check_findings(const FileReport& report, const CheckOptions& options) {
  std::vector<Finding> findings;
  if (report.macho) check_macho(*report.macho, report.path, "", options, findings);
  if (report.pte)
    for (const BlobReport& blob : report.pte->blobs) check_macho(blob.macho, report.path, join(blob.keys), options, findings);
  for (const FileReport& member : report.members) {
    for (Finding finding : check_findings(member, options)) {
      finding.blob = finding.blob.empty() ? member.path : member.path + ": " + finding.blob;
      finding.file = report.path;
      findings.push_back(std::move(finding));
    }
  }
  return findings;
}

namespace {

// Calls visit(where, macho) for every Mach-O image a report covers.
template <typename Visit>
void each_image(const FileReport& report, const std::string& prefix, Visit&& visit) {
  if (report.macho) visit(prefix, *report.macho);
  if (report.pte)
    for (const BlobReport& blob : report.pte->blobs) visit(prefix + join(blob.keys) + ": ", blob.macho);
  for (const FileReport& member : report.members) each_image(member, prefix + member.path + ": ", visit);
}

}  // namespace

std::vector<std::string> verify_failures(const FileReport& report) {
  std::vector<std::string> failures;
  each_image(report, "", [&](const std::string& where, const MachOReport& macho) {
    for (const std::string& failure : signature_failures(macho)) failures.push_back(where + failure);
    for (const RuleViolation& violation : macho.loader_rules) failures.push_back(where + describe(violation));
    for (const SliceReport& slice : macho.slices)
      for (const RuleViolation& violation : slice.loader_rules) failures.push_back(where + slice.arch + ": " + describe(violation));
  });
  return failures;
}

std::vector<std::string> verify_notes(const FileReport& report) {
  std::vector<std::string> notes;
  each_image(report, "", [&](const std::string& where, const MachOReport& macho) {
    for (const SliceReport& slice : macho.slices)
      for (const std::string& note : slice.signature.notes) notes.push_back(where + slice.arch + ": " + note);
  });
  return notes;
}

}  // namespace machofix
