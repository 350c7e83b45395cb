#include "core/rewrite/edit.h"

#include <fnmatch.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"
#include "core/base/proof_seam.h"
#include "core/rewrite/prune.h"

namespace machofix {

bool EditOptions::any() const {
  return delete_duplicate_rpaths || !delete_rpath.empty() || !rpath.empty() || !id.empty() || !change.empty() ||
         !add_rpath.empty() || !weak_link.empty();
}

namespace {

std::string quoted(const std::string& text) { return "'" + text + "'"; }

// Applies the edits, in their order, to the list of load commands.
class Planner {
 public:
  Planner(const MachO& image, const EditOptions& options) : image_(image), options_(options), plan_{{}, LoadCommandList(image)} {}

  EditPlan run() {
    if (options_.delete_duplicate_rpaths) delete_duplicate_rpaths();
    for (const std::string& glob : options_.delete_rpath) delete_rpath(glob);
    for (const auto& [old_path, new_path] : options_.rpath) change_rpath(old_path, new_path);
    if (!options_.id.empty()) set_id(options_.id);
    for (const auto& [glob, new_name] : options_.change) change_dylib(glob, new_name);
    for (const std::string& path : options_.add_rpath) add_rpath(path);
    return std::move(plan_);
  }

 private:
  LoadCommandList& commands() { return plan_.commands; }

  void record(EditKind kind, const std::string& old_value, const std::string& new_value, EditStatus status) {
    plan_.records.push_back({kind, old_value, new_value, status});
  }

  // An edit the file gives nothing to work on: an error for a file named on the
  // command line, a note for one found in a walk.
  void unmatched(EditKind kind, const std::string& old_value, const std::string& new_value,
                 const std::string& problem) {
    if (!options_.unmatched_is_note) fail_as(ErrorKind::Inapplicable, problem);
    record(kind, old_value, new_value, EditStatus::NoMatch);
  }

  std::vector<size_t> rpaths_where(const std::function<bool(const std::string&)>& wanted) {
    std::vector<size_t> found;
    for (size_t i = 0; i < commands().size(); ++i)
      if (commands().cmd(i) == macho::LC_RPATH && wanted(command_string(commands().bytes(i), offsetof(macho::RpathCommand, path_offset))))
        found.push_back(i);
    return found;
  }

  bool has_rpath(const std::string& path) {
    return !rpaths_where([&](const std::string& existing) { return existing == path; }).empty();
  }

  void delete_rpath(const std::string& glob) {
    std::vector<size_t> found =
        rpaths_where([&](const std::string& path) { return fnmatch(glob.c_str(), path.c_str(), 0) == 0; });
    if (found.empty())
      return unmatched(EditKind::DeleteRpath, glob, "", "--delete-rpath " + quoted(glob) + ": no LC_RPATH matches");
    for (auto index = found.rbegin(); index != found.rend(); ++index) {
      std::string path = command_string(commands().bytes(*index), offsetof(macho::RpathCommand, path_offset));
      record(EditKind::DeleteRpath, path, "", EditStatus::Applied);
      commands().remove(*index);
    }
    std::reverse(plan_.records.end() - found.size(), plan_.records.end());  // in load-command order
  }

  // A file without a repeated rpath is already as asked: one record says so.
  void delete_duplicate_rpaths() {
    std::vector<std::string> seen;
    std::vector<size_t> repeats = rpaths_where([&](const std::string& path) {
      if (std::find(seen.begin(), seen.end(), path) != seen.end()) return true;
      seen.push_back(path);
      return false;
    });
    if (repeats.empty()) return record(EditKind::DeleteDuplicateRpaths, "", "", EditStatus::Already);
    for (auto index = repeats.rbegin(); index != repeats.rend(); ++index) {
      std::string path = command_string(commands().bytes(*index), offsetof(macho::RpathCommand, path_offset));
      record(EditKind::DeleteDuplicateRpaths, path, "", EditStatus::Applied);
      commands().remove(*index);
    }
    std::reverse(plan_.records.end() - repeats.size(), plan_.records.end());  // in load-command order
  }

  void change_rpath(const std::string& old_path, const std::string& new_path) {
    std::vector<size_t> found = rpaths_where([&](const std::string& path) { return path == old_path; });
    if (found.empty() && has_rpath(new_path)) return record(EditKind::Rpath, old_path, new_path, EditStatus::Already);
    if (found.empty())
      return unmatched(EditKind::Rpath, old_path, new_path, "--rpath " + quoted(old_path) + " " + quoted(new_path) + ": no LC_RPATH is " + quoted(old_path));
    if (old_path == new_path) return record(EditKind::Rpath, old_path, new_path, EditStatus::Already);
    if (has_rpath(new_path))
      return unmatched(EditKind::Rpath, old_path, new_path,
                       "--rpath " + quoted(old_path) + " " + quoted(new_path) + ": would duplicate the LC_RPATH " + quoted(new_path));
    size_t index = found.front();  // as install_name_tool: the first
    commands().replace(index, with_command_string(commands().bytes(index), offsetof(macho::RpathCommand, path_offset), new_path));
    record(EditKind::Rpath, old_path, new_path, EditStatus::Applied);
  }

  void set_id(const std::string& name) {
    std::optional<size_t> index;
    for (size_t i = 0; i < commands().size(); ++i)
      if (commands().cmd(i) == macho::LC_ID_DYLIB) index = i;
    if (image_.filetype != macho::MH_DYLIB || !index)
      return unmatched(EditKind::Id, "", name, "--id " + quoted(name) + ": not a dylib with an LC_ID_DYLIB (the file type is " +
                                           image_.filetype_name() + ")");
    std::string old_name = command_string(commands().bytes(*index), offsetof(macho::DylibCommand, name_offset));
    if (old_name == name) return record(EditKind::Id, old_name, name, EditStatus::Already);
    commands().replace(*index, with_command_string(commands().bytes(*index), offsetof(macho::DylibCommand, name_offset), name));
    record(EditKind::Id, old_name, name, EditStatus::Applied);
  }

  void change_dylib(const std::string& glob, const std::string& new_name) {
    bool matched = false, already = false;
    for (size_t i = 0; i < commands().size(); ++i) {
      if (!macho::names_a_dependency(commands().cmd(i))) continue;
      std::string name = command_string(commands().bytes(i), offsetof(macho::DylibCommand, name_offset));
      already |= name == new_name;
      if (!install_name_matches(glob, name) || name == new_name) continue;
      commands().replace(i, with_command_string(commands().bytes(i), offsetof(macho::DylibCommand, name_offset), new_name));
      record(EditKind::Change, name, new_name, EditStatus::Applied);
      matched = true;
    }
    if (matched) return;
    if (already) return record(EditKind::Change, glob, new_name, EditStatus::Already);
    unmatched(EditKind::Change, glob, new_name,
              "--change " + quoted(glob) + " " + quoted(new_name) + ": no dependent dylib's install name matches " + quoted(glob));
  }

  void add_rpath(const std::string& path) {
    if (has_rpath(path)) return record(EditKind::AddRpath, "", path, EditStatus::Already);
    commands().insert(commands().size(), rpath_command(path));  // at the end, as install_name_tool
    record(EditKind::AddRpath, "", path, EditStatus::Applied);
  }

  const MachO& image_;
  const EditOptions& options_;
  EditPlan plan_;
};

[[noreturn]] void edit_verification_failed(const std::string& problem) {
  fail_as(ErrorKind::ProofFailed, "verification of the edited file failed, nothing written: " + problem);
}

void verify_commands(const EditPlan& plan, const MachO& after) {
  if (after.commands.size() != plan.commands.size())
    edit_verification_failed(std::to_string(after.commands.size()) + " load commands, not the " +
                        std::to_string(plan.commands.size()) + " planned");
  for (size_t i = 0; i < after.commands.size(); ++i) {
    const std::vector<uint8_t>& planned = plan.commands.bytes(i);
    const LoadCommand& command = after.commands[i];
    if (command.size != planned.size() ||
        std::memcmp(after.bytes.data() + command.offset, planned.data(), planned.size()) != 0)
      edit_verification_failed("load command " + std::to_string(i) + " is not the planned one");
  }
}

void verify_imports(const ImportScan& before, const ImportScan& after) {
  if (before.imports.size() != after.imports.size())
    edit_verification_failed("the number of imports changed from " + std::to_string(before.imports.size()) + " to " +
                        std::to_string(after.imports.size()));
  for (size_t i = 0; i < before.imports.size(); ++i) {
    const Import& was = before.imports[i];
    const Import& now = after.imports[i];
    if (was.symbol != now.symbol || was.source != now.source || was.ordinal != now.ordinal || was.weak != now.weak)
      edit_verification_failed(std::string(import_source_name(was.source)) + " import " + std::string(was.symbol) +
                          " is not bound as before");
  }
}

// The header's other fields and everything after the load-command area (the old one
// or the new one, whichever is longer) must be exactly as they were.
void verify_untouched(const MachO& before, uint64_t commands_end, uint64_t area_end, const Bytes& after) {
  auto compare = [&](uint64_t start, uint64_t end) {
    if (auto changed = first_difference(before.bytes.data(), after.data(), start, end))
      edit_verification_failed("byte at slice offset " + hex(*changed) + " changed outside the load commands");
  };
  compare(0, offsetof(macho::MachHeader64, ncmds));
  compare(offsetof(macho::MachHeader64, flags), sizeof(macho::MachHeader64));
  for (uint64_t at = commands_end; at < area_end; ++at)
    if (after.data()[at] != 0) edit_verification_failed("byte at slice offset " + hex(at) + " after the load commands is not zero");
  compare(area_end, after.size());
}

}  // namespace

EditPlan plan_edit(const MachO& image, const EditOptions& options) { return Planner(image, options).run(); }

WeakLinkEdit plan_weak_link_edit(const MachO& edited, const ImportScan& scan, const EditOptions& options) {
  WeakLinkPlan plan = plan_weak_link(edited, scan, options.weak_link);
  WeakLinkEdit stage;
  for (const std::string& glob : plan.unmatched_globs) {
    if (!options.unmatched_is_note)
      fail_as(ErrorKind::Inapplicable, "--weak-link " + quoted(glob) + ": no dependent dylib's install name matches " + quoted(glob) +
           (options.change.empty() ? "" : " (after --change)"));
    stage.records.push_back({EditKind::WeakLink, glob, "", EditStatus::NoMatch});
  }
  for (const WeakLinkDecision& decision : plan.decisions) {
    if (decision.action == WeakLinkAction::Refused) {
      Error error("--weak-link " + quoted(decision.glob) + ": cannot weak-link " + quoted(decision.install_name) +
                  " (dylib ordinal " + std::to_string(decision.ordinal) + "): " + decision.reason);
      throw error.as_refusal();
    }
    bool already = decision.action == WeakLinkAction::NothingToDo;
    stage.records.push_back({EditKind::WeakLink, decision.install_name, "", already ? EditStatus::Already : EditStatus::Applied});
  }
  stage.ordinals = plan.ordinals();
  return stage;
}

void apply_edit(const MachO& image, const EditPlan& plan, MutableBytes out) {
  if (out.size() != image.bytes.size()) fail_as(ErrorKind::Internal, "internal error: the output slice is not a copy of the input");
  if (plan.changes()) plan.commands.write(image, out);
}

std::vector<uint8_t> apply_edit(const MachO& image, const EditPlan& plan) {
  std::vector<uint8_t> out(image.bytes.data(), image.bytes.data() + image.bytes.size());
  apply_edit(image, plan, out);
  return out;
}

void verify_edit(const MachO& before, const ImportScan& before_scan, const EditPlan& plan, const Bytes& output,
                 const SecondReader& second) {
  std::vector<uint8_t> spoiled;  // tests only (proof_seam.h)
  Bytes after(output.data(), output.size(), before.bytes.base());
  verify_edit(before, before_scan, plan, after, reread_output(after, spoiled), second);
}

void verify_edit(const MachO& before, const ImportScan& before_scan, const EditPlan& plan, const Bytes& after,
                 const MachO& reread, const SecondReader& second) {
  if (after.size() != before.bytes.size()) edit_verification_failed("the slice changed size");
  std::vector<uint8_t> spoiled_for_untouched, spoiled_for_lief;  // tests only (proof_seam.h)
  ImportScan reread_scan = scan_imports(reread);
  verify_commands(plan, reread);
  verify_imports(before_scan, reread_scan);
  uint64_t area_end = sizeof(macho::MachHeader64) + std::max<uint64_t>(before.sizeofcmds, plan.commands.sizeofcmds());
  verify_untouched(before, sizeof(macho::MachHeader64) + plan.commands.sizeofcmds(), area_end, seam::offer(seam::ProofStep::Untouched, after, spoiled_for_untouched));
  required(second)(seam::offer(seam::ProofStep::Lief, after, spoiled_for_lief), reread, reread_scan);
}

}  // namespace machofix
