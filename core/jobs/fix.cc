// Fixer (core/jobs/fix.h): one file inspected, checked, planned, rewritten, and its
// output checked at the commit before it goes live.
#include "core/jobs/fix.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "core/io/file_io.h"

namespace machofix {

namespace {

bool has_errors(const std::vector<Finding>& findings) {
  return std::any_of(findings.begin(), findings.end(), [](const Finding& finding) { return finding.level == Level::Error; });
}

// What the check of a file needs of the job's options: a plain read, no output.
JobOptions inspect_options(const JobOptions& options) {
  JobOptions inspect;
  inspect.repair.prune = options.repair.prune;  // --keep and --only: what counts as removable
  inspect.repair.second_reader = options.repair.second_reader;
  inspect.skip_other_files = options.skip_other_files;
  return inspect;
}

std::string real_path(const std::string& path) {
  char buffer[PATH_MAX];
  return realpath(path.c_str(), buffer) ? std::string(buffer) : path;
}

// A directory of its own for a dry run's output (the output is checked, then dropped),
// and for standard input spooled to a file that can be read twice.
class ScratchDirectory {
 public:
  ScratchDirectory() {
    std::string pattern = temp_directory() + "/machofix-fix-XXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    if (!mkdtemp(name.data())) throw Error("cannot create a temporary directory in " + temp_directory()).as(ErrorKind::System);
    path_ = name.data();
  }
  ~ScratchDirectory() {
    std::error_code error;
    std::filesystem::remove_all(path_, error);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Where the job's output goes (the target its AtomicOutput commits to), and where the
// repaired file is checked as lying: the same, except in a dry run.
struct Destination {
  std::string target;
  std::string checked_as;
  std::unique_ptr<ScratchDirectory> scratch;  // a dry run's
};

Destination destination(const std::string& path, const std::string& shown, JobOptions& rewrite) {
  Destination where;
  if (rewrite.dry_run) {
    where.scratch = std::make_unique<ScratchDirectory>();
    where.target = where.scratch->path() + "/" + std::filesystem::path(shown).filename().string();
    where.checked_as = rewrite.output.empty() || is_standard_stream(rewrite.output) ? shown : rewrite.output;
    rewrite.dry_run = false;
    rewrite.in_place = false;
    rewrite.backup_suffix.clear();
    rewrite.create_output_directories = false;
    rewrite.output = where.target;
    return where;
  }
  where.target = rewrite.in_place ? real_path(path) : rewrite.output;
  where.checked_as = rewrite.in_place ? shown : rewrite.output;
  return where;
}

// The refusal of a rewrite, named by the edit that needs it: a rename that needs room,
// else the first edit.
FixRefusal rewrite_refusal(const FixPlan& plan, const std::string& error) {
  const FixEdit* named = &plan.edits.front();
  for (const FixEdit& edit : plan.edits)
    if (edit.kind == FixEditKind::Change) named = &edit;
  return {named->removes, named->old_value, named->blob, named->member, named->arch, error};
}

}  // namespace

std::vector<Finding> Fixer::findings(const FileReport& report, const CheckOptions& options) {
  std::lock_guard<std::mutex> lock(mutex_);
  return check_findings(report, options, &applications_, nullptr, &external_data_);
}

FileReport Fixer::run(const std::string& path, const JobOptions& options) {
  if (!is_standard_stream(path)) return fix_file(path, path, options);
  // Standard input is read twice (checked, then rewritten): spooled to a file first.
  ScratchDirectory scratch;
  std::string spooled = scratch.path() + "/standard-input";
  try {
    MappedFile input(path);
    AtomicOutput copy(spooled, 0644, /*durable=*/false);
    copy.copy_from(input.fd(), 0, 0, input.size());
    copy.commit();
  } catch (Error& error) {
    FileReport report;
    report.path = path;
    report.error = error.in_file(path).describe();
    report.error_kind = error.kind();
    return report;
  }
  return fix_file(spooled, path, options);
}

// The check and plan of an inspected file. Throws Error for a contract, application
// or .ptd that cannot be read.
FixPlan Fixer::judge(const FileReport& input, const std::string& shown, CheckOptions& check, std::vector<Finding>& before) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    check = options_for_(shown);
  }
  before = findings(input, check);
  std::lock_guard<std::mutex> lock(mutex_);
  return plan_fix(input, before, check, check.app.empty() ? nullptr : &applications_.get(check.app, check.sysroot));
}

FileReport Fixer::fix_file(const std::string& path, const std::string& shown, const JobOptions& options) {
  FileReport input = run_job(path, Operation::Inspect, inspect_options(options));
  input.path = shown;
  if (input.status == FileStatus::Failed) return input;
  if (input.status == FileStatus::Skipped) {  // not a model: copied into a mirrored tree, as prune does
    FileReport skipped = run_job(path, Operation::Fix, options);
    skipped.path = shown;
    return skipped;
  }
  CheckOptions check;
  std::vector<Finding> before;
  FixPlan plan;
  try {
    plan = judge(input, shown, check, before);
  } catch (Error& error) {
    input.status = FileStatus::Failed;
    input.error = error.describe();
    input.error_kind = error.kind();
    return input;
  }
  auto outcome = std::make_shared<FixOutcome>();
  outcome->edits = plan.edits;
  outcome->refusals = plan.refusals;
  outcome->remaining = before;
  FileReport report = plan.empty() ? leave(path, input, options, *outcome) : rewrite(path, input, options, check, plan, *outcome);
  report.fix = outcome;
  return report;
}

// Nothing to edit: a file check passes is left as it is (with -o, a byte copy); one
// it fails is not written.
FileReport Fixer::leave(const std::string& path, const FileReport& input, const JobOptions& options, FixOutcome& outcome) {
  outcome.status = has_errors(outcome.remaining) ? FixStatus::NotWritten : FixStatus::NothingToFix;
  if (outcome.status == FixStatus::NotWritten) {
    FileReport report = input;
    report.status = FileStatus::Unchanged;
    return report;
  }
  FileReport report = run_job(path, Operation::Fix, options);
  report.path = input.path;
  return report;
}

// The plan's rewrite, whose output is held to check at its commit (CommitGate): written
// only if it passes. `outcome.remaining` becomes the output's findings.
FileReport Fixer::rewrite(const std::string& path, const FileReport& input, const JobOptions& options,
                          const CheckOptions& check, const FixPlan& plan, FixOutcome& outcome) {
  JobOptions rewrite = options;
  rewrite.repair.prune.only = plan.repair.prune.only;
  rewrite.repair.edit = plan.repair.edit;
  Destination where = destination(path, input.path, rewrite);
  bool gated = false, rejected = false;
  CommitGate gate(where.target, [&](const std::string& temp_path) {
    gated = true;
    FileReport output = run_job(temp_path, Operation::Inspect, inspect_options(options));
    if (output.status == FileStatus::Failed) throw Error("the repaired file cannot be read back: " + output.error);
    output.path = where.checked_as;
    std::vector<Finding> found = findings(output, check);
    for (Finding& finding : found) finding.file = input.path;
    outcome.remaining = found;
    rejected = has_errors(found);
    if (rejected) throw Error("its repaired form still fails check").as_refusal();
  });
  FileReport report = run_job(path, Operation::Fix, rewrite);
  report.path = input.path;
  // A rewrite refused before anything was written (load commands that do not fit the
  // header, a signature that is not ours to renew) is the user's to act on, as a
  // finding is, not bad input.
  bool refused_early = report.status == FileStatus::Failed && report.refused() && !gated;
  if (refused_early) outcome.refusals.push_back(rewrite_refusal(plan, report.error));
  if (rejected || refused_early) {  // not written: the file as it was read
    outcome.status = FixStatus::NotWritten;
    FileReport unchanged = input;
    unchanged.status = FileStatus::Unchanged;
    return unchanged;
  }
  if (report.status == FileStatus::Failed) {
    outcome.status = FixStatus::Failed;
  } else if (!gated) {  // in place, and the rewrite changed nothing
    outcome.status = has_errors(outcome.remaining) ? FixStatus::NotWritten : FixStatus::NothingToFix;
  } else if (options.dry_run) {
    outcome.status = FixStatus::WouldFix;
    if (report.status == FileStatus::Changed) report.status = FileStatus::WouldChange;
    report.bytes_written = 0;
    report.notes.clear();
  } else {
    outcome.status = FixStatus::Fixed;
  }
  return report;
}

}  // namespace machofix
