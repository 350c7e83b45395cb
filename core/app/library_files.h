// What dyld finds in a file it opens as a library: the slice of the process's
// architecture of a Mach-O file, or the library a text stub (.tbd) describes for
// the process's target. Each file is read once, whatever number of models is checked
// against the application it belongs to.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/format/exports.h"
#include "core/format/imports.h"
#include "core/format/macho.h"

namespace machofix {

class MappedFile;

// Why the kernel or dyld refuses to map a Mach-O file, as `verify` judges it.
struct ImageRefusal {
  bool signature = false;  // its code signature (else a load-time rule of dyld's)
  std::string rule;        // the loader rule's id (docs/loader-rules.md); empty for a signature
  std::string problem;     // what is wrong, as verify says it
  // The reason in a dyld "tried:" list.
  std::string reason() const;
};

// A library (or executable) as the simulated dyld sees it.
struct LibraryImage {
  std::string install_name;  // LC_ID_DYLIB or the stub's install-name; empty for an executable
  uint32_t filetype = 0;     // MH_DYLIB, MH_EXECUTE, MH_BUNDLE; a stub is a dylib
  bool stub = false;         // read from a .tbd: it loads nothing and binds nothing
  std::vector<Dylib> dependencies;  // ordinal = index + 1; a stub's are its re-exported libraries
  std::vector<std::string> rpaths;
  std::vector<BuildTarget> build_targets;
  ExportTable exports;
  bool exports_known = true;  // false for a model, whose exports check --app does not read
  // MH_TWOLEVEL: its flat lookups (-undefined dynamic_lookup) name only symbols it
  // does not define, so a flat lookup need not search the image itself.
  bool two_level = true;
  std::vector<BoundImport> imports;  // what it needs bound at load (none for a stub)
  // Set when the kernel or dyld would refuse the file (a Mach-O file; stubs are the
  // system's): dyld passes over such a library and tries the next path.
  std::optional<ImageRefusal> refused;
};

// A file opened for a process: the image, or dyld's reason for passing over it (the
// wording dyld puts in its "tried:" list: "mach-o file, but is an incompatible
// architecture (have 'x86_64', need 'arm64')", "not a mach-o file", ...).
struct OpenedLibrary {
  const LibraryImage* image = nullptr;
  std::string problem;
};

// The target names of text stubs ("macos", "ios", "maccatalyst", ...); dyld's names of
// the platforms are core/format/macho.h's platform_name.
std::string stub_platform_name(uint32_t platform);
inline constexpr uint32_t kPlatformMacOS = 1;

class LibraryFiles {
 public:
  LibraryFiles();
  ~LibraryFiles();
  LibraryFiles(const LibraryFiles&) = delete;
  LibraryFiles& operator=(const LibraryFiles&) = delete;

  // The file at `path` (on this machine) for a process of `arch` on `platform`.
  // Errors of the file become the problem, never an exception: dyld passes over a
  // file it cannot load and tries the next path.
  OpenedLibrary open(const std::string& path, const std::string& arch, uint32_t platform);
  // A library described inline by a text stub already read (libSystem's stub carries
  // /usr/lib/system/*): by install name.
  OpenedLibrary inlined(const std::string& install_name, const std::string& arch, uint32_t platform);

 private:
  struct Stub;
  OpenedLibrary open_uncached(const std::string& path, const std::string& arch, uint32_t platform);
  OpenedLibrary open_macho(const MappedFile& file, const std::string& arch, uint32_t platform);
  OpenedLibrary open_stub(const std::string& path, const MappedFile& file, const std::string& arch, uint32_t platform);
  OpenedLibrary stub_library(const Stub& stub, size_t index, const std::string& arch, uint32_t platform);
  const LibraryImage* keep(LibraryImage image);

  std::map<std::string, std::unique_ptr<MappedFile>> files_;
  std::map<std::string, std::unique_ptr<Stub>> stubs_;          // by path
  std::map<std::string, std::pair<const Stub*, size_t>> inlined_;  // install name -> stub, library index
  std::map<std::tuple<std::string, std::string, uint32_t>, OpenedLibrary> opened_;
  std::vector<std::unique_ptr<LibraryImage>> images_;
};

}  // namespace machofix
