#include "tool/rules.h"

#include "core/base/util.h"
#include "tool/report_text.h"

namespace machofix::cli {

const char* rule_reason(Rule rule) {
  switch (rule) {
    case Rule::UnusedDependency:
      return "A dependency that supplies no symbol must still be found at load time: where it is missing, the load fails "
             "for nothing.";
    case Rule::AbsoluteInstallName:
      return "An absolute install name outside /usr/lib and /System/Library (and the contract) names a directory of the "
             "build machine that users' machines do not have.";
    case Rule::AbsoluteRpath:
      return "An LC_RPATH that is absolute (or relative to the current directory) names a directory of the build "
             "machine: dyld searches it on users' machines too.";
    case Rule::DuplicateRpath:
      return "An LC_RPATH that repeats an earlier one byte for byte, in an image built with an SDK older than macOS 15.4: "
             "dyld still loads it, but the same file rebuilt with a newer SDK is refused (\"duplicate LC_RPATH\").";
    case Rule::UnprovidedDependency:
      return "An @rpath/, @loader_path/ or @executable_path/ dependency the contract does not say the application provides.";
    case Rule::WeakRequiredDependency:
      return "A weak-linked dependency the contract requires: a weak link hides its absence until a call fails.";
    case Rule::ForbiddenDependency:
      return "A dependency the contract or --forbid forbids, used or not, under any install name.";
    case Rule::MinMacos:
      return "A slice built for a newer macOS than the oldest the application supports (--min-macos): on older "
             "systems it fails to load, or a symbol it needs is missing.";
    case Rule::ArchMissing:
      return "An image without a slice for an architecture the application runs as (--arch): dyld finds no code to "
             "load there.";
    case Rule::LibraryNotLoaded:
      return "A dependency dyld does not find in the application (--app): the model fails to load with \"Library not "
             "loaded\".";
    case Rule::SymbolNotFound:
      return "An import the library dyld binds it to does not export (--app): the model fails to load with \"Symbol "
             "not found\" (a lazy bind: the first call aborts).";
    case Rule::InvalidSignature:
      return "A code signature that does not verify, or arm64 code without one: the kernel refuses to run it, or kills "
             "the process when it maps the page (`machofix verify` says which).";
    case Rule::LoaderRule:
      return "A load-time rule of dyld's that the image breaks (docs/loader-rules.md): dyld refuses to load it.";
    case Rule::UncheckedSlice:
      return "A slice machofix does not read (32-bit): no rule judged it, so its passing says nothing.";
    case Rule::RelativeInstallName:
      return "An install name with no leading '/' or '@' is a path relative to the process's current directory: "
             "the library is found only when the application is started from the right place.";
    case Rule::MissingWeights:
      return "An AOTI delegate whose weights cannot be found or read: ExecuTorch's Metal backend loads the model anyway "
             "and computes with constants it never received.";
  }
  return "";
}

const char* rule_repair_hint(Rule rule) {
  switch (rule) {
    case Rule::UnusedDependency: return "machofix fix FILE --in-place removes it (as machofix prune does).";
    case Rule::AbsoluteInstallName:
      return "machofix fix FILE --in-place --app APP renames it to the name the application ships it under (or, with "
             "a contract, to the `provided` name with its leaf); machofix edit FILE --in-place --change OLD "
             "@rpath/NAME by hand; or add its prefix to allow_prefix if every user has it.";
    case Rule::AbsoluteRpath:
      return "machofix fix FILE --in-place deletes it (machofix edit FILE --in-place --delete-rpath PATH, or --rpath "
             "PATH @loader_path/...); or list it in allowed_rpaths.";
    case Rule::DuplicateRpath:
      return "machofix fix FILE --in-place (or machofix edit FILE --in-place --delete-duplicate-rpaths) deletes the "
             "later copies: the first stays where it is in the search order.";
    case Rule::UnprovidedDependency:
      return "Ship the library and declare it in the contract's `provided` (or --provided), or link without it.";
    case Rule::WeakRequiredDependency: return "Link the library normally (without -weak_library / -weak-l).";
    case Rule::ForbiddenDependency:
      return "If it supplies no symbol, machofix fix FILE --in-place removes it; otherwise rebuild without it.";
    case Rule::MinMacos: return "Rebuild with -mmacosx-version-min (MACOSX_DEPLOYMENT_TARGET) at the application's minimum.";
    case Rule::ArchMissing: return "Rebuild for the missing architecture and merge the slices (lipo -create).";
    case Rule::LibraryNotLoaded:
      return "machofix fix FILE --in-place --app APP removes it if it supplies no symbol, else renames it to the "
             "library of the same name the application ships (or a system library to its /usr/lib name); otherwise "
             "ship it in the application where one of the paths tried points.";
    case Rule::SymbolNotFound:
      return "Ship the library version that exports the symbol, or rebuild the model against the application's.";
    case Rule::InvalidSignature:
      return "machofix sign --in-place (--resign-invalid for a signature that does not verify) signs it again ad hoc; "
             "an identity signature must be made again with its key (codesign -f -s IDENTITY).";
    case Rule::LoaderRule:
      return "Link the file again: no edit makes a broken layout valid. A repeated LC_RPATH (rpath-duplicate) is the "
             "exception: machofix fix FILE --in-place deletes the later copies.";
    case Rule::UncheckedSlice: return "None needed where no Mac runs it (macOS 10.15 and later run no 32-bit code); lipo -remove drops it.";
    case Rule::RelativeInstallName:
      return "machofix edit FILE --in-place --change NAME @rpath/NAME, and ship NAME where an LC_RPATH points.";
    case Rule::MissingWeights:
      return "Weights the application passes in a .ptd: check with --ptd FILE (the contract's ptd). Otherwise export "
             "the model again: no edit supplies weights.";
  }
  return "";
}

bool rule_needs_contract(Rule rule) {
  switch (rule) {
    case Rule::AbsoluteRpath:
    case Rule::DuplicateRpath:
    case Rule::UnprovidedDependency:
    case Rule::WeakRequiredDependency: return true;
    default: return false;
  }
}

namespace {

// How the load command ties the slice to the dylib, as a verb phrase.
std::string dependency_phrase(const Finding& finding) {
  switch (finding.dylib_kind) {
    case DylibKind::Load: return "depends on " + finding.dylib;
    case DylibKind::Weak: return "weakly depends on " + finding.dylib;
    case DylibKind::Reexport: return "re-exports " + finding.dylib;
    case DylibKind::Upward: return "has an upward dependency on " + finding.dylib;
  }
  return "depends on " + finding.dylib;
}

std::string symbol_list(const std::vector<std::string>& symbols) {
  constexpr size_t kShown = 5;
  std::string list;
  for (size_t i = 0; i < symbols.size() && i < kShown; ++i) list += (i ? ", " : "") + symbols[i];
  if (symbols.size() > kShown) list += ", and " + std::to_string(symbols.size() - kShown) + " more";
  return list;
}

// The forbidden dependency's finding: what removal would do, or why it is not the repair.
std::string forbidden_message(const Finding& finding) {
  std::string message = dependency_phrase(finding) + ", which the forbid glob '" + finding.glob + "' matches (--forbid or the contract)";
  size_t count = finding.symbols.size();
  if (count)
    return message + "; it is used (" + std::to_string(count) + (count == 1 ? " symbol: " : " symbols: ") +
           symbol_list(finding.symbols) + "), so removing it is not the repair: rebuild without it";
  if (finding.removable) return message + "; it supplies no symbol, and `machofix prune` removes it";
  return message + "; it supplies no symbol, but prune keeps it (" +
         (finding.kept_because ? to_text(*finding.kept_because) : std::string()) + ")";
}

std::string tried_list(const std::vector<TriedPath>& tried) {
  std::string list;
  for (const TriedPath& path : tried) list += (list.empty() ? "" : ", ") + ("'" + path.path + "' (" + path.reason + ")");
  return list.empty() ? "nothing" : list;
}

std::string needed_by_phrase(const Finding& finding) {
  return finding.needed_by.empty() ? "" : " (needed by " + finding.needed_by + ", which the model brings in)";
}

// A finding of the application itself (--app): it fails at launch, before any model.
std::string launch_message(const Finding& finding) {
  std::string cannot = "the application cannot launch: ";
  switch (finding.rule) {
    case Rule::LibraryNotLoaded:
      return cannot + finding.needed_by + " depends on " + finding.dylib + ", which dyld does not find; tried: " +
             tried_list(finding.tried);
    case Rule::InvalidSignature: return cannot + "the code signature of " + finding.needed_by + " is invalid: " + finding.problem;
    default: return cannot + "dyld refuses " + finding.needed_by + " (" + finding.loader_rule + "): " + finding.problem;
  }
}

std::string library_not_loaded_message(const Finding& finding) {
  std::string subject = finding.needed_by.empty() ? dependency_phrase(finding) : "a library it brings in depends on " + finding.dylib;
  return subject + ", which dyld does not find in the application" + needed_by_phrase(finding) + "; tried: " + tried_list(finding.tried);
}

std::string missing_weights_message(const Finding& finding) {
  std::string delegate = "the " + finding.backend + " delegate of method '" + finding.method + "'";
  if (finding.weights_key.empty())
    return delegate + " has an empty weights key: the backend finds no weights and computes without them";
  std::string key = "'" + finding.weights_key + "'";
  if (finding.expected_from_ptd)
    return delegate + " expects its weights " + key + " from a .ptd, and none was given (--ptd FILE checks it there)";
  if (finding.looked_in.empty() || finding.problem.find("no such key") == std::string::npos)
    return delegate + " cannot read its weights " + key + " (" + finding.problem + "): the backend computes without them";
  std::string files;
  for (const std::string& file : finding.looked_in) files += (files.empty() ? "" : ", ") + file;
  return delegate + " finds its weights " + key + " neither in the file nor in the .ptd given (" + files +
         "): the backend computes without them";
}

std::string symbol_not_found_message(const Finding& finding) {
  std::string where = finding.dylib == "flat namespace" ? "in any image the application has loaded (a flat-namespace lookup)"
                      : finding.expected_in.empty()     ? "in " + finding.dylib + ", which is missing (a weak link)"
                                                        : "in " + finding.dylib + " (" + finding.expected_in + ")";
  return "imports " + finding.symbol + ", which dyld does not find " + where + needed_by_phrase(finding) +
         (finding.lazy ? "; bound lazily, so dlopen succeeds and the first call aborts" : "");
}

}  // namespace

std::string finding_message(const Finding& finding) {
  if (finding.at_launch) return launch_message(finding);
  switch (finding.rule) {
    case Rule::UnusedDependency:
      return dependency_phrase(finding) + ", which supplies no symbol; `machofix prune` removes it";
    case Rule::AbsoluteInstallName:
      return dependency_phrase(finding) +
             ", an absolute path outside /usr/lib and /System/Library that users' machines will not have";
    case Rule::AbsoluteRpath:
      return "LC_RPATH " + finding.rpath +
             (finding.rpath[0] == '/' ? " is an absolute path" : " is relative to the current directory") +
             " of the build machine, outside the system, allow_prefix and allowed_rpaths";
    case Rule::DuplicateRpath:
      return "LC_RPATH " + finding.rpath + " repeats an earlier LC_RPATH of the slice; dyld refuses that in images built "
             "with the macOS 15.4 SDK or later";
    case Rule::UnprovidedDependency:
      return dependency_phrase(finding) + ", which the contract does not list as provided by the application";
    case Rule::WeakRequiredDependency:
      return dependency_phrase(finding) + ", which the contract requires ('" + finding.glob +
             "'): a weak link lets the model load without it";
    case Rule::ForbiddenDependency: return forbidden_message(finding);
    case Rule::MinMacos:
      return "built for macOS " + version_text(finding.min_macos) + " and later, newer than the application's minimum, macOS " +
             version_text(finding.required_min_macos);
    case Rule::ArchMissing: return "no " + finding.arch + " slice, which the application needs";
    case Rule::LibraryNotLoaded: return library_not_loaded_message(finding);
    case Rule::SymbolNotFound: return symbol_not_found_message(finding);
    case Rule::InvalidSignature:
      if (finding.unsigned_code) return "arm64 code with no code signature, which the kernel refuses to run";
      return "its code signature is invalid: " + finding.problem;
    case Rule::LoaderRule: return "dyld refuses to load it (" + finding.loader_rule + "): " + finding.problem;
    case Rule::UncheckedSlice: return "a 32-bit slice, which machofix does not read: no rule checked it";
    case Rule::RelativeInstallName:
      return dependency_phrase(finding) + ", a path relative to the process's current directory, where dyld looks for it";
    case Rule::MissingWeights: return missing_weights_message(finding);
  }
  return "";
}

std::string shell_quoted(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") ==
                           std::string::npos)
    return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string repair_command(const Finding& finding) {
  std::string file = shell_quoted(finding.file);
  // The application's to repair, not the model's.
  if (finding.at_launch)
    return finding.rule == Rule::InvalidSignature ? "machofix sign " + shell_quoted(finding.needed_by) + " --in-place --resign-invalid"
                                                  : "";
  // An error fails the gate: `fix` removes it (core/jobs/fix.h), run with the options
  // check ran with. A warning does not, and fix leaves a file that passes as it is: its
  // hint is the one edit that removes it.
  std::string fix = "machofix fix " + file + " --in-place" + finding.fix_arguments;
  bool error = finding.level == Level::Error;
  bool unused = finding.symbols.empty() && finding.removable;
  std::string prune = "machofix prune " + file + " --in-place --only " + shell_quoted(last_path_component(finding.dylib));
  switch (finding.rule) {
    case Rule::UnusedDependency: return error ? fix : prune;
    case Rule::AbsoluteInstallName:
      if (unused) return error ? fix : prune;  // an unused one is removed rather than renamed
      return "machofix edit " + file + " --in-place --change " + shell_quoted(finding.dylib) + " " +
             shell_quoted("@rpath/" + last_path_component(finding.dylib));
    case Rule::AbsoluteRpath:
      return error ? fix : "machofix edit " + file + " --in-place --delete-rpath " + shell_quoted(finding.rpath);
    case Rule::RelativeInstallName:
      return "machofix edit " + file + " --in-place --change " + shell_quoted(finding.dylib) + " " +
             shell_quoted("@rpath/" + last_path_component(finding.dylib));
    case Rule::DuplicateRpath: return error ? fix : "machofix edit " + file + " --in-place --delete-duplicate-rpaths";
    case Rule::ForbiddenDependency:
      if (!unused) return "";
      return error ? fix : prune;
    // The model's own dependency: removed when unused, else renamed to what the
    // application ships (fix says why when it cannot). A library's is the application's.
    case Rule::LibraryNotLoaded:
      if (!finding.needed_by.empty()) return "";
      return error ? fix : unused ? prune : "";
    case Rule::InvalidSignature:
      return "machofix sign " + file + " --in-place" +
             (finding.unsigned_code ? "" : " --resign-invalid");
    case Rule::UnprovidedDependency:
    case Rule::WeakRequiredDependency:
    case Rule::MinMacos:
    case Rule::ArchMissing:
    case Rule::SymbolNotFound:
    case Rule::LoaderRule:
      // A repeated rpath is the one loader rule an edit repairs.
      if (finding.loader_rule == "rpath-duplicate")
        return error ? fix : "machofix edit " + file + " --in-place --delete-duplicate-rpaths";
      return "";
    case Rule::UncheckedSlice: return "";
    case Rule::MissingWeights:
      return finding.expected_from_ptd ? "machofix check " + file + " --ptd WEIGHTS.ptd" : "";
  }
  return "";
}

}  // namespace machofix::cli
