// One file, start to finish: decide what it is by content, run the operation,
// verify, and write the output atomically. Front ends (the CLI, batch mode) call
// only this; it never throws for problems with the file, it reports them.
#pragma once

#include <optional>
#include <string>

#include "core/macho_repair.h"

namespace machofix {

enum class FileKind { MachO, Universal, Pte, Ptd, Elf, Other };
const char* file_kind_name(FileKind kind);
FileKind detect_kind(const Bytes& bytes);

enum class Operation { Inspect, Prune, Sign };

struct JobOptions {
  RepairOptions repair;
  std::string output;  // -o: the output path; empty with in_place
  bool in_place = false;
  bool dry_run = false;
};

struct FileReport {
  std::string path;
  FileKind kind = FileKind::Other;
  // "changed", "unchanged", "would change" (dry run), "inspected", "skipped", "failed"
  std::string status;
  std::string error;  // for "failed": file, part, offset and problem
  std::optional<MachOReport> macho;
  uint64_t bytes_written = 0;
  double seconds = 0;
};

FileReport run_job(const std::string& path, Operation operation, const JobOptions& options);

}  // namespace machofix
