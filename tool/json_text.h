// The text of a JSON report (schema 1), written by nlohmann-json with the escaping
// the report has always had.
//
// Names in Mach-O files are bytes, not necessarily UTF-8: every byte of a string is
// kept exact and the document stays ASCII. A byte outside printable ASCII is written
// as \u00XX (lowercase hex: the byte read as Latin-1), except \n, \t and \r, which
// have their short forms; '"' and '\' are escaped; '/' is not. Numbers with a
// fraction (a job's seconds) have six decimals, as "%.6f" writes them. No spaces,
// no newline at the end.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace machofix::cli {

using Json = nlohmann::ordered_json;  // keys in the order they are added

// Strings in `document` hold the bytes as they are (as read from the file).
std::string json_text(const Json& document);

}  // namespace machofix::cli
