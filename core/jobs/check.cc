#include "core/jobs/check.h"

#include <fnmatch.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "core/app/dyld.h"
#include "core/io/file_io.h"
#include "core/rewrite/prune.h"

namespace machofix {

namespace {

const char* const kSystemPrefixes[] = {"/usr/lib/", "/System/Library/"};
const char* const kRelativePrefixes[] = {"@rpath/", "@loader_path/", "@executable_path/"};

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

bool any_matches(const std::vector<std::string>& globs, const std::string& install_name) {
  return std::any_of(globs.begin(), globs.end(),
                     [&](const std::string& glob) { return install_name_matches(glob, install_name); });
}

const std::string* first_match(const std::vector<std::string>& globs, const std::string& install_name) {
  auto found = std::find_if(globs.begin(), globs.end(),
                            [&](const std::string& glob) { return install_name_matches(glob, install_name); });
  return found == globs.end() ? nullptr : &*found;
}

bool under_allowed_prefix(const std::string& path, const CheckOptions& options) {
  for (const char* prefix : kSystemPrefixes)
    if (starts_with(path, prefix)) return true;
  return std::any_of(options.allowed_prefixes.begin(), options.allowed_prefixes.end(),
                     [&](const std::string& prefix) { return starts_with(path, prefix); });
}

// An absolute install name users' machines will have: the system's, an allowed
// prefix's, or one the application says it provides.
bool absolute_name_allowed(const std::string& install_name, const CheckOptions& options) {
  if (install_name.empty() || install_name[0] != '/') return true;  // @rpath/..., @loader_path/...: relocatable
  return under_allowed_prefix(install_name, options) || any_matches(options.provided, install_name);
}

bool relative_name(const std::string& install_name) {
  return std::any_of(std::begin(kRelativePrefixes), std::end(kRelativePrefixes),
                     [&](const char* prefix) { return starts_with(install_name, prefix); });
}

}  // namespace

bool machine_rpath(const std::string& path, const CheckOptions& options) {
  if (starts_with(path, "@")) return false;
  if (std::any_of(options.allowed_rpaths.begin(), options.allowed_rpaths.end(),
                  [&](const std::string& glob) { return fnmatch(glob.c_str(), path.c_str(), 0) == 0; }))
    return false;
  return !under_allowed_prefix(path, options);
}

namespace {

struct SliceContext {
  const std::string& file;
  const std::string& blob;
  const SliceReport& slice;
  std::vector<Finding>& findings;
  const ModelLoad* load = nullptr;  // the slice loaded in the application (--app)

  Finding& add(Rule rule, std::optional<uint64_t> offset) {
    Finding finding;
    finding.file = file;
    finding.blob = blob;
    finding.arch = slice.arch;
    finding.rule = rule;
    finding.slice_offset = slice.offset;
    finding.offset = offset;
    return findings.emplace_back(std::move(finding));
  }

  Finding& add(Rule rule, const DylibReport& dylib) {
    Finding& finding = add(rule, dylib.command_offset);
    finding.dylib = dylib.install_name;
    finding.dylib_kind = dylib.kind;
    finding.symbols = dylib.symbols;
    finding.removable = dylib.removable();
    if (!dylib.removable()) finding.kept_because = dylib.decision;
    return finding;
  }
};

// dyld finds the dependency among the application's own files: a system library (taken
// as present, or found in the sysroot) is not the application's to provide.
bool found_in_app(const SliceContext& context, const DylibReport& dylib) {
  if (!context.load) return false;
  for (const DependencyOutcome& outcome : context.load->dependencies)
    if (outcome.ordinal == dylib.ordinal) return outcome.resolved && outcome.local;
  return false;
}

void check_dylib(SliceContext& context, const DylibReport& dylib, const CheckOptions& options) {
  const std::string& name = dylib.install_name;
  bool weak = dylib.kind == DylibKind::Weak;
  // In the application named, a dependency dyld finds there is provided: an unused
  // one costs a load that succeeds, an absolute name one the application satisfies.
  bool provided_by_app = found_in_app(context, dylib);
  if (dylib.removable() && !provided_by_app)
    context.add(Rule::UnusedDependency, dylib).in_sysroot = sysroot_holds(options.sysroot, name);
  // A sysroot that holds it says users' Macs have it.
  if (!absolute_name_allowed(name, options) && !provided_by_app && !sysroot_holds(options.sysroot, name))
    context.add(Rule::AbsoluteInstallName, dylib);
  if (!name.empty() && name[0] != '/' && name[0] != '@') context.add(Rule::RelativeInstallName, dylib);
  // With an application, what it provides is what dyld finds in it: library-not-loaded
  // says so for the dependencies it does not, with the paths tried.
  if (options.declared && options.app.empty() && relative_name(name) && !weak && !any_matches(options.provided, name))
    context.add(Rule::UnprovidedDependency, dylib);
  if (const std::string* glob = first_match(options.required, name); glob && weak)
    context.add(Rule::WeakRequiredDependency, dylib).glob = *glob;
  if (const std::string* glob = first_match(options.forbidden, name))
    context.add(Rule::ForbiddenDependency, dylib).glob = *glob;
}

bool breaks_loader_rule(const SliceReport& slice, const char* rule, uint64_t offset) {
  return std::any_of(slice.loader_rules.begin(), slice.loader_rules.end(),
                     [&](const RuleViolation& violation) { return violation.rule == rule && violation.offset == offset; });
}

// A repeated LC_RPATH, as dyld compares them (strcmp: a trailing slash makes another
// path). Where dyld refuses the image for it (its SDK's epoch: the loader rule
// rpath-duplicate), that finding says so; under an older SDK the contract's does.
void check_rpaths(SliceContext& context, const CheckOptions& options) {
  std::set<std::string> seen;
  for (const RpathReport& rpath : context.slice.rpaths) {
    if (machine_rpath(rpath.path, options)) context.add(Rule::AbsoluteRpath, rpath.command_offset).rpath = rpath.path;
    if (seen.insert(rpath.path).second || breaks_loader_rule(context.slice, "rpath-duplicate", rpath.command_offset)) continue;
    Finding& finding = context.add(Rule::DuplicateRpath, rpath.command_offset);
    finding.rpath = rpath.path;
    finding.repeats = rpath.path;
  }
}

void check_min_macos(SliceContext& context, const CheckOptions& options) {
  if (!options.min_macos) return;
  for (const BuildTarget& target : context.slice.build_targets)
    if (target.platform == kPlatformMacOS && target.min_os > *options.min_macos)
    {
      Finding& finding = context.add(Rule::MinMacos, context.slice.offset + target.command_offset);
      finding.min_macos = target.min_os;
      finding.required_min_macos = *options.min_macos;
    }
}

void check_archs(const MachOReport& macho, const std::string& file, const std::string& blob, const CheckOptions& options,
                 std::vector<Finding>& findings) {
  for (const std::string& arch : options.archs) {
    if (std::any_of(macho.slices.begin(), macho.slices.end(), [&](const SliceReport& slice) { return slice.arch == arch; }))
      continue;
    Finding finding;
    finding.file = file;
    finding.blob = blob;
    finding.arch = arch;
    finding.rule = Rule::ArchMissing;
    finding.offset = macho.slices.empty() ? std::nullopt : std::optional<uint64_t>(macho.slices.front().offset);
    findings.push_back(std::move(finding));
  }
}

ModelSlice model_slice(const SliceReport& slice) {
  ModelSlice model;
  model.arch = slice.arch;
  for (const DylibReport& report : slice.dylibs) {
    Dylib dylib;
    dylib.ordinal = report.ordinal;
    dylib.kind = report.kind;
    dylib.install_name = report.install_name;
    model.dependencies.push_back(std::move(dylib));
  }
  for (const RpathReport& rpath : slice.rpaths) model.rpaths.push_back(rpath.path);
  model.build_targets = slice.build_targets;
  model.imports = slice.imports;
  model.install_name = slice.install_name;
  model.two_level = std::find(slice.flags.begin(), slice.flags.end(), "flat-namespace") == slice.flags.end();
  return model;
}

const DylibReport* dependency(const SliceReport& slice, int ordinal) {
  for (const DylibReport& dylib : slice.dylibs)
    if (dylib.ordinal == ordinal) return &dylib;
  return nullptr;
}

std::optional<uint64_t> dependency_offset(const SliceReport& slice, int ordinal) {
  const DylibReport* dylib = dependency(slice, ordinal);
  return dylib ? std::optional<uint64_t>(dylib->command_offset) : std::nullopt;
}

// Where a finding of the load points in the file: the model's load command of the
// dependency it concerns, or of the one that brought in the library it concerns;
// else (a flat lookup of the model) the slice.
uint64_t load_offset(const SliceContext& context, const ModelLoad& load, size_t image, int ordinal) {
  int model_ordinal = image == load.model_index ? ordinal : load.via_ordinal[image];
  if (std::optional<uint64_t> offset = dependency_offset(context.slice, model_ordinal)) return *offset;
  return context.slice.offset;
}

// The application's own launch failing: no model loads in it.
void check_launch(SliceContext& context, const ModelLoad& load) {
  for (const RefusedImage& refused : load.launch_refused) {
    Finding& finding = context.add(refused.refusal.signature ? Rule::InvalidSignature : Rule::LoaderRule, context.slice.offset);
    finding.problem = refused.refusal.problem;
    finding.loader_rule = refused.refusal.rule;
    finding.needed_by = refused.path;
    finding.at_launch = true;
  }
  for (const MissingLibrary& missing : load.launch_missing) {
    Finding& finding = context.add(Rule::LibraryNotLoaded, context.slice.offset);
    finding.dylib = missing.install_name;
    finding.needed_by = load.image_paths[missing.needed_by];
    finding.tried = missing.tried;
    finding.at_launch = true;
  }
}

// library-not-loaded and symbol-not-found, from the slice's load in the application.
void check_load(SliceContext& context, const ModelLoad& load) {
  check_launch(context, load);
  auto needed_by = [&](size_t image) { return image == load.model_index ? std::string() : load.image_paths[image]; };
  for (const MissingLibrary& missing : load.missing) {
    const DylibReport* own = missing.needed_by == load.model_index ? dependency(context.slice, missing.ordinal) : nullptr;
    Finding& finding = own ? context.add(Rule::LibraryNotLoaded, *own)
                           : context.add(Rule::LibraryNotLoaded, load_offset(context, load, missing.needed_by, missing.ordinal));
    finding.dylib = missing.install_name;
    finding.needed_by = needed_by(missing.needed_by);
    finding.tried = missing.tried;
  }
  for (const BindingOutcome& binding : load.bindings) {
    if (binding.verdict != BindVerdict::Missing) continue;
    Finding& finding = context.add(Rule::SymbolNotFound, load_offset(context, load, binding.importer, binding.ordinal));
    finding.dylib = binding.library;
    finding.symbol = binding.symbol;
    finding.expected_in = binding.expected_in;
    finding.lazy = binding.lazy;
    finding.needed_by = needed_by(binding.importer);
  }
}

struct CheckRun {
  const CheckOptions& options;
  Applications* applications;
  std::vector<AppCheck>* app_checks;
  ExternalData& external_data;
  std::vector<Finding>& findings;
  // The file is a plain Mach-O given by path (not a member, not standard input) and
  // --load-as file: --app dlopen()s it from where it lies.
  bool from_own_path = false;
};

// An AOTI delegate's weights, as the backend's init looks them up: in the .ptd files
// the application passes first (MergedDataMap), then in the program's named data.
void check_weights(const PteReport& pte, const std::string& file, CheckRun& run) {
  for (const DelegateReport& delegate : pte.delegates) {
    if (!delegate.aoti || delegate.aoti->weights_found) continue;
    const DelegateReport::AotiKeys& keys = *delegate.aoti;
    if (!keys.weights_key.empty() && run.external_data.holder(run.options.ptd_files, keys.weights_key)) continue;
    Finding& finding = run.findings.emplace_back();
    finding.file = file;
    finding.rule = Rule::MissingWeights;
    finding.method = delegate.method;
    finding.backend = delegate.id;
    finding.weights_key = keys.weights_key;
    finding.problem = keys.weights_missing;
    finding.looked_in = run.options.ptd_files;
    finding.offset = keys.weights_missing_at;
    // Not in the file and no .ptd given: the application may well pass the one that
    // holds it; an empty key or an entry that cannot be read is broken wherever it ships.
    finding.expected_from_ptd = !keys.weights_key.empty() && !keys.weights_unreadable && run.options.ptd_files.empty();
  }
}

// What verify fails: a bad or missing (arm64) signature, a loader rule broken.
void check_verifiable(SliceContext& context) {
  const SliceReport& slice = context.slice;
  bool unsigned_code = slice.signature.status == SignatureStatus::Unsigned;
  for (const std::string& failure : slice_signature_failures(slice)) {
    Finding& finding = context.add(Rule::InvalidSignature, slice.offset);
    finding.problem = failure;
    finding.unsigned_code = unsigned_code;
  }
  for (const RuleViolation& violation : slice.loader_rules) {
    Finding& finding = context.add(Rule::LoaderRule, violation.offset);
    finding.problem = violation.message;
    finding.loader_rule = violation.rule;
    // The one loader rule an edit repairs: its rpath, for the repair command.
    for (const RpathReport& rpath : slice.rpaths)
      if (violation.rule == "rpath-duplicate" && rpath.command_offset == violation.offset) finding.rpath = rpath.path;
  }
}

// The universal header's own loader rules: findings of the file, not of a slice.
void check_universal_rules(const MachOReport& macho, const std::string& file, const std::string& blob,
                           std::vector<Finding>& findings) {
  for (const RuleViolation& violation : macho.loader_rules) {
    Finding& finding = findings.emplace_back();
    finding.file = file;
    finding.blob = blob;
    finding.rule = Rule::LoaderRule;
    finding.offset = violation.offset;
    finding.problem = violation.message;
    finding.loader_rule = violation.rule;
  }
}

void check_macho(const MachOReport& macho, const std::string& file, const std::string& blob, CheckRun& run) {
  const CheckOptions& options = run.options;
  check_universal_rules(macho, file, blob, run.findings);
  check_archs(macho, file, blob, options, run.findings);
  for (const SliceReport& slice : macho.slices) {
    SliceContext context{file, blob, slice, run.findings};
    if (!slice.handled) {
      context.add(Rule::UncheckedSlice, slice.offset);
      continue;
    }
    check_verifiable(context);
    std::optional<ModelLoad> load;
    if (!options.app.empty() && run.applications && slice.handled) {
      App& app = run.applications->get(options.app, options.sysroot);
      if (app.launched(slice.arch)) {
        ModelSlice model = model_slice(slice);
        if (run.from_own_path && blob.empty()) model.path = file;
        load = app.load_model(model);
      }
      if (run.app_checks) run.app_checks->push_back({file, blob, "", slice.arch, load, app.has_sysroot()});
      context.load = load ? &*load : nullptr;
    }
    for (const DylibReport& dylib : slice.dylibs) check_dylib(context, dylib, options);
    if (options.declared) check_rpaths(context, options);
    check_min_macos(context, options);
    if (load) check_load(context, *load);
  }
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// A blob machofix cannot read and no loader rule explains: nothing judged it, so it
// must not pass in silence (an unchecked-slice error, with the reader's reason).
void unreadable_blob(const BlobReport& blob, const std::string& file, std::vector<Finding>& findings) {
  Finding& finding = findings.emplace_back();
  finding.file = file;
  finding.blob = join(blob.keys);
  finding.rule = Rule::UncheckedSlice;
  finding.offset = blob.offset;
  finding.problem = blob.error;
}

// What stays of a blob when the model is exported again: the methods whose delegates
// load it, and its keys without their content hash.
std::string blob_role(const PteReport& pte, const BlobReport& blob) {
  std::vector<std::string> methods, keys;
  for (const DelegateReport& delegate : pte.delegates)
    if (delegate.aoti && std::find(blob.keys.begin(), blob.keys.end(), delegate.aoti->so_key) != blob.keys.end())
      methods.push_back(delegate.method);
  // A content-hash key (the report says which: sha256 of the blob, then "_so_blob")
  // without its hash.
  for (const std::string& key : blob.keys) {
    bool hashed = std::any_of(pte.named_data.begin(), pte.named_data.end(),
                              [&](const NamedDataReport& named) { return named.key == key && named.content_hash_key; });
    keys.push_back(hashed && key.size() > blob.sha256.size() + 1 ? key.substr(blob.sha256.size() + 1) : key);
  }
  return (methods.empty() ? "" : join(methods) + "/") + join(keys);
}

}  // namespace

const char* rule_id(Rule rule) {
  switch (rule) {
    case Rule::UnusedDependency: return "unused-dependency";
    case Rule::AbsoluteInstallName: return "absolute-install-name";
    case Rule::AbsoluteRpath: return "absolute-rpath";
    case Rule::DuplicateRpath: return "duplicate-rpath";
    case Rule::UnprovidedDependency: return "unprovided-dependency";
    case Rule::WeakRequiredDependency: return "weak-required-dependency";
    case Rule::ForbiddenDependency: return "forbidden-dependency";
    case Rule::MinMacos: return "min-macos";
    case Rule::ArchMissing: return "arch-missing";
    case Rule::LibraryNotLoaded: return "library-not-loaded";
    case Rule::SymbolNotFound: return "symbol-not-found";
    case Rule::InvalidSignature: return "invalid-signature";
    case Rule::LoaderRule: return "loader-rule";
    case Rule::UncheckedSlice: return "unchecked-slice";
    case Rule::RelativeInstallName: return "relative-install-name";
    case Rule::MissingWeights: return "missing-weights";
  }
  return "?";
}

std::optional<Rule> rule_from_id(const std::string& id) {
  for (Rule rule : kAllRules)
    if (id == rule_id(rule)) return rule;
  return std::nullopt;
}

const char* level_name(Level level) {
  switch (level) {
    case Level::Error: return "error";
    case Level::Warning: return "warning";
    case Level::Note: return "note";
    case Level::Off: return "off";
  }
  return "?";
}

std::optional<Level> level_from_name(const std::string& name) {
  for (Level level : {Level::Error, Level::Warning, Level::Note, Level::Off})
    if (name == level_name(level)) return level;
  return std::nullopt;
}

Level default_level(const Finding& finding) {
  switch (finding.rule) {
    // Every supported macOS has its system libraries: an unused one costs a load that
    // succeeds. Any other unused one may be missing where the model ships.
    case Rule::UnusedDependency:
      return under_allowed_prefix(finding.dylib, CheckOptions{}) || finding.in_sysroot ? Level::Warning : Level::Error;
    // dyld searches a build machine's directory in vain and goes on: it loads.
    case Rule::AbsoluteRpath: return Level::Warning;
    // Nothing was judged: said, not failed (no Mac runs 32-bit code since 10.15).
    case Rule::UncheckedSlice: return finding.problem.empty() ? Level::Note : Level::Error;
    // Weights expected from a .ptd none was given: the application may pass it.
    case Rule::MissingWeights: return finding.expected_from_ptd ? Level::Warning : Level::Error;
    default: return Level::Error;
  }
}

void apply_levels(std::vector<Finding>& findings, const CheckOptions& options) {
  auto exempted = [&](const Finding& finding) {
    return std::any_of(options.exempt.begin(), options.exempt.end(), [&](const Exemption& exemption) {
      return exemption.rule == finding.rule && !finding.dylib.empty() && install_name_matches(exemption.dylib, finding.dylib);
    });
  };
  for (Finding& finding : findings) {
    auto set = options.levels.find(finding.rule);
    finding.level = exempted(finding) ? Level::Off : set != options.levels.end() ? set->second : default_level(finding);
    if (options.warnings_as_errors && finding.level == Level::Warning) finding.level = Level::Error;
  }
  findings.erase(std::remove_if(findings.begin(), findings.end(), [](const Finding& f) { return f.level == Level::Off; }),
                 findings.end());
}

namespace {

// The dependency rules in the order that picks the one reporting a cause: the rule
// whose repair removes the others' reason first (prune removes an unused library).
constexpr Rule kCausePriority[] = {Rule::UnusedDependency,     Rule::ForbiddenDependency, Rule::LibraryNotLoaded,
                                   Rule::UnprovidedDependency, Rule::AbsoluteInstallName, Rule::RelativeInstallName};

std::optional<size_t> cause_rank(Rule rule) {
  const Rule* at = std::find(std::begin(kCausePriority), std::end(kCausePriority), rule);
  if (at == std::end(kCausePriority)) return std::nullopt;
  return static_cast<size_t>(at - std::begin(kCausePriority));
}

bool same_cause(const Finding& a, const Finding& b) {
  return a.file == b.file && a.member == b.member && a.blob == b.blob && a.arch == b.arch &&
         a.slice_offset == b.slice_offset && a.dylib == b.dylib && a.needed_by == b.needed_by &&
         a.at_launch == b.at_launch;
}

// Levels rank as their enum: Error first.
bool reports_before(const Finding& a, const Finding& b) {
  if (a.level != b.level) return a.level < b.level;
  return *cause_rank(a.rule) < *cause_rank(b.rule);
}

}  // namespace

void group_causes(std::vector<Finding>& findings) {
  for (size_t first = 0; first < findings.size(); ++first) {
    if (!cause_rank(findings[first].rule) || findings[first].dylib.empty() || findings[first].reported_with ||
        !findings[first].also.empty())
      continue;
    std::vector<size_t> group{first};
    for (size_t other = first + 1; other < findings.size(); ++other)
      if (cause_rank(findings[other].rule) && !findings[other].reported_with && same_cause(findings[first], findings[other]))
        group.push_back(other);
    if (group.size() < 2) continue;
    size_t lead = *std::min_element(group.begin(), group.end(),
                                    [&](size_t a, size_t b) { return reports_before(findings[a], findings[b]); });
    for (size_t index : group) {
      if (index == lead) continue;
      findings[lead].also.push_back(findings[index].rule);
      findings[index].reported_with = findings[lead].rule;
    }
  }
}

App& Applications::get(const std::string& app, const std::string& sysroot) {
  auto& known = apps_[{app, sysroot}];
  if (!known) known = std::make_unique<App>(AppOptions{app, sysroot});
  return *known;
}

namespace {

// Every finding of the file and its archive members, before levels.
std::vector<Finding> findings_before_levels(const FileReport& report, const CheckOptions& options, Applications* applications,
                                            std::vector<AppCheck>* app_checks, ExternalData& external_data,
                                            bool in_archive = false) {
  std::vector<Finding> findings;
  bool from_own_path = !in_archive && options.load_as.value_or(LoadAs::File) == LoadAs::File && !is_standard_stream(report.path);
  CheckRun run{options, applications, app_checks, external_data, findings, from_own_path};
  if (report.macho) check_macho(*report.macho, report.path, "", run);
  if (report.pte) {
    for (const BlobReport& blob : report.pte->blobs) {
      size_t first = findings.size();
      check_macho(blob.macho, report.path, join(blob.keys), run);
      if (!blob.error.empty() && blob.macho.loader_rules.empty()) unreadable_blob(blob, report.path, findings);
      for (size_t index = first; index < findings.size(); ++index) findings[index].blob_role = blob_role(*report.pte, blob);
    }
    check_weights(*report.pte, report.path, run);
  }
  for (const FileReport& member : report.members) {
    size_t member_checks_at = app_checks ? app_checks->size() : 0;
    for (Finding finding : findings_before_levels(member, options, applications, app_checks, external_data, true)) {
      finding.blob = finding.blob.empty() ? member.path : member.path + ": " + finding.blob;
      finding.blob_role = finding.blob_role.empty() ? member.path : member.path + ": " + finding.blob_role;
      finding.file = report.path;
      finding.member = member.path;
      finding.member_offset = finding.offset;  // an offset in the member, not in the archive
      finding.offset.reset();
      findings.push_back(std::move(finding));
    }
    if (!app_checks) continue;
    for (size_t index = member_checks_at; index < app_checks->size(); ++index) {
      AppCheck& check = (*app_checks)[index];
      check.blob = check.blob.empty() ? member.path : member.path + ": " + check.blob;
      check.file = report.path;
      check.member = member.path;
    }
  }
  return findings;
}

}  // namespace

std::vector<Finding> check_findings(const FileReport& report, const CheckOptions& options, Applications* applications,
                                    std::vector<AppCheck>* app_checks, ExternalData* external_data) {
  // Every .ptd given is read, needed or not: a broken one must not pass unseen.
  ExternalData own_data;
  ExternalData& data = external_data ? *external_data : own_data;
  data.read(options.ptd_files);
  // Levels once, over the members' findings too.
  std::vector<Finding> findings = findings_before_levels(report, options, applications, app_checks, data);
  apply_levels(findings, options);
  group_causes(findings);
  return findings;
}

namespace {

// Calls visit(where, macho) for every Mach-O image a report covers.
template <typename Visit>
void each_image(const FileReport& report, const std::string& prefix, Visit&& visit) {
  if (report.macho) visit(prefix, *report.macho);
  if (report.pte)
    for (const BlobReport& blob : report.pte->blobs) visit(prefix + join(blob.keys) + ": ", blob.macho);
  for (const FileReport& member : report.members) each_image(member, prefix + member.path + ": ", visit);
}

// A blob that cannot be read, unless a loader rule says why (those are listed too).
void unreadable_blobs(const FileReport& report, const std::string& prefix, std::vector<std::string>& failures) {
  if (report.pte)
    for (const BlobReport& blob : report.pte->blobs)
      if (!blob.error.empty() && blob.macho.loader_rules.empty()) failures.push_back(prefix + "cannot be read: " + blob.error);
  for (const FileReport& member : report.members) unreadable_blobs(member, prefix + member.path + ": ", failures);
}

}  // namespace

std::vector<std::string> verify_failures(const FileReport& report) {
  std::vector<std::string> failures;
  unreadable_blobs(report, "", failures);
  each_image(report, "", [&](const std::string& where, const MachOReport& macho) {
    for (const std::string& failure : signature_failures(macho)) failures.push_back(where + failure);
    for (const RuleViolation& violation : macho.loader_rules) failures.push_back(where + describe(violation));
    for (const SliceReport& slice : macho.slices)
      for (const RuleViolation& violation : slice.loader_rules) failures.push_back(where + slice.arch + ": " + describe(violation));
  });
  return failures;
}

size_t unfollowed_dependencies(const FileReport& report, const CheckOptions& options) {
  if (!options.app.empty() || options.declared) return 0;
  size_t count = 0;
  each_image(report, "", [&](const std::string&, const MachOReport& macho) {
    for (const SliceReport& slice : macho.slices)
      for (const DylibReport& dylib : slice.dylibs)
        count += dylib.kind != DylibKind::Weak && relative_name(dylib.install_name);
  });
  return count;
}

std::vector<std::string> verify_notes(const FileReport& report) {
  std::vector<std::string> notes;
  each_image(report, "", [&](const std::string& where, const MachOReport& macho) {
    for (const SliceReport& slice : macho.slices)
      for (const SignatureFinding& note : slice.signature.findings.notes)
        notes.push_back(where + slice.arch + ": " + describe(note));
  });
  return notes;
}

}  // namespace machofix
