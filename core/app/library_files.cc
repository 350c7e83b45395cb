#include "core/app/library_files.h"

#include <string_view>

#include "core/format/codesign.h"
#include "core/format/fat.h"
#include "core/format/loader_rules.h"
#include "core/format/macho_format.h"
#include "core/format/tbd.h"
#include "core/io/file_io.h"

namespace machofix {

std::string stub_platform_name(uint32_t platform) {
  static const char* const names[] = {"unknown", "macos", "ios", "tvos", "watchos", "bridgeos", "maccatalyst",
                                      "ios-simulator", "tvos-simulator", "watchos-simulator", "driverkit",
                                      "xros", "xros-simulator"};
  return platform < std::size(names) ? names[platform] : "unknown";
}

struct LibraryFiles::Stub {
  TbdFile file;
};

LibraryFiles::LibraryFiles() = default;
LibraryFiles::~LibraryFiles() = default;

namespace {

// The slices dyld accepts for a process, best first (GradedArchitectures): an arm64e
// process takes arm64 code too; arm64 and x86_64 processes only their own.
std::vector<std::string> acceptable_archs(const std::string& arch) {
  if (arch == "arm64e") return {"arm64e", "arm64"};
  return {arch};
}

std::string incompatible_architecture(const std::string& have, const std::string& need) {
  return "mach-o file, but is an incompatible architecture (have '" + have + "', need '" + need + "')";
}

// dyld loads an image built for the process's platform; a Mac Catalyst process also
// loads macOS ones (Header::loadableIntoProcess). An image that names no platform
// is taken as macOS, as dyld guesses it (Header::platformAndVersions).
std::string platform_problem(const std::vector<BuildTarget>& targets, uint32_t process_platform) {
  if (process_platform == 0) return "";  // the main executable: it sets the platform
  if (targets.empty()) return process_platform == kPlatformMacOS || process_platform == 6 ? "" : "mach-o file, but is an incompatible platform (have 'macOS', need '" + platform_name(process_platform) + "')";
  std::string have;
  for (const BuildTarget& target : targets) {
    if (target.platform == process_platform) return "";
    if (process_platform == 6 && target.platform == kPlatformMacOS) return "";
    have += (have.empty() ? "" : ", ") + platform_name(target.platform);
  }
  return "mach-o file, but is an incompatible platform (have '" + have + "', need '" + platform_name(process_platform) + "')";
}

// What the kernel or dyld refuses, as verify judges it: the first load-time rule the
// slice breaks (dyld's checks run before it maps anything), else a code signature that
// does not verify, or arm64 code without one (the kernel refuses it).
std::optional<ImageRefusal> refusal(const MachO& macho, const Bytes& slice) {
  std::vector<RuleViolation> violations = check_loader_rules(slice);
  if (!violations.empty()) return ImageRefusal{false, violations.front().rule, violations.front().message};
  SignatureCheck check = check_code_signature(macho);
  if (check.valid()) return std::nullopt;
  const SignatureFinding& problem = check.problems.front();
  if (problem.is<finding::NotSigned>())
    return macho.cputype == macho::CPU_TYPE_ARM64 ? std::optional<ImageRefusal>(ImageRefusal{true, "", "not signed (arm64 code must be signed to run)"})
                                                  : std::nullopt;
  return ImageRefusal{true, "", describe(problem)};
}

LibraryImage image_of(const MachO& macho) {
  LibraryImage image;
  image.install_name = macho.id_name.value_or("");
  image.filetype = macho.filetype;
  image.two_level = macho.two_level();
  image.dependencies = macho.dylibs;
  for (const Rpath& rpath : macho.rpaths) image.rpaths.push_back(rpath.path);
  image.build_targets = macho.build_targets;
  image.exports = read_exports(macho);
  image.imports = bound_imports(scan_imports(macho));
  return image;
}

}  // namespace

std::string ImageRefusal::reason() const {
  return signature ? "code signature invalid: " + problem : "dyld refuses it (" + rule + "): " + problem;
}

const LibraryImage* LibraryFiles::keep(LibraryImage image) {
  images_.push_back(std::make_unique<LibraryImage>(std::move(image)));
  return images_.back().get();
}

OpenedLibrary LibraryFiles::open(const std::string& path, const std::string& arch, uint32_t platform) {
  auto key = std::make_tuple(path, arch, platform);
  auto known = opened_.find(key);
  if (known != opened_.end()) return known->second;
  OpenedLibrary opened = open_uncached(path, arch, platform);
  opened_.emplace(key, opened);
  return opened;
}

OpenedLibrary LibraryFiles::open_uncached(const std::string& path, const std::string& arch, uint32_t platform) {
  try {
    auto& file = files_[path];
    if (!file) file = std::make_unique<MappedFile>(path);
    Bytes bytes = file->bytes();
    if (looks_like_universal(bytes) || looks_like_thin_macho(bytes)) return open_macho(*file, arch, platform);
    std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    if (looks_like_tbd(text)) return open_stub(path, *file, arch, platform);
    return {nullptr, "not a mach-o file"};
  } catch (const Error& error) {
    return {nullptr, "not a valid mach-o file: " + error.describe()};
  }
}

OpenedLibrary LibraryFiles::open_macho(const MappedFile& file, const std::string& arch, uint32_t platform) {
  Bytes bytes = file.bytes();
  std::vector<std::string> accepted = acceptable_archs(arch);
  std::optional<Bytes> slice;
  std::string have;
  if (looks_like_universal(bytes)) {
    Universal universal = parse_universal(bytes);
    for (const std::string& wanted : accepted) {
      for (const FatSlice& entry : universal.slices)
        if (!slice && cpu_name(entry.cputype, entry.cpusubtype) == wanted) slice = bytes.sub(entry.offset, entry.size, "universal slice");
    }
    for (const FatSlice& entry : universal.slices) have += (have.empty() ? "" : ",") + cpu_name(entry.cputype, entry.cpusubtype);
  } else {
    if (bytes.size() < 12) return {nullptr, "not a mach-o file"};
    std::string thin = cpu_name(bytes.u32(4), bytes.u32(8));
    for (const std::string& wanted : accepted)
      if (thin == wanted) slice = bytes;
    have = thin;
  }
  if (!slice) return {nullptr, incompatible_architecture(have, arch)};
  MachO macho = parse_macho(*slice);
  if (std::string problem = platform_problem(macho.build_targets, platform); !problem.empty()) return {nullptr, problem};
  LibraryImage image = image_of(macho);
  image.refused = refusal(macho, *slice);
  return {keep(std::move(image)), ""};
}

OpenedLibrary LibraryFiles::open_stub(const std::string& path, const MappedFile& file, const std::string& arch,
                                      uint32_t platform) {
  auto& stub = stubs_[path];
  if (!stub) {
    Bytes bytes = file.bytes();
    stub = std::make_unique<Stub>();
    stub->file = parse_tbd(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    if (stub->file.libraries.empty()) return {nullptr, "text stub describes no library"};
    for (size_t index = 1; index < stub->file.libraries.size(); ++index)
      inlined_.try_emplace(stub->file.libraries[index].install_name, stub.get(), index);
  }
  return stub_library(*stub, 0, arch, platform);
}

OpenedLibrary LibraryFiles::inlined(const std::string& install_name, const std::string& arch, uint32_t platform) {
  auto found = inlined_.find(install_name);
  if (found == inlined_.end()) return {nullptr, "no such file"};
  auto key = std::make_tuple("inlined:" + install_name, arch, platform);
  auto known = opened_.find(key);
  if (known != opened_.end()) return known->second;
  OpenedLibrary opened = stub_library(*found->second.first, found->second.second, arch, platform);
  opened_.emplace(key, opened);
  return opened;
}

OpenedLibrary LibraryFiles::stub_library(const Stub& stub, size_t index, const std::string& arch, uint32_t platform) {
  const TbdLibrary& library = stub.file.libraries[index];
  std::string target = tbd_target(arch, stub_platform_name(platform));
  if (!library.has_target(target)) {
    for (const std::string& other : library.targets)
      if (other.rfind(arch + "-", 0) == 0)
        return {nullptr, "text stub, but for another platform (have '" + other + "', need '" + target + "')"};
    std::string have;
    for (const std::string& other : library.targets) have += (have.empty() ? "" : ",") + other;
    return {nullptr, "text stub, but for another architecture (have '" + have + "', need '" + target + "')"};
  }
  LibraryImage image;
  image.install_name = library.install_name;
  image.filetype = macho::MH_DYLIB;
  image.stub = true;
  for (const std::string& name : library.exports(target)) image.exports.names.emplace(name, Export{});
  for (const std::string& name : library.reexported_libraries(target)) {
    Dylib dylib;
    dylib.ordinal = static_cast<int>(image.dependencies.size()) + 1;
    dylib.kind = DylibKind::Reexport;
    dylib.install_name = name;
    image.dependencies.push_back(std::move(dylib));
  }
  image.build_targets.push_back({platform, 0, 0});
  return {keep(std::move(image)), ""};
}

}  // namespace machofix
