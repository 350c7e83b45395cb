// The CI gate: what `machofix check` reports about a file it has inspected.
//
// Each finding names file, blob key (in a .pte), slice, the rule it breaks (a typed
// Rule; its id, reason and repair become text in tool/rules.cc) and the dependency
// or LC_RPATH concerned, with the file offset of its load command.
//
// Rules that run always (today's gate, no declaration needed):
//  - unused-dependency: a dependency that supplies no symbol (prune removes it);
//  - absolute-install-name: an absolute install name outside the places every Mac
//    has (/usr/lib, /System/Library), --allow-prefix and the provided globs, such as
//    PyTorch's /opt/llvm-openmp/lib/libomp.dylib: users' machines will not have it;
//  - forbidden-dependency: a dependency matching a --forbid glob (install name or its
//    last component), used or not, whatever its path or kind;
//  - relative-install-name: an install name with no '/' or '@' at its start
//    ("liba.dylib"), which dyld resolves against the process's current directory: held
//    to the rule of rpaths relative to it, whatever the contract provides.
// Rules that run once the application declares what it ships (a contract: a contract
// file, or --provided / --allowed-rpath / --required on the command line); without a
// declaration there is nothing to hold an @rpath/ name or an rpath against:
//  - absolute-rpath: an LC_RPATH naming a build machine's directory (absolute, or
//    relative to the current directory), outside the system, --allow-prefix and the
//    allowed-rpath globs;
//  - duplicate-rpath: an LC_RPATH that repeats an earlier one of the slice;
//  - unprovided-dependency: a non-weak @rpath/, @loader_path/ or @executable_path/
//    dependency no provided glob names: nothing says the application ships it;
//  - weak-required-dependency: a weak-linked dependency a required glob names: it
//    must be present at load, and a weak link hides its absence until a call fails.
// Rules of the targets (--min-macos, --arch):
//  - min-macos: a slice whose minimum macOS (LC_BUILD_VERSION, LC_VERSION_MIN_MACOSX)
//    is newer than the oldest the application supports;
//  - arch-missing: an image without a slice for an architecture the application needs.
// Rules of the file itself, what `verify` fails (run always: a file the kernel or
// dyld refuses must not pass the gate):
//  - invalid-signature: a slice whose code signature does not verify (a page hash,
//    a slot, the structure), or an arm64 slice without one; the kernel kills the
//    process that maps such a page, or refuses the arm64 code;
//  - loader-rule: a load-time rule of dyld's the image breaks (core/format/
//    loader_rules.h: segments, load commands, __LINKEDIT, the universal header);
//  - unchecked-slice (a note): a slice machofix does not read (32-bit), so no rule
//    judged it: never counted as passed in silence.
// Rules of the model (a .pte's AOTI delegates):
//  - missing-weights: the weights key a delegate looks up is empty, names an entry
//    that cannot be read, or is found neither in the .pte nor in the .ptd files given
//    (--ptd, the contract's ptd; a warning naming the key when none is given). The
//    Metal backend loads such a model and computes with constants it never received.
// Rules of the application (--app: core/app/process.h loads each model slice in it):
//  - library-not-loaded: a dependency (of the model, or of a library it brings in)
//    that dyld does not find, with every path it tried (a file of the application the
//    kernel or dyld refuses is tried and passed over, with the reason);
//  - the application's own launch: an image of it the kernel or dyld refuses
//    (loader-rule, invalid-signature) or a library it needs at launch that dyld does
//    not find (library-not-loaded), each naming the image (at_launch);
//  - symbol-not-found: an import the library dyld binds it to does not export (or, a
//    flat lookup, no loaded image does). With an application, what it provides is
//    what dyld finds in it: library-not-loaded takes the place of
//    unprovided-dependency, and a dependency found there is neither an
//    unused-dependency nor an absolute-install-name finding.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/app/process.h"
#include "core/jobs/external_data.h"
#include "core/jobs/job.h"

namespace machofix {

enum class Rule {
  UnusedDependency,
  AbsoluteInstallName,
  AbsoluteRpath,
  DuplicateRpath,
  UnprovidedDependency,
  WeakRequiredDependency,
  ForbiddenDependency,
  MinMacos,
  ArchMissing,
  LibraryNotLoaded,
  SymbolNotFound,
  InvalidSignature,
  LoaderRule,
  UncheckedSlice,
  RelativeInstallName,
  MissingWeights,
};
inline constexpr Rule kAllRules[] = {Rule::UnusedDependency,     Rule::AbsoluteInstallName,    Rule::AbsoluteRpath,
                                     Rule::DuplicateRpath,       Rule::UnprovidedDependency,   Rule::WeakRequiredDependency,
                                     Rule::ForbiddenDependency,  Rule::MinMacos,               Rule::ArchMissing,
                                     Rule::LibraryNotLoaded,     Rule::SymbolNotFound,         Rule::InvalidSignature,
                                     Rule::LoaderRule,           Rule::UncheckedSlice,         Rule::RelativeInstallName,
                                     Rule::MissingWeights};

// A finding's level, as compilers and SARIF have them: only an error fails the gate.
// Off: the finding is not reported.
enum class Level { Error, Warning, Note, Off };

// The rule's stable id ("unused-dependency", ...), in every report and in --level.
const char* rule_id(Rule rule);
std::optional<Rule> rule_from_id(const std::string& id);
const char* level_name(Level level);  // "error", "warning", "note", "off"
std::optional<Level> level_from_name(const std::string& name);

// One dependency exempted from one rule (the contract's [[exempt]]).
struct Exemption {
  Rule rule = Rule::UnusedDependency;
  std::string dylib;  // a glob, matched as --keep's are (install name or last component)
};

// How --app loads a model that is a plain file given by path: from where it lies, as
// dlopen() loads an addon or a plug-in (@loader_path is its directory, the files there
// count as present); or as ExecuTorch loads a .pte's .so, written to a temporary
// directory first. Blobs, archive members and standard input are always the latter.
enum class LoadAs { File, Blob };

// What the application declares: a contract file (core/jobs/contract.h) and the command
// line together. Every list is of globs matched as --keep's are (install name or its
// last component) except the prefixes.
struct CheckOptions {
  std::vector<std::string> allowed_prefixes;  // added to /usr/lib/ and /System/Library/
  std::vector<std::string> forbidden;         // --forbid GLOB: no dependency may match
  std::vector<std::string> provided;          // install names the application ships
  std::vector<std::string> allowed_rpaths;    // LC_RPATH values it accepts (globs on the whole path)
  std::vector<std::string> required;          // must be present at load: no weak link to them
  std::string app;                            // --app: load every model slice in this application
  std::string sysroot;                        // --sysroot: where the system's libraries are
  std::optional<uint32_t> min_macos;          // --min-macos, packed as in LC_BUILD_VERSION
  std::vector<std::string> archs;             // --arch: slices every image must have
  std::vector<std::string> ptd_files;         // --ptd: the .ptd files the application passes with the models
  std::optional<LoadAs> load_as;              // --load-as, the contract's load_as; none: File
  // The declare-what-you-ship rules run: a contract file was read, or one of
  // --provided, --allowed-rpath, --required was given.
  bool declared = false;
  // The levels set (--level RULE=LEVEL, the contract's [levels]) over each rule's
  // default (default_level); every warning an error (--warnings-as-errors).
  std::map<Rule, Level> levels;
  bool warnings_as_errors = false;
  std::vector<Exemption> exempt;
};

struct Finding {
  std::string file;
  std::string blob;  // named-data key(s) in a .pte/.ptd, member name in an archive; else empty
  // The blob as it stays when the model is exported again (SARIF's fingerprint): its
  // methods and its key without the content hash ("forward/so_blob").
  std::string blob_role;
  std::string arch;
  Rule rule = Rule::UnusedDependency;
  std::string dylib;       // the dependency's install name (dependency rules)
  DylibKind dylib_kind = DylibKind::Load;
  std::string rpath;       // the LC_RPATH's path (rpath rules)
  std::string repeats;     // duplicate-rpath: the earlier LC_RPATH's path (a trailing slash may differ)
  std::string glob;        // the --forbid or required glob that matched
  std::vector<std::string> symbols;  // what the dylib supplies to this slice (none: unused)
  // symbol-not-found: the symbol, and the path of the library it was looked for in
  // (empty for a flat lookup, or a weak-linked library that is missing)
  std::string symbol;
  std::string expected_in;
  bool lazy = false;  // bound lazily: dlopen succeeds and the first call aborts
  // library-not-loaded and symbol-not-found: the library of the application whose
  // load command or import it is (empty: the model slice itself); the paths tried
  std::string needed_by;
  std::vector<TriedPath> tried;
  // library-not-loaded, loader-rule, invalid-signature (--app): of the application
  // itself, which fails at its launch before any model loads; needed_by is the
  // application's image that needs the library, or that is refused.
  bool at_launch = false;
  // invalid-signature, loader-rule: what verify says is wrong, and the loader rule's
  // own id (docs/loader-rules.md)
  std::string problem;
  std::string loader_rule;
  bool unsigned_code = false;  // invalid-signature: arm64 code with no signature at all
  // missing-weights: the method and backend of the delegate, the weights key it looks
  // up (`problem`: why it is not found), the .ptd files looked in; and whether it is
  // expected from a .ptd when none was given (a warning: nothing says it is missing).
  std::string method;
  std::string backend;
  std::string weights_key;
  std::vector<std::string> looked_in;
  bool expected_from_ptd = false;
  Level level = Level::Error;  // set by apply_levels
  uint32_t min_macos = 0;           // min-macos: the slice's minimum
  uint32_t required_min_macos = 0;  // min-macos: the application's (--min-macos)
  bool removable = false;  // prune removes the dependency
  bool in_sysroot = false;  // unused-dependency: the --sysroot has it (every Mac it stands for does)
  std::optional<DylibDecision> kept_because;  // why prune keeps an unused one
  uint64_t slice_offset = 0;  // of the slice in the file (universal) or blob
  std::optional<uint64_t> offset;  // file offset of the load command, where known
  // In an archive: the member the finding is in, and the load command's offset in the
  // member's own bytes (`offset` is then empty: the archive may be compressed).
  std::string member;
  std::optional<uint64_t> member_offset;
  // One cause, one finding (group_causes): the dependency rules one load command
  // breaks are reported by the first of them; it lists the others in `also`, and each
  // of those names it in `reported_with`. All stay in the list, so that rules can
  // still be counted; the text prints only the first.
  std::vector<Rule> also;
  std::optional<Rule> reported_with;
  // The options check ran with, as command-line words (" --app APP ..."), which the
  // repair hint's `machofix fix` repeats; set by the front end.
  std::string fix_arguments;
};

// One model slice loaded in the application (--app), for the report.
struct AppCheck {
  std::string file;
  std::string blob;  // as in Finding
  std::string member;
  std::string arch;
  std::optional<ModelLoad> load;  // none: the application has no process of this architecture
  bool sysroot = false;           // system libraries were looked up (else taken as present)
};

// The applications models are checked against, each read once for all the models.
class Applications {
 public:
  // Throws Error for an application or sysroot that cannot be read.
  App& get(const std::string& app, const std::string& sysroot);

 private:
  std::map<std::pair<std::string, std::string>, std::unique_ptr<App>> apps_;
};

// The level a finding has unless the user sets one: will the file fail to load, or
// load wrong, where it ships? (docs/commands/check.md gives each rule's and why.)
Level default_level(const Finding& finding);

// Each finding's level from its default, the options' levels and exemptions and
// --warnings-as-errors; findings turned off are dropped.
void apply_levels(std::vector<Finding>& findings, const CheckOptions& options);

// Ties the findings of one cause together (Finding::also, reported_with): the rules a
// dependency breaks in one slice (unused, forbidden, not loaded, unprovided, an
// absolute or relative install name). The most severe reports them, in that order.
void group_causes(std::vector<Finding>& findings);

// `applications` is needed only when options.app is set; `app_checks`, when given,
// receives each model slice's load. `external_data` holds the .ptd files read for
// options.ptd_files (one for the whole run; else read for this file). Throws Error for
// an application, sysroot or .ptd that cannot be read.
std::vector<Finding> check_findings(const FileReport& report, const CheckOptions& options,
                                    Applications* applications = nullptr, std::vector<AppCheck>* app_checks = nullptr,
                                    ExternalData* external_data = nullptr);

// `verify`: every slice of every Mach-O image in the file (blobs of a .pte, members
// of an archive) whose signature is invalid, or which is arm64 and unsigned, and
// every loader rule an image breaks (core/format/loader_rules.h); each line names the blob
// and slice. And the notes on what could not be checked.
std::vector<std::string> verify_failures(const FileReport& report);
std::vector<std::string> verify_notes(const FileReport& report);

// An rpath that names a directory of the machine that built the file (absolute-rpath):
// absolute, or relative to the process's current directory (not @loader_path/ or
// @executable_path/), outside the system, --allow-prefix and the allowed-rpath globs.
bool machine_rpath(const std::string& path, const CheckOptions& options);

// How many dependencies of the file's slices check could not follow: named through a
// run-time path (@rpath/, @loader_path/, @executable_path/), not weak, with no
// application (options.app) to look them up in and nothing declared to hold them to.
size_t unfollowed_dependencies(const FileReport& report, const CheckOptions& options);

}  // namespace machofix
