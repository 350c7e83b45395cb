#include "core/app/bundle.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <system_error>

#include "core/app/plist_library.h"
#include "core/base/error.h"
#include "core/io/file_io.h"

namespace machofix {

namespace {

namespace fs = std::filesystem;

// An Info.plist is a few kilobytes; libplist takes a 32-bit length, and a file this
// large is not an Info.plist whatever it holds.
constexpr uint64_t kLargestInfoPlist = 16ull << 20;

bool is_file(const fs::path& path) {
  std::error_code ignored;
  return fs::is_regular_file(path, ignored);
}

// Where the Info.plist is and where it names the executable from.
struct Layout {
  fs::path info_plist;
  fs::path executables;
  std::string executables_name;  // for messages: "Contents/MacOS"
};

std::optional<Layout> layout_of(const fs::path& dir) {
  if (is_file(dir / "Contents" / "Info.plist")) return Layout{dir / "Contents" / "Info.plist", dir / "Contents" / "MacOS", "Contents/MacOS"};
  if (is_file(dir / "Info.plist")) return Layout{dir / "Info.plist", dir, "the bundle's top"};
  return std::nullopt;
}

}  // namespace

std::string info_plist_executable(Bytes bytes) {
  if (bytes.size() > kLargestInfoPlist)
    fail(std::to_string(bytes.size()) + " bytes, more than the " + std::to_string(kLargestInfoPlist >> 20) + " MiB an Info.plist may have");
  const PlistFunctions& plist = plist_functions();
  const char* data = reinterpret_cast<const char*>(bytes.data());
  uint32_t length = static_cast<uint32_t>(bytes.size());
  plist_t parsed = nullptr;
  bool binary = length && plist.is_binary(data, length);
  if (binary) plist.from_bin(data, length, &parsed);
  else if (length) plist.from_xml(data, length, &parsed);
  std::unique_ptr<void, void (*)(plist_t)> root(parsed, plist.free);
  if (!root) fail(binary ? "not a valid binary property list" : "not a property list (neither XML nor binary)");
  if (plist.node_type(root.get()) != PLIST_DICT) fail("the property list is not a dictionary");
  plist_t item = plist.dict_item(root.get(), "CFBundleExecutable");
  if (!item) fail("no CFBundleExecutable: the bundle names no executable");
  if (plist.node_type(item) != PLIST_STRING) fail("CFBundleExecutable is not a string");
  uint64_t size = 0;
  const char* text = plist.string_ptr(item, &size);
  std::string name = text ? std::string(text, size) : std::string();
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos || name.find('\0') != std::string::npos)
    fail("CFBundleExecutable '" + name + "' is not a file name");
  return name;
}

bool is_app_bundle(const std::string& dir) {
  std::error_code ignored;
  return fs::is_directory(dir, ignored) && layout_of(dir).has_value();
}

std::string bundle_executable(const std::string& dir) {
  std::optional<Layout> layout = layout_of(dir);
  if (!layout) {
    Error error("not an application bundle: neither Contents/Info.plist nor Info.plist");
    throw error.in_file(dir);
  }
  std::string info_plist = layout->info_plist.string();
  try {
    MappedFile file(info_plist, SmallFile::Read);
    std::string name = info_plist_executable(file.bytes());
    fs::path executable = layout->executables / name;
    if (!is_file(executable)) {
      std::error_code ignored;
      fail("CFBundleExecutable names '" + name + "', " +
           (fs::exists(executable, ignored) ? "which is not a file" : "which is not in " + layout->executables_name));
    }
    return executable.string();
  } catch (Error& error) {
    throw error.in_file(info_plist);
  }
}

}  // namespace machofix
