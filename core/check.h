// The CI gate: what `machofix check` reports about a file it has inspected.
//
// Three findings, each naming file, blob key (in a .pte), slice and dylib:
//  - a dependency that supplies no symbol (prune would remove it);
//  - an install name that is an absolute path outside the places every Mac has
//    (/usr/lib, /System/Library, plus --allow-prefix), such as PyTorch's
//    /opt/llvm-openmp/lib/libomp.dylib: it will not exist on users' machines;
//  - a dependency the user forbids (--forbid GLOB, matched against the install name
//    and its last component): used or not, whatever its path or kind. Whether it is
//    used, and by which symbols, says whether removal is the repair.
#pragma once

#include <string>
#include <vector>

#include "core/job.h"

namespace machofix {

struct CheckOptions {
  std::vector<std::string> allowed_prefixes;  // added to /usr/lib/ and /System/Library/
  std::vector<std::string> forbidden;         // --forbid GLOB: no dependency may match
};

struct Finding {
  std::string file;
  std::string blob;  // named-data key(s) in a .pte/.ptd, member name in an archive; else empty
  std::string arch;
  std::string dylib;
  std::string rule;  // "unused-dependency", "absolute-install-name", "forbidden-dependency"
  std::string message;
  std::vector<std::string> symbols;  // what the dylib supplies to this slice (none: unused)
};

std::vector<Finding> check_findings(const FileReport& report, const CheckOptions& options);

// `verify`: every slice of every Mach-O image in the file (blobs of a .pte, members
// of an archive) whose signature is invalid, or which is arm64 and unsigned, and
// every loader rule an image breaks (core/loader_rules.h); each line names the blob
// and slice. And the notes on what could not be checked.
std::vector<std::string> verify_failures(const FileReport& report);
std::vector<std::string> verify_notes(const FileReport& report);

}  // namespace machofix
