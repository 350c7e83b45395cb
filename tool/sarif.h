// `check --sarif FILE`: the findings as SARIF 2.1.0, the format code-scanning
// services (GitHub, GitLab, Azure DevOps) read. One run; the tool's driver lists
// every rule (id, reason, repair); each result names its rule, the file (relative to
// the current directory, against the %SRCROOT% base, where it lies below it), the
// load command's byte offset where known, and the blob and slice as a logical location.
#pragma once

#include <string>
#include <vector>

#include "core/jobs/check.h"

namespace machofix::cli {

std::string sarif_document(const std::vector<Finding>& findings, const std::vector<std::string>& contracts);

}  // namespace machofix::cli
