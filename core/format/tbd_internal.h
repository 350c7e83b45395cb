// What the .tbd readers share (core/format/tbd.cc, tbd_yaml.cc, tbd_json.cc): the
// checks of values that mean the same in every version.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/format/tbd.h"

namespace machofix::tbd {

// A version "X[.Y[.Z]]" packed as in LC_ID_DYLIB, X <= 65535, Y and Z <= 255
// (LLVM's PackedVersion::parse32). `parts` is 5 for version 5, whose versions may
// have two more parts that must then be 0 (parse64 without truncation); nullopt when
// `text` is not such a version.
std::optional<uint32_t> packed_version(std::string_view text, int parts = 3);

// A target as a file writes it, "arm64-macos", in the form tbd_target makes
// (a platform written "<N>", its LC_BUILD_VERSION number, gets its name); nullopt when
// the architecture is empty or the platform unknown (Target::create).
std::optional<std::string> normal_target(std::string_view text);

// Versions 1-4, YAML; version 5, JSON.
TbdFile parse_yaml(std::string_view text);
TbdFile parse_json(std::string_view text);

}  // namespace machofix::tbd
