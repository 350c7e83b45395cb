// `machofix edit`: install names and rpaths changed in install_name_tool's
// vocabulary, on one slice. The stages mirror prune's:
//   plan_edit()    which load commands each edit changes, adds or removes (errors
//                  for an edit that matches nothing, or would duplicate an rpath)
//   apply_edit()   the load-command area written anew (core/rewrite/load_commands.h)
//   verify_edit()  the output re-read: exactly the planned load commands, every
//                  import as before, every other byte unchanged, the second reader (LIEF) agrees
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/format/imports.h"
#include "core/rewrite/load_commands.h"
#include "core/format/macho.h"
#include "core/rewrite/second_reader.h"
#include "core/rewrite/weak_link.h"

namespace machofix {

struct EditOptions {
  // Applied in this order, each kind in the order given (install_name_tool's and
  // LLVM's order, after the duplicates): --delete-duplicate-rpaths, --delete-rpath,
  // --rpath, --id, --change, --add-rpath.
  // Every LC_RPATH that repeats an earlier one byte for byte (dyld's strcmp) goes; the
  // first copy stays where it is, so the search order is unchanged.
  bool delete_duplicate_rpaths = false;
  std::vector<std::string> delete_rpath;                     // globs
  std::vector<std::pair<std::string, std::string>> rpath;    // OLD -> NEW (exact)
  std::string id;                                            // empty: unchanged
  std::vector<std::pair<std::string, std::string>> change;   // OLD (glob, as prune's --keep) -> NEW
  std::vector<std::string> add_rpath;
  // --weak-link GLOB: the stage after all of the above (core/rewrite/weak_link.h), on the
  // edited slice, so a glob matches a dependency's name after --change.
  std::vector<std::string> weak_link;
  // Inside a directory or archive walk an edit that matches nothing is a note for
  // that file; in a file named on the command line it is an error.
  bool unmatched_is_note = false;
  bool any() const;
};

// The option an edit came from (--delete-rpath, --rpath, --id, --change, --add-rpath,
// --weak-link); the reports spell both enums in tool/report_text.cc.
enum class EditKind { DeleteDuplicateRpaths, DeleteRpath, Rpath, Id, Change, AddRpath, WeakLink };
enum class EditStatus {
  Applied,
  Already,  // the file was already in the state the edit asks for: a second identical edit changes nothing
  NoMatch,  // it matched nothing: a note in a walk (an error for a file named on the command line)
};

// One edit as it went (WeakLink's old_value: the dylib's install name, or the glob
// when it matched nothing).
struct EditRecord {
  EditKind kind = EditKind::Change;
  std::string old_value;  // empty for AddRpath and Id on a dylib without one
  std::string new_value;  // empty for DeleteRpath
  EditStatus status = EditStatus::Applied;
};

struct EditPlan {
  std::vector<EditRecord> records;  // in the order applied
  LoadCommandList commands;         // the intended load commands
  bool changes() const { return commands.changed(); }
};

// Throws an Error naming the edit when it matches nothing (unless
// options.unmatched_is_note) or would duplicate an rpath.
EditPlan plan_edit(const MachO& image, const EditOptions& options);

// --weak-link's stage (options.weak_link), planned on the slice as the other edits
// leave it (so on the names after --change). A record per matching dylib: Applied,
// or Already when it is weak with every import marked. Throws a refusal naming the
// dylib and why when the plan refuses one; a glob that matches nothing is handled as
// the other edits' (options.unmatched_is_note).
struct WeakLinkEdit {
  std::vector<EditRecord> records;
  std::vector<int> ordinals;  // the dylibs to change (apply_weak_link)
};
WeakLinkEdit plan_weak_link_edit(const MachO& edited, const ImportScan& scan, const EditOptions& options);

// The slice with the planned load commands; same size. Throws a refusal when the
// commands do not fit in the header padding (room needed and available).
void apply_edit(const MachO& image, const EditPlan& plan, MutableBytes out);  // `out` holds a copy of the slice
std::vector<uint8_t> apply_edit(const MachO& image, const EditPlan& plan);  // on a copy

// Re-reads `after`: its load commands must be exactly the planned ones, every import
// bind as before (same ordinal, same symbol, same weakness), every byte outside the
// load-command area unchanged, and `second` must agree.
void verify_edit(const MachO& before, const ImportScan& before_scan, const EditPlan& plan, const Bytes& after,
                 const SecondReader& second);
void verify_edit(const MachO& before, const ImportScan& before_scan, const EditPlan& plan, const Bytes& after,
                 const MachO& reread, const SecondReader& second);  // `after` re-read (reread_output)

}  // namespace machofix
