// Apple's text-based stubs (.tbd): what a library exports, read without the library.
// An SDK ships these in place of its dylibs (macOS's own libraries live only in the
// shared cache), so they are how a Linux machine can know which symbols a system
// library provides. The model is LLVM's TextAPI reader (llvm/lib/TextAPI/TextStub.cpp
// for the YAML versions 1-4, TextStubV5.cpp for the JSON version 5) and the linker
// names llvm/lib/Object/TapiFile.cpp gives its entries; docs/tbd.md says what is read.
//
// A file holds one library and any number of inlined ones (libSystem.tbd carries
// every /usr/lib/system/ library it re-exports). Each entry applies to a list of
// targets ("arm64-macos", "x86_64-maccatalyst"...): a library's exports differ by
// architecture and platform, so every question is asked for one target.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace machofix {

// The target a .tbd names for a Mach-O architecture ("arm64", "x86_64", "arm64e",
// "x86_64h", as machofix names slices) on a platform ("macos", "maccatalyst", "ios",
// "ios-simulator"...): "arm64-macos". "macosx" and "iosmac", the platform names of
// versions 1-3, are taken for "macos" and "maccatalyst".
std::string tbd_target(const std::string& arch, const std::string& platform = "macos");

// One section of a library: names that apply to `targets` alone.
struct TbdSection {
  std::vector<std::string> targets;
  // Exported by this library, or by one it re-exports (v4 `reexports`, v5
  // `reexported_symbols`, `reexported` set): either way dyld finds them through it.
  bool reexported = false;
  std::vector<std::string> symbols;               // as the linker names them: "_malloc"
  std::vector<std::string> weak_symbols;          // weak definitions
  std::vector<std::string> thread_local_symbols;  // thread-local variables
  std::vector<std::string> objc_classes;          // bare: "NSObject"
  std::vector<std::string> objc_eh_types;         // bare: "NSException"
  std::vector<std::string> objc_ivars;            // bare: "NSObject.isa"
  std::vector<std::string> reexported_libraries;  // install names
};

struct TbdLibrary {
  std::string install_name;
  // Packed as in LC_ID_DYLIB (X<<16 | Y<<8 | Z); 1.0.0 when the file says nothing.
  uint32_t current_version = 0x10000, compatibility_version = 0x10000;
  std::vector<std::string> targets;  // every target it is built for
  std::vector<TbdSection> sections;

  bool has_target(std::string_view target) const;
  // The linker symbol names it exports for `target`, sorted and unique: symbols, weak
  // and thread-local ones, re-exported ones, each Objective-C class as
  // _OBJC_CLASS_$_X and _OBJC_METACLASS_$_X (.objc_class_name_X for i386-macos, the
  // ObjC 1 runtime), each EH type as _OBJC_EHTYPE_$_X, each ivar as _OBJC_IVAR_$_X.y.
  std::vector<std::string> exports(std::string_view target) const;
  // The install names of the libraries it re-exports for `target`, in the file's
  // order, each once.
  std::vector<std::string> reexported_libraries(std::string_view target) const;
};

struct TbdFile {
  std::vector<TbdLibrary> libraries;  // [0] the main library, then the inlined ones
};

// Whether `text` is a .tbd by the test the linker applies before parsing it
// (TextStub.cpp, canReadFileType): a YAML stub starts with a tapi-tbd document
// marker and ends with "...", a JSON one is an object naming tapi_tbd_version.
bool looks_like_tbd(std::string_view text);

// Reads every library of a .tbd. Throws an Error saying what is wrong, with "line L"
// where the parser knows it; the caller adds the file (Error::in_file).
TbdFile parse_tbd(std::string_view text);

}  // namespace machofix
