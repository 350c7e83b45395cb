#include "core/jobs/check.h"

#include <fnmatch.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "core/rewrite/prune.h"

namespace machofix {

namespace {

const char* const kSystemPrefixes[] = {"/usr/lib/", "/System/Library/"};
const char* const kRelativePrefixes[] = {"@rpath/", "@loader_path/", "@executable_path/"};

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

bool any_matches(const std::vector<std::string>& globs, const std::string& install_name) {
  return std::any_of(globs.begin(), globs.end(),
                     [&](const std::string& glob) { return install_name_matches(glob, install_name); });
}

const std::string* first_match(const std::vector<std::string>& globs, const std::string& install_name) {
  auto found = std::find_if(globs.begin(), globs.end(),
                            [&](const std::string& glob) { return install_name_matches(glob, install_name); });
  return found == globs.end() ? nullptr : &*found;
}

bool under_allowed_prefix(const std::string& path, const CheckOptions& options) {
  for (const char* prefix : kSystemPrefixes)
    if (starts_with(path, prefix)) return true;
  return std::any_of(options.allowed_prefixes.begin(), options.allowed_prefixes.end(),
                     [&](const std::string& prefix) { return starts_with(path, prefix); });
}

// An absolute install name users' machines will have: the system's, an allowed
// prefix's, or one the application says it provides.
bool absolute_name_allowed(const std::string& install_name, const CheckOptions& options) {
  if (install_name.empty() || install_name[0] != '/') return true;  // @rpath/..., @loader_path/...: relocatable
  return under_allowed_prefix(install_name, options) || any_matches(options.provided, install_name);
}

bool relative_name(const std::string& install_name) {
  return std::any_of(std::begin(kRelativePrefixes), std::end(kRelativePrefixes),
                     [&](const char* prefix) { return starts_with(install_name, prefix); });
}

// An rpath that names a directory of the machine that built the file: absolute, or
// relative to the process's current directory (not @loader_path/ or @executable_path/).
bool machine_rpath(const std::string& path, const CheckOptions& options) {
  if (starts_with(path, "@")) return false;
  if (std::any_of(options.allowed_rpaths.begin(), options.allowed_rpaths.end(),
                  [&](const std::string& glob) { return fnmatch(glob.c_str(), path.c_str(), 0) == 0; }))
    return false;
  return !under_allowed_prefix(path, options);
}

struct SliceContext {
  const std::string& file;
  const std::string& blob;
  const SliceReport& slice;
  std::vector<Finding>& findings;

  Finding& add(Rule rule, std::optional<uint64_t> offset) {
    Finding finding;
    finding.file = file;
    finding.blob = blob;
    finding.arch = slice.arch;
    finding.rule = rule;
    finding.slice_offset = slice.offset;
    finding.offset = offset;
    return findings.emplace_back(std::move(finding));
  }

  Finding& add(Rule rule, const DylibReport& dylib) {
    Finding& finding = add(rule, dylib.command_offset);
    finding.dylib = dylib.install_name;
    finding.dylib_kind = dylib.kind;
    finding.symbols = dylib.symbols;
    finding.removable = dylib.removable();
    if (!dylib.removable()) finding.kept_because = dylib.decision;
    return finding;
  }
};

void check_dylib(SliceContext& context, const DylibReport& dylib, const CheckOptions& options) {
  const std::string& name = dylib.install_name;
  bool weak = dylib.kind == DylibKind::Weak;
  if (dylib.removable()) context.add(Rule::UnusedDependency, dylib);
  if (!absolute_name_allowed(name, options)) context.add(Rule::AbsoluteInstallName, dylib);
  if (options.declared && relative_name(name) && !weak && !any_matches(options.provided, name))
    context.add(Rule::UnprovidedDependency, dylib);
  if (const std::string* glob = first_match(options.required, name); glob && weak)
    context.add(Rule::WeakRequiredDependency, dylib).glob = *glob;
  if (const std::string* glob = first_match(options.forbidden, name))
    context.add(Rule::ForbiddenDependency, dylib).glob = *glob;
}

// dyld (macOS 15 on) compares rpaths with a trailing slash ignored: "@loader_path"
// and "@loader_path/" are duplicates.
std::string without_trailing_slash(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

void check_rpaths(SliceContext& context, const CheckOptions& options) {
  std::map<std::string, std::string> first_spelling;  // by the path without a trailing slash
  for (const RpathReport& rpath : context.slice.rpaths) {
    if (machine_rpath(rpath.path, options)) context.add(Rule::AbsoluteRpath, rpath.command_offset).rpath = rpath.path;
    auto [earlier, first] = first_spelling.emplace(without_trailing_slash(rpath.path), rpath.path);
    if (first) continue;
    Finding& finding = context.add(Rule::DuplicateRpath, rpath.command_offset);
    finding.rpath = rpath.path;
    finding.repeats = earlier->second;
  }
}

void check_macho(const MachOReport& macho, const std::string& file, const std::string& blob,
                 const CheckOptions& options, std::vector<Finding>& findings) {
  for (const SliceReport& slice : macho.slices) {
    SliceContext context{file, blob, slice, findings};
    for (const DylibReport& dylib : slice.dylibs) check_dylib(context, dylib, options);
    if (options.declared) check_rpaths(context, options);
  }
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
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
      finding.member = member.path;
      finding.member_offset = finding.offset;  // an offset in the member, not in the archive
      finding.offset.reset();
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
      for (const SignatureFinding& note : slice.signature.findings.notes)
        notes.push_back(where + slice.arch + ": " + describe(note));
  });
  return notes;
}

}  // namespace machofix
