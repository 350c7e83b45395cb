// How reports look: text for people, JSON (versioned schema, see README) for programs.
#pragma once

#include <string>
#include <vector>

#include "core/job.h"
#include "tool/json.h"

namespace machofix::cli {

constexpr int kJsonSchemaVersion = 1;

std::string text_report(const FileReport& report, bool inspect);
void json_file_report(Json& json, const FileReport& report);
std::string json_document(const std::string& command, const std::vector<FileReport>& reports);

}  // namespace machofix::cli
