// Weak-linking a dependency that is already there (`edit --weak-link GLOB`): the
// slice afterwards is what `ld -weak_library` would have linked.
//
// What the linker does for a -weak_library dylib (lld: DylibSymbol::isWeakRef() is
// true for every symbol of a forceWeakImport dylib or of a dylib it re-exports; ld64:
// forcedWeakLinked()), and so what this module does, each a same-size edit in place:
//  - the dylib's LC_LOAD_DYLIB becomes LC_LOAD_WEAK_DYLIB (same struct dylib_command);
//  - every import from it is marked weak wherever the format records that:
//    BIND_SYMBOL_FLAGS_WEAK_IMPORT in the SET_SYMBOL_TRAILING_FLAGS_IMM opcode of the
//    bind and the lazy-bind streams (lld keeps lazy binds lazy and sets the flag in
//    the lazy-bind stream: LazyBindingSection::encode), N_WEAK_REF in the n_desc of its
//    undefined symbols, weak_import in its chained imports (any of the three formats);
//  - with chained fixups, an import of a weak definition is bound by ordinal -3 (weak
//    lookup), yet the linkers mark it weak too when the symbol came from the weak
//    dylib; the file records where it came from in that symbol's nlist entry, so a
//    -3 import is marked when the undefined symbol of its name names the dylib. A -3
//    import without such an entry cannot be attributed and is left alone.
// dyld needs the import marks, not only the command: its resolve() returns 0 for a
// weak import whose library did not load, but for an unmarked import (lazy or not)
// it fails with "can't resolve symbol ... because dependent dylib #N could not be
// loaded". A relink also gives the file a new LC_UUID; the edit keeps the old one
// (the code is unchanged, so its dSYM still matches). Nothing else differs from a
// relink with ld64.lld-16 (tests/weak_link/test_weak_link.py proves it byte by byte).
//
// Stages, like core/rewrite/prune.h's: plan (globs -> ordinals, refusals), apply (the bytes),
// verify (the output re-read and compared with the input). Re-signing is the
// caller's, as for prune.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/format/imports.h"
#include "core/format/macho.h"
#include "core/rewrite/second_reader.h"

namespace machofix {

enum class WeakLinkAction {
  MakeWeak,     // LC_LOAD_DYLIB -> LC_LOAD_WEAK_DYLIB, its imports marked
  MarkImports,  // already LC_LOAD_WEAK_DYLIB, but some of its imports are not marked weak
  NothingToDo,  // already weak, every import marked: a second identical edit changes nothing
  Refused,      // cannot be weak-linked (reason says why)
};
const char* weak_link_action_name(WeakLinkAction action);

struct WeakLinkDecision {
  int ordinal = 0;
  std::string install_name;
  std::string glob;  // the first glob that matched it
  WeakLinkAction action = WeakLinkAction::NothingToDo;
  std::string reason;
};

struct WeakLinkPlan {
  std::vector<WeakLinkDecision> decisions;   // one per matching dependent dylib, in ordinal order
  std::vector<std::string> unmatched_globs;  // globs that match no dependent dylib
  // Set when no dylib of the slice can be weak-linked (flat namespace, ...); every
  // matching dylib is then Refused with this reason.
  std::string slice_refused_because;

  std::vector<int> ordinals() const;  // those to change: MakeWeak and MarkImports
  bool refuses_any() const;
};

// Which dependent dylibs the globs (install_name_matches: the install name or its
// last component) name, and what --weak-link does to each.
WeakLinkPlan plan_weak_link(const MachO& image, const ImportScan& scan, const std::vector<std::string>& globs);

// Why `ordinal` cannot be weak-linked in `image`, or "" if it can. The slice-wide
// reasons (flat namespace, LC_LAZY_LOAD_DYLIB) come first.
std::string weak_link_refusal(const MachO& image, const ImportScan& scan, int ordinal);

// The slice with the dylibs of `ordinals` weak-linked: same size, only the command
// words and the weak bits differ. Fails (Error) for an ordinal that does not exist or
// that weak_link_refusal() refuses; nothing else is checked here (verify does that).
void apply_weak_link(const MachO& image, const ImportScan& scan, const std::vector<int>& ordinals, MutableBytes out);
std::vector<uint8_t> apply_weak_link(const MachO& image, const ImportScan& scan, const std::vector<int>& ordinals);  // on a copy

// Re-reads `after` with machofix's reader and fails (Error, "nothing written") unless
// the dylibs of `ordinals` are LC_LOAD_WEAK_DYLIB, every import from them is marked
// weak in every place the scan finds one, no other dylib or import changed, and no
// byte differs from `before` but those command words and weak bits; then the second
// reader must read it as we do (`second`: core/rewrite/second_reader.h).
void verify_weak_link(const MachO& before, const ImportScan& before_scan, const std::vector<int>& ordinals,
                      const Bytes& after, const SecondReader& second);
void verify_weak_link(const MachO& before, const ImportScan& before_scan, const std::vector<int>& ordinals,
                      const Bytes& after, const MachO& reread, const SecondReader& second);  // `after` re-read (reread_output)

}  // namespace machofix
