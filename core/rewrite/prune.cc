#include "core/rewrite/prune.h"

#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/rewrite/load_commands.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"
#include "core/base/proof_seam.h"
#include "core/base/util.h"

namespace machofix {

namespace {

// Symbols through which code finds other code by name at run time.
const char* const kRuntimeLookupSymbols[] = {"_dlsym", "_objc_getClass", "_objc_lookUpClass", "_NSClassFromString",
                                             "_objc_getRequiredClass", "_NSSelectorFromString"};

}  // namespace

bool install_name_matches(const std::string& glob, const std::string& install_name) {
  return fnmatch(glob.c_str(), install_name.c_str(), 0) == 0 || fnmatch(glob.c_str(), last_path_component(install_name).c_str(), 0) == 0;
}

SliceAnalysis analyze(const MachO& image, const ImportScan& scan) {
  SliceAnalysis analysis;
  std::vector<std::set<std::string>> symbols(image.dylibs.size());
  std::vector<std::set<ImportSource>> sources(image.dylibs.size());
  std::set<std::string> lookups, flat_lookups;
  for (const Import& import : scan.imports) {
    for (const char* lookup : kRuntimeLookupSymbols)
      if (import.symbol == lookup) lookups.insert(std::string(import.symbol));
    if (import.ordinal == macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP) flat_lookups.insert(std::string(import.symbol));
    if (import.ordinal <= 0 || static_cast<size_t>(import.ordinal) > image.dylibs.size()) continue;
    symbols[import.ordinal - 1].insert(std::string(import.symbol));
    sources[import.ordinal - 1].insert(import.source);
  }
  std::vector<bool> named(image.dylibs.size(), false);
  for (const OrdinalSite& site : scan.sites)
    if (site.ordinal > 0 && static_cast<size_t>(site.ordinal) <= image.dylibs.size()) named[site.ordinal - 1] = true;
  for (size_t i = 0; i < image.dylibs.size(); ++i)
    analysis.uses.push_back({image.dylibs[i], {symbols[i].begin(), symbols[i].end()}, {sources[i].begin(), sources[i].end()},
                             named[i] && symbols[i].empty()});
  analysis.runtime_lookups.assign(lookups.begin(), lookups.end());
  analysis.flat_lookup_imports = flat_lookups.size();
  return analysis;
}

size_t PrunePlan::removal_count() const {
  return std::count_if(decisions.begin(), decisions.end(), [](const DylibDecision& d) { return d.remove(); });
}

namespace {

// Why a dylib that supplies nothing must stay, or Unused if it may go.
DylibDecision keep_or_remove(const DylibUse& use, const PruneOptions& options) {
  DylibDecision decision{use.dylib.ordinal, DylibVerdict::Unused};
  if (use.dylib.kind == DylibKind::Reexport) decision.verdict = DylibVerdict::Reexported;
  else if (use.dylib.kind == DylibKind::Upward) decision.verdict = DylibVerdict::Upward;
  else if (use.named_without_symbol) decision.verdict = DylibVerdict::NamedWithoutSymbol;
  if (decision.verdict != DylibVerdict::Unused) return decision;
  for (const std::string& glob : options.keep)
    if (install_name_matches(glob, use.dylib.install_name)) return {use.dylib.ordinal, DylibVerdict::KeptByGlob, 0, glob};
  if (!options.only.empty() &&
      std::none_of(options.only.begin(), options.only.end(),
                   [&](const std::string& glob) { return install_name_matches(glob, use.dylib.install_name); }))
    decision.verdict = DylibVerdict::NotSelected;
  return decision;
}

}  // namespace

PrunePlan plan_prune(const MachO& image, const SliceAnalysis& analysis, const PruneOptions& options) {
  PrunePlan plan;
  if (!image.two_level()) plan.left_as_is = LeftAsIs::FlatNamespace;
  else if (image.has_lazy_load_dylib) plan.left_as_is = LeftAsIs::LazyLoadDylib;
  for (const DylibUse& use : analysis.uses) {
    if (!use.symbols.empty())
      plan.decisions.push_back({use.dylib.ordinal, DylibVerdict::Supplies, use.symbols.size()});
    else if (plan.left_as_is != LeftAsIs::No)
      plan.decisions.push_back({use.dylib.ordinal, DylibVerdict::SliceLeftAsIs});
    else
      plan.decisions.push_back(keep_or_remove(use, options));
  }
  // dyld rejects a modern binary without any LC_LOAD_DYLIB: keep one, preferring libSystem.
  if (!plan.decisions.empty() && plan.removal_count() == plan.decisions.size()) {
    size_t keep = 0;
    for (size_t i = 0; i < analysis.uses.size(); ++i)
      if (analysis.uses[i].dylib.install_name.rfind("/usr/lib/libSystem", 0) == 0) keep = i;
    plan.decisions[keep] = {plan.decisions[keep].ordinal, DylibVerdict::LastDependency};
  }
  if (plan.removal_count() && !analysis.runtime_lookups.empty()) {
    std::string names;
    for (const std::string& name : analysis.runtime_lookups) names += (names.empty() ? "" : ", ") + name;
    plan.warnings.push_back("the file looks up symbols by name at run time (" + names +
                            "): a removed library might have served those; use --keep to protect it");
  }
  return plan;
}

namespace {

// old ordinal -> new ordinal (0 for removed ones), index 0 unused.
std::vector<int> renumbering(const PrunePlan& plan) {
  std::vector<int> map(plan.decisions.size() + 1, 0);
  int next = 1;
  for (const DylibDecision& decision : plan.decisions)
    if (!decision.remove()) map[decision.ordinal] = next++;
  return map;
}

void write_site(MutableBytes out, const OrdinalSite& site, int ordinal) {
  switch (site.encoding) {
    case SiteEncoding::NDescHighByte:
    case SiteEncoding::Chained8:
      return put_u8(out, site.offset, static_cast<uint8_t>(ordinal));
    case SiteEncoding::Chained16:
      return put_u16(out, site.offset, static_cast<uint16_t>(ordinal));
    case SiteEncoding::OpcodeImm:
      // A smaller ordinal still fits the immediate: the opcode keeps its one byte.
      return put_u8(out, site.offset, macho::BIND_OPCODE_SET_DYLIB_ORDINAL_IMM | ordinal);
    case SiteEncoding::OpcodeUleb:
    case SiteEncoding::TrieUleb: {
      // Same length as before (padded if need be): stub helpers hold offsets into the stream.
      std::vector<uint8_t> encoded = padded_uleb(ordinal, site.length);
      return put_bytes(out, site.offset, encoded.data(), encoded.size());
    }
    case SiteEncoding::OpcodeSpecial:
      return;
  }
}

// The removed dylibs' commands go; the ones after them move up and the freed bytes
// become zero header padding (LoadCommandList writes the area, ncmds and sizeofcmds).
void remove_commands(const MachO& image, const PrunePlan& plan, MutableBytes out) {
  std::set<size_t> removed;
  for (const DylibDecision& decision : plan.decisions)
    if (decision.remove()) removed.insert(image.dylibs[decision.ordinal - 1].command_index);
  LoadCommandList commands(image);
  for (auto index = removed.rbegin(); index != removed.rend(); ++index) commands.remove(*index);  // last first: indices hold
  commands.write(image, out);
}

}  // namespace

std::vector<uint8_t> apply_prune(const MachO& image, const ImportScan& scan, const PrunePlan& plan) {
  std::vector<uint8_t> out(image.bytes.data(), image.bytes.data() + image.bytes.size());
  apply_prune(image, scan, plan, out);
  return out;
}

void apply_prune(const MachO& image, const ImportScan& scan, const PrunePlan& plan, MutableBytes out) {
  if (out.size() != image.bytes.size()) fail_as(ErrorKind::Internal, "internal error: the output slice is not a copy of the input");
  if (plan.removal_count() == 0) return;
  std::vector<int> map = renumbering(plan);
  for (const OrdinalSite& site : scan.sites) {
    if (site.ordinal <= 0 || site.encoding == SiteEncoding::OpcodeSpecial) continue;
    int renumbered = map.at(site.ordinal);
    if (renumbered == 0)
      image.bytes.fail_here(site.offset, "internal error: a removed dylib (ordinal " + std::to_string(site.ordinal) +
                                             ") is still referenced");
    if (renumbered != site.ordinal) write_site(out, site, renumbered);
  }
  remove_commands(image, plan, out);
}

namespace {

[[noreturn]] void prune_verification_failed(const std::string& problem) {
  fail_as(ErrorKind::ProofFailed, "verification of the rewritten file failed, nothing written: " + problem);
}

void verify_dylibs(const MachO& before, const PrunePlan& plan, const MachO& after) {
  std::vector<std::pair<std::string, DylibKind>> expected, actual;
  for (const DylibDecision& decision : plan.decisions)
    if (!decision.remove()) expected.emplace_back(before.dylibs[decision.ordinal - 1].install_name, before.dylibs[decision.ordinal - 1].kind);
  for (const Dylib& dylib : after.dylibs) actual.emplace_back(dylib.install_name, dylib.kind);
  if (expected != actual) prune_verification_failed("the dependent dylibs are not the planned ones");
}

void verify_imports(const MachO& before, const ImportScan& before_scan, const MachO& after, const ImportScan& after_scan) {
  if (before_scan.imports.size() != after_scan.imports.size())
    prune_verification_failed("the number of imports changed from " + std::to_string(before_scan.imports.size()) + " to " +
                        std::to_string(after_scan.imports.size()));
  for (size_t i = 0; i < before_scan.imports.size(); ++i) {
    const Import& old_import = before_scan.imports[i];
    const Import& new_import = after_scan.imports[i];
    std::string was = resolve_ordinal(before, old_import.ordinal);
    std::string now = resolve_ordinal(after, new_import.ordinal);
    if (old_import.symbol == new_import.symbol && old_import.source == new_import.source && was == now &&
        old_import.weak != new_import.weak)
      prune_verification_failed(std::string(import_source_name(old_import.source)) + " import " + std::string(old_import.symbol) +
                          (old_import.weak ? " was weak before and is not after" : " was not weak before and is after"));
    if (old_import.symbol != new_import.symbol || old_import.source != new_import.source || was != now)
      prune_verification_failed(std::string(import_source_name(old_import.source)) + " import " + std::string(old_import.symbol) +
                          " bound to " + was + " before and to " + now + " after");
  }
}

// Every byte outside the load-command area and the ordinal sites must be untouched.
// The allowed ranges are sorted and the gaps between them compared with memcmp, so
// a 200 MB slice costs one pass at memory speed.
void verify_untouched(const MachO& before, const ImportScan& scan, const Bytes& after) {
  std::vector<std::pair<uint64_t, uint64_t>> allowed{
      {offsetof(macho::MachHeader64, ncmds), sizeof(macho::MachHeader64) + before.sizeofcmds}};  // ncmds onwards
  for (const OrdinalSite& site : scan.sites) allowed.emplace_back(site.offset, site.offset + site.length);
  std::sort(allowed.begin(), allowed.end());
  uint64_t position = 0;
  auto compare_until = [&](uint64_t end) {
    if (auto changed = first_difference(before.bytes.data(), after.data(), position, end))
      prune_verification_failed("byte at slice offset " + hex(*changed) + " changed outside any ordinal or load command");
  };
  for (const auto& [start, end] : allowed) {
    compare_until(start);
    position = std::max(position, end);
  }
  compare_until(after.size());
}

}  // namespace

void verify_prune(const MachO& before, const ImportScan& before_scan, const PrunePlan& plan,
                  const Bytes& output, const SecondReader& second) {
  std::vector<uint8_t> spoiled;  // tests only (proof_seam.h)
  Bytes after(output.data(), output.size(), before.bytes.base());
  verify_prune(before, before_scan, plan, after, reread_output(after, spoiled), second);
}

void verify_prune(const MachO& before, const ImportScan& before_scan, const PrunePlan& plan,
                  const Bytes& after, const MachO& reread, const SecondReader& second) {
  if (after.size() != before.bytes.size()) prune_verification_failed("the slice changed size");
  std::vector<uint8_t> spoiled_for_untouched, spoiled_for_lief;  // tests only (proof_seam.h)
  ImportScan reread_scan = scan_imports(reread);
  verify_dylibs(before, plan, reread);
  verify_imports(before, before_scan, reread, reread_scan);
  verify_untouched(before, before_scan, seam::offer(seam::ProofStep::Untouched, after, spoiled_for_untouched));
  required(second)(seam::offer(seam::ProofStep::Lief, after, spoiled_for_lief), reread, reread_scan);
}

}  // namespace machofix
