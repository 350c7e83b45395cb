// The loader's rules: the checks dyld (and xnu, for the code signature) applies to
// a Mach-O image before mapping it, mirrored so that a Linux machine can tell
// whether a file will load. docs/loader-rules.md lists every rule with the dyld or
// xnu function and message it mirrors.
//
// The checks read the raw bytes through the bounds-checked reader and never throw
// for a malformed file: every problem is a RuleViolation (rule id, absolute file
// offset, message). Text is made only at the edge (tool/).
//
// machofix runs them on every input it rewrites (a file dyld would refuse is
// refused, not "repaired" into one that looks valid), on every output before it is
// written (a rewrite that would break one is an error), and `verify` reports them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/bytes.h"

namespace machofix {

struct RuleViolation {
  std::string rule;     // stable id, e.g. "lc-cmdsize-align"
  uint64_t offset = 0;  // absolute file offset (Bytes::base() applied) of the field at fault
  std::string message;  // what is wrong there, in dyld's terms
};

struct LoaderRule {
  const char* id;
  const char* checks;  // one line
  const char* source;  // the dyld/xnu function it mirrors
};

// Every rule, in the order of docs/loader-rules.md.
const std::vector<LoaderRule>& loader_rules();

// A thin 64-bit slice (`slice.base()` is its offset in the file). Empty: it passes
// every rule. The load-command walk stops at the first structural problem, as
// dyld's does; later checks then do not run.
std::vector<RuleViolation> check_loader_rules(const Bytes& slice);

// A universal file's header and the placement of its slices (the slices' own
// contents are checked by check_loader_rules, slice by slice).
std::vector<RuleViolation> check_universal_rules(const Bytes& file);

// Thin or universal: the universal rules and every 64-bit slice's rules.
std::vector<RuleViolation> check_image_rules(const Bytes& file);

// "loader rule <id> at offset 0x..: <message>"
std::string describe(const RuleViolation& violation);

// Throws an Error at the first violation's offset: "<what> breaks the loader rule
// <id>: <message>". `what` says which bytes: "the rewritten slice", "the rewritten file".
void require_loader_rules(const std::vector<RuleViolation>& violations, const std::string& what);

// For an input: the same, as a refusal (Error::as_refusal): machofix does not rewrite
// a file dyld would refuse, which would make it look valid with a fresh signature.
void refuse_breaking_loader_rules(const std::vector<RuleViolation>& violations);

}  // namespace machofix
