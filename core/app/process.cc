#include "core/app/process.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>

#include "core/app/bundle.h"
#include "core/app/dyld.h"
#include "core/format/fat.h"
#include "core/format/macho_format.h"
#include "core/io/file_io.h"

namespace machofix {

namespace {

std::string absolute_path(const std::string& path) {
  std::error_code error;
  std::filesystem::path canonical = std::filesystem::weakly_canonical(std::filesystem::absolute(path), error);
  return error ? path : canonical.string();
}

// The architectures of a Mach-O executable's 64-bit slices.
std::vector<std::string> executable_archs(const std::string& path) {
  MappedFile file(path);
  Bytes bytes = file.bytes();
  std::vector<std::string> archs;
  if (looks_like_universal(bytes)) {
    for (const FatSlice& slice : parse_universal(bytes).slices) archs.push_back(cpu_name(slice.cputype, slice.cpusubtype));
  } else if (looks_like_thin_macho(bytes) && bytes.size() >= 12) {
    archs.push_back(cpu_name(bytes.u32(4), bytes.u32(8)));
  } else {
    throw Error("not a Mach-O executable (nor an .app bundle or a directory of libraries)").in_file(path);
  }
  return archs;
}

}  // namespace

App::App(AppOptions options) : options_(std::move(options)) {
  std::error_code error;
  std::filesystem::file_status status = std::filesystem::status(options_.app, error);
  if (error || !std::filesystem::exists(status)) throw Error("no such application").in_file(options_.app);
  if (!options_.sysroot.empty()) {
    if (!std::filesystem::is_directory(options_.sysroot, error)) throw Error("--sysroot is not a directory").in_file(options_.sysroot);
    options_.sysroot = absolute_path(options_.sysroot);
  }
  if (std::filesystem::is_directory(status) && !is_app_bundle(options_.app)) {
    root_ = absolute_path(options_.app);
    for (const auto& entry : std::filesystem::directory_iterator(root_, error))
      if (entry.is_regular_file(error)) library_directory_files_.push_back(entry.path().string());
    std::sort(library_directory_files_.begin(), library_directory_files_.end());
    return;
  }
  executable_ = absolute_path(std::filesystem::is_directory(status) ? bundle_executable(options_.app) : options_.app);
  root_ = std::filesystem::is_directory(status) ? absolute_path(options_.app) : directory_of(executable_);
  archs_ = executable_archs(executable_);
  for (const std::string& arch : archs_) {
    OpenedLibrary opened = files_.open(executable_, arch, 0);
    if (!opened.image) continue;  // a 32-bit slice, say: that process is never asked for
    if (opened.image->filetype != macho::MH_EXECUTE)
      throw Error("not a Mach-O executable: give the application's executable, its .app bundle, or a directory of its "
                  "libraries").in_file(executable_);
  }
}

App::~App() = default;

const Process* App::launched(const std::string& arch) {
  auto& process = processes_[arch];
  if (process) return process.get();
  auto launching = std::make_unique<Process>();
  launching->arch = arch;
  SearchRoots roots{root_, options_.sysroot, ""};
  ProcessImage main;
  main.local = true;
  if (executable_.empty()) {
    // A directory of libraries: an executable in it whose LC_RPATH is the directory.
    directory_executable_.rpaths = {root_};
    directory_executable_.filetype = macho::MH_EXECUTE;
    directory_executable_.exports_known = false;
    main.path = root_ + "/<executable>";
    main.image = &directory_executable_;
    launching->executable_directory = root_;
  } else {
    OpenedLibrary opened = files_.open(executable_, arch, 0);
    if (!opened.image) return nullptr;
    main.path = executable_;
    main.image = opened.image;
    if (opened.image->refused) launching->refused.push_back({executable_, *opened.image->refused});
    main.dependents.resize(opened.image->dependencies.size());
    launching->executable_directory = directory_of(executable_);
    if (!opened.image->build_targets.empty()) launching->platform = opened.image->build_targets.front().platform;
  }
  launching->images.push_back(std::move(main));
  Dyld dyld(*launching, files_, roots);
  dyld.load_dependents(0);
  // The libraries of a library directory are the application's: loaded, each with
  // what it loads, in name order.
  for (const std::string& path : library_directory_files_) {
    OpenedLibrary opened = files_.open(path, arch, launching->platform);
    if (!opened.image || opened.image->filetype != macho::MH_DYLIB) continue;
    if (opened.image->refused) {
      launching->refused.push_back({path, *opened.image->refused});
      continue;
    }
    ProcessImage image;
    image.path = path;
    image.image = opened.image;
    image.dependents.resize(opened.image->dependencies.size());
    image.loaded_by = 0;
    image.local = true;
    launching->images.push_back(std::move(image));
    dyld.load_dependents(launching->images.size() - 1);
  }
  process = std::move(launching);
  return process.get();
}

std::vector<std::string> App::files_named(const std::string& leaf) const {
  std::set<std::string> found;
  std::error_code error;
  auto options = std::filesystem::directory_options::skip_permission_denied;
  for (std::filesystem::recursive_directory_iterator it(root_, options, error), end; !error && it != end; it.increment(error)) {
    if (it->path().filename() != leaf || !it->is_regular_file(error)) continue;
    std::string real = std::filesystem::canonical(it->path(), error).string();
    if (!error) found.insert(real);
  }
  return {found.begin(), found.end()};
}

OpenedLibrary App::open_library(const std::string& path, const std::string& arch) {
  const Process* process = launched(arch);
  return files_.open(path, arch, process ? process->platform : kPlatformMacOS);
}

ModelLoad App::load_model(const ModelSlice& model) {
  ModelLoad load;
  load.arch = model.arch;
  const Process* launched_process = launched(model.arch);
  if (!launched_process) return load;
  Process process = *launched_process;
  size_t missing_at_launch = process.missing.size();
  LibraryImage image;
  image.install_name = model.install_name;
  image.filetype = macho::MH_DYLIB;
  image.dependencies = model.dependencies;
  image.rpaths = model.rpaths;
  image.build_targets = model.build_targets;
  image.imports = model.imports;
  image.exports_known = false;
  image.two_level = model.two_level;
  ProcessImage loaded;
  SearchRoots roots{root_, options_.sysroot, ""};
  if (!model.path.empty()) {
    std::error_code error;
    std::string real = std::filesystem::canonical(model.path, error).string();  // @loader_path is the real path
    loaded.path = error ? std::filesystem::absolute(model.path).lexically_normal().string() : real;
    loaded.local = true;
    roots.model_directory = directory_of(loaded.path);
  } else {
    std::string leaf = model.install_name.substr(model.install_name.find_last_of('/') + 1);
    loaded.path = std::string(kModelDirectory) + "/" + (leaf.empty() ? "model.so" : leaf);
  }
  loaded.image = &image;
  loaded.dependents.resize(image.dependencies.size());
  loaded.hidden_from_flat = true;
  process.images.push_back(std::move(loaded));
  size_t model_index = process.images.size() - 1;
  Dyld dyld(process, files_, roots);
  load.dependencies = dyld.load_dependents(model_index);
  for (size_t index = model_index; index < process.images.size(); ++index)
    for (BindingOutcome& binding : dyld.bind(index)) load.bindings.push_back(std::move(binding));
  load.missing.assign(process.missing.begin() + missing_at_launch, process.missing.end());
  load.launch_missing.assign(process.missing.begin(), process.missing.begin() + missing_at_launch);
  load.launch_refused = process.refused;
  for (const ProcessImage& each : process.images) load.image_paths.push_back(each.path);
  load.model_index = model_index;
  load.via_ordinal.assign(process.images.size(), 0);
  const ProcessImage& model_image = process.images[model_index];
  for (size_t index = model_index + 1; index < process.images.size(); ++index) {
    size_t child = index;
    while (process.images[child].loaded_by && *process.images[child].loaded_by != model_index) child = *process.images[child].loaded_by;
    for (size_t ordinal = 0; ordinal < model_image.dependents.size(); ++ordinal)
      if (model_image.dependents[ordinal] == child) load.via_ordinal[index] = static_cast<int>(ordinal) + 1;
  }
  return load;
}

}  // namespace machofix
