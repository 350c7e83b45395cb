#include "core/rewrite/weak_link.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"
#include "core/base/proof_seam.h"
#include "core/rewrite/prune.h"

namespace machofix {

const char* weak_link_action_name(WeakLinkAction action) {
  switch (action) {
    case WeakLinkAction::MakeWeak: return "weak-link";
    case WeakLinkAction::MarkImports: return "mark-imports";
    case WeakLinkAction::NothingToDo: return "nothing-to-do";
    case WeakLinkAction::Refused: return "refused";
  }
  return "?";
}

std::vector<int> WeakLinkPlan::ordinals() const {
  std::vector<int> result;
  for (const WeakLinkDecision& decision : decisions)
    if (decision.action == WeakLinkAction::MakeWeak || decision.action == WeakLinkAction::MarkImports)
      result.push_back(decision.ordinal);
  return result;
}

bool WeakLinkPlan::refuses_any() const {
  return std::any_of(decisions.begin(), decisions.end(),
                     [](const WeakLinkDecision& decision) { return decision.action == WeakLinkAction::Refused; });
}

namespace {

// The imports a weak link of some dylibs marks: those bound by their ordinals, and the
// chained weak-lookup (-3) imports of the names their undefined symbols carry.
class Targets {
 public:
  Targets(const ImportScan& scan, const std::vector<int>& ordinals) : ordinals_(ordinals.begin(), ordinals.end()) {
    for (const Import& import : scan.imports)
      if (import.source == ImportSource::Symtab && ordinals_.count(import.ordinal)) symtab_names_.insert(import.symbol);
  }

  bool covers(ImportSource source, int ordinal, std::string_view symbol) const {
    if (source == ImportSource::ExportsTrie) return false;  // a re-export has no weak mark (refused)
    if (ordinals_.count(ordinal)) return true;
    return source == ImportSource::ChainedFixups && ordinal == macho::BIND_SPECIAL_DYLIB_WEAK_LOOKUP &&
           symtab_names_.count(symbol);
  }
  bool covers(const WeakMark& mark) const { return covers(mark.source, mark.ordinal, mark.symbol); }
  bool covers(const Import& import) const { return covers(import.source, import.ordinal, import.symbol); }
  bool has(int ordinal) const { return ordinals_.count(ordinal); }

 private:
  std::set<int> ordinals_;
  std::set<std::string_view> symtab_names_;  // views into the scanned slice
};

std::string plural(size_t count, const char* noun) { return std::to_string(count) + " " + noun + (count == 1 ? "" : "s"); }

std::string slice_refusal(const MachO& image) {
  if (!image.two_level())
    return "flat namespace (MH_TWOLEVEL clear): imports name no library, so those from it cannot be marked weak";
  if (image.has_lazy_load_dylib) return "LC_LAZY_LOAD_DYLIB present: tools disagree on how it counts in ordinals";
  return "";
}

// A SET_SYMBOL_TRAILING_FLAGS_IMM opcode whose symbol is bound from `ordinal` and from
// another library too: its one weak bit cannot say "weak" for one of them only.
std::string shared_bind_opcode(const MachO& image, const ImportScan& scan, int ordinal) {
  std::map<uint64_t, std::set<int>> ordinals_by_opcode;
  for (const WeakMark& mark : scan.weak_marks)
    if (mark.source == ImportSource::Bind || mark.source == ImportSource::LazyBind)
      ordinals_by_opcode[mark.offset].insert(mark.ordinal);
  for (const WeakMark& mark : scan.weak_marks) {
    if (mark.ordinal != ordinal || !ordinals_by_opcode.count(mark.offset)) continue;
    const std::set<int>& ordinals = ordinals_by_opcode[mark.offset];
    if (ordinals.size() < 2) continue;
    int other = *ordinals.begin() == ordinal ? *ordinals.rbegin() : *ordinals.begin();
    return "the " + std::string(import_source_name(mark.source)) + " opcode at offset " + hex(image.bytes.base() + mark.offset) +
           " names " + std::string(mark.symbol) + " for it and for " + resolve_ordinal(image, other) +
           ": its one weak flag cannot mark only one of them";
  }
  return "";
}

}  // namespace

std::string weak_link_refusal(const MachO& image, const ImportScan& scan, int ordinal) {
  if (std::string slice = slice_refusal(image); !slice.empty()) return slice;
  if (ordinal < 1 || static_cast<size_t>(ordinal) > image.dylibs.size())
    return "no dependent dylib has ordinal " + std::to_string(ordinal);
  const Dylib& dylib = image.dylibs[ordinal - 1];
  bool reexported = std::any_of(image.dylibs.begin(), image.dylibs.end(), [&](const Dylib& other) {
    return other.kind == DylibKind::Reexport && other.install_name == dylib.install_name;
  });
  if (reexported)
    return "re-exported (LC_REEXPORT_DYLIB): its symbols are part of this library's interface, and a re-export has no weak form";
  if (dylib.kind == DylibKind::Upward) return "upward dependency (LC_LOAD_UPWARD_DYLIB): an upward link has no weak form";
  size_t trie_reexports = std::count_if(scan.imports.begin(), scan.imports.end(), [&](const Import& import) {
    return import.source == ImportSource::ExportsTrie && import.ordinal == ordinal;
  });
  if (trie_reexports)
    return "the exports trie re-exports " + plural(trie_reexports, "symbol") +
           " from it: a re-export cannot be marked weak, so a client binding one would fail when it is missing";
  return shared_bind_opcode(image, scan, ordinal);
}

namespace {

// What --weak-link does to one dylib a glob named.
WeakLinkDecision decide(const MachO& image, const ImportScan& scan, const Dylib& dylib, const std::string& glob) {
  WeakLinkDecision decision{dylib.ordinal, dylib.install_name, glob, WeakLinkAction::Refused,
                            weak_link_refusal(image, scan, dylib.ordinal)};
  if (!decision.reason.empty()) return decision;
  Targets targets(scan, {dylib.ordinal});
  std::set<std::string_view> symbols, unmarked;
  for (const WeakMark& mark : scan.weak_marks)
    if (targets.covers(mark)) {
      symbols.insert(mark.symbol);
      if (!mark.weak) unmarked.insert(mark.symbol);
    }
  if (dylib.kind == DylibKind::Weak && unmarked.empty()) {
    decision.action = WeakLinkAction::NothingToDo;
    decision.reason = "already LC_LOAD_WEAK_DYLIB, every import from it marked weak";
  } else if (dylib.kind == DylibKind::Weak) {
    decision.action = WeakLinkAction::MarkImports;
    decision.reason = "already LC_LOAD_WEAK_DYLIB; marks " + plural(unmarked.size(), "imported symbol") + " weak";
  } else {
    decision.action = WeakLinkAction::MakeWeak;
    decision.reason = "LC_LOAD_DYLIB -> LC_LOAD_WEAK_DYLIB; " + plural(symbols.size(), "imported symbol") + " marked weak";
  }
  return decision;
}

}  // namespace

WeakLinkPlan plan_weak_link(const MachO& image, const ImportScan& scan, const std::vector<std::string>& globs) {
  WeakLinkPlan plan;
  plan.slice_refused_because = slice_refusal(image);
  for (const std::string& glob : globs)
    if (std::none_of(image.dylibs.begin(), image.dylibs.end(),
                     [&](const Dylib& dylib) { return install_name_matches(glob, dylib.install_name); }))
      plan.unmatched_globs.push_back(glob);
  for (const Dylib& dylib : image.dylibs) {
    auto glob = std::find_if(globs.begin(), globs.end(),
                             [&](const std::string& candidate) { return install_name_matches(candidate, dylib.install_name); });
    if (glob != globs.end()) plan.decisions.push_back(decide(image, scan, dylib, *glob));
  }
  return plan;
}

std::vector<uint8_t> apply_weak_link(const MachO& image, const ImportScan& scan, const std::vector<int>& ordinals) {
  std::vector<uint8_t> out(image.bytes.data(), image.bytes.data() + image.bytes.size());
  apply_weak_link(image, scan, ordinals, out);
  return out;
}

void apply_weak_link(const MachO& image, const ImportScan& scan, const std::vector<int>& ordinals, MutableBytes out) {
  if (out.size() != image.bytes.size()) fail_as(ErrorKind::Internal, "internal error: the output slice is not a copy of the input");
  for (int ordinal : ordinals)
    if (std::string reason = weak_link_refusal(image, scan, ordinal); !reason.empty())
      fail("cannot weak-link " + resolve_ordinal(image, ordinal) + ": " + reason);
  for (int ordinal : ordinals) {
    const Dylib& dylib = image.dylibs[ordinal - 1];
    // dylib_command is the same struct under both command values: only `cmd` changes.
    if (dylib.kind == DylibKind::Load)
      put_u32(out, image.commands[dylib.command_index].offset + offsetof(macho::DylibCommand, cmd), macho::LC_LOAD_WEAK_DYLIB);
  }
  Targets targets(scan, ordinals);
  for (const WeakMark& mark : scan.weak_marks)
    if (targets.covers(mark)) put_u8(out, mark.offset, image.bytes.u8(mark.offset, "weak-import flag") | mark.bit);
}

namespace {

[[noreturn]] void weak_link_verification_failed(const std::string& problem) {
  fail_as(ErrorKind::ProofFailed, "verification of the weak-linked file failed, nothing written: " + problem);
}

void verify_dylibs(const MachO& before, const Targets& targets, const MachO& after) {
  if (before.dylibs.size() != after.dylibs.size()) weak_link_verification_failed("the number of dependent dylibs changed");
  for (size_t i = 0; i < before.dylibs.size(); ++i) {
    const Dylib& was = before.dylibs[i];
    const Dylib& now = after.dylibs[i];
    DylibKind expected = targets.has(was.ordinal) ? DylibKind::Weak : was.kind;
    if (now.install_name != was.install_name || now.kind != expected)
      weak_link_verification_failed("dylib " + std::to_string(was.ordinal) + " is " + dylib_kind_name(now.kind) + " " + now.install_name +
                          ", expected " + dylib_kind_name(expected) + " " + was.install_name);
  }
}

template <typename Entry>
void verify_weakness(const char* what, const std::vector<Entry>& before, const std::vector<Entry>& after, const MachO& image_before,
                     const MachO& image_after, const Targets& targets) {
  if (before.size() != after.size())
    weak_link_verification_failed(std::string("the number of ") + what + " changed from " + std::to_string(before.size()) + " to " +
                        std::to_string(after.size()));
  for (size_t i = 0; i < before.size(); ++i) {
    const Entry& was = before[i];
    const Entry& now = after[i];
    std::string label = std::string(import_source_name(was.source)) + " import " + std::string(was.symbol);
    if (was.symbol != now.symbol || was.source != now.source ||
        resolve_ordinal(image_before, was.ordinal) != resolve_ordinal(image_after, now.ordinal))
      weak_link_verification_failed(label + " changed (" + what + " " + std::to_string(i) + ")");
    bool expected = was.weak || targets.covers(was);
    if (now.weak != expected)
      weak_link_verification_failed(label + " from " + resolve_ordinal(image_before, was.ordinal) + (expected ? " is not" : " is") +
                          " marked weak (" + what + " " + std::to_string(i) + ")");
  }
}

// Every byte equals the input's, except the edited ones, which equal what they must be.
// The gaps between edits are compared with memcmp: one pass at memory speed.
void verify_untouched(const MachO& before, const ImportScan& scan, const Targets& targets, const Bytes& after) {
  std::map<uint64_t, uint8_t> edits;
  for (const Dylib& dylib : before.dylibs)
    if (targets.has(dylib.ordinal) && dylib.kind == DylibKind::Load)
      for (uint64_t i = 0; i < sizeof(uint32_t); ++i)
        edits[before.commands[dylib.command_index].offset + offsetof(macho::DylibCommand, cmd) + i] = static_cast<uint8_t>(macho::LC_LOAD_WEAK_DYLIB >> (8 * i));
  for (const WeakMark& mark : scan.weak_marks)
    if (targets.covers(mark)) edits[mark.offset] = before.bytes.u8(mark.offset) | mark.bit;
  uint64_t position = 0;
  auto compare_until = [&](uint64_t end) {
    if (auto changed = first_difference(before.bytes.data(), after.data(), position, end))
      weak_link_verification_failed("byte at slice offset " + hex(*changed) + " changed outside any weak-link edit");
  };
  for (const auto& [offset, expected] : edits) {
    compare_until(offset);
    if (after.u8(offset) != expected)
      weak_link_verification_failed("byte at slice offset " + hex(offset) + " is " + hex(after.u8(offset)) + ", the weak link makes it " +
                          hex(expected));
    position = offset + 1;
  }
  compare_until(after.size());
}

}  // namespace

void verify_weak_link(const MachO& before, const ImportScan& before_scan, const std::vector<int>& ordinals,
                      const Bytes& output, const SecondReader& second) {
  std::vector<uint8_t> spoiled;  // tests only (proof_seam.h)
  Bytes after(output.data(), output.size(), before.bytes.base());
  verify_weak_link(before, before_scan, ordinals, after, reread_output(after, spoiled), second);
}

void verify_weak_link(const MachO& before, const ImportScan& before_scan, const std::vector<int>& ordinals,
                      const Bytes& after, const MachO& reread, const SecondReader& second) {
  if (after.size() != before.bytes.size()) weak_link_verification_failed("the slice changed size");
  for (int ordinal : ordinals)
    if (ordinal < 1 || static_cast<size_t>(ordinal) > before.dylibs.size())
      weak_link_verification_failed("no dependent dylib has ordinal " + std::to_string(ordinal));
  Targets targets(before_scan, ordinals);
  std::vector<uint8_t> spoiled_for_untouched, spoiled_for_lief;  // tests only (proof_seam.h)
  ImportScan reread_scan = scan_imports(reread);
  verify_dylibs(before, targets, reread);
  verify_weakness("imports", before_scan.imports, reread_scan.imports, before, reread, targets);
  verify_weakness("weak-import flags", before_scan.weak_marks, reread_scan.weak_marks, before, reread, targets);
  verify_untouched(before, before_scan, targets, seam::offer(seam::ProofStep::Untouched, after, spoiled_for_untouched));
  required(second)(seam::offer(seam::ProofStep::Lief, after, spoiled_for_lief), reread, reread_scan);
}

}  // namespace machofix
