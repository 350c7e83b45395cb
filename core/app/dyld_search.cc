// Finding libraries as dyld4 does (Loader::getLoader, Loader::forEachPath,
// ProcessConfig::PathOverrides::forEachPathVariant, Loader::forEachResolvedAtPathVar).
#include <algorithm>
#include <filesystem>
#include <system_error>

#include "core/app/dyld.h"
#include "core/format/macho_format.h"

namespace machofix {

namespace {

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// The prefixes dyld looks for in its shared cache (mightBeInSharedCache): on a Mac
// since macOS 11 most of these libraries exist only there, not as files.
bool system_path(const std::string& path) {
  return starts_with(path, "/usr/lib/") || starts_with(path, "/System/Library/") ||
         starts_with(path, "/System/iOSSupport/") || starts_with(path, "/System/DriverKit/");
}

std::string join(const std::string& directory, const std::string& tail) {
  if (directory.empty()) return tail;
  return directory.back() == '/' ? directory + tail : directory + "/" + tail;
}

std::string leaf_name(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

// "Foo.framework/Foo" or "Foo.framework/Versions/A/Foo" at the end of a path, for
// the framework fallback paths (getFrameworkPartialPath).
std::optional<std::string> framework_partial_path(const std::string& path) {
  std::string leaf = leaf_name(path);
  std::string framework = leaf + ".framework/";
  size_t at = path.rfind(framework);
  if (at == std::string::npos || (at > 0 && path[at - 1] != '/')) return std::nullopt;
  std::string partial = path.substr(at);
  if (partial == framework + leaf) return partial;
  std::string versions = framework + "Versions/";
  if (!starts_with(partial, versions)) return std::nullopt;
  std::string version_and_leaf = partial.substr(versions.size());  // "A/Foo"
  size_t slash = version_and_leaf.find('/');
  if (slash == 0 || slash == std::string::npos || version_and_leaf.substr(slash + 1) != leaf) return std::nullopt;
  return partial;
}

// dyld gives an image the default fallback paths only if it was linked against an
// SDK older than 2022's (macOS 14: MachOFile::enforceFormat(sdkOnOrAfter2022)).
bool pre_2022(const LibraryImage* image) {
  if (!image) return false;
  for (const BuildTarget& target : image->build_targets) {
    if (target.platform == kPlatformMacOS || target.platform == 6) return target.sdk < (14u << 16);
    if (target.platform == 2 || target.platform == 3 || target.platform == 7 || target.platform == 8)
      return target.sdk < (17u << 16);
  }
  return true;
}

std::string lexically_normal(const std::string& path) {
  return std::filesystem::path(path).lexically_normal().string();
}

enum class FileState { Regular, Other, Missing };

FileState file_state(const std::string& path) {
  std::error_code error;
  std::filesystem::file_status status = std::filesystem::status(path, error);
  if (error || !std::filesystem::exists(status)) return FileState::Missing;
  return std::filesystem::is_regular_file(status) ? FileState::Regular : FileState::Other;
}

// A text stub of an SDK stands for the library at a system path: usr/lib/libz.1.tbd
// for /usr/lib/libz.1.dylib, Foo.framework/Foo.tbd for the framework's binary.
std::string stub_path(const std::string& path) {
  if (path.size() > 6 && path.compare(path.size() - 6, 6, ".dylib") == 0) return path.substr(0, path.size() - 6) + ".tbd";
  return path + ".tbd";
}

}  // namespace

std::string sysroot_library(const std::string& sysroot, const std::string& install_name) {
  if (sysroot.empty() || install_name.empty() || install_name[0] != '/') return "";
  // As try_candidate looks there: the file, or for a system path its SDK stub.
  std::string local = lexically_normal(sysroot + install_name);
  if (file_state(local) == FileState::Regular) return local;
  if (system_path(install_name) && file_state(stub_path(local)) == FileState::Regular) return stub_path(local);
  return "";
}

bool sysroot_holds(const std::string& sysroot, const std::string& install_name) {
  return !sysroot_library(sysroot, install_name).empty();
}

std::string directory_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

const std::string& ProcessImage::install_name() const {
  static const std::string none;
  return image ? image->install_name : none;
}

// JustInTimeLoader::matchesPath: a loaded image answers to its path and to its
// install name, so a library the application loaded under the install name a model
// asks for is the one the model gets, wherever it lies.
std::optional<size_t> Dyld::loaded(const std::string& path) const {
  for (size_t index = 0; index < process_.images.size(); ++index) {
    const ProcessImage& image = process_.images[index];
    if (image.path == path || (!image.install_name().empty() && image.install_name() == path)) return index;
  }
  return std::nullopt;
}

// Loader::forEachResolvedAtPathVar for @rpath/: the LC_RPATHs of the requester, of
// each image up the chain that loaded it, then of the main executable (the dlopen
// caller), each image's in load-command order. dyld pushes some links twice; each
// is searched once here, which tries the same paths in the same order.
std::vector<Dyld::Candidate> Dyld::rpath_candidates(const std::string& tail, size_t requester) const {
  std::vector<size_t> chain;
  for (std::optional<size_t> link = requester; link; link = process_.images[*link].loaded_by) {
    if (std::find(chain.begin(), chain.end(), *link) != chain.end()) break;
    chain.push_back(*link);
  }
  if (std::find(chain.begin(), chain.end(), 0) == chain.end()) chain.push_back(0);
  std::vector<Candidate> paths;
  for (size_t link : chain) {
    const ProcessImage& image = process_.images[link];
    if (!image.image) continue;
    for (const std::string& rpath : image.image->rpaths) {
      Candidate candidate;
      if (starts_with(rpath, "@loader_path")) {
        candidate = {join(directory_of(image.path) + rpath.substr(12), tail), false, image.local};
      } else if (starts_with(rpath, "@executable_path")) {
        candidate = {join(lexically_normal(process_.executable_directory + rpath.substr(16)), tail), false, true};
      } else if (starts_with(rpath, "/")) {
        candidate = {join(rpath, tail), false, local(rpath)};
      } else {
        continue;  // relative to the current directory: unknowable here (and refused by hardened apps)
      }
      paths.push_back(std::move(candidate));
    }
  }
  return paths;
}

// The application's directory itself too: a library directory's stand-in executable has it as
// its LC_RPATH.
// A model loaded from where it lies brings its directory: the files beside it ship with it.
bool Dyld::local(const std::string& path) const {
  auto under = [&](const std::string& root) { return !root.empty() && (path == root || starts_with(path, root + "/")); };
  return under(roots_.app) || under(roots_.model_directory);
}

// forEachPathVariant: the path itself (its @ forms expanded), then the default
// fallbacks by leaf name or framework partial path for an image that gets them.
// The cryptex and DYLD_* variants are left out: a shipped app sets no DYLD_*
// variable, and the cryptex holds only the system's libraries.
std::vector<Dyld::Candidate> Dyld::candidates(const std::string& load_path, size_t requester) const {
  std::vector<Candidate> paths;
  const ProcessImage& image = process_.images[requester];
  if (starts_with(load_path, "@rpath/")) {
    paths = rpath_candidates(load_path.substr(7), requester);
  } else if (starts_with(load_path, "@loader_path/")) {
    paths.push_back({join(directory_of(image.path), load_path.substr(13)), false, image.local});
  } else if (starts_with(load_path, "@executable_path/")) {
    // dyld folds the ".." of an @executable_path expansion (expandAndNormalizeAtExecutablePath).
    paths.push_back({lexically_normal(join(process_.executable_directory, load_path.substr(17))), false, true});
  } else if (!starts_with(load_path, "@")) {
    paths.push_back({load_path, false, local(load_path)});
  }
  if (!pre_2022(image.image)) return paths;
  std::optional<std::string> framework = framework_partial_path(load_path);
  std::vector<std::string> fallbacks;
  if (framework) fallbacks = {"/Library/Frameworks/" + *framework, "/System/Library/Frameworks/" + *framework};
  else fallbacks = {"/usr/local/lib/" + leaf_name(load_path), "/usr/lib/" + leaf_name(load_path)};
  for (std::string& path : fallbacks)
    if (path != load_path) paths.push_back({std::move(path), true});
  return paths;
}

bool Dyld::add_image(const std::string& path, const OpenedLibrary& opened, size_t requester, Found& found) {
  if (!opened.image) {
    found.tried.push_back({path, opened.problem});
    return false;
  }
  if (opened.image->filetype != macho::MH_DYLIB) {
    found.tried.push_back({path, opened.image->filetype == macho::MH_EXECUTE ? "cannot link against a main executable"
                                                                              : "cannot link against a bundle"});
    return false;
  }
  ProcessImage image;
  image.path = path;
  image.image = opened.image;
  image.dependents.resize(opened.image->dependencies.size());
  image.loaded_by = requester;
  process_.images.push_back(std::move(image));
  found.image = process_.images.size() - 1;
  return true;
}

// One candidate, as getLoader's handler takes it: an image already loaded under that
// path or install name; else the file (the application's, the sysroot's, or a system
// library taken as present).
bool Dyld::try_candidate(const Candidate& candidate, size_t requester, Found& found) {
  if (std::optional<size_t> image = loaded(candidate.path)) {
    found.image = image;
    return true;
  }
  const std::string& path = candidate.path;
  if (starts_with(path, std::string(kModelDirectory) + "/")) {
    found.tried.push_back({path, "no such file"});
    return false;
  }
  if (candidate.local) {
    std::string local = lexically_normal(path);
    FileState state = file_state(local);
    if (state != FileState::Regular) {
      found.tried.push_back({path, state == FileState::Missing ? "no such file" : "not a file"});
      return false;
    }
    std::error_code error;
    std::string real = std::filesystem::canonical(local, error).string();  // @loader_path is the real path
    if (error) real = local;
    // dyld also knows a file loaded under another name (a symlink, "..") by its inode.
    if (std::optional<size_t> image = loaded(real)) {
      found.image = image;
      return true;
    }
    OpenedLibrary opened = files_.open(local, process_.arch, process_.platform);
    // A file of the application that the kernel or dyld refuses: dyld notes why and
    // tries the next path. (The sysroot stands for the system, which is taken as sound.)
    if (opened.image && opened.image->refused) {
      found.tried.push_back({path, opened.image->refused->reason()});
      return false;
    }
    bool added = add_image(real, opened, requester, found);
    if (added) process_.images[*found.image].local = true;
    return added;
  }
  bool system = system_path(path);
  if (!starts_with(path, "/")) {
    found.tried.push_back({path, "no such file (a path relative to the current directory)"});
    return false;
  }
  if (roots_.sysroot.empty()) {
    if (system && !candidate.fallback) {
      ProcessImage image;
      image.path = path;
      image.loaded_by = requester;
      process_.images.push_back(std::move(image));
      found.image = process_.images.size() - 1;
      found.system_assumed = true;
      return true;
    }
    found.tried.push_back({path, system ? "not looked up (no --sysroot), so not taken as present" : "no such file"});
    return false;
  }
  std::string local = lexically_normal(roots_.sysroot + path);
  FileState state = file_state(local);
  if (state == FileState::Regular) return add_image(path, files_.open(local, process_.arch, process_.platform), requester, found);
  if (system) {
    std::string stub = stub_path(local);
    if (file_state(stub) == FileState::Regular) return add_image(path, files_.open(stub, process_.arch, process_.platform), requester, found);
    OpenedLibrary inlined = files_.inlined(path, process_.arch, process_.platform);
    if (inlined.image) return add_image(path, inlined, requester, found);
  }
  found.tried.push_back({path, state == FileState::Other ? "not a file" : system ? "no such file, not in dyld cache" : "no such file"});
  return false;
}

// Loader::getLoader: an @rpath/ name an image already loaded carries is that image,
// whatever the rpaths say; otherwise each candidate in turn.
Dyld::Found Dyld::find(const std::string& load_path, size_t requester) {
  Found found;
  if (starts_with(load_path, "@rpath/"))
    if (std::optional<size_t> image = loaded(load_path)) {
      found.image = image;
      return found;
    }
  for (const Candidate& candidate : candidates(load_path, requester))
    if (try_candidate(candidate, requester, found)) return found;
  if (found.tried.empty() && starts_with(load_path, "@rpath/"))
    found.tried.push_back({load_path, "no LC_RPATH's found"});
  return found;
}

std::vector<DependencyOutcome> Dyld::load_dependents(size_t image) {
  std::vector<DependencyOutcome> outcomes;
  std::vector<size_t> added;
  const LibraryImage* library = process_.images[image].image;
  if (!library) return outcomes;
  for (size_t index = 0; index < library->dependencies.size(); ++index) {
    const Dylib& dylib = library->dependencies[index];
    size_t images_before = process_.images.size();
    Found found = find(dylib.install_name, image);
    DependencyOutcome outcome{dylib.ordinal, dylib.install_name, dylib.kind, std::nullopt, found.system_assumed, false, {}};
    if (found.image) {
      process_.images[image].dependents[index] = found.image;
      outcome.resolved = process_.images[*found.image].path;
      outcome.local = process_.images[*found.image].local;
      if (*found.image >= images_before) added.push_back(*found.image);
    } else {
      outcome.tried = found.tried;
      // A weak link may be missing; a re-exported library may not, even weak-linked.
      if (dylib.kind != DylibKind::Weak) process_.missing.push_back({image, dylib.ordinal, dylib.install_name, found.tried});
    }
    outcomes.push_back(std::move(outcome));
  }
  for (size_t index : added) load_dependents(index);
  return outcomes;
}

}  // namespace machofix
