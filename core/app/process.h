// The application a model is checked against, and dyld's work in its process:
// finding libraries (dyld's Loader::getLoader and Loader::forEachPath) and binding
// imports (Loader::resolveSymbol, Loader::hasExportedSymbol). docs/app-check.md says
// which dyld function each step mirrors and where this simulation stops.
//
// App reads the application once: its main executable and everything that loads at
// launch, per architecture. load_model() then simulates one dlopen of a model (the
// way ExecuTorch's AOTI backends load the .so of a .pte: written to a temporary
// directory and dlopen()ed by the application with RTLD_LAZY | RTLD_LOCAL; or, for a
// plain file, from where it lies) on a copy of the launched process, so a thousand
// models cost one launch.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/app/library_files.h"

namespace machofix {

struct AppOptions {
  std::string app;      // an .app bundle, a Mach-O executable, or a directory of the app's libraries
  std::string sysroot;  // an SDK or a copy of a Mac's libraries; empty: system libraries taken as present
};

// One path dyld tried, and why it went on.
struct TriedPath {
  std::string path;
  std::string reason;  // "no such file", "not a file", an OpenedLibrary problem, ...
};

// An image in the simulated process.
struct ProcessImage {
  std::string path;  // where it was found (an app's file as found here; a system path as on a Mac)
  const LibraryImage* image = nullptr;  // none: a system library taken as present (no --sysroot)
  // Per dependency (ordinal - 1): the image it resolved to; none when it is missing
  // (weak-linked, or a failure reported) or not yet resolved.
  std::vector<std::optional<size_t>> dependents;
  std::optional<size_t> loaded_by;  // whose dependency it was first: the rpath chain goes up it
  bool hidden_from_flat = false;    // the dlopen()ed model itself (RTLD_LOCAL)
  bool local = false;               // a file of the application here (not the sysroot's, the system's, the model)
  const std::string& install_name() const;
};

// A dependency dyld did not find: the whole dlopen fails ("Library not loaded").
struct MissingLibrary {
  size_t needed_by = 0;  // the image whose load command names it
  int ordinal = 0;       // of that load command among its dependencies
  std::string install_name;
  std::vector<TriedPath> tried;
};

// An image of the application itself that the kernel or dyld refuses at its launch.
struct RefusedImage {
  std::string path;
  ImageRefusal refusal;
};

struct Process {
  std::string arch;
  uint32_t platform = kPlatformMacOS;
  std::vector<ProcessImage> images;  // in load order; [0] is the main executable
  std::string executable_directory;  // @executable_path
  std::vector<MissingLibrary> missing;
  std::vector<RefusedImage> refused;  // the executable, or a library of a library directory
};

// Where dyld found one dependency of the model, or what it tried.
struct DependencyOutcome {
  int ordinal = 0;
  std::string install_name;
  DylibKind kind = DylibKind::Load;
  std::optional<std::string> resolved;  // the path found
  bool system_assumed = false;          // a system path taken as present without --sysroot
  bool local = false;                   // found among the application's files (not the sysroot's)
  std::vector<TriedPath> tried;         // when not found, every path in dyld's order
};

enum class BindVerdict {
  Bound,        // found in `found_in`
  Missing,      // not exported where dyld looks: the load fails (or, lazily bound, the first call)
  WeakMissing,  // not found, but a weak import: bound to 0
  NotLoaded,    // its library was not found: the load fails there (library-not-loaded)
  Unchecked,    // its library is a system library taken as present: exports unknown
};

struct BindingOutcome {
  std::string symbol;
  int ordinal = 0;
  bool weak = false;
  bool lazy = false;
  std::string library;   // install name, or "flat namespace", "self", "main executable"
  std::string expected_in;  // the path of the library searched (two-level), if any
  BindVerdict verdict = BindVerdict::Unchecked;
  std::string found_in;  // the path of the image that exports it
  size_t importer = 0;   // the image that imports it (0: the model)
};

// What loading a model slice in the application comes to.
struct ModelLoad {
  std::string arch;
  std::vector<DependencyOutcome> dependencies;  // the model's own, by ordinal
  std::vector<MissingLibrary> missing;          // the model's and those of libraries it brings in
  std::vector<BindingOutcome> bindings;         // every import of the model and of the libraries it brings in
  std::vector<std::string> image_paths;         // by image index: for needed_by / importer
  size_t model_index = 0;                       // the model's image index
  // By image index: the model's dependency (ordinal) that brought it in, directly or
  // through others; 0 for the application's images and the model itself.
  std::vector<int> via_ordinal;
  // The application's own launch: an image refused, a library not found (needed_by
  // indexes image_paths). Either way it never runs, so no model loads in it.
  std::vector<RefusedImage> launch_refused;
  std::vector<MissingLibrary> launch_missing;
};

// What of the model's slice load_model() needs (a SliceReport has it all).
struct ModelSlice {
  std::string arch;
  // Where the file lies, dlopen()ed from there (@loader_path is its real directory,
  // whose files count as present); empty: a blob, written to a temporary directory.
  std::string path;
  std::vector<Dylib> dependencies;
  std::vector<std::string> rpaths;
  std::vector<BuildTarget> build_targets;
  std::vector<BoundImport> imports;
  std::string install_name;
  bool two_level = true;
};

class App {
 public:
  // Reads the application's executable (or lists its library directory). Throws
  // Error naming the path for an application that cannot be read.
  explicit App(AppOptions options);
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  const AppOptions& options() const { return options_; }
  // The architectures the application runs as (its executable's slices).
  const std::vector<std::string>& archs() const { return archs_; }
  bool has_sysroot() const { return !options_.sysroot.empty(); }

  // The process of `arch` once the application has launched (read once); nullptr if
  // the application has no such slice.
  const Process* launched(const std::string& arch);
  ModelLoad load_model(const ModelSlice& model);

  // What `fix` needs to rename a dependency to one of the application's files.
  // The application's directory (an absolute path under it is one of its files).
  const std::string& root() const { return root_; }
  // Its files named `leaf`, under its directory, each once by its real path, sorted.
  std::vector<std::string> files_named(const std::string& leaf) const;
  // A file of this machine (the application's, a sysroot's stub) as a library of a
  // process of `arch`, read once.
  OpenedLibrary open_library(const std::string& path, const std::string& arch);

 private:
  AppOptions options_;
  std::string executable_;  // empty for a directory of libraries
  // The application's directory: an absolute path under it is one of its files.
  std::string root_;
  std::vector<std::string> archs_;
  std::vector<std::string> library_directory_files_;
  LibraryImage directory_executable_;  // the stand-in executable of a library directory
  LibraryFiles files_;
  std::map<std::string, std::unique_ptr<Process>> processes_;
};

}  // namespace machofix
