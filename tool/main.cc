// machofix command line: argument parsing, reports and progress only; all format
// knowledge is in core/.
#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "core/batch.h"
#include "core/check.h"
#include "core/file_io.h"
#include "core/job.h"
#include "core/lief_check.h"
#include "tool/progress.h"
#include "tool/report.h"

namespace machofix::cli {

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFindings = 1;  // check findings, verify failures
constexpr int kExitError = 2;

struct Settings {
  std::vector<std::string> paths;
  JobOptions job;
  CheckOptions check;
  std::string json;  // "" no JSON, "-" stdout, else a file
  unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
  int verbosity = 0;
  bool quiet = false;
};

// An existing path, or "-" for standard input.
const CLI::Validator kPathOrStandardInput(
    [](std::string& path) { return is_standard_stream(path) ? std::string() : CLI::ExistingPath(path); }, "PATH");

void add_paths(CLI::App* command, Settings& settings, const char* what) {
  command->add_option("paths", settings.paths, std::string(what) + "; - reads one from standard input")
      ->required()
      ->check(kPathOrStandardInput);
}

void add_json(CLI::App* command, Settings& settings) {
  command->add_option("--json", settings.json, "write a JSON report (schema in README) to FILE, or stdout with - or no value")
      ->expected(0, 1)
      ->default_str("-")
      ->type_name("[FILE]");
}

void add_jobs(CLI::App* command, Settings& settings) {
  command->add_option("-j,--jobs", settings.jobs, "files processed in parallel (default: number of cores)")->check(CLI::Range(1u, 1024u));
}

void add_policy(CLI::App* command, Settings& settings) {
  command->add_option("--keep", settings.job.repair.prune.keep, "never remove dylibs whose install name (or its last component) matches GLOB; repeatable")
      ->type_name("GLOB");
  command->add_option("--only", settings.job.repair.prune.only, "remove only unused dylibs matching GLOB, e.g. '*libomp*'; repeatable")
      ->type_name("GLOB");
}

void add_output(CLI::App* command, Settings& settings) {
  command->add_option("-o,--output", settings.job.output,
                      "output file (one input file; always written, a copy when nothing changes; - for standard output) "
                      "or directory mirroring the inputs");
  command->add_flag("--in-place", settings.job.in_place, "replace each changed file atomically (new inode, mode kept)");
}

void add_resign_invalid(CLI::App* command, Settings& settings) {
  command->add_flag("--resign-invalid", settings.job.repair.resign_invalid,
                    "re-sign slices whose input signature is invalid (changed or corrupt after signing); without it "
                    "such files are refused");
}

bool json_to_stdout(const Settings& settings) { return settings.json == "-"; }

// Writes the JSON report where --json asked; false (after an error message) if it could not.
bool emit_json(const Settings& settings, const std::string& command, const std::vector<FileReport>& reports,
               const std::vector<Finding>* findings) {
  if (settings.json.empty()) return true;
  std::string document = json_document(command, reports, summarize(reports), findings);
  if (json_to_stdout(settings)) {
    std::cout << document;
    return true;
  }
  std::ofstream out(settings.json);
  out << document;
  if (!out) spdlog::error("cannot write the JSON report to {}", settings.json);
  return static_cast<bool>(out);
}

std::vector<FileReport> run_all(const Settings& settings, Operation operation, bool batch_mode) {
  JobOptions job = settings.job;
  job.skip_other_files = batch_mode;
  BatchPlan plan = plan_batch(settings.paths, job.output, job.in_place);
  ProgressBar bar(!settings.quiet && !json_to_stdout(settings) && plan.items.size() > 1);
  std::vector<FileReport> reports = run_batch(plan, operation, job, settings.jobs,
                                              [&](size_t done, size_t total, const FileReport& latest) { bar.update(done, total, latest); });
  bar.finish();
  for (const FileReport& report : reports)
    if (report.status == "failed") spdlog::error("{}", report.error);
  return reports;
}

bool batch_mode(const Settings& settings) {
  return settings.paths.size() > 1 || std::filesystem::is_directory(settings.paths.front());
}

int run_inspect(const Settings& settings) {
  std::vector<FileReport> reports = run_all(settings, Operation::Inspect, batch_mode(settings));
  if (!json_to_stdout(settings))
    for (const FileReport& report : reports)
      if (report.status != "skipped") std::cout << text_report(report, true);
  bool written = emit_json(settings, "inspect", reports, nullptr);
  return summarize(reports).failed || !written ? kExitError : kExitOk;
}

// prune and sign.
int run_rewrite(const Settings& settings, Operation operation, const char* command) {
  const JobOptions& job = settings.job;
  if (job.in_place == !job.output.empty() && !job.dry_run) {
    spdlog::error("{} needs exactly one of -o OUT and --in-place (or --dry-run)", command);
    return kExitError;
  }
  if (!job.backup_suffix.empty() && !job.in_place) {
    spdlog::error("--backup only makes sense with --in-place");
    return kExitError;
  }
  // -o -: standard output carries the output alone, so the report goes to stderr.
  bool output_to_stdout = is_standard_stream(job.output) && !job.dry_run;
  if (output_to_stdout && json_to_stdout(settings)) {
    spdlog::error("-o - and --json - both want standard output: give --json a file");
    return kExitError;
  }
  if (output_to_stdout && isatty(STDOUT_FILENO)) {
    spdlog::error("-o - would write a binary file to the terminal: redirect or pipe standard output");
    return kExitError;
  }
  std::ostream& text = output_to_stdout ? std::cerr : std::cout;
  bool batch = batch_mode(settings);
  std::vector<FileReport> reports = run_all(settings, operation, batch);
  if (!json_to_stdout(settings) && !settings.quiet) {
    for (const FileReport& report : reports)
      text << (batch && settings.verbosity == 0 ? short_report(report) : text_report(report, false));
    if (batch) text << summary_line(summarize(reports), job.dry_run) << "\n";
  }
  bool written = emit_json(settings, command, reports, nullptr);
  return summarize(reports).failed || !written ? kExitError : kExitOk;
}

int run_verify(const Settings& settings) {
  std::vector<FileReport> reports = run_all(settings, Operation::Inspect, batch_mode(settings));
  bool invalid = false;
  for (const FileReport& report : reports) {
    if (report.status == "failed" || report.status == "skipped") continue;
    std::vector<std::string> failures = verify_failures(report);
    invalid |= !failures.empty();
    if (json_to_stdout(settings)) continue;
    std::cout << report.path << ": " << (failures.empty() ? "valid" : "INVALID") << "\n";
    for (const std::string& failure : failures) std::cout << "  " << failure << "\n";
    if (settings.verbosity > 0)
      for (const std::string& note : verify_notes(report)) std::cout << "  note: " << note << "\n";
  }
  bool written = emit_json(settings, "verify", reports, nullptr);
  if (summarize(reports).failed || !written) return kExitError;
  return invalid ? kExitFindings : kExitOk;
}

int run_check(const Settings& settings) {
  std::vector<FileReport> reports = run_all(settings, Operation::Inspect, true);
  std::vector<Finding> findings;
  for (const FileReport& report : reports) {
    std::vector<Finding> found = check_findings(report, settings.check);
    findings.insert(findings.end(), found.begin(), found.end());
  }
  if (!json_to_stdout(settings)) {
    for (const Finding& finding : findings) std::cout << finding_line(finding) << "\n";
    if (!settings.quiet) std::cout << check_summary(reports, findings) << "\n";
  }
  bool written = emit_json(settings, "check", reports, &findings);
  if (summarize(reports).failed || !written) return kExitError;
  return findings.empty() ? kExitOk : kExitFindings;
}

void configure_logging(const Settings& settings) {
  auto logger = spdlog::stderr_color_mt("machofix");
  logger->set_pattern("machofix: %^%l%$: %v");
  logger->set_level(settings.quiet           ? spdlog::level::err
                    : settings.verbosity > 0 ? spdlog::level::debug
                                             : spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "machofix: removes unused dylib dependencies from Mach-O files and from the .so blobs of ExecuTorch .pte/.ptd "
      "models, renumbering every library ordinal and re-signing"};
  app.require_subcommand(1);
  app.fallthrough();  // -v/-q work after the subcommand too
  app.set_version_flag("--version", [] {
    return "machofix " MACHOFIX_VERSION "\nLIEF reader: " + machofix::lief_reader_location();
  });
  Settings settings;
  app.add_flag("-v,--verbose", settings.verbosity, "more detail");
  app.add_flag("-q,--quiet", settings.quiet, "errors only");

  CLI::App* inspect = app.add_subcommand("inspect", "show each slice's dependent dylibs, what each supplies, and the signature");
  add_paths(inspect, settings, "Mach-O, .pte or .ptd files, or directories");
  add_json(inspect, settings);
  add_jobs(inspect, settings);
  add_policy(inspect, settings);

  CLI::App* prune = app.add_subcommand("prune", "remove dependent dylibs that supply no symbol, renumber ordinals, re-sign");
  add_paths(prune, settings, "Mach-O, .pte or .ptd files, or directories (recursive)");
  add_output(prune, settings);
  prune->add_flag("--dry-run", settings.job.dry_run, "report what would change; write nothing");
  prune->add_option("--backup", settings.job.backup_suffix, "with --in-place: keep each replaced original as NAME+SUFFIX")
      ->type_name("SUFFIX");
  prune->add_flag("--sign", settings.job.repair.sign_unsigned, "also sign unsigned slices (ad hoc)");
  prune->add_flag("--adhoc", settings.job.repair.replace_identity,
                  "replace an identity (Developer ID) signature with an ad hoc one; without it such files are refused");
  add_resign_invalid(prune, settings);
  add_json(prune, settings);
  add_jobs(prune, settings);
  add_policy(prune, settings);

  CLI::App* sign = app.add_subcommand("sign", "re-sign ad hoc, keeping the signature's structure; sign unsigned files");
  add_paths(sign, settings, "Mach-O, .pte or .ptd files, or directories");
  add_output(sign, settings);
  sign->add_option("--identifier", settings.job.repair.identifier,
                   "identifier for a new signature (default: install name leaf, else file name)");
  sign->add_flag("--adhoc", settings.job.repair.replace_identity, "replace an identity (Developer ID) signature with an ad hoc one");
  add_resign_invalid(sign, settings);
  add_json(sign, settings);
  add_jobs(sign, settings);

  CLI::App* verify = app.add_subcommand("verify", "check every slice's signature: structure, every page and special-slot hash");
  add_paths(verify, settings, "Mach-O, .pte or .ptd files, or directories");
  add_json(verify, settings);
  add_jobs(verify, settings);

  CLI::App* check = app.add_subcommand(
      "check", "CI gate: exit 1 if any dependency supplies no symbol or has an absolute install name outside the system");
  add_paths(check, settings, "Mach-O, .pte or .ptd files, archives, or directories");
  check->add_option("--allow-prefix", settings.check.allowed_prefixes, "also accept absolute install names under PREFIX; repeatable")
      ->type_name("PREFIX");
  add_json(check, settings);
  add_jobs(check, settings);
  add_policy(check, settings);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? kExitOk : kExitError;
  }
  configure_logging(settings);
  if (inspect->parsed()) return run_inspect(settings);
  if (sign->parsed()) return run_rewrite(settings, Operation::Sign, "sign");
  if (verify->parsed()) return run_verify(settings);
  if (check->parsed()) return run_check(settings);
  return run_rewrite(settings, Operation::Prune, "prune");
}

}  // namespace machofix::cli

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MACHOFIX_EXIT_NORMALLY 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define MACHOFIX_EXIT_NORMALLY 1
#endif

int main(int argc, char** argv) {
  int status = machofix::cli::main(argc, argv);
#ifndef MACHOFIX_EXIT_NORMALLY
  // Every output is written, renamed and closed by now. Ending here skips the
  // destructors of static objects, those of the LIEF plugin's tables above all
  // (0.5 ms of a 10 ms .pte run), which would only free memory the kernel is
  // about to take back (mold ends the same way). Sanitizer builds return, so
  // that LeakSanitizer still runs.
  std::cout.flush();
  std::fflush(nullptr);
  _exit(status);
#endif
  return status;
}
