#include "core/job.h"

#include <chrono>
#include <climits>
#include <cstdlib>

#include "core/file_io.h"
#include "core/macho.h"

namespace machofix {

const char* file_kind_name(FileKind kind) {
  switch (kind) {
    case FileKind::MachO: return "mach-o";
    case FileKind::Universal: return "mach-o universal";
    case FileKind::Pte: return "pte";
    case FileKind::Ptd: return "ptd";
    case FileKind::Elf: return "elf";
    case FileKind::Other: return "other";
  }
  return "?";
}

FileKind detect_kind(const Bytes& bytes) {
  if (looks_like_universal(bytes)) return FileKind::Universal;
  if (looks_like_thin_macho(bytes)) return FileKind::MachO;
  if (bytes.size() >= 4 && bytes.u32(0) == 0x464c457f) return FileKind::Elf;
  return FileKind::Other;
}

namespace {

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// In place on a symlink rewrites the file it points to; the link stays a link.
std::string resolved(const std::string& path) {
  char buffer[PATH_MAX];
  return realpath(path.c_str(), buffer) ? std::string(buffer) : path;
}

void run_macho(const MappedFile& input, Operation operation, const JobOptions& options, FileReport& report) {
  RepairOptions repair = options.repair;
  if (repair.file_name.empty()) repair.file_name = base_name(input.path());
  if (operation == Operation::Inspect) {
    report.macho = inspect_macho(input.bytes(), repair);
    report.status = "inspected";
    return;
  }
  MachORepair result = operation == Operation::Prune ? prune_macho(input.bytes(), repair) : sign_macho(input.bytes(), repair);
  report.macho = std::move(result.report);
  bool changed = report.macho->changed;
  report.status = changed ? (options.dry_run ? "would change" : "changed") : "unchanged";
  if (options.dry_run) return;
  // -o always produces a file (an identical copy when nothing changed); in place only when needed.
  std::string target = options.in_place ? resolved(input.path()) : options.output;
  if (target.empty() || (options.in_place && !changed)) return;
  write_file_atomically(target, result.output, input.mode());
  report.bytes_written = result.output.size();
}

}  // namespace

FileReport run_job(const std::string& path, Operation operation, const JobOptions& options) {
  auto start = std::chrono::steady_clock::now();
  FileReport report;
  report.path = path;
  try {
    MappedFile input(path);
    report.kind = detect_kind(input.bytes());
    switch (report.kind) {
      case FileKind::MachO:
      case FileKind::Universal:
        run_macho(input, operation, options, report);
        break;
      default:
        fail(std::string("not a Mach-O, .pte or .ptd file (it looks like ") +
             (report.kind == FileKind::Elf ? "an ELF file" : "something else") + ")");
    }
  } catch (Error& error) {
    report.status = "failed";
    report.error = error.in_file(path).describe();
  } catch (const std::bad_alloc&) {
    report.status = "failed";
    report.error = path + ": out of memory";
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace machofix
