// `check --sarif FILE`: the findings as SARIF 2.1.0, the format code-scanning
// services (GitHub, GitLab, Azure DevOps) read. One run; the tool's driver lists
// every rule (id, reason, repair); each result names its rule, the file (relative to
// the root, against the %SRCROOT% base, where it lies below it), the load command's
// byte offset where known, and the blob and slice as a logical location. Every input
// that could not be checked is a tool execution notification, and the run is then
// not successful: an upload of a failed run never shows a clean scan.
#pragma once

#include <string>
#include <vector>

#include "core/jobs/check.h"
#include "core/jobs/fix.h"

namespace machofix::cli {

// An input check could not judge: the path and why.
struct InputFailure {
  std::string path;
  std::string error;
};

// The root URIs are relative to (%SRCROOT%): --sarif-root, else the top of the git
// work tree holding the current directory, else the current directory.
std::string sarif_root(const std::string& given);

// An edit of `fix`, for the log: the file it is in and what became of the file.
struct FixedEdit {
  std::string file;
  FixEdit edit;
  FixStatus status = FixStatus::Fixed;
};

// `edits` (fix): each a result of the rule whose finding it removes, of kind "pass"
// (fixed, or would be by a dry run) or "informational" (the file was not written).
std::string sarif_document(const std::vector<Finding>& findings, const std::vector<std::string>& contracts,
                           const std::vector<InputFailure>& failures, const std::string& root,
                           const std::vector<FixedEdit>& edits = {});

}  // namespace machofix::cli
