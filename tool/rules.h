// The check rules as text: each rule's stable id, its one-line reason, its help, and
// for each finding the message and the machofix command that repairs it (if any).
// core/jobs/check.h decides; this only words it (text, JSON and SARIF all use it).
#pragma once

#include <string>

#include "core/jobs/check.h"

namespace machofix::cli {

// rule_id (core/jobs/check.h): the stable id of every report.
const char* rule_reason(Rule rule);     // one line: why it is a defect
const char* rule_repair_hint(Rule rule);  // how it is repaired, in general
bool rule_needs_contract(Rule rule);    // runs only once something is declared

std::string finding_message(const Finding& finding);
// The command line that repairs this finding (the file named), or "" when no
// machofix command does.
std::string repair_command(const Finding& finding);

// A word quoted for a POSIX shell when it needs to be.
std::string shell_quoted(const std::string& word);

}  // namespace machofix::cli
