#include "core/format/tbd.h"

#include <algorithm>
#include <array>
#include <charconv>

#include "core/base/error.h"
#include "core/format/tbd_internal.h"

namespace machofix {

namespace {

// The platforms a target may name (Target::create), by their LC_BUILD_VERSION number
// less one, which a target may also write as "<N>".
constexpr std::array<std::string_view, 12> kPlatforms = {
    "macos",         "ios",          "tvos",      "watchos", "bridgeos", "maccatalyst", "ios-simulator",
    "tvos-simulator", "watchos-simulator", "driverkit", "xros",    "xros-simulator"};

std::string_view trimmed(std::string_view text) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

bool applies_to(const TbdSection& section, std::string_view target) {
  return std::find(section.targets.begin(), section.targets.end(), target) != section.targets.end();
}

}  // namespace

namespace tbd {

std::optional<uint32_t> packed_version(std::string_view text, int parts) {
  uint32_t packed = 0;
  int index = 0;
  for (size_t start = 0; start <= text.size(); ++index) {
    size_t end = std::min(text.find('.', start), text.size());
    std::string_view part = text.substr(start, end - start);
    uint64_t value = 0;
    auto [stop, error] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || error != std::errc() || stop != part.data() + part.size() || index >= parts) return std::nullopt;
    if (index == 0 && value > 0xffff) return std::nullopt;
    if ((index == 1 || index == 2) && value > 0xff) return std::nullopt;
    if (index >= 3 && value != 0) return std::nullopt;  // would not fit in 32 bits
    if (index < 3) packed |= static_cast<uint32_t>(value) << (16 - 8 * index);
    start = end + 1;
  }
  return packed;
}

std::optional<std::string> normal_target(std::string_view text) {
  size_t dash = text.find('-');
  if (dash == 0 || dash == std::string_view::npos) return std::nullopt;
  std::string_view platform = text.substr(dash + 1);
  if (std::find(kPlatforms.begin(), kPlatforms.end(), platform) != kPlatforms.end()) return std::string(text);
  if (platform.size() > 2 && platform.front() == '<' && platform.back() == '>') {
    unsigned number = 0;
    std::string_view digits = platform.substr(1, platform.size() - 2);
    auto [stop, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
    if (error == std::errc() && stop == digits.data() + digits.size() && number >= 1 && number <= kPlatforms.size())
      return std::string(text.substr(0, dash + 1)) + std::string(kPlatforms[number - 1]);
  }
  return std::nullopt;
}

}  // namespace tbd

std::string tbd_target(const std::string& arch, const std::string& platform) {
  if (platform == "macosx") return arch + "-macos";
  if (platform == "iosmac") return arch + "-maccatalyst";
  return arch + "-" + platform;
}

bool TbdLibrary::has_target(std::string_view target) const {
  return std::find(targets.begin(), targets.end(), target) != targets.end();
}

std::vector<std::string> TbdLibrary::exports(std::string_view target) const {
  // The ObjC 1 runtime of 32-bit macOS names a class by one symbol of its own
  // (TapiFile.cpp: ObjC1ClassNamePrefix); every other target has ObjC 2's pair.
  bool objc1 = target == "i386-macos";
  std::vector<std::string> names;
  for (const TbdSection& section : sections) {
    if (!applies_to(section, target)) continue;
    for (const auto* list : {&section.symbols, &section.weak_symbols, &section.thread_local_symbols})
      names.insert(names.end(), list->begin(), list->end());
    for (const std::string& name : section.objc_classes) {
      if (objc1) {
        names.push_back(".objc_class_name_" + name);
      } else {
        names.push_back("_OBJC_CLASS_$_" + name);
        names.push_back("_OBJC_METACLASS_$_" + name);
      }
    }
    for (const std::string& name : section.objc_eh_types) names.push_back("_OBJC_EHTYPE_$_" + name);
    for (const std::string& name : section.objc_ivars) names.push_back("_OBJC_IVAR_$_" + name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::vector<std::string> TbdLibrary::reexported_libraries(std::string_view target) const {
  std::vector<std::string> names;
  for (const TbdSection& section : sections) {
    if (!applies_to(section, target)) continue;
    for (const std::string& name : section.reexported_libraries)
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

bool looks_like_tbd(std::string_view text) {
  std::string_view file = trimmed(text);
  if (file.starts_with('{') && file.ends_with('}')) return file.find("\"tapi_tbd_version\"") != std::string_view::npos;
  if (!file.ends_with("...")) return false;
  for (std::string_view start : {"--- !tapi-tbd\n", "--- !tapi-tbd-v3\n", "--- !tapi-tbd-v2\n", "--- !tapi-tbd-v1\n", "---\narchs:"})
    if (file.starts_with(start)) return true;
  return false;
}

TbdFile parse_tbd(std::string_view text) {
  if (!looks_like_tbd(text))
    fail("not a text-based stub: a .tbd is a YAML document that starts with '--- !tapi-tbd' and ends with '...', "
         "or a JSON object with tapi_tbd_version");
  std::string_view file = trimmed(text);
  return file.starts_with('{') ? tbd::parse_json(text) : tbd::parse_yaml(text);
}

}  // namespace machofix
