// How reports look: text for people, JSON (versioned schema, docs/json-report.md) for programs.
#pragma once

#include <string>
#include <vector>

#include "core/jobs/batch.h"
#include "core/jobs/check.h"
#include "core/jobs/job.h"

namespace machofix::cli {

constexpr int kJsonSchemaVersion = 1;

std::string text_report(const FileReport& report, bool inspect);
std::string short_report(const FileReport& report);  // one line per file, for batches
std::string summary_line(const BatchSummary& summary, bool dry_run);
// `with_repair`: and the command that repairs it, on a line of its own.
std::string finding_line(const Finding& finding, bool with_repair = true);
// Content-hash keys as the docs write them, "2ae56f..._so_blob": 64 hex digits make a
// line unreadable. JSON and SARIF keep them whole.
std::string shortened_keys(const std::string& text);
std::string check_summary(const std::vector<FileReport>& reports, const std::vector<Finding>& findings);

// What check --app could not judge, said once: system libraries taken as present
// without --sysroot, slices of an architecture the application does not run as.
std::vector<std::string> app_notes(const std::vector<AppCheck>& app_checks);
// Dependencies named through a run-time path that check could not follow: no
// application to look them up in, nothing declared (unfollowed_dependencies).
std::string unfollowed_note(size_t count);

// `fix`: what became of the file, its edits, refusals and (not written) the findings left.
std::string fix_text(const FileReport& report);

std::string json_document(const std::string& command, const std::vector<FileReport>& reports, const BatchSummary& summary,
                          const std::vector<Finding>* findings, const std::vector<std::string>* contracts = nullptr,
                          const std::vector<AppCheck>* app_checks = nullptr);

}  // namespace machofix::cli
