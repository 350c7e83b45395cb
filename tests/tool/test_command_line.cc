// parse_command_line: a line that names a command is parsed with that command alone
// (tool/command_line.cc says why); it must read the same as with every command, and
// a line that command does not take must still get the answers every command gives.
#include <doctest/doctest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "tool/command_line.h"

using namespace machofix;
using namespace machofix::cli;

namespace {

struct Parsed {
  CommandLine line;
  Settings settings;
};

Parsed parse(std::initializer_list<const char*> words) {
  std::vector<std::string> kept{"machofix"};
  kept.insert(kept.end(), words.begin(), words.end());
  std::vector<char*> argv;
  for (std::string& word : kept) argv.push_back(word.data());
  Parsed parsed;
  parsed.line = parse_command_line(static_cast<int>(argv.size()), argv.data(), parsed.settings);
  return parsed;
}

}  // namespace

TEST_CASE("command line: each command is the one named, with its options and the global ones") {
  CHECK(parse({"inspect", "a.pte"}).line.command == Command::Inspect);
  CHECK(parse({"verify", "a.dylib"}).line.command == Command::Verify);
  CHECK(parse({"check", "a.pte"}).line.command == Command::Check);
  CHECK(parse({"sign", "a.dylib", "-o", "b.dylib"}).line.command == Command::Sign);
  Parsed prune = parse({"-q", "prune", "--jobs", "3", "a.pte", "b.pte", "-o", "out"});
  CHECK(prune.line.command == Command::Prune);
  CHECK(prune.line.status == kExitOk);
  CHECK(prune.settings.quiet);
  CHECK(prune.settings.jobs == 3);
  CHECK(prune.settings.paths == std::vector<std::string>{"a.pte", "b.pte"});
  Parsed verbose = parse({"verify", "a.dylib", "-v", "-v"});  // global flags after the command too
  CHECK(verbose.line.command == Command::Verify);
  CHECK(verbose.settings.verbosity == 2);
}

TEST_CASE("command line: what the named command does not take is answered as before") {
  for (auto words : {std::initializer_list<const char*>{"prune", "--bogus", "a.pte"},  // unknown option: a suggestion
                     {"prune", "--jobs", "0", "a.pte"},                               // out of range
                     {"prun", "a.pte"},                                               // unknown command
                     {"prune"}}) {                                                    // no PATH
    Parsed parsed = parse(words);
    CHECK_FALSE(parsed.line.command);
    CHECK(parsed.line.status == kExitError);
  }
  Parsed help = parse({"help", "prune"});
  CHECK_FALSE(help.line.command);
  CHECK(help.line.status == kExitOk);
}
