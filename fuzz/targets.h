// The entry points the libFuzzer targets (fuzz_*.cc) and the plain replay driver
// (replay.cc) share, so that a reproducer runs the very same code in both.
//
// Each takes untrusted bytes and runs everything machofix does with such a file.
// A machofix::Error is the expected outcome for bad input and is swallowed; any
// other exception escapes (the contract is "an Error with an offset, or success"),
// and so do crashes, sanitizer reports and hangs: those are the findings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace machofix::fuzz {

// Mach-O reader and analysis: detect_kind, parse_universal / parse_macho,
// scan_imports, analyze, plan_prune, apply_prune, verify_prune (each thin 64-bit
// slice), then inspect_macho, prune_macho and sign_macho on the whole file
// (signatures read, checked, renewed, replaced or added; LIEF cross-check).
void run_macho(const uint8_t* data, size_t size);

// Code signatures of every thin 64-bit slice: read_code_signature,
// check_code_signature and the words of its findings; renew_code_signature,
// replace_with_adhoc_signature and (unsigned slices) add_adhoc_signature on copies,
// each result re-read and checked again.
void run_codesign(const uint8_t* data, size_t size);

// .pte/.ptd: inspect_pte, then repair_pte as a dry run through a memfd (nothing is
// written anywhere).
void run_pte(const uint8_t* data, size_t size);

// .tbd stubs, YAML (versions 1-4) and JSON (version 5), as check --app reads a
// library it finds: looks_like_tbd, parse_tbd, then each library's exports and
// re-exported libraries for its targets and a few others; then the file opened through
// LibraryFiles (a memfd) for arm64 and x86_64 macOS and Mac Catalyst, and every
// inlined library by its install name. LibraryFiles::open never throws.
void run_tbd(const uint8_t* data, size_t size);

// An Info.plist (XML or binary), as the bundle reader reads it: info_plist_executable,
// then the same bytes as the Info.plist of a bundle on disk (macOS or flat layout, by
// the size) holding the executable it names: bundle_executable must find that file,
// or refuse the bundle exactly when info_plist_executable refused the bytes (checked
// on disk for every list that names an executable and one refused list in 16).
void run_plist(const uint8_t* data, size_t size);

// An exports trie: walk_exports_trie on the bytes alone (exactly sized, so ASan sees
// any overread), then inside a dylib (LC_DYLD_EXPORTS_TRIE or LC_DYLD_INFO's export
// part, by the size): read_exports and scan_imports, which must agree on every
// re-export, and the dylib opened through LibraryFiles as check --app opens a library.
void run_exports(const uint8_t* data, size_t size);

// "macho", "codesign", "pte", "tbd", "plist", "exports" -> the function; nullptr for
// another name.
using Target = void (*)(const uint8_t*, size_t);
Target target_named(const std::string& name);

}  // namespace machofix::fuzz
