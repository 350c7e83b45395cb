// plan_fix (core/jobs/fix.h): which edit removes each finding, or why none may.
#include <fnmatch.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "core/app/dyld.h"
#include "core/jobs/fix.h"

namespace machofix {

namespace {

// The libraries every Mac since macOS 11 (the release's minimum) has in /usr/lib, in
// its shared cache: a dependency named by their leaf some other way (@rpath/libc++.1.dylib)
// is renamed to the system's install name. docs/commands/fix.md lists them.
constexpr const char* kSystemLibraries[] = {
    "libSystem.B.dylib", "libc++.1.dylib",   "libc++abi.dylib",   "libobjc.A.dylib",   "libz.1.dylib",
    "libbz2.1.0.dylib",  "libiconv.2.dylib", "libcharset.1.dylib", "libsqlite3.dylib", "libxml2.2.dylib",
    "libxslt.1.dylib",   "libexslt.0.dylib", "libcurl.4.dylib",   "libresolv.9.dylib", "libedit.3.dylib",
    "libncurses.5.4.dylib", "libpam.2.dylib", "libffi.dylib",     "libcompression.dylib", "libexpat.1.dylib",
    "libpcap.A.dylib",   "libarchive.2.dylib",
};

std::string leaf_of(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

bool in_system_list(const std::string& leaf) {
  return std::any_of(std::begin(kSystemLibraries), std::end(kSystemLibraries), [&](const char* name) { return leaf == name; });
}

// An install name or rpath as a glob that matches only itself (fnmatch's escapes).
std::string literal_glob(const std::string& text) {
  std::string glob;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') glob += '\\';
    glob += c;
  }
  return glob;
}

bool has_glob_characters(const std::string& text) { return text.find_first_of("*?[]\\") != std::string::npos; }

std::string joined(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

std::string normal(const std::string& path) { return std::filesystem::path(path).lexically_normal().string(); }

// A slice of the file where findings point: (member, blob as check names it, arch, offset).
using SliceKey = std::tuple<std::string, std::string, std::string, uint64_t>;

void index_slices(const FileReport& report, const std::string& member, std::map<SliceKey, const SliceReport*>& slices) {
  auto add = [&](const std::string& blob, const MachOReport& macho) {
    for (const SliceReport& slice : macho.slices) slices[{member, blob, slice.arch, slice.offset}] = &slice;
  };
  auto in_member = [&](const std::string& blob) { return member.empty() ? blob : blob.empty() ? member : member + ": " + blob; };
  if (report.macho) add(in_member(""), *report.macho);
  if (report.pte)
    for (const BlobReport& blob : report.pte->blobs) add(in_member(joined(blob.keys)), blob.macho);
  for (const FileReport& inner : report.members) index_slices(inner, inner.path, slices);
}

class FixPlanner {
 public:
  FixPlanner(const FileReport& report, const CheckOptions& options, App* app) : report_(report), options_(options), app_(app) {
    index_slices(report, "", slices_);
  }

  void plan(const Finding& finding) {
    if (finding.reported_with) return;  // its cause's first finding plans the edit
    auto breaks = [&](Rule rule) {
      return finding.rule == rule || std::find(finding.also.begin(), finding.also.end(), rule) != finding.also.end();
    };
    if (breaks(Rule::UnusedDependency) && finding.removable) return remove(finding);
    if (finding.rule == Rule::DuplicateRpath || (finding.rule == Rule::LoaderRule && finding.loader_rule == "rpath-duplicate"))
      return delete_duplicates(finding);
    if (finding.rule == Rule::AbsoluteRpath) return delete_rpath(finding, finding.rpath);
    if (breaks(Rule::LibraryNotLoaded) && app_) return rename_in_app(finding);
    if (!app_ && (breaks(Rule::AbsoluteInstallName) || breaks(Rule::UnprovidedDependency)))
      rename_to_provided(finding, breaks(Rule::AbsoluteInstallName) ? Rule::AbsoluteInstallName : Rule::UnprovidedDependency);
  }

  // An rpath of a build machine, outside the application, in a slice whose
  // dependencies fix renames or removes: nothing on a user's Mac is found through it.
  void delete_unused_rpaths() {
    for (const auto& [key, slice] : slices_) {
      bool edited = std::any_of(slice->dylibs.begin(), slice->dylibs.end(), [&](const DylibReport& dylib) {
        return removed_.count(dylib.install_name) || renamed_.count(dylib.install_name);
      });
      if (!edited) continue;
      for (const RpathReport& rpath : slice->rpaths) {
        if (!machine_rpath(rpath.path, options_) || in_app(rpath.path)) continue;
        Finding where;
        std::tie(where.member, where.blob, where.arch, std::ignore) = key;
        if (where.member.empty()) where.offset = rpath.command_offset;  // in a member: its own bytes
        delete_rpath(where, rpath.path);
      }
    }
  }

  FixPlan take() { return std::move(plan_); }

 private:
  FixEdit& add(FixEditKind kind, const Finding& finding, std::string old_value, std::string new_value = {}) {
    FixEdit& edit = plan_.edits.emplace_back();
    edit.kind = kind;
    edit.old_value = std::move(old_value);
    edit.new_value = std::move(new_value);
    edit.removes = finding.rule;
    edit.blob = finding.blob;
    edit.member = finding.member;
    edit.arch = finding.arch;
    edit.offset = finding.offset;
    return edit;
  }

  // The finding's cause stays: a refusal names the rule fix would have removed.
  void refuse(const Finding& finding, const std::string& subject, std::string reason, Rule rule = Rule::LibraryNotLoaded) {
    plan_.refusals.push_back({rule, subject, finding.blob, finding.member, finding.arch, std::move(reason)});
  }

  void remove(const Finding& finding) {
    add(FixEditKind::RemoveDependency, finding, finding.dylib).removes = Rule::UnusedDependency;
    if (removed_.insert(finding.dylib).second) plan_.repair.prune.only.push_back(literal_glob(finding.dylib));
  }

  void delete_duplicates(const Finding& finding) {
    add(FixEditKind::DeleteDuplicateRpaths, finding, finding.rpath).removes = finding.rule;
    plan_.repair.edit.delete_duplicate_rpaths = true;
  }

  void delete_rpath(const Finding& finding, const std::string& rpath) {
    if (!deleted_rpaths_.insert(rpath).second) return;
    add(FixEditKind::DeleteRpath, finding, rpath).removes = Rule::AbsoluteRpath;
    plan_.repair.edit.delete_rpath.push_back(literal_glob(rpath));
  }

  // `removes`: the rule the rename removes (its cause may be reported by another).
  void rename(const Finding& finding, const std::string& new_name, Rule removes) {
    auto [known, added] = renamed_.try_emplace(finding.dylib, new_name);
    if (!added && known->second != new_name) {
      refuse(finding, finding.dylib, "it would be renamed to " + known->second + " in one image and to " + new_name +
                                         " in another: fix the images one at a time", removes);
      return;
    }
    add(FixEditKind::Change, finding, finding.dylib, new_name).removes = removes;
    if (added) plan_.repair.edit.change.emplace_back(literal_glob(finding.dylib), new_name);
  }

  bool in_app(const std::string& path) const {
    return app_ && (path == app_->root() || path.rfind(app_->root() + "/", 0) == 0);
  }

  const SliceReport* slice_of(const Finding& finding) const {
    auto found = slices_.find({finding.member, finding.blob, finding.arch, finding.slice_offset});
    return found == slices_.end() ? nullptr : found->second;
  }

  // The symbols of the finding the library does not export; nullopt when its exports
  // cannot say (it re-exports others, or was not read): the output's check decides.
  static std::optional<std::vector<std::string>> unexported(const Finding& finding, const LibraryImage* library) {
    if (!library || !library->exports_known) return std::nullopt;
    for (const Dylib& dependency : library->dependencies)
      if (dependency.kind == DylibKind::Reexport) return std::nullopt;
    std::vector<std::string> missing;
    for (const std::string& symbol : finding.symbols)
      if (!library->exports.find(symbol)) missing.push_back(symbol);
    return missing;
  }

  bool binds_all(const Finding& finding, const LibraryImage* library, const std::string& where) {
    std::optional<std::vector<std::string>> missing = unexported(finding, library);
    if (!missing || missing->empty()) return true;
    refuse(finding, finding.dylib, where + " does not export " + joined(*missing) +
                                       ", which the model imports from it: ship a library that does, or relink the model");
    return false;
  }

  void rename_in_app(const Finding& finding) {
    if (finding.at_launch || !finding.needed_by.empty()) {
      refuse(finding, finding.dylib, "a library of the application (" + (finding.needed_by.empty() ? "its executable" : finding.needed_by) +
                                         ") needs it: fix edits models, not the application");
      return;
    }
    std::string leaf = leaf_of(finding.dylib);
    if (in_system_list(leaf) || sysroot_has(leaf)) return rename_to_system(finding, leaf);
    rename_to_app_file(finding, leaf);
  }

  bool sysroot_has(const std::string& leaf) const {
    return !options_.sysroot.empty() && !sysroot_library(options_.sysroot, "/usr/lib/" + leaf).empty();
  }

  void rename_to_system(const Finding& finding, const std::string& leaf) {
    std::string install_name = "/usr/lib/" + leaf;
    if (finding.dylib == install_name) {
      refuse(finding, finding.dylib, "it is the system's own name: the sysroot does not have it");
      return;
    }
    if (!options_.sysroot.empty()) {
      std::string stub = sysroot_library(options_.sysroot, install_name);
      if (stub.empty()) {
        refuse(finding, finding.dylib, "the sysroot has no " + install_name + " to rename it to");
        return;
      }
      if (!binds_all(finding, app_->open_library(stub, finding.arch).image, stub)) return;
    }
    rename(finding, install_name, Rule::LibraryNotLoaded);
  }

  // The name dyld finds `file` by for this model: @rpath/<leaf> through an rpath of
  // the model (its own first) or of the executable, else @executable_path/...
  std::string name_for(const Finding& finding, const std::string& file, const Process& process) const {
    std::string leaf = leaf_of(file);
    std::string model_directory;
    bool own_path = finding.member.empty() && finding.blob.empty() && options_.load_as.value_or(LoadAs::File) == LoadAs::File;
    if (own_path) model_directory = std::filesystem::absolute(report_.path).parent_path().string();
    auto reaches = [&](const std::string& rpath, const std::string& loader_directory) {
      std::string directory = rpath;
      if (rpath.rfind("@loader_path", 0) == 0) {
        if (loader_directory.empty()) return false;
        directory = loader_directory + rpath.substr(12);
      } else if (rpath.rfind("@executable_path", 0) == 0) {
        directory = process.executable_directory + rpath.substr(16);
      }
      if (directory.empty() || directory[0] != '/') return false;
      std::error_code error;
      std::string found = std::filesystem::weakly_canonical(directory + "/" + leaf, error).string();
      return !error && found == file;
    };
    if (const SliceReport* slice = slice_of(finding))
      for (const RpathReport& rpath : slice->rpaths)
        if (reaches(rpath.path, model_directory)) return "@rpath/" + leaf;
    const ProcessImage& executable = process.images.front();
    if (executable.image)
      for (const std::string& rpath : executable.image->rpaths)
        if (reaches(rpath, process.executable_directory)) return "@rpath/" + leaf;
    return "@executable_path/" + normal(std::filesystem::path(file).lexically_relative(process.executable_directory).string());
  }

  struct Candidate {
    std::string name;  // the new install name
    std::string path;  // the file of the application
    const LibraryImage* image = nullptr;
  };

  std::vector<Candidate> candidates(const Finding& finding, const std::string& leaf, const Process& process) {
    std::vector<Candidate> found;
    // Loaded at launch under that leaf: dyld hands the model that very image.
    for (size_t index = 1; index < process.images.size(); ++index) {
      const ProcessImage& image = process.images[index];
      if (!image.local || !image.image || image.install_name().empty()) continue;
      if (leaf_of(image.path) != leaf && leaf_of(image.install_name()) != leaf) continue;
      if (std::none_of(found.begin(), found.end(), [&](const Candidate& c) { return c.name == image.install_name(); }))
        found.push_back({image.install_name(), image.path, image.image});
    }
    if (!found.empty()) return found;
    for (const std::string& file : app_->files_named(leaf))
      found.push_back({name_for(finding, file, process), file, app_->open_library(file, finding.arch).image});
    return found;
  }

  // Several candidates: the one --provided (or the contract's provided) names.
  std::vector<Candidate> picked(std::vector<Candidate> found) const {
    if (found.size() < 2) return found;
    std::vector<Candidate> named;
    for (const Candidate& candidate : found)
      if (std::any_of(options_.provided.begin(), options_.provided.end(), [&](const std::string& glob) {
            return install_name_matches(glob, candidate.name) || fnmatch(glob.c_str(), candidate.path.c_str(), 0) == 0;
          }))
        named.push_back(candidate);
    return named.size() == 1 ? named : found;
  }

  void rename_to_app_file(const Finding& finding, const std::string& leaf) {
    const Process* process = app_->launched(finding.arch);
    if (!process) {
      refuse(finding, finding.dylib, "the application has no " + finding.arch + " executable to load it in");
      return;
    }
    std::vector<Candidate> found = picked(candidates(finding, leaf, *process));
    if (found.empty()) {
      refuse(finding, finding.dylib, "the application has no file named " + leaf +
                                         ": ship it in the application and run fix again, or relink the model without it");
      return;
    }
    if (found.size() > 1) {
      std::vector<std::string> names;
      for (const Candidate& candidate : found) names.push_back(candidate.path + " (as " + candidate.name + ")");
      refuse(finding, finding.dylib, "several files of the application are " + leaf + ": " + joined(names) +
                                         ": name the one to use with --provided NAME");
      return;
    }
    if (!binds_all(finding, found.front().image, found.front().path)) return;
    rename(finding, found.front().name, Rule::LibraryNotLoaded);
  }

  // Without an application: the name the contract (or --provided) says it ships
  // under, a literal name with the same leaf.
  void rename_to_provided(const Finding& finding, Rule removes) {
    std::string leaf = leaf_of(finding.dylib);
    std::vector<std::string> names;
    for (const std::string& provided : options_.provided)
      if (!has_glob_characters(provided) && leaf_of(provided) == leaf && provided != finding.dylib &&
          (provided[0] == '@' || provided.rfind("/usr/lib/", 0) == 0 || provided.rfind("/System/", 0) == 0))
        names.push_back(provided);
    if (names.empty() && finding.dylib[0] == '@' && in_system_list(leaf)) names.push_back("/usr/lib/" + leaf);
    if (names.size() == 1) return rename(finding, names.front(), removes);
    if (names.size() > 1)
      refuse(finding, finding.dylib, "the provided names " + joined(names) + " share its leaf: give the one to use alone",
             removes);
  }

  const FileReport& report_;
  const CheckOptions& options_;
  App* app_;
  std::map<SliceKey, const SliceReport*> slices_;
  FixPlan plan_;
  std::set<std::string> removed_;
  std::map<std::string, std::string> renamed_;
  std::set<std::string> deleted_rpaths_;
};

}  // namespace

FixPlan plan_fix(const FileReport& inspected, const std::vector<Finding>& findings, const CheckOptions& options, App* app) {
  FixPlanner planner(inspected, options, app);
  // Only what fails the gate is repaired (a file check passes stays as it is), and a
  // cause as a whole: its first finding plans the edit when any of its rules is an error.
  std::set<std::tuple<std::string, std::string, std::string, uint64_t, std::string>> failing_causes;
  for (const Finding& finding : findings)
    if (finding.level == Level::Error && !finding.dylib.empty())
      failing_causes.insert({finding.member, finding.blob, finding.arch, finding.slice_offset, finding.dylib});
  for (const Finding& finding : findings) {
    bool failing = finding.level == Level::Error ||
                   (!finding.dylib.empty() &&
                    failing_causes.count({finding.member, finding.blob, finding.arch, finding.slice_offset, finding.dylib}));
    if (failing) planner.plan(finding);
  }
  planner.delete_unused_rpaths();
  return planner.take();
}

const char* fix_edit_name(FixEditKind kind) {
  switch (kind) {
    case FixEditKind::RemoveDependency: return "remove-dependency";
    case FixEditKind::Change: return "change";
    case FixEditKind::DeleteRpath: return "delete-rpath";
    case FixEditKind::DeleteDuplicateRpaths: return "delete-duplicate-rpaths";
  }
  return "?";
}

const char* fix_status_name(FixStatus status) {
  switch (status) {
    case FixStatus::NothingToFix: return "nothing-to-fix";
    case FixStatus::Fixed: return "fixed";
    case FixStatus::WouldFix: return "would-fix";
    case FixStatus::NotWritten: return "not-written";
    case FixStatus::Failed: return "failed";
  }
  return "?";
}

}  // namespace machofix
