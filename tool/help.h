// How `machofix --help`, `machofix COMMAND --help` and `machofix help [COMMAND]` look:
// a usage line that says what each command needs, each command's own options only,
// and value names (FILE, GLOB, N) instead of CLI11's types and validators.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <string>

namespace machofix::cli {

class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter();
  // What follows "Usage: machofix COMMAND", e.g. "PATH... (-o OUT | --in-place) [OPTIONS]".
  void set_synopsis(const CLI::App* command, std::string synopsis) { synopses_[command] = std::move(synopsis); }

  std::string make_usage(const CLI::App* app, std::string name) const override;
  std::string make_option_name(const CLI::Option* option, bool positional) const override;
  std::string make_option_opts(const CLI::Option* option) const override;

 private:
  std::map<const CLI::App*, std::string> synopses_;
};

// The help text of `command` (the whole program when it has no parent).
std::string help_text(const CLI::App& command);

}  // namespace machofix::cli
