#include "core/jobs/job.h"

#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "core/io/archive.h"
#include "core/format/fat.h"
#include "core/io/file_io.h"
#include "core/lief/lief_check.h"
#include "core/format/macho.h"
#include "core/io/macho_write.h"
#include "core/base/util.h"

namespace machofix {

FileKind detect_kind(const Bytes& bytes) {
  if (looks_like_universal(bytes)) return FileKind::Universal;
  if (looks_like_thin_macho(bytes)) return FileKind::MachO;
  if (looks_like_pte(bytes)) return FileKind::Pte;
  if (looks_like_ptd(bytes)) return FileKind::Ptd;
  if (bytes.size() >= 4 && bytes.u32(0) == 0x464c457f) return FileKind::Elf;
  if (looks_like_archive(bytes)) return FileKind::Archive;
  return FileKind::Other;
}

namespace {

// Calls visit(macho) for every Mach-O image the report covers: the file's, its
// blobs', its members'.
template <typename Report, typename Visit>
void each_macho(Report& report, Visit&& visit) {
  if (report.macho) visit(*report.macho);
  if (report.pte)
    for (auto& blob : report.pte->blobs) visit(blob.macho);
  for (auto& member : report.members) each_macho(member, visit);
}

}  // namespace

size_t FileReport::removed_count() const {
  size_t count = 0;
  each_macho(*this, [&](const MachOReport& macho) { count += macho.removed_count(); });
  return count;
}

size_t FileReport::removable_count() const {
  size_t count = 0;
  each_macho(*this, [&](const MachOReport& macho) { count += macho.removable_count(); });
  return count;
}

namespace {

// Nothing was written (a dry run, a failure): what prune would remove stays in the
// report as removable, but nothing was removed.
void forget_removals(FileReport& report) {
  each_macho(report, [](MachOReport& macho) {
    for (SliceReport& slice : macho.slices)
      for (DylibReport& dylib : slice.dylibs) dylib.removed = false;
  });
}

// In place on a symlink rewrites the file it points to; the link stays a link.
std::string resolved(const std::string& path) {
  char buffer[PATH_MAX];
  return realpath(path.c_str(), buffer) ? std::string(buffer) : path;
}

// A single output file goes into a directory that exists, as with cp (the
// directories of a mirrored tree are made): checked before the work, once the
// file has been judged (a refusal comes first, whatever the output).
void check_output_directory(const JobOptions& options) {
  if (options.output.empty() || options.in_place || options.dry_run || options.create_output_directories) return;
  require_output_directory(options.output);
}

// Where the result goes: the -o path (in a mirrored tree, its directories made), the
// input itself in place, or nowhere.
std::string output_target(const MappedFile& input, const JobOptions& options) {
  if (options.dry_run) return "";
  if (options.in_place && is_standard_stream(input.path())) fail("standard input cannot be replaced in place: use -o");
  if (options.in_place) return resolved(input.path());
  if (options.output.empty() || is_standard_stream(options.output)) return options.output;
  std::error_code error;
  if (options.create_output_directories)
    std::filesystem::create_directories(std::filesystem::path(options.output).parent_path(), error);
  return options.output;
}

// Keeps the original under another name before it is replaced: a hard link, so it
// costs nothing and the original inode stays exactly as it was.
class Backup {
 public:
  Backup(const std::string& target, const JobOptions& options) {
    if (!options.in_place || options.backup_suffix.empty() || target.empty()) return;
    path_ = target + options.backup_suffix;
    ::unlink(path_.c_str());
    if (::link(target.c_str(), path_.c_str()) != 0) fail_system("cannot keep a backup at " + path_);
  }
  // The backup stays only if the original was really replaced.
  void keep_if(bool replaced, FileReport& report) {
    if (path_.empty()) return;
    if (replaced) report.notes.push_back("original kept as " + path_);
    else ::unlink(path_.c_str());
    path_.clear();
  }
  ~Backup() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }

 private:
  std::string path_;
};

bool any_would_change(const std::vector<FileReport>& members) {
  for (const FileReport& member : members)
    if (member.status == FileStatus::WouldChange) return true;
  return false;
}

void set_status(FileReport& report, bool changed, const JobOptions& options) {
  report.status = changed ? (options.dry_run ? FileStatus::WouldChange : FileStatus::Changed) : FileStatus::Unchanged;
}

RewriteKind rewrite_kind(Operation operation) {
  switch (operation) {
    case Operation::Sign: return RewriteKind::Sign;
    case Operation::Edit: return RewriteKind::Edit;
    case Operation::Fix: return RewriteKind::Fix;
    default: return RewriteKind::Prune;
  }
}

// A rewrite's progress, in passes over the file: judging it (its signature checked,
// every page hashed), rewriting it (the new signature made and checked: two more),
// writing it. Each pass ends at its mark even where it hashed nothing (an unsigned
// input), so that the line moves whatever the file.
constexpr uint64_t kJudgedPasses = 1, kRewrittenPasses = 3, kAllPasses = 4;

void run_macho(const MappedFile& input, Operation operation, const JobOptions& options, FileReport& report) {
  RepairOptions repair = options.repair;
  // Standard input has no file name to name a new signature after.
  if (repair.file_name.empty() && !is_standard_stream(input.path())) repair.file_name = last_path_component(input.path());
  if (operation == Operation::Inspect) {
    ProgressMeter progress(options.repair.progress, input.size());  // the input's pages hashed
    ProgressScope counting(&progress);
    report.macho = inspect_macho(input.bytes(), repair);
    report.status = FileStatus::Inspected;
    return;
  }
  ProgressMeter progress(options.repair.progress, kAllPasses * input.size());
  ProgressScope counting(&progress);  // the pages hashed count
  // Every decision that refuses the file is taken here, before any rewriting work.
  MachORewrite rewrite(input.bytes(), repair, rewrite_kind(operation));
  progress.reach(kJudgedPasses * input.size());
  check_output_directory(options);
  // -o always produces a file (an identical copy when nothing changed); in place only
  // when needed. The output starts as a copy of the input, made while the file is
  // rewritten (core/io/copy_ahead.h).
  std::string target = output_target(input, options);
  std::optional<CopiedOutput> output;
  if (!target.empty() && (!options.in_place || rewrite.rewrites()))
    output.emplace(input, target, options.in_place, ByteProgress{}, rewrite.expected_placement());
  // A pruned or edited file is re-read by LIEF: load it while this one is rewritten
  // (not when nothing is to be rewritten: loading it would cost more than the rest).
  std::optional<LiefPreload> preload;
  if (rewrite.rereads()) preload.emplace();
  MachORepair result = rewrite.run();
  report.macho = std::move(result.report);
  bool changed = report.macho->changed;
  set_status(report, changed, options);
  if (!output || (options.in_place && !changed)) return;
  progress.reach(kRewrittenPasses * input.size());
  Backup backup(target, options);
  write_macho_file(input, result.output, *output, &progress);
  backup.keep_if(true, report);
  report.bytes_written = result.output.size();
}

void run_pte(const MappedFile& input, Operation operation, const JobOptions& options, FileReport& report) {
  if (operation == Operation::Inspect) {
    report.pte = inspect_pte(input.bytes(), options.repair);
    report.status = FileStatus::Inspected;
    return;
  }
  RepairOptions repair = options.repair;
  BlobRewriter rewrite = macho_rewriter(rewrite_kind(operation));
  std::string target = output_target(input, options);
  Backup backup(target, options);
  report.pte = repair_pte(input, target.empty() ? input.path() : target, repair, target.empty(), rewrite);
  set_status(report, report.pte->changed, options);
  backup.keep_if(report.pte->written, report);
  if (report.pte->written) report.bytes_written = report.pte->output_size;
}

// An -o output for a file that did not change: an identical copy.
void copy_unchanged(const MappedFile& input, const JobOptions& options, FileReport& report, const char* note) {
  std::string target = output_target(input, options);
  if (target.empty() || options.in_place) return;
  AtomicOutput output(target, input.mode(), /*durable=*/false);  // the original stays where it is
  output.copy_from(input.fd(), 0, 0, input.size());
  output.commit();
  report.bytes_written = input.size();
  report.notes.push_back(note);
}

// Archives of models: each member that is a model goes through run_job on its own
// temporary file (in place); the archive module copies every other member as it is.
void run_archive(const MappedFile& input, Operation operation, const JobOptions& options, FileReport& report) {
  check_output_directory(options);  // the members are fixed in a directory beside the output
  JobOptions member_options = options;
  member_options.output.clear();
  member_options.in_place = true;
  member_options.backup_suffix.clear();
  member_options.skip_other_files = true;
  member_options.dry_run = options.dry_run || operation == Operation::Inspect;
  std::string target = output_target(input, options);
  ArchiveOptions archive_options;
  archive_options.dry_run = target.empty() || operation == Operation::Inspect;
  archive_options.whole_or_nothing = true;
  MemberFixer fix = [&](const ArchiveMember& member, const std::string& temp_path) {
    // A new signature is named as the member would be on its own, not by its temporary file.
    JobOptions this_member = member_options;
    this_member.repair.file_name = last_path_component(member.name);
    FileReport member_report = run_job(temp_path, operation, this_member);
    if (member_report.status == FileStatus::Skipped) return false;  // not a model: no report
    member_report.path = member.name;
    if (member_report.status == FileStatus::Failed) {  // the temporary path means nothing to the user
      std::string problem = member_report.error.substr(temp_path.size() + 2);
      // Refused, the archive is refused with it; written, it would carry the member
      // unfixed: either way nothing is written, the member's kind of failure kept
      // (rewrite_archive adds the archive and the member).
      if (member_report.refused() || !archive_options.dry_run)
        throw Error(problem).as(member_report.error_kind.value_or(ErrorKind::Malformed));
      member_report.error = input.path() + ": " + member.name + ": " + problem;
    }
    bool changed = member_report.status == FileStatus::Changed;
    report.members.push_back(std::move(member_report));
    return changed;
  };
  archive_options.durable = options.in_place;
  archive_options.input_name = input.path();
  // Members are fixed in temporary files beside the output (a disk, not a tmpfs);
  // with standard input or output there is no such place: $TMPDIR.
  std::string beside = target.empty() ? resolved(input.path()) : target;
  if (!is_standard_stream(beside)) archive_options.temp_root = std::filesystem::path(beside).parent_path().string();
  Backup backup(target, options);
  ArchiveResult result =
      rewrite_archive(input.reopen_path(), target.empty() ? input.reopen_path() : target, input.mode(), fix, archive_options);
  backup.keep_if(result.written, report);
  if (operation == Operation::Inspect) report.status = FileStatus::Inspected;
  else set_status(report, !result.changed.empty() || (options.dry_run && any_would_change(report.members)), options);
  if (result.written) report.bytes_written = result.output_size;
  else if (!options.in_place && report.status != FileStatus::Inspected) copy_unchanged(input, options, report, "nothing to change: copied");
  for (const MemberFailure& failure : result.failures) report.notes.push_back(failure.member + ": not processed: " + failure.error);
}

// Why a file is not a model, for the error when it was named.
std::string not_a_model(const MappedFile& input, FileKind kind) {
  if (input.size() == 0) return "empty file";
  return std::string("not a Mach-O, .pte or .ptd file (it looks like ") + (kind == FileKind::Elf ? "an ELF file" : "something else") + ")";
}

void run_other(const MappedFile& input, const JobOptions& options, FileReport& report) {
  // Only files found among others are skipped; standard input is always named on purpose.
  if (!options.skip_other_files || is_standard_stream(input.path())) fail(not_a_model(input, report.kind));
  report.status = FileStatus::Skipped;
  copy_unchanged(input, options, report, "not a model: copied unchanged");
}

// The type of a Mach-O file that is not a dylib, bundle or executable (an object
// file, a dSYM...), when every slice has that type; nullopt otherwise, and for
// headers the parser is to judge.
std::optional<uint32_t> unsupported_filetype(const Bytes& bytes, FileKind kind) {
  if (kind == FileKind::MachO) {
    std::optional<uint32_t> filetype = header_filetype(bytes);
    return filetype && !rewritable_filetype(*filetype) ? filetype : std::nullopt;
  }
  std::optional<uint32_t> common;
  try {
    for (const FatSlice& slice : parse_universal(bytes).slices) {
      std::optional<uint32_t> filetype = header_filetype(bytes.sub(slice.offset, slice.size, "universal slice"));
      if (!filetype || rewritable_filetype(*filetype) || (common && *common != *filetype)) return std::nullopt;
      common = filetype;
    }
  } catch (const Error&) {
    return std::nullopt;  // prune and inspect report what is wrong with the header
  }
  return common;
}

// Named on the command line, such a file is an error; found in a directory, it is
// passed over with a note (and copied into a mirrored tree).
void run_unsupported(const MappedFile& input, uint32_t filetype, const JobOptions& options, FileReport& report) {
  if (!options.skip_other_files)
    fail("a " + filetype_description(filetype) + ", not a dylib, bundle or executable: machofix does not handle it");
  report.status = FileStatus::Skipped;
  report.skipped_filetype = filetype;
  copy_unchanged(input, options, report, "not handled: copied unchanged");
}

}  // namespace

FileReport run_job(const std::string& path, Operation operation, const JobOptions& named_options) {
  // An edit that matches nothing is an error in a file named on the command line,
  // a note in one found in a directory or archive.
  JobOptions options = named_options;
  // `fix` plans its edits for the whole file: one matches in some of its images only.
  options.repair.edit.unmatched_is_note = options.skip_other_files || operation == Operation::Fix;
  // Every rewrite is re-read by LIEF too, unless the caller named another reader.
  if (!options.repair.second_reader) options.repair.second_reader = cross_check_with_lief;
  auto start = std::chrono::steady_clock::now();
  FileReport report;
  report.path = path;
  try {
    MappedFile input(path);
    report.kind = detect_kind(input.bytes());
    switch (report.kind) {
      case FileKind::MachO:
      case FileKind::Universal:
        if (std::optional<uint32_t> filetype = unsupported_filetype(input.bytes(), report.kind))
          run_unsupported(input, *filetype, options, report);
        else
          run_macho(input, operation, options, report);
        break;
      case FileKind::Pte:
      case FileKind::Ptd:
        run_pte(input, operation, options, report);
        break;
      case FileKind::Archive:
        run_archive(input, operation, options, report);
        break;
      default:
        run_other(input, options, report);
    }
  } catch (Error& error) {
    report.status = FileStatus::Failed;
    report.error_kind = error.kind();
    report.error = error.in_file(path).describe();
  } catch (const std::bad_alloc&) {
    report.status = FileStatus::Failed;
    report.error_kind = ErrorKind::System;
    report.error = path + ": out of memory";
  }
  if (options.dry_run || report.status == FileStatus::Failed) forget_removals(report);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace machofix
