#include "tool/help.h"

#include <set>

namespace machofix::cli {

namespace {

// The type names CLI11 makes up for an option that was given none.
bool generic_type_name(const std::string& name) {
  static const std::set<std::string> generic = {"", "TEXT", "INT", "UINT", "FLOAT", "NUMBER", "BOOLEAN", "ENUM", "CHAR"};
  return generic.count(name) > 0;
}

// CLI11 appends each validator's description after a colon ("UINT:UINT in [1 - 1024]").
std::string value_name(const CLI::Option* option) {
  std::string name = option->get_type_name();
  name = name.substr(0, name.find(':'));
  return generic_type_name(name) ? "VALUE" : name;
}

std::string program_name(const CLI::App& command) {
  return command.get_parent() ? program_name(*command.get_parent()) + " " + command.get_name() : command.get_name();
}

}  // namespace

HelpFormatter::HelpFormatter() {
  label("Positionals", "Arguments");
  column_width(28);
}

std::string HelpFormatter::make_usage(const CLI::App* app, std::string name) const {
  auto synopsis = synopses_.find(app);
  if (synopsis == synopses_.end()) return CLI::Formatter::make_usage(app, name);
  return "Usage: " + name + " " + synopsis->second + "\n";
}

std::string HelpFormatter::make_option_name(const CLI::Option* option, bool positional) const {
  if (positional) return option->get_name(true, false) + (option->get_expected_max() > 1 ? "..." : "");
  std::string names = option->get_name(false, true);
  for (size_t comma = names.find(','); comma != std::string::npos; comma = names.find(',', comma + 2)) names.insert(comma + 1, " ");
  return names;
}

std::string HelpFormatter::make_option_opts(const CLI::Option* option) const {
  if (option->get_positional() || option->get_expected_max() == 0) return "";  // flags take no value
  if (!option->get_option_text().empty()) return " " + option->get_option_text();
  return " " + value_name(option);
}

std::string help_text(const CLI::App& command) {
  return command.get_formatter()->make_help(&command, program_name(command), CLI::AppFormatMode::Normal);
}

}  // namespace machofix::cli
