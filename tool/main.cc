// machofix command line: argument parsing and output only; all format knowledge is in core/.
#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>

#include "core/job.h"
#include "tool/report.h"

namespace machofix::cli {

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFindings = 1;  // check findings, verify failures
constexpr int kExitError = 2;

struct Settings {
  std::vector<std::string> files;
  JobOptions job;
  bool json = false;
  int verbosity = 0;
  bool quiet = false;
};

void add_policy_options(CLI::App* command, Settings& settings) {
  command->add_option("--keep", settings.job.repair.prune.keep, "never remove dylibs whose install name (or its last component) matches GLOB; repeatable")
      ->type_name("GLOB");
  command->add_option("--only", settings.job.repair.prune.only, "remove only unused dylibs matching GLOB, e.g. '*libomp*'; repeatable")
      ->type_name("GLOB");
}

void print_failure(const FileReport& report) { spdlog::error("{}", report.error); }

int run_inspect(const Settings& settings) {
  std::vector<FileReport> reports;
  int status = kExitOk;
  for (const std::string& file : settings.files) {
    reports.push_back(run_job(file, Operation::Inspect, settings.job));
    if (reports.back().status == "failed") {
      print_failure(reports.back());
      status = kExitError;
    } else if (!settings.json) {
      std::cout << text_report(reports.back(), true);
    }
  }
  if (settings.json) std::cout << json_document("inspect", reports);
  return status;
}

// prune and sign: one file, written to -o or in place.
int run_rewrite(const Settings& settings, Operation operation, const char* command) {
  const JobOptions& job = settings.job;
  if (job.in_place == !job.output.empty() && !job.dry_run) {
    spdlog::error("{} needs exactly one of -o OUT and --in-place{}", command, operation == Operation::Prune ? " (or --dry-run)" : "");
    return kExitError;
  }
  FileReport report = run_job(settings.files.front(), operation, job);
  if (report.status == "failed") print_failure(report);
  if (settings.json) std::cout << json_document(command, {report});
  else std::cout << text_report(report, false);
  return report.status == "failed" ? kExitError : kExitOk;
}

int run_verify(const Settings& settings) {
  std::vector<FileReport> reports;
  bool unreadable = false, invalid = false;
  for (const std::string& file : settings.files) {
    reports.push_back(run_job(file, Operation::Inspect, settings.job));
    const FileReport& report = reports.back();
    if (report.status == "failed") {
      print_failure(report);
      unreadable = true;
      continue;
    }
    std::vector<std::string> failures = signature_failures(*report.macho);
    invalid |= !failures.empty();
    if (settings.json) continue;
    std::cout << report.path << ": " << (failures.empty() ? "valid" : "INVALID") << "\n";
    for (const std::string& failure : failures) std::cout << "  " << failure << "\n";
    if (settings.verbosity > 0)
      for (const SliceReport& slice : report.macho->slices)
        for (const std::string& note : slice.signature.notes) std::cout << "  " << slice.arch << ": note: " << note << "\n";
  }
  if (settings.json) std::cout << json_document("verify", reports);
  return unreadable ? kExitError : invalid ? kExitFindings : kExitOk;
}

void configure_logging(const Settings& settings) {
  auto logger = spdlog::stderr_color_mt("machofix");
  logger->set_pattern("machofix: %^%l%$: %v");
  logger->set_level(settings.quiet ? spdlog::level::err
                    : settings.verbosity > 0 ? spdlog::level::debug
                                             : spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"machofix: removes unused dylib dependencies from Mach-O files and the .so blobs of ExecuTorch .pte models, renumbering every library ordinal and re-signing"};
  app.require_subcommand(1);
  app.fallthrough();  // -v/-q work after the subcommand too
  app.set_version_flag("--version", "machofix 0.1.0");
  Settings settings;
  app.add_flag("-v,--verbose", settings.verbosity, "more detail on stderr");
  app.add_flag("-q,--quiet", settings.quiet, "errors only on stderr");

  CLI::App* inspect = app.add_subcommand("inspect", "show each slice's dependent dylibs, what each supplies, and the signature");
  inspect->add_option("files", settings.files, "Mach-O files")->required()->check(CLI::ExistingPath);
  inspect->add_flag("--json", settings.json, "machine-readable report on stdout");
  add_policy_options(inspect, settings);

  CLI::App* prune = app.add_subcommand("prune", "remove dependent dylibs that supply no symbol, renumber ordinals, re-sign");
  prune->add_option("file", settings.files, "a Mach-O file")->required()->expected(1)->check(CLI::ExistingPath);
  prune->add_option("-o,--output", settings.job.output, "write the result here (always written; a copy when nothing changes)");
  prune->add_flag("--in-place", settings.job.in_place, "replace the file (atomically) if anything changes");
  prune->add_flag("--dry-run", settings.job.dry_run, "report what would change; write nothing");
  prune->add_flag("--json", settings.json, "machine-readable report on stdout");
  prune->add_flag("--sign", settings.job.repair.sign_unsigned, "also sign unsigned slices (ad hoc)");
  prune->add_flag("--adhoc", settings.job.repair.replace_identity,
                  "replace an identity (Developer ID) signature with an ad hoc one; without it such files are refused");
  add_policy_options(prune, settings);

  CLI::App* sign = app.add_subcommand("sign", "re-sign ad hoc, keeping the signature's structure; sign unsigned files");
  sign->add_option("file", settings.files, "a Mach-O file")->required()->expected(1)->check(CLI::ExistingPath);
  sign->add_option("-o,--output", settings.job.output, "write the result here");
  sign->add_flag("--in-place", settings.job.in_place, "replace the file (atomically) if anything changes");
  sign->add_option("--identifier", settings.job.repair.identifier, "identifier for a new signature (default: install name leaf, else file name)");
  sign->add_flag("--adhoc", settings.job.repair.replace_identity, "replace an identity (Developer ID) signature with an ad hoc one");
  sign->add_flag("--json", settings.json, "machine-readable report on stdout");

  CLI::App* verify = app.add_subcommand("verify", "check every slice's signature: structure, every page and special-slot hash");
  verify->add_option("files", settings.files, "Mach-O files")->required()->check(CLI::ExistingPath);
  verify->add_flag("--json", settings.json, "machine-readable report on stdout");

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
  return run_rewrite(settings, Operation::Prune, "prune");
}

}  // namespace machofix::cli

int main(int argc, char** argv) { return machofix::cli::main(argc, argv); }
