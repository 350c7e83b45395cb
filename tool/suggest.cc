#include "tool/suggest.h"

#include <algorithm>
#include <cctype>

namespace machofix::cli {

namespace {

std::string lowered(const std::string& text) {
  std::string out = text;
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string without_dashes(const std::string& word) { return word.substr(std::min(word.find_first_not_of('-'), word.size())); }

}  // namespace

size_t edit_distance(const std::string& first, const std::string& second) {
  std::string a = lowered(first), b = lowered(second);
  // Optimal string alignment: three rows of the Damerau-Levenshtein table.
  std::vector<size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) current[j] = std::min(current[j], before[j - 2] + 1);
    }
    before.swap(previous);
    previous.swap(current);
  }
  return previous[b.size()];
}

std::optional<std::string> nearest(const std::string& word, const std::vector<std::string>& candidates) {
  size_t letters = without_dashes(word).size();
  size_t allowed = letters < 3 ? 0 : std::max<size_t>(1, letters / 3);
  std::optional<std::string> best;
  size_t best_distance = allowed + 1;
  for (const std::string& candidate : candidates) {
    size_t distance = edit_distance(without_dashes(word), without_dashes(candidate));
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace machofix::cli
