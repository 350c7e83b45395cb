#include "tool/command_line.h"

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>
#include <iterator>
#include <memory>
#include <utility>

#include "core/jobs/contract.h"
#include "core/lief/lief_check.h"
#include "tool/help.h"
#include "tool/suggest.h"

namespace machofix::cli {

namespace {

// --- options shared by several commands -------------------------------------------

void add_paths(CLI::App* command, Settings& settings, const char* what) {
  // A path that does not exist is an error of that path alone (core/jobs/batch.cc), not
  // of the command line: the other inputs are still processed.
  command->add_option("PATH", settings.paths, std::string(what) + "; - reads one from standard input")->required();
  command->add_option("--from-tree", settings.tree,
                      "the PATHs are files of the tree DIR, each handled as a run over DIR handles it (one that is no "
                      "model skipped; -o mirrors DIR): a part of a run over DIR, as a distributed run's tasks are")
      ->type_name("DIR");
}

void add_json(CLI::App* command, Settings& settings) {
  command->add_option("--json", settings.json, "write a JSON report (its schema: docs/json-report.md) to FILE, or stdout with - or no value")
      ->expected(0, 1)
      ->default_str("-")
      ->type_name("[FILE]");
}

void add_jobs(CLI::App* command, Settings& settings) {
  command->add_option("-j,--jobs", settings.jobs, "files processed in parallel (default: number of cores)")
      ->check(CLI::Range(1u, 1024u))
      ->type_name("N");
}

// --keep and --only, in the words of what the command does with an unused dylib:
// prune removes it, inspect shows it as removable, check reports it.
struct PolicyWords {
  const char* keep;
  const char* only;
};
constexpr PolicyWords kPruneWords{"never remove dylibs whose install name (or its last component) matches GLOB; repeatable",
                                  "remove only unused dylibs matching GLOB, e.g. '*libomp*'; repeatable"};
constexpr PolicyWords kInspectWords{
    "show unused dylibs whose install name (or its last component) matches GLOB as kept, not removable; repeatable",
    "show only unused dylibs matching GLOB as removable, e.g. '*libomp*'; repeatable"};
constexpr PolicyWords kCheckWords{
    "no unused-dependency finding for dylibs whose install name (or its last component) matches GLOB; repeatable",
    "unused-dependency findings only for dylibs matching GLOB, e.g. '*libomp*'; repeatable"};

void add_policy(CLI::App* command, Settings& settings, const PolicyWords& words) {
  command->add_option("--keep", settings.job.repair.prune.keep, words.keep)
      ->type_name("GLOB")
      ->allow_extra_args(false);  // one GLOB per --keep: the words after it are paths
  command->add_option("--only", settings.job.repair.prune.only, words.only)
      ->type_name("GLOB")
      ->allow_extra_args(false);
}

void add_output(CLI::App* command, Settings& settings) {
  command->add_option("-o,--output", settings.job.output,
                      "output file (one input file; always written, a copy when nothing changes; - for standard output) "
                      "or directory mirroring the inputs")
      ->type_name("OUT");
  command->add_flag("--in-place", settings.job.in_place, "replace each changed file atomically (new inode, mode kept)");
}

// What prune, edit and fix share besides -o/--in-place: a dry run, a backup, signing.
void add_rewrite_options(CLI::App* command, Settings& settings, const char* dry_run) {
  command->add_flag("--dry-run", settings.job.dry_run, dry_run);
  command->add_option("--backup", settings.job.backup_suffix, "with --in-place: keep each replaced original as NAME+SUFFIX")
      ->type_name("SUFFIX");
  command->add_flag("--sign", settings.job.repair.sign_unsigned, "also sign unsigned slices (ad hoc)");
  command->add_flag("--adhoc", settings.job.repair.replace_identity,
                    "replace an identity (Developer ID) signature with an ad hoc one; without it such files are refused");
}

void add_resign_invalid(CLI::App* command, Settings& settings) {
  command->add_flag("--resign-invalid", settings.job.repair.resign_invalid,
                    "re-sign slices whose input signature is invalid (changed or corrupt after signing); without it "
                    "such files are refused");
}

// --- the commands -----------------------------------------------------------------
// One function per command: its options, its usage line.

struct Commands {
  std::vector<std::pair<const CLI::App*, Command>> to_run;
  const CLI::App* help = nullptr;
};

CLI::App* add_command(CLI::App& app, HelpFormatter& help, const char* name, const char* description, const char* synopsis) {
  CLI::App* command = app.add_subcommand(name, description);
  command->group("Commands");
  help.set_synopsis(command, synopsis);
  return command;
}

// A paragraph of the command's help, after its options and before the footer it
// inherited from machofix's.
void add_note(CLI::App* command, const std::string& note) {
  command->footer(note + "\n\n" + command->get_footer());
}

const char* const kRefusesLoaderRules =
    "A file that breaks one of the loader's rules (dyld's checks, docs/loader-rules.md) is refused, with "
    "--resign-invalid too; every file written is checked against them first.";

CLI::App* add_inspect(CLI::App& app, HelpFormatter& help, const char* name, Settings& settings) {
  CLI::App* inspect = add_command(app, help, name, "show each slice's dependent dylibs, what each supplies, and the signature",
                                  "PATH... [OPTIONS]");
  add_paths(inspect, settings, "Mach-O, .pte or .ptd files, archives of them, or directories");
  add_json(inspect, settings);
  add_jobs(inspect, settings);
  add_policy(inspect, settings, kInspectWords);
  add_note(inspect, "Also lists each loader rule (dyld's checks, docs/loader-rules.md) a file breaks, with its file offset.");
  return inspect;
}

CLI::App* add_prune(CLI::App& app, HelpFormatter& help, const char* name, Settings& settings) {
  CLI::App* prune = add_command(app, help, name, "remove dependent dylibs that supply no symbol, renumber ordinals, re-sign",
                                "PATH... (-o OUT | --in-place | --dry-run) [OPTIONS]");
  add_paths(prune, settings, "Mach-O, .pte or .ptd files, archives of them, or directories (recursive)");
  add_output(prune, settings);
  add_rewrite_options(prune, settings, "report what would change; write nothing");
  add_resign_invalid(prune, settings);
  add_json(prune, settings);
  add_jobs(prune, settings);
  add_policy(prune, settings, kPruneWords);
  add_note(prune, kRefusesLoaderRules);
  return prune;
}

CLI::App* add_sign(CLI::App& app, HelpFormatter& help, const char* name, Settings& settings) {
  CLI::App* sign = add_command(app, help, name, "re-sign ad hoc, keeping the signature's structure; sign unsigned files",
                               "PATH... (-o OUT | --in-place) [OPTIONS]");
  add_paths(sign, settings, "Mach-O, .pte or .ptd files, archives of them, or directories");
  add_output(sign, settings);
  sign->add_option("--identifier", settings.job.repair.identifier,
                   "identifier for a new signature (default: install name leaf, else file name)")
      ->type_name("ID");
  sign->add_flag("--adhoc", settings.job.repair.replace_identity, "replace an identity (Developer ID) signature with an ad hoc one");
  add_resign_invalid(sign, settings);
  add_json(sign, settings);
  add_jobs(sign, settings);
  add_note(sign, kRefusesLoaderRules);
  return sign;
}

void add_edits(CLI::App* command, EditOptions& edit) {
  command->add_option("--change", edit.change,
                      "change the dependency whose install name (or its last component) matches OLD (a glob, as for "
                      "--keep) to NEW; repeatable")
      ->type_name("OLD NEW")
      ->allow_extra_args(false);
  command->add_option("--id", edit.id, "set a dylib's own install name (LC_ID_DYLIB)")->type_name("NAME");
  command->add_option("--add-rpath", edit.add_rpath, "add an LC_RPATH (after the last load command); repeatable")
      ->type_name("PATH")
      ->allow_extra_args(false);
  command->add_flag("--delete-duplicate-rpaths", edit.delete_duplicate_rpaths,
                    "delete every LC_RPATH that repeats an earlier one (dyld refuses such an image when built with "
                    "the macOS 15.4 SDK or later); the first copy stays in its place");
  command->add_option("--delete-rpath", edit.delete_rpath, "delete every LC_RPATH matching GLOB; repeatable")
      ->type_name("GLOB")
      ->allow_extra_args(false);
  command->add_option("--rpath", edit.rpath, "change the LC_RPATH OLD to NEW; repeatable")
      ->type_name("OLD NEW")
      ->allow_extra_args(false);
  command->add_option("--weak-link", edit.weak_link,
                      "weak-link every dependency whose install name (or its last component) matches GLOB, as the "
                      "linker's -weak_library: LC_LOAD_WEAK_DYLIB, every import from it marked weak; repeatable")
      ->type_name("GLOB")
      ->allow_extra_args(false);
}

CLI::App* add_edit(CLI::App& app, HelpFormatter& help, const char* name, Settings& settings) {
  CLI::App* edit = add_command(app, help, name, "change install names and rpaths (install_name_tool's edits), weak-link dependencies, re-sign",
                               "PATH... (-o OUT | --in-place | --dry-run) EDIT... [OPTIONS]");
  add_paths(edit, settings, "Mach-O, .pte or .ptd files, archives of them, or directories (recursive)");
  add_edits(edit, settings.job.repair.edit);
  add_output(edit, settings);
  add_rewrite_options(edit, settings, "report what would change; write nothing");
  add_resign_invalid(edit, settings);
  add_json(edit, settings);
  add_jobs(edit, settings);
  add_note(edit,
           "Edits apply to every slice and every Mach-O blob of a .pte/.ptd, in this order (install_name_tool's): "
           "--delete-duplicate-rpaths, --delete-rpath, --rpath, --id, --change, --add-rpath, each kind in the order "
           "given, then --weak-link on the "
           "result (so its GLOB matches the name after --change). A dependency that cannot be weak-linked (re-exported, "
           "upward, re-exported through the exports trie, sharing a bind opcode with another library; any in a "
           "flat-namespace file or one with LC_LAZY_LOAD_DYLIB) refuses the file (exit 2, nothing written). An edit that matches "
           "nothing (no such dependency or rpath, --id on a file that is not a dylib) or would duplicate an rpath is an "
           "error in a file named on the command line (exit 2, nothing written) and a note in a file found in a "
           "directory or archive. An edit the file already satisfies (NEW is already there) does nothing, so running "
           "the same edit twice changes nothing the second time (--delete-rpath excepted: the second finds nothing to "
           "delete, an error as above). The load commands may grow into the header padding "
           "(before the first section's content); a file without room enough is refused, naming the bytes needed and "
           "available. " + std::string(kRefusesLoaderRules));
  return edit;
}

CLI::App* add_verify(CLI::App& app, HelpFormatter& help, const char* name, Settings& settings) {
  CLI::App* verify = add_command(
      app, help, name, "check every slice's signature (structure, every page and special-slot hash) and the loader's rules",
      "PATH... [OPTIONS]");
  add_paths(verify, settings, "Mach-O, .pte or .ptd files, archives of them, or directories");
  add_json(verify, settings);
  add_jobs(verify, settings);
  add_note(verify,
           "Exit status 1 if a slice's signature is invalid, an arm64 slice is unsigned, or a file breaks one of the "
           "loader's rules (dyld's checks, docs/loader-rules.md); each broken rule is named with its file offset.");
  return verify;
}

// Options of `check` that take one value each, repeatable: the words after it are paths.
void add_globs(CLI::App* command, const char* name, std::vector<std::string>& values, const char* what,
               const char* type = "GLOB") {
  command->add_option(name, values, what)->type_name(type)->allow_extra_args(false);
}

const char* const kCheckRules =
    "Rules (ids in every report): unused-dependency, absolute-install-name, relative-install-name and "
    "forbidden-dependency always run, and so do invalid-signature and loader-rule (what verify fails) and "
    "unchecked-slice (a note for a slice not read). "
    "absolute-rpath, duplicate-rpath, unprovided-dependency and weak-required-dependency run once the application "
    "declares what it ships: a contract file, or --provided, --allowed-rpath or --required; without a declaration "
    "there is nothing to hold an @rpath/ name or an rpath against, and check keeps its plain behaviour.\n\n"
    "The contract file, machofix.toml (TOML; keys provided, allow_prefix, allowed_rpaths, forbid, required, each a "
    "string or an array of strings), is --contract FILE, else the first machofix.toml in each model's directory or "
    "one of its parents. The command line's values add to the file's. A malformed file or an unknown key is an "
    "error (exit 2) naming the file, line and key.\n\n"
    "Levels: a finding is an error (it fails the gate: exit 1), a warning or a note. An unused dependency on a "
    "system library (/usr/lib, /System/Library) and an absolute rpath are warnings: the file still loads "
    "everywhere; every other finding is an error. --level RULE=LEVEL and the contract's [levels] table set a "
    "rule's level (off: not reported), --warnings-as-errors (warnings_as_errors = true) makes every warning an "
    "error, and the contract's [[exempt]] entries (rule, dylib) exempt one dependency from one rule. "
    "docs/commands/check.md gives each rule's level and why.\n\n"
    "--app APP loads each model slice in the application as dyld would (written to a temporary directory and "
    "dlopen()ed by the application's executable, as ExecuTorch loads a .pte's .so): library-not-loaded names a "
    "dependency not found, with every path tried; symbol-not-found an import no library it binds to exports. "
    "min-macos and arch-missing check the targets (--min-macos, --arch). The contract's keys app, sysroot, min_macos "
    "and arch say the same. docs/app-check.md has the rules.\n\n"
    "missing-weights: an AOTI delegate's weights key that is empty, names an entry that cannot be read, or is found "
    "neither in the .pte nor in a .ptd given with --ptd (the contract's ptd): ExecuTorch's Metal backend loads such "
    "a model and computes without its weights. With no .ptd given, weights not in the .pte are a warning naming the "
    "key.";

// The rules of `check` and what they hold the files to: `check` and `fix` take the same.
void add_check_rules(CLI::App* command, Settings& settings) {
  add_globs(command, "--allow-prefix", settings.check.allowed_prefixes,
            "also accept absolute install names and rpaths under PREFIX; repeatable", "PREFIX");
  add_globs(command, "--forbid", settings.check.forbidden,
            "a dependency whose install name (or its last component) matches GLOB is a finding, used or not, "
            "e.g. '*omp*'; repeatable");
  add_globs(command, "--provided", settings.check.provided,
            "the application ships libraries with install names matching GLOB, e.g. '@rpath/libomp.dylib'; repeatable");
  add_globs(command, "--allowed-rpath", settings.check.allowed_rpaths,
            "accept LC_RPATH entries matching GLOB (the whole path), e.g. '/opt/myapp/lib'; repeatable");
  add_globs(command, "--required", settings.check.required,
            "libraries matching GLOB must be present at load: a weak link to them is a finding; repeatable");
  command->add_option("--app", settings.check.app,
                    "load every model in this application as dyld would, and report what does not load or bind: an "
                    ".app bundle, a Mach-O executable, or a directory of the application's libraries")
      ->type_name("APP");
  command->add_option_function<std::string>(
           "--load-as",
           [&settings](const std::string& text) { settings.check.load_as = text == "blob" ? LoadAs::Blob : LoadAs::File; },
           "with --app, how a plain Mach-O given by path is loaded: file (default), dlopen()ed from where it lies "
           "(@loader_path is its directory, the files there ship with it), or blob, written to a temporary directory "
           "first, as ExecuTorch loads a .pte's .so (which .pte blobs, archive members and standard input always are)")
      ->type_name("file|blob")
      ->check(CLI::IsMember({"file", "blob"}));
  command->add_option("--sysroot", settings.check.sysroot,
                    "with --app: look system libraries up here (an SDK's .tbd stubs or a copy of a Mac's libraries); "
                    "without it they are taken as present, their symbols unchecked")
      ->type_name("DIR");
  command->add_option_function<std::string>(
           "--min-macos", [&settings](const std::string& text) { settings.check.min_macos = parse_version(text); },
           "a slice built for a newer macOS than VERSION is a finding (min-macos)")
      ->type_name("VERSION")
      ->check([](const std::string& text) { return parse_version(text) ? std::string() : "not a version such as 13.0: " + text; });
  command->add_option("--arch", settings.check.archs,
                    "an image without a slice for ARCH is a finding (arch-missing); repeatable")
      ->type_name("ARCH")
      ->allow_extra_args(false)
      ->check([](const std::string& arch) {
        return known_arch(arch) ? std::string() : "not an architecture (" + std::string(kArchNames) + "): " + arch;
      });
  command->add_option("--ptd", settings.check.ptd_files,
                    "a .ptd file the application passes with the models: AOTI weights not in a .pte are looked up "
                    "there (missing-weights); repeatable")
      ->type_name("FILE")
      ->allow_extra_args(false);
  command->add_option_function<std::vector<std::string>>(
           "--level",
           [&settings](const std::vector<std::string>& values) {
             for (const std::string& given : values) {
               size_t equals = given.find('=');
               settings.check.levels[*rule_from_id(given.substr(0, equals))] = *level_from_name(given.substr(equals + 1));
             }
           },
           "report RULE's findings at LEVEL: error (fails the gate), warning, note, or off; repeatable, e.g. "
           "--level unused-dependency=error")
      ->type_name("RULE=LEVEL")
      ->allow_extra_args(false)
      ->check([](const std::string& given) -> std::string {
        size_t equals = given.find('=');
        if (equals == std::string::npos) return "not RULE=LEVEL: " + given;
        if (!rule_from_id(given.substr(0, equals))) return "not a rule of check: " + given.substr(0, equals);
        if (!level_from_name(given.substr(equals + 1)))
          return "not a level (error, warning, note or off): " + given.substr(equals + 1);
        return "";
      });
  command->add_flag("--warnings-as-errors", settings.check.warnings_as_errors,
                  "every warning fails the gate, as an error does");
  command->add_option("--contract", settings.contract, "the contract file (TOML) to hold the models to, instead of "
                                                     "a machofix.toml found beside them")
      ->type_name("FILE");
  command->add_flag("--no-contract", settings.no_contract, "read no contract file");
  command->add_flag("--no-app", settings.no_app,
                  "check an .app bundle given as a PATH file by file, instead of loading its images in it as dyld "
                  "would (the default, as --app PATH)");
  command->add_option("--sarif", settings.sarif, "also write the findings as SARIF 2.1.0 to FILE (- for stdout)")
      ->type_name("FILE");
}

CLI::App* add_check(CLI::App& app, HelpFormatter& help, const char* name, Settings& settings) {
  CLI::App* check = add_command(
      app, help, name, "CI gate: exit 1 if a dependency or rpath breaks a rule of portability (or of the contract)",
      "PATH... [OPTIONS]");
  add_paths(check, settings, "Mach-O, .pte or .ptd files, archives of them, or directories");
  add_check_rules(check, settings);
  check->add_option("--sarif-root", settings.sarif_root,
                    "write SARIF URIs relative to DIR (default: the top of the git work tree holding the current "
                    "directory, else the current directory), as code scanning matches them to the repository's files")
      ->type_name("DIR");
  add_json(check, settings);
  add_jobs(check, settings);
  add_policy(check, settings, kCheckWords);
  add_note(check, kCheckRules);
  return check;
}

const char* const kFixNote =
    "For every error check reports with the same options (a finding that fails the gate), fix makes the least edit "
    "that removes it: an unused "
    "dependency is removed (as prune does), a repeated LC_RPATH deleted, and with --app a dependency that is not "
    "loaded renamed to the name dyld finds it by in the application (a library loaded at launch, @rpath/ through an "
    "rpath, else @executable_path/), or to the system's install name (/usr/lib/...); without --app to the name "
    "the contract's provided says. A build machine's rpath the renamed or removed dependencies leave unused goes. "
    "A file is written only if its repaired form passes check with the same options; otherwise nothing is "
    "written for it, the exit status is 1, and the report lists the edits it would have made and the findings "
    "that remain. A file check passes is left as it is (with -o, a byte copy). docs/commands/fix.md has the rules.";

CLI::App* add_fix(CLI::App& app, HelpFormatter& help, const char* name, Settings& settings) {
  CLI::App* fix = add_command(app, help, name, "make models load: the least edit that removes each error of check, "
                                                "written only if the result passes check",
                              "PATH... (-o OUT | --in-place | --dry-run) [OPTIONS]");
  add_paths(fix, settings, "Mach-O, .pte or .ptd files, archives of them, or directories (recursive)");
  add_output(fix, settings);
  add_rewrite_options(fix, settings, "report what would change, and check the result; write nothing");
  add_check_rules(fix, settings);
  add_json(fix, settings);
  add_jobs(fix, settings);
  add_policy(fix, settings, kPruneWords);
  add_note(fix, kFixNote);
  return fix;
}

CLI::App* add_help(CLI::App& app, HelpFormatter& help, Settings& settings) {
  CLI::App* command = add_command(app, help, "help", "show the help of machofix or of a command", "[COMMAND]");
  command->add_option("COMMAND", settings.help_topic, "the command whose options to show")->type_name("COMMAND");
  return command;
}

// Every command to run, in the order the help lists them. Its name is here alone: the
// function that adds it is given it, so that the parse with one command
// (parse_with_its_command) finds every command by the name it has.
struct CommandEntry {
  const char* name;
  CLI::App* (*add)(CLI::App&, HelpFormatter&, const char* name, Settings&);
  Command command;
};
constexpr CommandEntry kCommands[] = {
    {"inspect", add_inspect, Command::Inspect}, {"prune", add_prune, Command::Prune},
    {"sign", add_sign, Command::Sign},          {"edit", add_edit, Command::Edit},
    {"verify", add_verify, Command::Verify},    {"check", add_check, Command::Check},
    {"fix", add_fix, Command::Fix}};

CLI::App* add_entry(CLI::App& app, HelpFormatter& help, const CommandEntry& entry, Settings& settings) {
  return entry.add(app, help, entry.name, settings);
}

Commands add_commands(CLI::App& app, HelpFormatter& help, Settings& settings) {
  Commands commands;
  for (const CommandEntry& entry : kCommands) commands.to_run.push_back({add_entry(app, help, entry, settings), entry.command});
  commands.help = add_help(app, help, settings);
  return commands;
}

// --- mistakes on the command line -----------------------------------------------

std::vector<const CLI::App*> all_commands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* command : all_commands(app)) names.push_back(command->get_name());
  return names;
}

std::string listed(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return text;
}

// "--json", "-j", "--jobs": what a user may type for each option of `command`.
std::vector<std::string> option_spellings(const CLI::App& command) {
  std::vector<std::string> spellings;
  for (const CLI::Option* option : command.get_options()) {
    if (option->get_positional()) continue;
    for (const std::string& name : option->get_lnames()) spellings.push_back("--" + name);
    for (const std::string& name : option->get_snames()) spellings.push_back("-" + name);
  }
  return spellings;
}

std::string see_help(const CLI::App* command) {
  return command ? "run 'machofix help " + command->get_name() + "' for its options" : "run 'machofix help' for the commands";
}

void unknown_command(const CLI::App& app, const std::string& word) {
  std::optional<std::string> meant = nearest(word, command_names(app));
  if (meant) spdlog::error("unknown command '{}'; did you mean '{}'?", word, *meant);
  else spdlog::error("unknown command '{}'; the commands are {}", word, listed(command_names(app)));
}

std::vector<std::string> commands_taking(const CLI::App& app, const std::string& option) {
  std::vector<std::string> takers;
  for (const CLI::App* command : all_commands(app)) {
    std::vector<std::string> theirs = option_spellings(*command);
    if (std::find(theirs.begin(), theirs.end(), option) != theirs.end()) takers.push_back(command->get_name());
  }
  return takers;
}

// An option this command does not take: the nearest one it does take, else the
// commands that take it (or the nearest option of another command).
void unknown_option(const CLI::App& app, const CLI::App* command, const std::string& argument) {
  std::string option = argument.substr(0, argument.find('='));
  std::vector<std::string> own = option_spellings(app);
  if (command) {
    std::vector<std::string> its = option_spellings(*command);
    own.insert(own.end(), its.begin(), its.end());
  }
  std::string where = command ? " for " + command->get_name() : " (options go after the command)";
  if (std::optional<std::string> meant = nearest(option, own))
    return spdlog::error("unknown option '{}'{}; did you mean '{}'?", option, where, *meant);
  std::vector<std::string> elsewhere;
  for (const CLI::App* other : all_commands(app)) {
    std::vector<std::string> theirs = option_spellings(*other);
    elsewhere.insert(elsewhere.end(), theirs.begin(), theirs.end());
  }
  if (std::optional<std::string> meant = nearest(option, elsewhere)) {
    std::vector<std::string> takers = commands_taking(app, *meant);
    return spdlog::error("unknown option '{}'{}; {} {} '{}'", option, where, listed(takers), takers.size() == 1 ? "takes" : "take",
                         *meant);
  }
  spdlog::error("unknown option '{}'{}; {}", option, where, see_help(command));
}

CLI::App* parsed_command(const CLI::App& app) {
  std::vector<CLI::App*> parsed = app.get_subcommands();
  return parsed.empty() ? nullptr : parsed.front();
}

// Every word CLI11 did not recognise is an error, named with a suggestion. False if there was one.
bool all_words_known(const CLI::App& app) {
  const CLI::App* command = parsed_command(app);
  bool known = true;
  bool after_option = false;  // a word right after an unknown option may be its value
  for (const std::string& word : app.remaining(true)) {
    if (word == "--") continue;  // CLI11 keeps the mark after which every word is a path
    bool option = word.size() > 1 && word[0] == '-';
    if (option) {
      unknown_option(app, command, word);
    } else if (!command) {
      unknown_command(app, word);
      return false;  // what follows belongs to a command we do not know
    } else if (!after_option) {
      spdlog::error("unexpected argument '{}'; {}", word, see_help(command));
    }
    known = false;
    after_option = option;
  }
  return known;
}

// `machofix help [COMMAND]`: the exit status.
int show_help(const CLI::App& app, const Settings& settings) {
  if (settings.help_topic.empty()) {
    std::cout << help_text(app);
    return kExitOk;
  }
  for (const CLI::App* command : all_commands(app)) {
    if (command->get_name() != settings.help_topic) continue;
    std::cout << help_text(*command);
    return kExitOk;
  }
  unknown_command(app, settings.help_topic);
  return kExitError;
}

std::string failure_message(const CLI::App* app, const CLI::Error& error) {
  return "machofix: error: " + std::string(error.what()) + "; " + see_help(parsed_command(*app)) + "\n";
}

void configure_app(CLI::App& app, const std::shared_ptr<HelpFormatter>& help, Settings& settings) {
  app.formatter(help);
  help->set_synopsis(&app, "[-v | -q] COMMAND [ARGUMENTS...]");
  app.set_help_flag("-h,--help", "show this help");
  app.allow_extras();             // unknown words are answered with a suggestion (all_words_known)
  app.require_subcommand(0, 1);  // after `help`, a command's name is its argument
  app.fallthrough();             // -v/-q work after the command too
  app.failure_message(failure_message);
  app.set_version_flag("--version", [] {
    return "machofix " MACHOFIX_VERSION "\nLIEF reader: " + machofix::lief_reader_location();
  }, "show the version and which LIEF reader is used");
  app.add_flag("-v,--verbose", settings.verbosity, "more detail");
  app.add_flag("-q,--quiet", settings.quiet, "errors only");
  app.footer("Run 'machofix help COMMAND' for the options of a command. -v and -q go before or after the command.");
}

// The command named on the command line, found before CLI11 parses it: the first
// word that is no option (the options before a command are flags, without values).
// None when there is no such word, or when the help or the version is asked first.
std::optional<std::string> named_command(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word == "-h" || word == "--help" || word == "--version") return std::nullopt;
    if (word.empty() || word[0] != '-') return word;
  }
  return std::nullopt;
}

constexpr const char* kAbout =
    "machofix: removes unused dylib dependencies from Mach-O files and from the .so blobs of ExecuTorch .pte/.ptd "
    "models, renumbering every library ordinal and re-signing";

// The command line parsed with only the command it names, when that command takes
// every word of it: CLI11 builds every option of every command it is given, and
// building all seven cost every run about 1 ms (BENCHMARKS.md, "fixed costs"). None
// otherwise (no command named, `help`, a word or an option CLI11 does not take): the
// messages and the help then need every command, and the line is parsed again.
std::optional<CommandLine> parse_with_its_command(int argc, char** argv, Settings& settings) {
  std::optional<std::string> name = named_command(argc, argv);
  if (!name) return std::nullopt;
  auto known = std::find_if(std::begin(kCommands), std::end(kCommands), [&](const CommandEntry& entry) { return *name == entry.name; });
  if (known == std::end(kCommands)) return std::nullopt;
  CLI::App app{kAbout, "machofix"};
  auto help = std::make_shared<HelpFormatter>();
  configure_app(app, help, settings);
  CLI::App* command = add_entry(app, *help, *known, settings);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError&) {
    return std::nullopt;
  }
  if (!app.remaining(true).empty() || parsed_command(app) != command) return std::nullopt;
  return CommandLine{known->command, kExitOk};
}

CommandLine parse_with_every_command(int argc, char** argv, Settings& settings) {
  CLI::App app{kAbout, "machofix"};
  auto help = std::make_shared<HelpFormatter>();
  configure_app(app, help, settings);
  Commands commands = add_commands(app, *help, settings);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // A misspelt option is the likelier cause of what CLI11 found (a missing PATH...).
    if (error.get_exit_code() != 0 && !all_words_known(app)) return {std::nullopt, kExitError};
    return {std::nullopt, app.exit(error) == 0 ? kExitOk : kExitError};
  }
  if (!all_words_known(app)) return {std::nullopt, kExitError};
  const CLI::App* command = parsed_command(app);
  if (command == commands.help) return {std::nullopt, show_help(app, settings)};
  for (const auto& [parsed, which] : commands.to_run)
    if (command == parsed) return {which, kExitOk};
  std::cerr << help_text(app);
  spdlog::error("no command given");
  return {std::nullopt, kExitError};
}

}  // namespace

CommandLine parse_command_line(int argc, char** argv, Settings& settings) {
  if (std::optional<CommandLine> parsed = parse_with_its_command(argc, argv, settings)) return *parsed;
  settings = Settings{};  // what the first parse set
  return parse_with_every_command(argc, argv, settings);
}

}  // namespace machofix::cli
