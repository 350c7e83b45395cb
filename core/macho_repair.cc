#include "core/macho_repair.h"

#include <algorithm>

#include "core/codesign.h"
#include "core/fat.h"
#include "core/macho.h"
#include "core/macho_format.h"

namespace machofix {

size_t MachOReport::removed_count() const {
  size_t count = 0;
  for (const SliceReport& slice : slices)
    for (const DylibReport& dylib : slice.dylibs) count += dylib.removed;
  return count;
}

namespace {

SignatureReport signature_report(const MachO& image) {
  SignatureReport report;
  std::optional<CodeSignature> signature;
  try {
    signature = read_code_signature(image);
  } catch (const Error& error) {
    report.status = "invalid";
    report.problems.push_back(error.describe());
    return report;
  }
  if (!signature) return report;
  report.style = signature->style();
  report.identifier = signature->identifier();
  report.hash_types = signature->hash_type_names();
  report.page_size = signature->page_size();
  SignatureCheck check = check_code_signature(image);
  report.problems = std::move(check.problems);
  report.notes = std::move(check.notes);
  report.status = report.problems.empty() ? "valid" : "invalid";
  return report;
}

std::vector<std::string> slice_flags(const MachO& image) {
  std::vector<std::string> flags;
  flags.push_back(image.two_level() ? "two-level" : "flat-namespace");
  if (image.chained_fixups.present) flags.push_back("chained-fixups");
  if (image.dyld_info.present) flags.push_back("dyld-info");
  if (image.has_lazy_load_dylib) flags.push_back("lazy-load-dylib");
  return flags;
}

SliceReport describe_slice(const MachO& image, const SliceAnalysis& analysis, const PrunePlan& plan) {
  SliceReport report;
  report.arch = image.arch();
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
    dylib.kind = dylib_kind_name(use.dylib.kind);
    dylib.symbols = use.symbols;
    for (ImportSource source : use.sources) dylib.sources.push_back(import_source_name(source));
    if (i < plan.decisions.size()) {  // `sign` describes the dylibs without a plan
      dylib.removed = plan.decisions[i].remove;
      dylib.reason = plan.decisions[i].reason;
    }
    report.dylibs.push_back(std::move(dylib));
  }
  report.signature = signature_report(image);
  return report;
}

struct SliceJob {
  SliceReport report;
  std::vector<uint8_t> bytes;  // the new slice
};

// The thin-slice analysis shared by inspect and prune.
struct SliceAnalysisBundle {
  MachO image;
  ImportScan scan;
  SliceAnalysis analysis;
  PrunePlan plan;
};

SliceAnalysisBundle analyze_slice(const Bytes& slice, const RepairOptions& options) {
  SliceAnalysisBundle bundle{parse_macho(slice), {}, {}, {}};
  bundle.scan = scan_imports(bundle.image);
  bundle.analysis = analyze(bundle.image, bundle.scan);
  bundle.plan = plan_prune(bundle.image, bundle.analysis, options.prune);
  return bundle;
}

// Brings the signature of a rewritten (or, for `sign`, unchanged) slice up to date.
// Returns the slice's new bytes, which are larger only when a signature was added.
std::vector<uint8_t> update_signature(const MachO& image, std::vector<uint8_t> bytes, const RepairOptions& options,
                                      SliceReport& report) {
  uint64_t base = image.bytes.base();
  std::optional<CodeSignature> signature = read_code_signature(image);
  if (!signature) {
    if (!options.sign_unsigned) {
      if (image.cputype == macho::CPU_TYPE_ARM64)
        report.warnings.push_back("unsigned arm64 slice left unsigned (it cannot run as is); pass --sign to sign it");
      return bytes;
    }
    MachO current = parse_macho(Bytes(bytes.data(), bytes.size(), base));
    std::string identifier = options.identifier.empty() ? default_identifier(image, options.file_name) : options.identifier;
    bytes = add_adhoc_signature(current, identifier);
    report.signature_after.status = "added";
  } else if (signature->has_identity) {
    if (!options.replace_identity)
      fail("signed with an identity (a CMS signature, e.g. Developer ID): it cannot be renewed without the "
           "signer's key; pass --adhoc to replace it with an ad hoc signature");
    replace_with_adhoc_signature(bytes, base);
    report.signature_after.status = "replaced (ad hoc)";
  } else {
    if (!options.identifier.empty() && options.identifier != signature->identifier())
      fail("--identifier cannot change the identifier of an existing signature (it is '" + signature->identifier() + "')");
    renew_code_signature(bytes, base);
    report.signature_after.status = "renewed";
  }
  // One verification of the new signature serves both the check and the report.
  std::string status = report.signature_after.status;
  report.signature_after = signature_report(parse_macho(Bytes(bytes.data(), bytes.size(), base)));
  if (report.signature_after.status != "valid")
    fail("the renewed signature does not verify, nothing written: " +
         (report.signature_after.problems.empty() ? std::string("unreadable") : report.signature_after.problems.front()));
  report.signature_after.status = status;
  return bytes;
}

SliceJob prune_slice(const Bytes& slice, const RepairOptions& options) {
  SliceAnalysisBundle bundle = analyze_slice(slice, options);
  SliceJob job{describe_slice(bundle.image, bundle.analysis, bundle.plan), {}};
  job.bytes = apply_prune(bundle.image, bundle.scan, bundle.plan);
  bool pruned = bundle.plan.left_unchanged_because.empty() && bundle.plan.removal_count() > 0;
  if (pruned) verify_prune(bundle.image, bundle.scan, bundle.plan, job.bytes);
  bool unsigned_to_sign = options.sign_unsigned && job.report.signature.status == "unsigned";
  if (pruned || unsigned_to_sign) job.bytes = update_signature(bundle.image, std::move(job.bytes), options, job.report);
  job.report.changed = pruned || unsigned_to_sign;
  return job;
}

SliceJob sign_slice(const Bytes& slice, const RepairOptions& options) {
  MachO image = parse_macho(slice);
  SliceJob job;
  job.report = describe_slice(image, analyze(image, scan_imports(image)), PrunePlan{});
  RepairOptions signing = options;
  signing.sign_unsigned = true;  // that is what `sign` is for
  std::vector<uint8_t> original(slice.data(), slice.data() + slice.size());
  job.bytes = update_signature(image, original, signing, job.report);
  job.report.changed = job.bytes != original;
  return job;
}

using SliceFunction = SliceJob (*)(const Bytes&, const RepairOptions&);

SliceJob unsupported_slice(const Bytes& slice, const FatSlice& entry) {
  SliceJob job;
  job.report.arch = cpu_name(entry.cputype, entry.cpusubtype);
  job.report.offset = entry.offset;
  job.report.size = entry.size;
  job.report.left_unchanged_because = "only 64-bit slices are handled; this one is left as it is";
  job.bytes.assign(slice.data(), slice.data() + slice.size());
  return job;
}

bool is_64_bit(const FatSlice& entry) { return entry.cputype & macho::CPU_ARCH_ABI64; }

// Universal files: each slice on its own; slices that keep their size are patched
// where they are, otherwise the slices are laid out again.
// Each slice on its own; errors name the slice. 32-bit slices pass through unchanged.
std::vector<SliceJob> process_slices(const Bytes& file, const Universal& universal, const RepairOptions& options,
                                     SliceFunction process) {
  std::vector<SliceJob> jobs;
  for (const FatSlice& entry : universal.slices) {
    Bytes slice = file.sub(entry.offset, entry.size, "universal slice");
    try {
      jobs.push_back(is_64_bit(entry) ? process(slice, options) : unsupported_slice(slice, entry));
    } catch (Error& error) {
      throw error.in_part("slice " + cpu_name(entry.cputype, entry.cpusubtype));
    }
  }
  return jobs;
}

MachORepair process_universal(const Bytes& file, const RepairOptions& options, SliceFunction process) {
  Universal universal = parse_universal(file);
  MachORepair result;
  result.report.universal = true;
  result.report.fat64 = universal.fat64;
  std::vector<SliceJob> jobs = process_slices(file, universal, options, process);
  result.output.assign(file.data(), file.data() + file.size());
  bool same_sizes = true;
  for (size_t i = 0; i < jobs.size(); ++i) same_sizes &= jobs[i].bytes.size() == universal.slices[i].size;
  if (!same_sizes) {
    std::vector<uint64_t> sizes;
    for (const SliceJob& job : jobs) sizes.push_back(job.bytes.size());
    layout_universal(universal, sizes);
    uint64_t end = 0;
    for (const FatSlice& entry : universal.slices) end = std::max(end, entry.offset + entry.size);
    result.output.assign(end, 0);
    std::vector<uint8_t> header = universal_header_bytes(universal);
    put_bytes(result.output, 0, header.data(), header.size());
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    put_bytes(result.output, universal.slices[i].offset, jobs[i].bytes.data(), jobs[i].bytes.size());
    jobs[i].report.offset = universal.slices[i].offset;
    result.report.changed |= jobs[i].report.changed;
    result.report.slices.push_back(std::move(jobs[i].report));
  }
  return result;
}

MachORepair process_file(const Bytes& file, const RepairOptions& options, SliceFunction process) {
  if (looks_like_universal(file)) return process_universal(file, options, process);
  SliceJob job = process(file, options);
  MachORepair result;
  result.report.changed = job.report.changed;
  result.report.slices.push_back(std::move(job.report));
  result.output = std::move(job.bytes);
  return result;
}

SliceJob inspect_slice(const Bytes& slice, const RepairOptions& options) {
  SliceAnalysisBundle bundle = analyze_slice(slice, options);
  return {describe_slice(bundle.image, bundle.analysis, bundle.plan), {}};
}

}  // namespace

std::vector<std::string> signature_failures(const MachOReport& report) {
  std::vector<std::string> failures;
  for (const SliceReport& slice : report.slices) {
    if (!slice.left_unchanged_because.empty() && slice.filetype.empty()) continue;  // 32-bit slice: not ours to judge
    if (slice.signature.status == "unsigned" && slice.arch.rfind("arm64", 0) == 0)
      failures.push_back(slice.arch + ": not signed (arm64 code must be signed to run)");
    for (const std::string& problem : slice.signature.problems) failures.push_back(slice.arch + ": " + problem);
  }
  return failures;
}

MachOReport inspect_macho(const Bytes& file, const RepairOptions& options) {
  if (!looks_like_universal(file)) return process_file(file, options, inspect_slice).report;
  // Universal: analysis only, without assembling any output.
  Universal universal = parse_universal(file);
  MachOReport report;
  report.universal = true;
  report.fat64 = universal.fat64;
  for (SliceJob& job : process_slices(file, universal, options, inspect_slice)) report.slices.push_back(std::move(job.report));
  return report;
}

MachORepair prune_macho(const Bytes& file, const RepairOptions& options) {
  return process_file(file, options, prune_slice);
}

MachORepair sign_macho(const Bytes& file, const RepairOptions& options) {
  return process_file(file, options, sign_slice);
}

}  // namespace machofix
