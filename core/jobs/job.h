// One file, start to finish: decide what it is by content, run the operation,
// verify, and write the output atomically. Front ends (the CLI, batch mode) call
// only this; it never throws for problems with the file, it reports them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/rewrite/macho_repair.h"
#include "core/io/pte.h"

namespace machofix {

struct FixOutcome;

enum class FileKind { MachO, Universal, Pte, Ptd, Archive, Elf, Other };
FileKind detect_kind(const Bytes& bytes);

// Fix: `machofix fix`'s rewrite (RewriteKind::Fix), as core/jobs/fix.h plans it.
enum class Operation { Inspect, Prune, Sign, Edit, Fix };

struct JobOptions {
  RepairOptions repair;
  std::string output;  // -o: the output path; empty with in_place
  bool in_place = false;
  bool dry_run = false;
  std::string backup_suffix;  // in place: keep the original under name + suffix
  // Files found in a directory: files that are not models (or Mach-O files of a type
  // machofix does not rewrite) are skipped (and, with an output path, copied unchanged
  // so a mirrored tree is complete) instead of being errors.
  bool skip_other_files = false;
  // The output lies in a mirrored tree: its directories are made. A single output
  // file's directory must exist, as for cp.
  bool create_output_directories = false;
};

// What became of a file. The reports spell it in tool/report_text.cc.
enum class FileStatus {
  Changed,
  Unchanged,
  WouldChange,  // a dry run
  Inspected,
  Skipped,
  Failed,
};

struct FileReport {
  std::string path;
  FileKind kind = FileKind::Other;
  FileStatus status = FileStatus::Failed;  // until the job says otherwise: never a silent pass
  std::string error;  // for Failed: file, part, offset and problem
  std::optional<ErrorKind> error_kind;  // for Failed: what kind of failure (core/base/error.h)
  // Failed by a decision (an invalid input signature, an identity signature
  // without --adhoc), not because the file could not be read
  bool refused() const { return error_kind == ErrorKind::Refused; }
  std::optional<uint32_t> skipped_filetype;  // for Skipped: the Mach-O filetype machofix does not handle
  std::vector<std::string> notes;  // links, backups, copies: what was done besides
  std::optional<MachOReport> macho;
  std::optional<PteReport> pte;
  std::vector<FileReport> members;  // archives: one per member that is a model
  std::shared_ptr<const FixOutcome> fix;  // `fix`: its edits and the findings left (core/jobs/fix.h)
  uint64_t bytes_written = 0;
  double seconds = 0;

  // Its content was read and judged: neither Failed nor Skipped.
  bool examined() const { return status != FileStatus::Failed && status != FileStatus::Skipped; }
  size_t removed_count() const;    // dylib commands removed from the file written
  size_t removable_count() const;  // dylib commands prune removes (or removed)
};

FileReport run_job(const std::string& path, Operation operation, const JobOptions& options);

}  // namespace machofix
