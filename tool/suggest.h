// "Did you mean ...?": the nearest of a few known words to a mistyped one.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace machofix::cli {

// Edit distance (insertions, deletions, substitutions and swaps of two neighbours
// each count 1), ignoring case.
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate nearest to `word`, if it is near enough to be what was meant: at
// most a third of the word's letters wrong, leading dashes aside (`--jsn` and
// `-json` suggest `--json`), and only a change of case in words of one or two
// letters (`-J` suggests `-j`, `-x` nothing).
std::optional<std::string> nearest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace machofix::cli
