#include "core/rewrite/macho_repair.h"

#include <fnmatch.h>

#include <algorithm>
#include <cstring>

#include "core/format/codesign.h"
#include "core/format/fat.h"
#include "core/format/macho.h"
#include "core/format/macho_format.h"
#include "core/base/proof_seam.h"
#include "core/rewrite/slice_judgement.h"

namespace machofix {

namespace {

std::vector<std::string> slice_flags(const MachO& image) {
  std::vector<std::string> flags;
  flags.push_back(image.two_level() ? "two-level" : "flat-namespace");
  if (image.chained_fixups.present) flags.push_back("chained-fixups");
  if (image.dyld_info.present) flags.push_back("dyld-info");
  if (image.has_lazy_load_dylib) flags.push_back("lazy-load-dylib");
  return flags;
}

SliceReport describe_slice(const MachO& image, const ImportScan& scan, const SliceAnalysis& analysis, const PrunePlan& plan,
                           SignatureReport signature) {
  SliceReport report;
  report.arch = image.arch();
  report.cputype = image.cputype;
  report.filetype = image.filetype_name();
  report.offset = image.bytes.base();
  report.size = image.bytes.size();
  report.flags = slice_flags(image);
  report.install_name = image.id_name.value_or("");
  report.flat_lookup_imports = analysis.flat_lookup_imports;
  report.imports = bound_imports(scan);
  report.build_targets = image.build_targets;
  report.warnings = plan.warnings;
  report.left_as_is = plan.left_as_is;
  for (size_t i = 0; i < analysis.uses.size(); ++i) {
    const DylibUse& use = analysis.uses[i];
    DylibReport dylib;
    dylib.ordinal = use.dylib.ordinal;
    dylib.install_name = use.dylib.install_name;
    dylib.kind = use.dylib.kind;
    dylib.symbols = use.symbols;
    dylib.command_offset = image.bytes.base() + image.commands[use.dylib.command_index].offset;
    for (ImportSource source : use.sources) dylib.sources.push_back(import_source_name(source));
    if (i < plan.decisions.size()) dylib.decision = plan.decisions[i];  // `sign` describes the dylibs without a plan
    report.dylibs.push_back(std::move(dylib));
  }
  for (const Rpath& rpath : image.rpaths)
    report.rpaths.push_back({rpath.path, image.bytes.base() + image.commands[rpath.command_index].offset});
  report.signature = std::move(signature);
  report.loader_rules = check_loader_rules(image.bytes);
  return report;
}

// Where a rewrite writes in a slice: the load-command area (up to the header padding's
// end), the ordinal sites and weak-import flags, the signature, and __LINKEDIT, which
// a new signature grows. The pages between are borrowed from the input (OutputImage): what
// costs memory is the head and the tail, not the code and data.
OutputImage output_image(const JudgedSlice& judged, uint64_t room) {
  const MachO& image = *judged.image;
  uint64_t tail_start = image.bytes.size();
  if (const Segment* linkedit = image.segment("__LINKEDIT")) tail_start = std::min(tail_start, linkedit->file_offset);
  if (image.code_signature.present) tail_start = std::min(tail_start, image.code_signature.offset);
  for (const OrdinalSite& site : judged.scan.sites) tail_start = std::min(tail_start, site.offset);
  for (const WeakMark& mark : judged.scan.weak_marks) tail_start = std::min(tail_start, mark.offset);
  return OutputImage::borrowing(judged.bytes, header_padding_end(image), tail_start, room);
}

// --weak-link, planned on the slice as the load-command edits leave it (their names,
// their layout), so that every refusal is decided before anything is written.
void plan_weak_link_stage(JudgedSlice& judged, const EditOptions& options) {
  const MachO& image = *judged.image;
  WeakLinkEdit stage;
  if (judged.steps.edit) {
    OutputImage edited = output_image(judged, 0);
    apply_edit(image, *judged.edit, edited);
    MachO edited_image = parse_macho(edited.bytes(image.bytes.base()));
    stage = plan_weak_link_edit(edited_image, scan_imports(edited_image), options);
  } else {
    stage = plan_weak_link_edit(image, judged.scan, options);
  }
  judged.report.edits.insert(judged.report.edits.end(), stage.records.begin(), stage.records.end());
  judged.weak_link = std::move(stage.ordinals);
  judged.steps.weak_link = !judged.weak_link.empty();
}

// The weak-link stage of rewrite_slice, in `out`, then its own proof. After
// load-command edits (which may have moved every command) it starts from the edited
// slice: a second image of it is the "before" its proof compares with.
// Returns the weak-linked slice as its proof read it.
MachO weak_link_stage(const JudgedSlice& judged, OutputImage& out, const SecondReader& second,
                      std::vector<uint8_t>& spoiled) {
  const MachO& input = *judged.image;
  uint64_t base = input.bytes.base();
  if (!judged.steps.edit) {
    apply_weak_link(input, judged.scan, judged.weak_link, out);
    MachO linked = reread_output(out.bytes(base), spoiled);
    verify_weak_link(input, judged.scan, judged.weak_link, out.bytes(base), linked, second);
    return linked;
  }
  OutputImage edited = output_image(judged, 0);
  apply_edit(input, *judged.edit, edited);
  MachO before = parse_macho(edited.bytes(base));
  ImportScan scan = scan_imports(before);
  apply_weak_link(before, scan, judged.weak_link, out);
  MachO linked = reread_output(out.bytes(base), spoiled);
  verify_weak_link(before, scan, judged.weak_link, out.bytes(base), linked, second);
  return linked;
}

// Reading the binds of a slice dyld would refuse can fail before the loader rules
// run (a bind ordinal past the dylibs once ncmds shrank): the reader's reason then
// names the rule dyld refuses the slice for too.
template <typename Read>
auto read_naming_rule(const Bytes& slice, Read&& read) {
  try {
    return read();
  } catch (const Error& error) {
    std::vector<RuleViolation> violations = check_loader_rules(slice);
    if (violations.empty()) throw;
    const RuleViolation& first = violations.front();
    // Kept an error of the file (not a refusal): an archive goes on with its other members.
    throw Error(error.problem() + " (loader rule " + first.rule + "): dyld refuses the slice: " + first.message, error.offset())
        .in_part(error.part())
        .as(error.kind());
  }
}

// The loader rules an edit leaves to be repaired: a repeated LC_RPATH that
// --delete-duplicate-rpaths deletes, or one of its --delete-rpath globs (every copy;
// --add-rpath may put one back). The output
// is held to every rule before it is written, as any rewrite's is.
std::vector<RuleViolation> unrepaired(const Bytes& slice, const MachO& image, const std::vector<RuleViolation>& violations,
                                      const EditOptions& edit) {
  std::vector<RuleViolation> left;
  for (const RuleViolation& violation : violations) {
    bool repaired = false;
    for (const Rpath& rpath : image.rpaths) {
      // Violations carry absolute offsets; a command's is from the start of its slice.
      if (violation.rule != "rpath-duplicate" || slice.base() + image.commands[rpath.command_index].offset != violation.offset)
        continue;
      repaired = edit.delete_duplicate_rpaths ||
                 std::any_of(edit.delete_rpath.begin(), edit.delete_rpath.end(),
                             [&](const std::string& glob) { return fnmatch(glob.c_str(), rpath.path.c_str(), 0) == 0; });
    }
    if (!repaired) left.push_back(violation);
  }
  return left;
}

// `fix`: the edit planned on the slice as the prune stage leaves it (or on the input
// when nothing is pruned), so that its room check counts the padding removals free.
void plan_edit_after_prune(JudgedSlice& judged, const EditOptions& options) {
  const MachO* base = &*judged.image;
  if (judged.steps.prune) {
    auto pruned = std::make_shared<OutputImage>(output_image(judged, 0));
    apply_prune(*judged.image, judged.scan, judged.plan, *pruned);
    judged.pruned = pruned;
    judged.pruned_image = std::make_shared<MachO>(parse_macho(pruned->bytes(judged.image->bytes.base())));
    base = judged.pruned_image.get();
  }
  judged.edit.emplace(plan_edit(*base, options));
  judged.report.edits = judged.edit->records;
  judged.steps.edit = judged.edit->changes();
  if (judged.steps.edit) judged.edit->commands.check_room(*base);
}

// Everything but the rewriting: what `verify` costs, plus the import analysis.
JudgedSlice judge_slice(const Bytes& slice, const RepairOptions& options, RewriteKind kind) {
  JudgedSlice judged;
  judged.bytes = slice;
  const MachO& image = judged.image.emplace(parse_macho(slice));
  judged.input = check_input_signature(image);
  bool invalid = judged.input.report.status == SignatureStatus::Invalid;
  if (invalid && !options.resign_invalid) refuse_invalid_signature(judged.input);
  judged.scan = read_naming_rule(slice, [&] { return scan_imports(image); });
  SliceAnalysis analysis = read_naming_rule(slice, [&] { return analyze(image, judged.scan); });
  bool prunes = kind == RewriteKind::Prune || (kind == RewriteKind::Fix && !options.prune.only.empty());
  if (prunes) judged.plan = plan_prune(image, analysis, options.prune);
  judged.report = describe_slice(image, judged.scan, analysis, judged.plan, judged.input.report);
  bool edits = kind == RewriteKind::Edit || kind == RewriteKind::Fix;
  refuse_breaking_loader_rules(edits ? unrepaired(slice, image, judged.report.loader_rules, options.edit)
                                     : judged.report.loader_rules);
  judged.steps.prune = judged.plan.removal_count() > 0;
  if (kind == RewriteKind::Edit) {
    judged.edit.emplace(plan_edit(image, options.edit));
    judged.report.edits = judged.edit->records;
    judged.steps.edit = judged.edit->changes();
    if (judged.steps.edit) judged.edit->commands.check_room(image);
    if (!options.edit.weak_link.empty()) plan_weak_link_stage(judged, options.edit);
  }
  if (kind == RewriteKind::Fix && options.edit.any()) plan_edit_after_prune(judged, options.edit);
  bool unsigned_to_sign = !image.code_signature.present && (kind == RewriteKind::Sign || options.sign_unsigned);
  judged.steps.sign = kind == RewriteKind::Sign || judged.steps.rereads() || unsigned_to_sign || invalid;
  const std::optional<CodeSignature>& signature = judged.input.signature;
  if (judged.steps.sign && signature && signature->has_identity && !options.replace_identity) refuse_identity();
  if (judged.steps.sign && signature && !signature->has_identity && !options.identifier.empty() &&
      options.identifier != signature->identifier())
    throw Error("--identifier cannot change the identifier of an existing signature (it is '" + signature->identifier() +
                "'): a renewal keeps the signature's CodeDirectory as it was signed, identifier included; --identifier "
                "names the signature of a slice that has none")
        .as_refusal();
  return judged;
}

JudgedSlice unsupported_slice(const Bytes& slice, const FatSlice& entry) {
  JudgedSlice judged;
  judged.bytes = slice;
  judged.report.arch = cpu_name(entry.cputype, entry.cpusubtype);
  judged.report.cputype = entry.cputype;
  judged.report.handled = false;
  judged.report.offset = entry.offset;
  judged.report.size = entry.size;
  judged.report.left_as_is = LeftAsIs::Not64Bit;
  return judged;
}

// A slice that is not rewritten: borrowed whole from the input where it can be.
OutputImage unchanged_image(const Bytes& bytes) { return OutputImage::borrowing(bytes, 0, bytes.size(), 0); }

// The report of a rewritten slice: the judged slice's, with what the rewrite did.
SliceReport report_of(JudgedSlice& judged, const SignatureOutcome& signature, bool changed) {
  SliceReport report = std::move(judged.report);
  if (signature.after) report.signature_after = *signature.after;
  report.warnings.insert(report.warnings.end(), signature.warnings.begin(), signature.warnings.end());
  report.changed = changed;
  if (judged.steps.prune)
    for (DylibReport& dylib : report.dylibs) dylib.removed = dylib.removable();
  return report;
}

// MachORewrite's second step for one slice.
SliceJob rewrite_slice(JudgedSlice& judged, const RepairOptions& options) {
  SliceJob job;
  if (judged.steps.none()) {
    job.report = std::move(judged.report);
    job.bytes = unchanged_image(judged.bytes);
    return job;
  }
  const MachO& image = *judged.image;
  uint64_t base = image.bytes.base();
  job.bytes = output_image(judged, signature_room(judged, options));
  // Each state of the slice is read once: the proof of each stage re-reads what it
  // wrote, and the signature is renewed from that reading.
  std::optional<MachO> rewritten;
  std::vector<uint8_t> spoiled;  // tests only (proof_seam.h): what `rewritten` may view
  if (judged.steps.prune) {
    apply_prune(image, judged.scan, judged.plan, job.bytes);
    rewritten.emplace(reread_output(job.bytes.bytes(base), spoiled));
    verify_prune(image, judged.scan, judged.plan, job.bytes.bytes(base), *rewritten, options.second_reader);
  }
  if (judged.steps.edit) {
    // After a prune stage (`fix`) the edit starts from the pruned slice, its proof's "before".
    const MachO& before = judged.pruned_image ? *judged.pruned_image : image;
    ImportScan pruned_scan;
    if (judged.pruned_image) pruned_scan = scan_imports(before);
    apply_edit(before, *judged.edit, job.bytes);
    rewritten.emplace(reread_output(job.bytes.bytes(base), spoiled));
    verify_edit(before, judged.pruned_image ? pruned_scan : judged.scan, *judged.edit, job.bytes.bytes(base), *rewritten,
                options.second_reader);
  }
  if (judged.steps.weak_link) rewritten.emplace(weak_link_stage(judged, job.bytes, options.second_reader, spoiled));
  SignatureOutcome signature = update_signature(judged, job.bytes, rewritten, options);
  bool changed = judged.steps.prune || job.bytes.size() != judged.bytes.size() ||
                 first_difference(job.bytes.data(), judged.bytes.data(), 0, job.bytes.size());
  if (changed) {
    std::vector<uint8_t> spoiled;  // tests only (proof_seam.h)
    Bytes checked = seam::offer(seam::ProofStep::LoaderRules, job.bytes.bytes(base), spoiled);
    require_loader_rules(check_loader_rules(checked), "the rewritten slice");
  }
  job.report = report_of(judged, signature, changed);
  return job;
}

bool is_64_bit(const FatSlice& entry) { return entry.cputype & macho::CPU_ARCH_ABI64; }

std::string slice_part(const FatSlice& entry) { return "slice " + cpu_name(entry.cputype, entry.cpusubtype); }

// A slice's size after rewrite_slice, known before it runs: it grows only by a new
// signature added to an unsigned slice (a renewal and a replaced identity signature
// keep the signature's space); unset when an unreadable signature is replaced
// (--resign-invalid), whose new size depends on what it was.
std::optional<uint64_t> expected_size(const JudgedSlice& judged, const RepairOptions& options) {
  uint64_t size = judged.bytes.size();
  if (judged.steps.none()) return size;
  if (judged.input.read_error) return std::nullopt;
  bool adds_signature = !judged.image->code_signature.present && options.sign_unsigned;
  return adds_signature ? size + signature_room(judged, options) : size;
}

// What inspect shows of one slice: the analysis and the plan, nothing rewritten.
SliceReport inspect_slice(const Bytes& slice, const RepairOptions& options) {
  MachO image = parse_macho(slice);
  ImportScan scan = read_naming_rule(slice, [&] { return scan_imports(image); });
  SliceAnalysis analysis = read_naming_rule(slice, [&] { return analyze(image, scan); });
  PrunePlan plan = plan_prune(image, analysis, options.prune);
  return describe_slice(image, scan, analysis, plan, signature_report(image));
}

}  // namespace

MachOReport inspect_macho(const Bytes& file, const RepairOptions& options) {
  MachOReport report;
  if (!looks_like_universal(file)) {
    report.slices.push_back(inspect_slice(file, options));
    return report;
  }
  // Universal: analysis only, without assembling any output.
  Universal universal = parse_universal(file);
  report.universal = true;
  report.fat64 = universal.fat64;
  report.loader_rules = check_universal_rules(file);
  for (const FatSlice& entry : universal.slices) {
    Bytes slice = file.sub(entry.offset, entry.size, "universal slice");
    try {
      report.slices.push_back(is_64_bit(entry) ? inspect_slice(slice, options) : unsupported_slice(slice, entry).report);
    } catch (Error& error) {
      throw error.in_part(slice_part(entry));
    }
  }
  return report;
}

struct MachORewrite::State {
  Bytes file;
  RepairOptions options;
  std::optional<Universal> universal;
  std::vector<JudgedSlice> slices;
};

MachORewrite::MachORewrite(const Bytes& file, const RepairOptions& options, RewriteKind kind)
    : state_(std::make_unique<State>()) {
  state_->file = file;
  state_->options = options;
  if (kind == RewriteKind::Sign) state_->options.sign_unsigned = true;  // that is what `sign` is for
  const RepairOptions& effective = state_->options;
  if (!looks_like_universal(file)) {
    try {
      state_->slices.push_back(judge_slice(file, effective, kind));
    } catch (Error& error) {
      // A universal file's errors name the slice; a refusal of a thin file does too.
      if (error.refusal() && looks_like_thin_macho(file)) error.in_part("slice " + parse_macho(file).arch());
      throw;
    }
    return;
  }
  const Universal& universal = state_->universal.emplace(parse_universal(file));
  refuse_breaking_loader_rules(check_universal_rules(file));
  for (const FatSlice& entry : universal.slices) {
    Bytes slice = file.sub(entry.offset, entry.size, "universal slice");
    try {
      state_->slices.push_back(is_64_bit(entry) ? judge_slice(slice, effective, kind) : unsupported_slice(slice, entry));
    } catch (Error& error) {
      throw error.in_part(slice_part(entry));
    }
  }
}

MachORewrite::~MachORewrite() = default;
MachORewrite::MachORewrite(MachORewrite&&) noexcept = default;
MachORewrite& MachORewrite::operator=(MachORewrite&&) noexcept = default;

bool MachORewrite::rereads() const {
  return state_ && std::any_of(state_->slices.begin(), state_->slices.end(), [](const JudgedSlice& slice) {
           return slice.steps.rereads();
         });
}

bool MachORewrite::rewrites() const {
  return state_ && std::any_of(state_->slices.begin(), state_->slices.end(), [](const JudgedSlice& slice) {
           return !slice.steps.none();
         });
}

std::vector<CopiedRange> MachORewrite::expected_placement() const {
  if (!state_) fail_as(ErrorKind::Internal, "internal error: a MachORewrite runs once");
  std::vector<CopiedRange> in_place = in_place_plan(state_->file.size());
  if (!state_->universal) return in_place;
  std::vector<uint64_t> sizes;
  bool same_sizes = true;
  for (size_t i = 0; i < state_->slices.size(); ++i) {
    std::optional<uint64_t> size = expected_size(state_->slices[i], state_->options);
    if (!size) return in_place;
    sizes.push_back(*size);
    same_sizes &= *size == state_->universal->slices[i].size;
  }
  if (same_sizes) return in_place;
  Universal after = *state_->universal;
  try {
    layout_universal(after, sizes);
  } catch (const Error&) {
    return in_place;  // run() fails on it, with the same words
  }
  bool same_offsets = true;  // the growth fits before the next slice's page
  for (size_t i = 0; i < after.slices.size(); ++i) same_offsets &= after.slices[i].offset == state_->universal->slices[i].offset;
  return same_offsets ? in_place : slice_placement(*state_->universal, after);
}

MachORepair MachORewrite::run() {
  if (!state_) fail_as(ErrorKind::Internal, "internal error: a MachORewrite runs once");
  std::unique_ptr<State> state = std::move(state_);
  std::vector<SliceJob> jobs;
  for (size_t i = 0; i < state->slices.size(); ++i) {
    try {
      jobs.push_back(rewrite_slice(state->slices[i], state->options));
    } catch (Error& error) {
      if (state->universal) error.in_part(slice_part(state->universal->slices[i]));
      throw;
    }
  }
  if (state->universal) return assemble_universal(state->file, std::move(*state->universal), std::move(jobs));
  MachORepair result;
  result.report.changed = jobs.front().report.changed;
  result.report.slices.push_back(std::move(jobs.front().report));
  result.output = std::move(jobs.front().bytes);
  return result;
}

MachORepair prune_macho(const Bytes& file, const RepairOptions& options) {
  return MachORewrite(file, options, RewriteKind::Prune).run();
}

MachORepair edit_macho(const Bytes& file, const RepairOptions& options) {
  return MachORewrite(file, options, RewriteKind::Edit).run();
}

MachORepair fix_macho(const Bytes& file, const RepairOptions& options) {
  return MachORewrite(file, options, RewriteKind::Fix).run();
}

MachORepair sign_macho(const Bytes& file, const RepairOptions& options) {
  return MachORewrite(file, options, RewriteKind::Sign).run();
}

}  // namespace machofix
