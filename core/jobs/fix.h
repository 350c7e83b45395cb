// `machofix fix`: for every finding `check` reports with the same options, the least
// edit that removes it; the repaired file is checked again, in process and with the
// same options, and written only if it passes.
//
//   plan_fix()  findings -> edits (prune's removals, renames, rpath deletions), or a
//               refusal naming why a finding has no safe edit
//   Fixer::run() one file: inspect, check, plan, rewrite (RewriteKind::Fix: the edit
//               planned on the pruned slice, so it may use the room removals free),
//               and at the commit (core/io/file_io.h's CommitGate) the output's check
//
// The edits of a file apply to every image in it (a .pte's blobs, an archive's
// members): each is exact (an install name or rpath matched whole), and the output's
// check holds every image to the rules whatever an edit did elsewhere.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/jobs/check.h"
#include "core/jobs/job.h"

namespace machofix {

enum class FixEditKind { RemoveDependency, Change, DeleteRpath, DeleteDuplicateRpaths };

// One edit of the plan, with the finding it removes.
struct FixEdit {
  FixEditKind kind = FixEditKind::RemoveDependency;
  std::string old_value;  // the install name, or the rpath
  std::string new_value;  // Change: the new install name
  Rule removes = Rule::UnusedDependency;
  std::string blob, member, arch;  // where the finding is (as Finding's)
  std::optional<uint64_t> offset;  // the file offset of the load command it edits, where known (Finding::offset)
};

// A finding fix has no safe edit for, and why (what the user must do).
struct FixRefusal {
  Rule rule = Rule::LibraryNotLoaded;
  std::string subject;  // the dependency's install name or the rpath
  std::string blob, member, arch;
  std::string reason;
};

struct FixPlan {
  std::vector<FixEdit> edits;
  std::vector<FixRefusal> refusals;
  RepairOptions repair;  // the edits as prune's --only and edit's options
  bool empty() const { return edits.empty(); }
};

// `app` is the application the findings were loaded in (options.app), else nullptr.
FixPlan plan_fix(const FileReport& inspected, const std::vector<Finding>& findings, const CheckOptions& options,
                 App* app);

enum class FixStatus {
  NothingToFix,  // check passes: left as it is (with -o, a byte copy)
  Fixed,         // written, and its check passes
  WouldFix,      // --dry-run: the repaired form passes
  NotWritten,    // the repaired form (or the input, with no edit to make) still fails check
  Failed,        // the file could not be read or rewritten (FileReport::error)
};

// What fix did to one file (FileReport::fix).
struct FixOutcome {
  FixStatus status = FixStatus::Failed;
  std::vector<FixEdit> edits;  // made, or (NotWritten, WouldFix) that would be made
  std::vector<FixRefusal> refusals;
  std::vector<Finding> remaining;  // check's findings of the output (of the input when nothing was rewritten)
};

// The files of one run: the check options of each file, and the applications and
// .ptd files read once for all. run() is a JobRunner (core/jobs/batch.h), safe to call
// from several threads: the checks take turns, the rewrites do not.
class Fixer {
 public:
  // Throws Error for a contract that cannot be read.
  using OptionsFor = std::function<CheckOptions(const std::string& path)>;
  explicit Fixer(OptionsFor options_for) : options_for_(std::move(options_for)) {}

  FileReport run(const std::string& path, const JobOptions& options);

 private:
  std::vector<Finding> findings(const FileReport& report, const CheckOptions& options);
  FileReport fix_file(const std::string& path, const std::string& shown, const JobOptions& options);
  FixPlan judge(const FileReport& input, const std::string& shown, CheckOptions& check, std::vector<Finding>& before);
  FileReport leave(const std::string& path, const FileReport& input, const JobOptions& options, FixOutcome& outcome);
  FileReport rewrite(const std::string& path, const FileReport& input, const JobOptions& options,
                     const CheckOptions& check, const FixPlan& plan, FixOutcome& outcome);

  OptionsFor options_for_;
  std::mutex mutex_;  // the checks: Applications and ExternalData read files into caches
  Applications applications_;
  ExternalData external_data_;
};

const char* fix_edit_name(FixEditKind kind);      // "remove-dependency", "change", "delete-rpath", "delete-duplicate-rpaths"
const char* fix_status_name(FixStatus status);    // "nothing-to-fix", "fixed", "would-fix", "not-written", "failed"

}  // namespace machofix
