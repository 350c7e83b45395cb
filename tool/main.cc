// machofix: runs the command the command line names (tool/command_line.cc) and
// prints its reports and progress; all format knowledge is in core/.
#include <algorithm>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "core/app/bundle.h"
#include "core/jobs/batch.h"
#include "core/jobs/check.h"
#include "core/jobs/contract.h"
#include "core/jobs/fix.h"
#include "core/base/error.h"
#include "core/io/file_io.h"
#include "core/jobs/job.h"
#include "core/rewrite/prune.h"
#include "tool/command_line.h"
#include "tool/main.h"
#include "tool/progress.h"
#include "tool/report.h"
#include "tool/report_text.h"
#include "tool/rules.h"
#include "tool/sarif.h"

namespace machofix::cli {

namespace {

bool json_to_stdout(const Settings& settings) { return settings.json == "-"; }

// Writes the JSON report where --json asked; false (after an error message) if it could not.
bool emit_json(const Settings& settings, const std::string& command, const std::vector<FileReport>& reports,
               const std::vector<Finding>* findings, const std::vector<std::string>* contracts = nullptr,
               const std::vector<AppCheck>* app_checks = nullptr) {
  if (settings.json.empty()) return true;
  std::string document = json_document(command, reports, summarize(reports), findings, contracts, app_checks);
  if (json_to_stdout(settings)) {
    std::cout << document;
    return true;
  }
  std::ofstream out(settings.json);
  out << document;
  if (!out) spdlog::error("cannot write the JSON report to {}", settings.json);
  return static_cast<bool>(out);
}

// What a run over the inputs gave: one report per file, and whether some input (a
// directory, an archive) held no model at all.
struct Outcome {
  std::vector<FileReport> reports;
  // Inputs (files, directories) that held no model: an error for every command, since
  // a run that looked at nothing must not pass, nor report such a file as valid.
  std::vector<std::string> without_models;
  bool input_without_models = false;
  int status(bool written) const {
    return summarize(reports).failed || !written || input_without_models ? kExitError : kExitOk;
  }
  bool held_models(const FileReport& report) const {
    return std::find(without_models.begin(), without_models.end(), report.path) == without_models.end();
  }
};

// Errors of the files that failed (and of the archive members that did), notes of
// the files passed over for their type.
void print_problems(const std::vector<FileReport>& reports) {
  for (const FileReport& report : reports) {
    if (report.status == FileStatus::Failed) spdlog::error("{}", report.error);
    if (report.skipped_filetype)
      spdlog::info("{}: skipped: {}", report.path, skipped_because(*report.skipped_filetype));
    print_problems(report.members);
  }
}

// An input that held no model: one error, the same for every command (exit 2).
std::vector<std::string> print_inputs_without_models(const BatchPlan& plan, const std::vector<FileReport>& reports) {
  std::vector<std::string> paths;
  for (const InputWithoutModels& input : inputs_without_models(plan, reports)) {
    spdlog::error("{}{}", input.directory ? "no models found under " : "no models found in ", input.path);
    paths.push_back(input.path);
  }
  return paths;
}

// Every dependency's install name in the files read (blobs and archive members too).
void collect_install_names(const std::vector<FileReport>& reports, std::set<std::string>& names) {
  auto add = [&](const MachOReport& macho) {
    for (const SliceReport& slice : macho.slices)
      for (const DylibReport& dylib : slice.dylibs) names.insert(dylib.install_name);
  };
  for (const FileReport& report : reports) {
    if (report.macho) add(*report.macho);
    if (report.pte)
      for (const BlobReport& blob : report.pte->blobs) add(blob.macho);
    collect_install_names(report.members, names);
  }
}

// A selection that selects nothing says so: `--only libomp` matches no install name
// (it is matched whole, or against the last component: libomp.dylib), and the run
// would otherwise report "unchanged" as if there were nothing to do.
void warn_unmatched_globs(const Settings& settings, const std::vector<FileReport>& reports) {
  std::set<std::string> names;
  collect_install_names(reports, names);
  if (names.empty()) return;
  auto warn = [&](const char* option, const std::vector<std::string>& globs) {
    for (const std::string& glob : globs) {
      if (std::any_of(names.begin(), names.end(), [&](const std::string& name) { return install_name_matches(glob, name); }))
        continue;
      std::string hint;
      for (const std::string& name : names)
        if (hint.empty() && name.find(glob) != std::string::npos) hint = " ('*" + glob + "*' would match " + name + ")";
      spdlog::warn("{} '{}' matches no dependency of the files read: a glob is matched against the whole install name "
                   "and its last component{}", option, glob, hint);
    }
  };
  warn("--only", settings.job.repair.prune.only);
  warn("--keep", settings.job.repair.prune.keep);
  warn("--forbid", settings.check.forbidden);
}

Outcome run_all(const Settings& settings, Operation operation, const JobRunner& runner = {}) {
  BatchPlan plan = plan_batch(settings.paths, settings.job.output, settings.job.in_place, settings.tree);
  ProgressBar bar(!settings.quiet, progress_mode(std::getenv("MACHOFIX_PROGRESS")), plan.items.size(), plan.total_size());
  BatchProgress progress;
  progress.file_started = [&](const BatchItem& item) { bar.file_started(item.shown); };
  progress.file_done = [&](size_t, size_t, const FileReport& latest) { bar.file_done(latest); };
  progress.bytes_done = [&](uint64_t bytes) { bar.add_bytes(bytes); };
  Outcome outcome;
  outcome.reports = run_batch(plan, operation, settings.job, settings.jobs, progress, runner);
  bar.finish();
  print_problems(outcome.reports);
  warn_unmatched_globs(settings, outcome.reports);
  outcome.without_models = print_inputs_without_models(plan, outcome.reports);
  outcome.input_without_models = !outcome.without_models.empty();
  return outcome;
}

// Several inputs or a directory: a line per file and a summary rather than full reports.
bool batch_mode(const Settings& settings) {
  std::error_code error;
  return settings.paths.size() > 1 || !settings.tree.empty() || std::filesystem::is_directory(settings.paths.front(), error);
}

int run_inspect(const Settings& settings) {
  Outcome outcome = run_all(settings, Operation::Inspect);
  if (!json_to_stdout(settings))
    for (const FileReport& report : outcome.reports)
      if (report.status != FileStatus::Skipped) std::cout << text_report(report, true);
  return outcome.status(emit_json(settings, "inspect", outcome.reports, nullptr));
}

// -o -: standard output carries the output alone, so the report goes to stderr; false
// (after an error message) when standard output cannot take it.
bool output_to_stdout(const Settings& settings) {
  return is_standard_stream(settings.job.output) && !settings.job.dry_run;
}

bool stdout_usable(const Settings& settings) {
  if (!output_to_stdout(settings)) return true;
  if (json_to_stdout(settings)) {
    spdlog::error("-o - and --json - both want standard output: give --json a file");
    return false;
  }
  if (isatty(STDOUT_FILENO)) {
    spdlog::error("-o - would write a binary file to the terminal: redirect or pipe standard output");
    return false;
  }
  return true;
}

// Where a rewriting command writes: exactly one of -o and --in-place, unless a dry run.
bool output_options_usable(const Settings& settings, const char* command) {
  const JobOptions& job = settings.job;
  if (job.in_place == !job.output.empty() && !job.dry_run) {
    spdlog::error("{} needs exactly one of -o OUT and --in-place (or --dry-run)", command);
    return false;
  }
  if (!job.backup_suffix.empty() && !job.in_place) {
    spdlog::error("--backup only makes sense with --in-place");
    return false;
  }
  return stdout_usable(settings);
}

// prune, sign and edit.
int run_rewrite(const Settings& settings, Operation operation, const char* command) {
  const JobOptions& job = settings.job;
  if (!output_options_usable(settings, command)) return kExitError;
  std::ostream& text = output_to_stdout(settings) ? std::cerr : std::cout;
  bool batch = batch_mode(settings);
  Outcome outcome = run_all(settings, operation);
  if (!json_to_stdout(settings) && !settings.quiet) {
    for (const FileReport& report : outcome.reports)
      text << (batch && settings.verbosity == 0 ? short_report(report) : text_report(report, false));
    if (batch) text << summary_line(summarize(outcome.reports), job.dry_run) << "\n";
  }
  return outcome.status(emit_json(settings, command, outcome.reports, nullptr));
}

int run_edit(const Settings& settings) {
  if (!settings.job.repair.edit.any()) {
    spdlog::error("edit needs at least one edit: --change, --id, --add-rpath, --delete-rpath, --rpath or --weak-link");
    return kExitError;
  }
  return run_rewrite(settings, Operation::Edit, "edit");
}

int run_verify(const Settings& settings) {
  Outcome outcome = run_all(settings, Operation::Inspect);
  bool invalid = false;
  for (const FileReport& report : outcome.reports) {
    if (!report.examined() || !outcome.held_models(report)) continue;
    std::vector<std::string> failures = verify_failures(report);
    invalid |= !failures.empty();
    if (json_to_stdout(settings)) continue;
    std::cout << report.path << ": " << (failures.empty() ? "valid" : "INVALID") << "\n";
    for (const std::string& failure : failures) std::cout << "  " << failure << "\n";
    if (settings.verbosity > 0)
      for (const std::string& note : verify_notes(report)) std::cout << "  note: " << note << "\n";
  }
  bool written = emit_json(settings, "verify", outcome.reports, nullptr);
  if (outcome.status(written) != kExitOk || outcome.input_without_models) return kExitError;
  return invalid ? kExitFindings : kExitOk;
}

// The contracts that apply to the files checked: --contract's for all, else the
// machofix.toml found beside each file (core/jobs/contract.h), read once each.
class Contracts {
 public:
  explicit Contracts(const Settings& settings) : settings_(settings) {
    extra_ = settings.check;
    extra_.declared = !extra_.provided.empty() || !extra_.allowed_rpaths.empty() || !extra_.required.empty();
    // Which PATHs are bundles is asked once, not for every file found under them.
    for (std::string given : settings.paths) {
      while (given.size() > 1 && given.back() == '/') given.pop_back();
      if (is_app_bundle(given)) bundles_given_.push_back(given);
    }
  }

  // What `path` is held to: its contract and the command line's declarations. Throws
  // Error for a contract file that cannot be read or is malformed.
  CheckOptions for_file(const std::string& path) {
    CheckOptions options = contract_options(path);
    // A user who hands check an application means "will it load": its files are
    // loaded in it, as --app would, unless --app, a contract or --no-app says otherwise.
    if (options.app.empty() && !settings_.no_app)
      if (std::string app = app_given_as_path(path); !app.empty()) {
        options.app = app;
        if (std::find(apps_from_paths_.begin(), apps_from_paths_.end(), app) == apps_from_paths_.end())
          apps_from_paths_.push_back(app);
      }
    return options;
  }

  // The .app bundles given as PATHs whose files were loaded in them.
  const std::vector<std::string>& apps_from_paths() const { return apps_from_paths_; }

  const std::vector<std::string>& used() const { return used_; }
  // --app, or a contract's `app`: the report carries each model slice's load.
  bool app_named() const {
    if (!extra_.app.empty() || !apps_from_paths_.empty()) return true;
    for (const auto& [file, options] : read_) if (!options.app.empty()) return true;
    return false;
  }

 private:
  CheckOptions contract_options(const std::string& path) {
    std::optional<std::string> file;
    if (!settings_.contract.empty()) file = settings_.contract;
    else if (!settings_.no_contract) file = find_contract(path);
    if (!file) return extra_;
    auto [known, added] = read_.try_emplace(*file);
    if (added) {
      known->second = combined(read_contract(*file), extra_);
      used_.push_back(*file);
    }
    return known->second;
  }

  // The .app bundle among the PATHs given that holds `path` (or is it); "" for none.
  std::string app_given_as_path(const std::string& path) const {
    for (const std::string& given : bundles_given_)
      if (path == given || path.starts_with(given + "/")) return given;
    return "";
  }

  const Settings& settings_;
  CheckOptions extra_;
  std::map<std::string, CheckOptions> read_;
  std::vector<std::string> used_;
  std::vector<std::string> apps_from_paths_;
  std::vector<std::string> bundles_given_;  // the PATHs that are .app bundles, without trailing '/'
};

bool write_text_file(const std::string& path, const std::string& text, const char* what) {
  if (path == "-") {
    std::cout << text;
    return true;
  }
  try {
    write_file_atomically(path, std::vector<uint8_t>(text.begin(), text.end()), 0644, /*durable=*/false);
    return true;
  } catch (const Error& error) {
    spdlog::error("cannot write the {} to {}: {}", what, path, error.describe());
    return false;
  }
}

bool check_options_usable(const Settings& settings) {
  if (!settings.contract.empty() && settings.no_contract) {
    spdlog::error("--contract and --no-contract contradict each other: give one");
    return false;
  }
  if (!settings.check.app.empty() && settings.no_app) {
    spdlog::error("--app and --no-app contradict each other: give one");
    return false;
  }
  if (settings.sarif == "-" && json_to_stdout(settings)) {
    spdlog::error("--sarif - and --json - both want standard output: give one of them a file");
    return false;
  }
  return true;
}

// The options check ran with for one file, as the words `machofix fix` takes, so that
// the repair hint repairs under the same rules: the contract, the declarations, the
// application (given, or the .app the file was found in), the targets and levels.
std::string fix_arguments(const Settings& settings, const CheckOptions& options) {
  std::string words;
  auto add = [&](const char* option, const std::string& value) { words += std::string(" ") + option + " " + shell_quoted(value); };
  auto add_all = [&](const char* option, const std::vector<std::string>& values) {
    for (const std::string& value : values) add(option, value);
  };
  if (!settings.contract.empty()) add("--contract", settings.contract);
  if (settings.no_contract) words += " --no-contract";
  add_all("--provided", settings.check.provided);
  add_all("--allowed-rpath", settings.check.allowed_rpaths);
  add_all("--allow-prefix", settings.check.allowed_prefixes);
  add_all("--required", settings.check.required);
  add_all("--forbid", settings.check.forbidden);
  add_all("--keep", settings.job.repair.prune.keep);
  add_all("--only", settings.job.repair.prune.only);
  if (!options.app.empty() && settings.check.app.empty()) add("--app", options.app);
  if (!settings.check.app.empty()) add("--app", settings.check.app);
  if (!settings.check.sysroot.empty()) add("--sysroot", settings.check.sysroot);
  if (settings.check.load_as) add("--load-as", *settings.check.load_as == LoadAs::Blob ? "blob" : "file");
  add_all("--ptd", settings.check.ptd_files);
  add_all("--arch", settings.check.archs);
  if (settings.check.min_macos) add("--min-macos", version_text(*settings.check.min_macos));
  for (const auto& [rule, level] : settings.check.levels) add("--level", std::string(rule_id(rule)) + "=" + level_name(level));
  if (settings.check.warnings_as_errors) words += " --warnings-as-errors";
  return words;
}

// The findings of every file, each held to its contract; nullopt (after an error
// message, kept in `error`) when a contract file is malformed, or an application
// (--app) or a .ptd cannot be read: a gate must not pass on a broken one.
std::optional<std::vector<Finding>> all_findings(const Settings& settings, const std::vector<FileReport>& reports, Contracts& contracts,
                                                 std::vector<AppCheck>& app_checks, std::string& error_text,
                                                 size_t& unfollowed) {
  std::vector<Finding> findings;
  Applications applications;
  ExternalData external_data;  // the .ptd files, read once for every model
  try {
    for (const FileReport& report : reports) {
      if (!report.examined()) continue;
      CheckOptions options = contracts.for_file(report.path);
      std::vector<Finding> found = check_findings(report, options, &applications, &app_checks, &external_data);
      std::string arguments = fix_arguments(settings, options);
      for (Finding& finding : found) finding.fix_arguments = arguments;
      unfollowed += unfollowed_dependencies(report, options);
      findings.insert(findings.end(), found.begin(), found.end());
    }
  } catch (const Error& error) {
    error_text = error.describe();
    spdlog::error("{}", error_text);
    return std::nullopt;
  }
  return findings;
}

// Every input check could not judge, for the SARIF log and the annotations: files
// (and archive members) that failed, inputs that held no model.
void collect_failures(const std::vector<FileReport>& reports, std::vector<InputFailure>& failures) {
  for (const FileReport& report : reports) {
    if (report.status == FileStatus::Failed) failures.push_back({report.path, report.error});
    collect_failures(report.members, failures);
  }
}

std::vector<InputFailure> input_failures(const Outcome& outcome) {
  std::vector<InputFailure> failures;
  collect_failures(outcome.reports, failures);
  for (const std::string& path : outcome.without_models) failures.push_back({path, "no models found in " + path});
  return failures;
}

// GitHub Actions turns these into error annotations, as it does a finding's.
void annotate_failures(const std::vector<InputFailure>& failures) {
  const char* actions = std::getenv("GITHUB_ACTIONS");
  if (!actions || std::string(actions) != "true") return;
  for (const InputFailure& failure : failures)
    std::cout << "::error " << (failure.path.empty() ? "" : "file=" + failure.path + ",")
              << "title=machofix could not check it::" << failure.error << "\n";
}

// A contract named with --contract is read before any model; what is wrong with it
// (said on stderr), or nothing.
std::optional<std::string> read_named_contract(const Settings& settings, Contracts& contracts) {
  if (settings.contract.empty()) return std::nullopt;
  try {
    contracts.for_file(settings.contract);
  } catch (const Error& error) {
    spdlog::error("{}", error.describe());
    return error.describe();
  }
  return std::nullopt;
}

int run_check(const Settings& settings) {
  if (!check_options_usable(settings)) return kExitError;
  Contracts contracts(settings);
  if (std::optional<std::string> error = read_named_contract(settings, contracts)) {
    if (!settings.sarif.empty())
      write_text_file(settings.sarif, sarif_document({}, {}, {{"", *error}}, sarif_root(settings.sarif_root)), "SARIF report");
    return kExitError;
  }
  Outcome outcome = run_all(settings, Operation::Inspect);
  std::vector<AppCheck> app_checks;
  std::string error_text;
  size_t unfollowed = 0;
  std::optional<std::vector<Finding>> findings = all_findings(settings, outcome.reports, contracts, app_checks, error_text, unfollowed);
  std::vector<InputFailure> failures = input_failures(outcome);
  if (!findings) failures.push_back({"", error_text});
  if (!json_to_stdout(settings) && settings.sarif != "-") annotate_failures(failures);
  std::string root = sarif_root(settings.sarif_root);
  if (!findings) {
    // Nothing was judged, and the log says so: an upload must not show a clean scan.
    if (!settings.sarif.empty()) write_text_file(settings.sarif, sarif_document({}, contracts.used(), failures, root), "SARIF report");
    return kExitError;
  }
  if (!json_to_stdout(settings) && settings.sarif != "-") {
    for (const Finding& finding : *findings)
      if (!finding.reported_with) std::cout << finding_line(finding) << "\n";  // one line per cause
    if (!settings.quiet) {
      for (const std::string& contract : contracts.used()) std::cout << "machofix check: contract " << contract << "\n";
      for (const std::string& app : contracts.apps_from_paths())
        std::cout << "machofix check: " << app << " is an application: its images were loaded in it as dyld would "
                  << "(--no-app checks them file by file)\n";
      for (const std::string& note : app_notes(app_checks)) std::cout << "machofix check: " << note << "\n";
      if (unfollowed) std::cout << "machofix check: " << unfollowed_note(unfollowed) << "\n";
      std::vector<FileReport> with_models;
      for (const FileReport& report : outcome.reports)
        if (outcome.held_models(report)) with_models.push_back(report);
      std::cout << check_summary(with_models, *findings) << "\n";
    }
  }
  bool written = emit_json(settings, "check", outcome.reports, &*findings, &contracts.used(),
                           contracts.app_named() ? &app_checks : nullptr);
  if (!settings.sarif.empty())
    written &= write_text_file(settings.sarif, sarif_document(*findings, contracts.used(), failures, root), "SARIF report");
  if (outcome.status(written) != kExitOk || outcome.input_without_models) return kExitError;
  bool errors = std::any_of(findings->begin(), findings->end(), [](const Finding& f) { return f.level == Level::Error; });
  return errors ? kExitFindings : kExitOk;
}

// Every finding left in the files fix read (the output's where it was checked), each
// named by the file as the user gave it.
std::vector<Finding> remaining_findings(const Settings& settings, const std::vector<FileReport>& reports) {
  std::vector<Finding> findings;
  for (const FileReport& report : reports) {
    if (!report.fix) continue;
    for (Finding finding : report.fix->remaining) {
      finding.file = report.path;
      finding.fix_arguments = fix_arguments(settings, settings.check);
      findings.push_back(std::move(finding));
    }
  }
  return findings;
}

int run_fix(const Settings& settings) {
  if (!check_options_usable(settings) || !output_options_usable(settings, "fix")) return kExitError;
  Contracts contracts(settings);
  if (read_named_contract(settings, contracts)) return kExitError;
  Fixer fixer([&](const std::string& path) { return contracts.for_file(path); });
  JobRunner runner = [&](const std::string& path, Operation, const JobOptions& options) { return fixer.run(path, options); };
  Outcome outcome = run_all(settings, Operation::Fix, runner);
  std::vector<Finding> findings = remaining_findings(settings, outcome.reports);
  bool not_written = std::any_of(outcome.reports.begin(), outcome.reports.end(), [](const FileReport& report) {
    return report.fix && report.fix->status == FixStatus::NotWritten;
  });
  std::ostream& text = output_to_stdout(settings) ? std::cerr : std::cout;
  if (!json_to_stdout(settings) && settings.sarif != "-" && !settings.quiet) {
    for (const FileReport& report : outcome.reports) text << fix_text(report);
    for (const std::string& contract : contracts.used()) text << "machofix fix: contract " << contract << "\n";
    if (batch_mode(settings)) text << summary_line(summarize(outcome.reports), settings.job.dry_run) << "\n";
  }
  bool written = emit_json(settings, "fix", outcome.reports, &findings, &contracts.used());
  if (!settings.sarif.empty()) {
    std::vector<FixedEdit> edits;
    for (const FileReport& report : outcome.reports)
      if (report.fix)
        for (const FixEdit& edit : report.fix->edits) edits.push_back({report.path, edit, report.fix->status});
    written &= write_text_file(settings.sarif,
                               sarif_document(findings, contracts.used(), input_failures(outcome),
                                              sarif_root(settings.sarif_root), edits),
                               "SARIF report");
  }
  if (outcome.status(written) != kExitOk) return kExitError;
  return not_written ? kExitFindings : kExitOk;
}

void configure_logging() {
  auto logger = spdlog::stderr_color_mt("machofix");
  logger->set_pattern("machofix: %^%l%$: %v");
  spdlog::set_default_logger(logger);
}

void set_verbosity(const Settings& settings) {
  spdlog::set_level(settings.quiet           ? spdlog::level::err
                    : settings.verbosity > 0 ? spdlog::level::debug
                                             : spdlog::level::info);
}

int run(Command command, const Settings& settings) {
  switch (command) {
    case Command::Inspect: return run_inspect(settings);
    case Command::Prune: return run_rewrite(settings, Operation::Prune, "prune");
    case Command::Sign: return run_rewrite(settings, Operation::Sign, "sign");
    case Command::Edit: return run_edit(settings);
    case Command::Verify: return run_verify(settings);
    case Command::Check: return run_check(settings);
    case Command::Fix: return run_fix(settings);
  }
  return kExitError;
}

}  // namespace

int main(int argc, char** argv) {
  configure_logging();
  Settings settings;
  CommandLine command_line = parse_command_line(argc, argv, settings);
  if (!command_line.command) return command_line.status;
  set_verbosity(settings);
  return run(*command_line.command, settings);
}

}  // namespace machofix::cli
