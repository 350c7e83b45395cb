// An application bundle's main executable, found as the system finds it: the bundle's
// Info.plist names it (CFBundleExecutable), in Contents/MacOS/ of a macOS bundle
// (X.app/Contents/Info.plist), or beside the Info.plist of a flat, iOS-style bundle
// (X.app/Info.plist). The Info.plist may be XML or binary, as Xcode writes either;
// libplist reads both (core/app/plist_library.h).
#pragma once

#include <string>

#include "core/base/bytes.h"

namespace machofix {

// Whether `dir` is a directory holding Contents/Info.plist or, flat, Info.plist.
bool is_app_bundle(const std::string& dir);

// The path of the bundle's main executable (`dir` joined with Contents/MacOS/NAME, or
// NAME). Throws an Error in the Info.plist's file when it cannot be read or parsed,
// its top is not a dictionary, it has no CFBundleExecutable or that is not a string,
// the name is not a file name (empty, ".", "..", with '/' or NUL), or no file has it;
// in `dir` when the bundle has no Info.plist.
std::string bundle_executable(const std::string& dir);

// The CFBundleExecutable an Info.plist's bytes name, as bundle_executable reads it
// (XML or binary); throws an Error for each refusal listed above but the missing file.
// Public for the fuzzer (fuzz/targets.h).
std::string info_plist_executable(Bytes info_plist);

}  // namespace machofix
