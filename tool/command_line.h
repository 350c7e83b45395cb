// The command line: the commands and their options, `help`, and answers to
// mistakes (an unknown command or option gets the nearest known one).
#pragma once

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/jobs/check.h"
#include "core/jobs/job.h"

namespace machofix::cli {

constexpr int kExitOk = 0;
constexpr int kExitFindings = 1;  // check findings, verify failures
constexpr int kExitError = 2;

struct Settings {
  std::vector<std::string> paths;
  std::string tree;  // --from-tree DIR: the paths are files of that tree (core/jobs/batch.h)
  JobOptions job;
  CheckOptions check;            // the command line's declarations (check)
  std::string contract;          // check --contract FILE; "" looks for one beside each model
  bool no_contract = false;      // check --no-contract: none read
  bool no_app = false;           // check --no-app: an .app given as a PATH is checked file by file
  std::string sarif;             // check --sarif FILE
  std::string sarif_root;        // check --sarif-root DIR: SARIF URIs relative to it
  std::string json;  // "" no JSON, "-" stdout, else a file
  std::string help_topic;  // `machofix help COMMAND`
  unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
  int verbosity = 0;
  bool quiet = false;
};

enum class Command { Inspect, Prune, Sign, Edit, Verify, Check, Fix };

// The command to run, or none when the run is over: help or the version was
// printed (status 0), or a mistake was reported on stderr (status 2).
struct CommandLine {
  std::optional<Command> command;
  int status = kExitOk;
};

CommandLine parse_command_line(int argc, char** argv, Settings& settings);

}  // namespace machofix::cli
