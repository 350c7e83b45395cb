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

// "macho", "codesign", "pte" -> the function; nullptr for another name.
using Target = void (*)(const uint8_t*, size_t);
Target target_named(const std::string& name);

}  // namespace machofix::fuzz
