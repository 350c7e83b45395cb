// dyld's two jobs in a simulated process (core/app/process.h): finding the libraries
// an image depends on (dyld_search.cc) and binding its imports (dyld_bind.cc). Each
// function names the dyld function it mirrors; docs/app-check.md has the rules.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/app/process.h"

namespace machofix {

// Where the application's files and the system's are on this machine.
struct SearchRoots {
  std::string app;      // the application's directory: paths inside it are its files
  std::string sysroot;  // system paths (and other absolute ones) are looked up under it
  // A model loaded from its own path: its directory, whose files ship with it.
  std::string model_directory;
};

// What the model's directory is called in paths: ExecuTorch writes the .so to a
// fresh temporary directory, where nothing else is.
inline constexpr const char* kModelDirectory = "<temporary directory>";

// The sysroot has the library at that absolute install name (the file, or for a
// system path its SDK text stub): the Macs it stands for have it.
bool sysroot_holds(const std::string& sysroot, const std::string& install_name);
// Where: the file or stub on this machine; "" when the sysroot does not have it.
std::string sysroot_library(const std::string& sysroot, const std::string& install_name);

class Dyld {
 public:
  Dyld(Process& process, LibraryFiles& files, const SearchRoots& roots)
      : process_(process), files_(files), roots_(roots) {}

  // JustInTimeLoader::loadDependents: resolves every dependency of `image` in
  // load-command order (adding the images found), then those of each image it added,
  // depth first. A non-weak dependency not found becomes a MissingLibrary of the
  // process; a weak one is left missing. Returns the outcome of each of `image`'s own.
  std::vector<DependencyOutcome> load_dependents(size_t image);

  // Loader::resolveSymbol for every import of `image`.
  std::vector<BindingOutcome> bind(size_t image) const;

 private:
  struct Found {
    std::optional<size_t> image;
    bool system_assumed = false;
    std::vector<TriedPath> tried;
  };
  struct Candidate {
    std::string path;
    bool fallback = false;  // from the default fallback paths: never assumed present
    // A file of the application on this machine: expanded from @executable_path, or
    // from @loader_path of one of its files, or under its directory. Any other
    // absolute path names the user's Mac (the sysroot, the system, or nothing).
    bool local = false;
  };

  Found find(const std::string& load_path, size_t requester);
  std::vector<Candidate> candidates(const std::string& load_path, size_t requester) const;
  std::vector<Candidate> rpath_candidates(const std::string& tail, size_t requester) const;
  bool local(const std::string& path) const;
  std::optional<size_t> loaded(const std::string& path) const;
  bool try_candidate(const Candidate& candidate, size_t requester, Found& found);
  bool add_image(const std::string& path, const OpenedLibrary& opened, size_t requester, Found& found);

  enum class Lookup { Found, NotFound, Unknown };
  Lookup lookup(size_t image, const std::string& symbol, bool shallow, std::vector<size_t>& searched,
                std::string& found_in) const;
  void bind_flat(const std::string& symbol, size_t importer, BindingOutcome& outcome) const;

  Process& process_;
  LibraryFiles& files_;
  const SearchRoots& roots_;
};

// The directory part of a path ("/a/b" for "/a/b/c"), as dyld's @loader_path.
std::string directory_of(const std::string& path);

}  // namespace machofix
