#include "core/rewrite/macho_repair.h"

#include <algorithm>
#include <cstring>

#include "core/format/codesign.h"
#include "core/format/fat.h"
#include "core/format/macho.h"
#include "core/format/macho_format.h"
#include "core/base/proof_seam.h"

namespace machofix {

size_t MachOReport::removed_count() const {
  size_t count = 0;
  for (const SliceReport& slice : slices)
    for (const DylibReport& dylib : slice.dylibs) count += dylib.removed;
  return count;
}

size_t MachOReport::removable_count() const {
  size_t count = 0;
  for (const SliceReport& slice : slices)
    for (const DylibReport& dylib : slice.dylibs) count += dylib.removable;
  return count;
}

namespace {

// A slice's input signature, read and verified once: prune and sign decide from it
// and report it.
struct InputSignature {
  SignatureReport report;
  std::optional<CodeSignature> signature;  // unset: unsigned, or unreadable
  std::optional<Error> read_error;         // set: present but too malformed to read
};

InputSignature check_input_signature(const MachO& image, const KnownPageHashes* known = nullptr) {
  InputSignature input;
  SignatureReport& report = input.report;
  try {
    input.signature = read_code_signature(image);
  } catch (const Error& error) {
    input.read_error = error;
    report.status = SignatureStatus::Invalid;
    report.problems.push_back(error.describe());
    report.first_problem_at = error.offset();
    return input;
  }
  if (!input.signature) return input;
  report.style = input.signature->style();
  report.identifier = input.signature->identifier();
  report.hash_types = input.signature->hash_type_names();
  report.page_size = input.signature->page_size();
  SignatureCheck check = check_code_signature(image, known);
  report.problems = std::move(check.problems);
  report.notes = std::move(check.notes);
  report.first_problem_at = check.first_problem_at;
  report.status = report.problems.empty() ? SignatureStatus::Valid : SignatureStatus::Invalid;
  return input;
}

SignatureReport signature_report(const MachO& image, const KnownPageHashes* known = nullptr) {
  return check_input_signature(image, known).report;
}

std::vector<std::string> slice_flags(const MachO& image) {
  std::vector<std::string> flags;
  flags.push_back(image.two_level() ? "two-level" : "flat-namespace");
  if (image.chained_fixups.present) flags.push_back("chained-fixups");
  if (image.dyld_info.present) flags.push_back("dyld-info");
  if (image.has_lazy_load_dylib) flags.push_back("lazy-load-dylib");
  return flags;
}

SliceReport describe_slice(const MachO& image, const SliceAnalysis& analysis, const PrunePlan& plan,
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
  report.warnings = plan.warnings;
  report.left_unchanged_because = plan.left_unchanged_because;
  for (size_t i = 0; i < analysis.uses.size(); ++i) {
    const DylibUse& use = analysis.uses[i];
    DylibReport dylib;
    dylib.ordinal = use.dylib.ordinal;
    dylib.install_name = use.dylib.install_name;
    dylib.kind = use.dylib.kind;
    dylib.symbols = use.symbols;
    dylib.command_offset = image.bytes.base() + image.commands[use.dylib.command_index].offset;
    for (ImportSource source : use.sources) dylib.sources.push_back(import_source_name(source));
    if (i < plan.decisions.size()) {  // `sign` describes the dylibs without a plan
      dylib.removable = plan.decisions[i].remove;
      dylib.reason = plan.decisions[i].reason;
    }
    report.dylibs.push_back(std::move(dylib));
  }
  for (const Rpath& rpath : image.rpaths)
    report.rpaths.push_back({rpath.path, image.bytes.base() + image.commands[rpath.command_index].offset});
  report.signature = std::move(signature);
  report.loader_rules = check_loader_rules(image.bytes);
  return report;
}

struct SliceJob {
  SliceReport report;
  OutputImage bytes;  // the new slice
};

// One slice of the input, read and judged (MachORewrite's first step).
struct JudgedSlice {
  Bytes bytes;
  bool supported = true;  // 64-bit; other slices are left as they are
  std::optional<MachO> image;
  ImportScan scan;
  PrunePlan plan;
  InputSignature input;
  SliceReport report;
  std::optional<EditPlan> edit;  // `edit`: the planned load commands
  std::vector<int> weak_link;    // `edit --weak-link`: the dylibs (of the edited slice) to weak-link
  bool prunes = false;   // dylib commands are removed
  bool edits = false;    // load commands are changed, added or removed
  bool weak_links = false;  // dylibs become weak or their imports are marked weak
  bool resigns = false;  // the signature is renewed, added or replaced
};

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

// The identifier a new signature gets: --identifier, else the install name's or the
// file's name (empty for standard input).
std::string signature_identifier(const MachO& image, const RepairOptions& options) {
  return options.identifier.empty() ? default_identifier(image, options.file_name) : options.identifier;
}

// What a new signature may add to the slice (a renewal keeps its size).
uint64_t signature_room(const JudgedSlice& judged, const RepairOptions& options) {
  const MachO& image = *judged.image;
  if (image.code_signature.present && !judged.input.read_error) return 0;
  return adhoc_signature_room(image.bytes.size(), signature_identifier(image, options));
}

// The first problem of an invalid signature, as the refusal and the report name it.
std::string first_problem(const InputSignature& input) {
  return input.read_error ? input.read_error->problem() : input.report.problems.front();
}

[[noreturn]] void refuse_invalid_signature(const InputSignature& input) {
  size_t more = input.report.problems.size() - 1;
  std::string message = "the input signature is invalid: " + first_problem(input);
  if (more) message += " (and " + std::to_string(more) + " more problem" + (more == 1 ? "" : "s") + ")";
  message +=
      "; re-signing would make a changed or corrupt file look valid, so nothing is written (pass --resign-invalid "
      "to re-sign it anyway)";
  Error error(message, input.report.first_problem_at);
  throw error.as_refusal();
}

[[noreturn]] void refuse_identity() {
  Error error(
      "signed with an identity (a CMS signature, e.g. Developer ID): it cannot be renewed without the signer's key; "
      "pass --adhoc to replace it with an ad hoc signature");
  throw error.as_refusal();
}

// --weak-link, planned on the slice as the load-command edits leave it (their names,
// their layout), so that every refusal is decided before anything is written.
void plan_weak_link_stage(JudgedSlice& judged, const EditOptions& options) {
  const MachO& image = *judged.image;
  WeakLinkEdit stage;
  if (judged.edits) {
    OutputImage edited = output_image(judged, 0);
    apply_edit(image, *judged.edit, edited);
    MachO edited_image = parse_macho(edited.bytes(image.bytes.base()));
    stage = plan_weak_link_edit(edited_image, scan_imports(edited_image), options);
  } else {
    stage = plan_weak_link_edit(image, judged.scan, options);
  }
  judged.report.edits.insert(judged.report.edits.end(), stage.records.begin(), stage.records.end());
  judged.weak_link = std::move(stage.ordinals);
  judged.weak_links = !judged.weak_link.empty();
}

// The weak-link stage of rewrite_slice, in `out`, then its own proof. After
// load-command edits (which may have moved every command) it starts from the edited
// slice: a second image of it is the "before" its proof compares with.
// Returns the weak-linked slice as its proof read it.
MachO weak_link_stage(const JudgedSlice& judged, OutputImage& out, const SecondReader& second,
                      std::vector<uint8_t>& spoiled) {
  const MachO& input = *judged.image;
  uint64_t base = input.bytes.base();
  if (!judged.edits) {
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

// Everything but the rewriting: what `verify` costs, plus the import analysis.
JudgedSlice judge_slice(const Bytes& slice, const RepairOptions& options, RewriteKind kind) {
  JudgedSlice judged;
  judged.bytes = slice;
  const MachO& image = judged.image.emplace(parse_macho(slice));
  judged.input = check_input_signature(image);
  bool invalid = judged.input.report.status == SignatureStatus::Invalid;
  if (invalid && !options.resign_invalid) refuse_invalid_signature(judged.input);
  judged.scan = scan_imports(image);
  SliceAnalysis analysis = analyze(image, judged.scan);
  if (kind == RewriteKind::Prune) judged.plan = plan_prune(image, analysis, options.prune);
  judged.report = describe_slice(image, analysis, judged.plan, judged.input.report);
  refuse_breaking_loader_rules(judged.report.loader_rules);
  judged.prunes = judged.plan.left_unchanged_because.empty() && judged.plan.removal_count() > 0;
  if (kind == RewriteKind::Edit) {
    judged.edit.emplace(plan_edit(image, options.edit));
    judged.report.edits = judged.edit->records;
    judged.edits = judged.edit->changes();
    if (judged.edits) judged.edit->commands.check_room(image);
    if (!options.edit.weak_link.empty()) plan_weak_link_stage(judged, options.edit);
  }
  bool unsigned_to_sign = !image.code_signature.present && (kind == RewriteKind::Sign || options.sign_unsigned);
  judged.resigns =
      kind == RewriteKind::Sign || judged.prunes || judged.edits || judged.weak_links || unsigned_to_sign || invalid;
  const std::optional<CodeSignature>& signature = judged.input.signature;
  if (judged.resigns && signature && signature->has_identity && !options.replace_identity) refuse_identity();
  if (judged.resigns && signature && !signature->has_identity && !options.identifier.empty() &&
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
  judged.supported = false;
  judged.report.arch = cpu_name(entry.cputype, entry.cpusubtype);
  judged.report.cputype = entry.cputype;
  judged.report.handled = false;
  judged.report.offset = entry.offset;
  judged.report.size = entry.size;
  judged.report.left_unchanged_because = "only 64-bit slices are handled; this one is left as it is";
  return judged;
}

// A slice that is not rewritten: borrowed whole from the input where it can be.
OutputImage unchanged_image(const Bytes& bytes) { return OutputImage::borrowing(bytes, 0, bytes.size(), 0); }

// A new signature is named after the install name, else the file name: standard
// input has no file name.
const std::string& new_identifier(const std::string& identifier) {
  if (identifier.empty())
    fail("a new signature needs an identifier, and the file has neither an install name nor a file name (standard "
         "input): sign it with machofix sign --identifier");
  return identifier;
}

// What re-signing a slice did: the new signature as its check read it (unset when the
// slice was left unsigned), and what the report should warn of.
struct SignatureOutcome {
  std::optional<SignatureReport> after;
  std::vector<std::string> warnings;
};

// Brings the signature of a rewritten (or, for `sign`, unchanged) slice up to date in
// `bytes`, which grow only when a signature is added, and checks it.
// `rewritten`: the slice as the rewrite's proof read it (its bytes are `bytes`'),
// unset when it was not rewritten.
SignatureOutcome update_signature(const JudgedSlice& judged, OutputImage& bytes, const std::optional<MachO>& rewritten,
                                  const RepairOptions& options) {
  SignatureOutcome outcome;
  const MachO& image = *judged.image;
  const InputSignature& input = judged.input;
  uint64_t base = image.bytes.base();
  std::string identifier = signature_identifier(image, options);
  // A valid input signature's hashes serve every page the output borrows unchanged.
  std::optional<VerifiedInputHashes> verified;
  if (input.report.status == SignatureStatus::Valid && input.signature) verified.emplace(image, *input.signature);
  const KnownPageHashes* known = verified ? &*verified : nullptr;
  // A new signature's own page hashes serve its check for the pages no one can have
  // changed since they were hashed (HashedPages): a signature added to an unsigned
  // slice, or one renewed over an invalid one (whose hashes serve nothing).
  std::optional<HashedPages> signed_pages;
  std::optional<HashedPagesList> renewed_pages;
  if (!image.code_signature.present) {
    if (!options.sign_unsigned) {
      if (image.cputype == macho::CPU_TYPE_ARM64)
        outcome.warnings.push_back("unsigned arm64 slice left unsigned (it cannot run as is); pass --sign to sign it");
      return outcome;
    }
    known = &signed_pages.emplace(add_adhoc_signature(bytes, base, new_identifier(identifier)));
  } else if (input.read_error) {  // only with --resign-invalid: judge_slice refuses it otherwise
    known = &signed_pages.emplace(replace_unreadable_signature(bytes, base, new_identifier(identifier)));
  } else {
    // Read once: the proof's reading of the rewritten slice, or now for `sign`.
    std::optional<MachO> unchanged;
    const MachO& current = rewritten ? *rewritten : unchanged.emplace(parse_macho(bytes.bytes(base)));
    HashedPagesList written = input.signature->has_identity ? replace_with_adhoc_signature(bytes, current, known)
                                                             : renew_code_signature(bytes, current, known);
    if (!known) known = &renewed_pages.emplace(std::move(written));
  }
  // One verification of the new signature serves both the check and the report.
  std::vector<uint8_t> spoiled;  // tests only (proof_seam.h)
  SignatureReport after = signature_report(parse_macho(seam::offer(seam::ProofStep::Signature, bytes.bytes(base), spoiled)), known);
  if (after.status != SignatureStatus::Valid)
    fail("the renewed signature does not verify, nothing written: " +
         (after.problems.empty() ? std::string("unreadable") : after.problems.front()));
  after.status = !image.code_signature.present ? SignatureStatus::Added
                 : input.read_error || input.signature->has_identity ? SignatureStatus::ReplacedAdHoc
                                                                      : SignatureStatus::Renewed;
  outcome.after = std::move(after);
  if (input.report.status == SignatureStatus::Invalid)
    outcome.warnings.push_back("input signature was invalid (" + input.report.problems.front() +
                               "): re-signed because of --resign-invalid" +
                               (input.read_error ? ", with a new linker-style ad hoc signature" : ""));
  return outcome;
}

// The report of a rewritten slice: the judged slice's, with what the rewrite did.
SliceReport report_of(JudgedSlice& judged, const SignatureOutcome& signature, bool changed) {
  SliceReport report = std::move(judged.report);
  if (signature.after) report.signature_after = *signature.after;
  report.warnings.insert(report.warnings.end(), signature.warnings.begin(), signature.warnings.end());
  report.changed = changed;
  if (judged.prunes)
    for (DylibReport& dylib : report.dylibs) dylib.removed = dylib.removable;
  return report;
}

// MachORewrite's second step for one slice.
SliceJob rewrite_slice(JudgedSlice& judged, const RepairOptions& options) {
  SliceJob job;
  if (!judged.supported || !(judged.prunes || judged.resigns)) {
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
  if (judged.prunes) {
    apply_prune(image, judged.scan, judged.plan, job.bytes);
    rewritten.emplace(reread_output(job.bytes.bytes(base), spoiled));
    verify_prune(image, judged.scan, judged.plan, job.bytes.bytes(base), *rewritten, options.second_reader);
  }
  if (judged.edits) {
    apply_edit(image, *judged.edit, job.bytes);
    rewritten.emplace(reread_output(job.bytes.bytes(base), spoiled));
    verify_edit(image, judged.scan, *judged.edit, job.bytes.bytes(base), *rewritten, options.second_reader);
  }
  if (judged.weak_links) rewritten.emplace(weak_link_stage(judged, job.bytes, options.second_reader, spoiled));
  SignatureOutcome signature = update_signature(judged, job.bytes, rewritten, options);
  bool changed = judged.prunes || job.bytes.size() != judged.bytes.size() ||
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

// A universal file's output: every slice at its offset; between them the input's
// bytes (same layout) or zeros after a new `header` (a new layout).
OutputImage place_slices(const Bytes& file, const Universal& universal, const std::vector<SliceJob>& jobs,
                   const std::optional<Bytes>& header) {
  std::vector<size_t> order(jobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return universal.slices[a].offset < universal.slices[b].offset; });
  uint64_t end = header ? 0 : file.size();
  for (const FatSlice& entry : universal.slices) end = std::max(end, entry.offset + entry.size);
  OutputImage output = OutputImage::zeroed(end);
  uint64_t position = 0;
  if (header) {
    output.put_bytes_of(0, *header);
    position = header->size();
  }
  for (size_t i : order) {
    uint64_t offset = universal.slices[i].offset;
    if (!header && offset > position) output.put_bytes_of(position, file.sub(position, offset - position, "universal file"));
    output.put_image(offset, jobs[i].bytes);
    position = std::max(position, offset + jobs[i].bytes.size());
  }
  if (!header && end > position) output.put_bytes_of(position, file.sub(position, end - position, "universal file"));
  return output;
}

// Universal files: slices that keep their size are put back where they were,
// otherwise the slices are laid out again.
MachORepair assemble_universal(const Bytes& file, Universal universal, std::vector<SliceJob> jobs) {
  MachORepair result;
  result.report.universal = true;
  result.report.fat64 = universal.fat64;
  bool same_sizes = true;
  for (size_t i = 0; i < jobs.size(); ++i) same_sizes &= jobs[i].bytes.size() == universal.slices[i].size;
  std::vector<uint8_t> header;
  if (!same_sizes) {
    std::vector<uint64_t> sizes;
    for (const SliceJob& job : jobs) sizes.push_back(job.bytes.size());
    layout_universal(universal, sizes);
    header = universal_header_bytes(universal);
  }
  result.output = place_slices(file, universal, jobs, same_sizes ? std::nullopt : std::optional<Bytes>(Bytes(header)));
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].report.offset = universal.slices[i].offset;
    result.report.changed |= jobs[i].report.changed;
    result.report.slices.push_back(std::move(jobs[i].report));
  }
  // The slices passed on their own; a new layout must also place them as dyld requires.
  if (result.report.changed) {
    std::vector<uint8_t> spoiled;  // tests only (proof_seam.h)
    require_loader_rules(check_image_rules(seam::offer(seam::ProofStep::UniversalRules, result.output.bytes(), spoiled)),
                         "the rewritten file");
  }
  return result;
}

// A slice's size after rewrite_slice, known before it runs: it grows only by a new
// signature added to an unsigned slice (a renewal and a replaced identity signature
// keep the signature's space); unset when an unreadable signature is replaced
// (--resign-invalid), whose new size depends on what it was.
std::optional<uint64_t> expected_size(const JudgedSlice& judged, const RepairOptions& options) {
  uint64_t size = judged.bytes.size();
  if (!judged.supported || !(judged.prunes || judged.resigns)) return size;
  if (judged.input.read_error) return std::nullopt;
  bool adds_signature = !judged.image->code_signature.present && options.sign_unsigned;
  return adds_signature ? size + signature_room(judged, options) : size;
}

// Each slice of `before`, where `after` puts it, in output order; adjoining slices
// that keep their distance make one range.
std::vector<CopiedRange> slice_placement(const Universal& before, const Universal& after) {
  std::vector<CopiedRange> placement;
  for (size_t i = 0; i < before.slices.size(); ++i)
    placement.push_back({before.slices[i].offset, after.slices[i].offset, before.slices[i].size});
  std::sort(placement.begin(), placement.end(), [](const CopiedRange& a, const CopiedRange& b) { return a.out_at < b.out_at; });
  std::vector<CopiedRange> joined;
  for (const CopiedRange& range : placement) append_joined(joined, range);
  return joined;
}

// What inspect shows of one slice: the analysis and the plan, nothing rewritten.
SliceReport inspect_slice(const Bytes& slice, const RepairOptions& options) {
  MachO image = parse_macho(slice);
  ImportScan scan = scan_imports(image);
  SliceAnalysis analysis = analyze(image, scan);
  PrunePlan plan = plan_prune(image, analysis, options.prune);
  return describe_slice(image, analysis, plan, signature_report(image));
}

}  // namespace

std::vector<std::string> signature_failures(const MachOReport& report) {
  std::vector<std::string> failures;
  for (const SliceReport& slice : report.slices) {
    if (!slice.handled) continue;  // a 32-bit slice: not ours to judge
    if (slice.signature.status == SignatureStatus::Unsigned && slice.cputype == macho::CPU_TYPE_ARM64)
      failures.push_back(slice.arch + ": not signed (arm64 code must be signed to run)");
    for (const std::string& problem : slice.signature.problems) failures.push_back(slice.arch + ": " + problem);
  }
  return failures;
}

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
           return slice.prunes || slice.edits || slice.weak_links;
         });
}

bool MachORewrite::rewrites() const {
  return state_ && std::any_of(state_->slices.begin(), state_->slices.end(), [](const JudgedSlice& slice) {
           return slice.supported && slice.resigns;  // set by every change (judge_slice)
         });
}

std::vector<CopiedRange> MachORewrite::expected_placement() const {
  if (!state_) fail("internal error: a MachORewrite runs once");
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
  if (!state_) fail("internal error: a MachORewrite runs once");
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

MachORepair sign_macho(const Bytes& file, const RepairOptions& options) {
  return MachORewrite(file, options, RewriteKind::Sign).run();
}

}  // namespace machofix
