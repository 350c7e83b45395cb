// Replays fuzzer reproducers through the plain (non-fuzzer) build: the same entry
// points as the libFuzzer targets (fuzz/targets.h). Registered in ctest on
// fuzz/regressions, so every crash once found stays fixed.
//
//   fuzz_replay [--target macho|codesign|pte|tbd|plist|exports] [--max-rss-mb N] [--max-seconds S] PATH...
//
// A directory is walked recursively. Without --target, a file's target is the name
// of the directory that holds it (fuzz/regressions/<target>/...). Files ending in
// .hex are hex text (whitespace ignored, '#' starts a comment to the end of the
// line, "XX*N" repeats a byte), kept as text so the repository holds no binaries;
// other files are raw bytes (a crash-* artifact straight from libFuzzer); *.md and
// dotfiles are skipped.
// Each input runs in a child process. A crash, sanitizer report or uncaught
// exception fails; so does an input that makes the child's peak RSS exceed --max-rss-mb (default 1024, what libFuzzer's
// -rss_limit_mb=2048 catches, with room) or takes longer than --max-seconds
// (default 30; the child is killed at that limit): resource exhaustion is a finding too.
#include <sys/resource.h>
#include <sys/wait.h>
#include <csignal>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/targets.h"
#include "tests/support/whole_file.h"

namespace fs = std::filesystem;

namespace {

int hex_digit(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

// Hex text: pairs of hex digits; "XX*N" is the byte XX repeated N (decimal) times;
// whitespace is ignored and '#' starts a comment that runs to the end of the line.
std::optional<std::vector<uint8_t>> parse_hex(const std::string& text) {
  std::vector<uint8_t> bytes;
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
      continue;
    }
    if (i + 1 >= text.size() || hex_digit(c) < 0 || hex_digit(text[i + 1]) < 0) return std::nullopt;
    uint8_t byte = static_cast<uint8_t>(hex_digit(c) << 4 | hex_digit(text[i + 1]));
    i += 2;
    uint64_t count = 1;
    if (i < text.size() && text[i] == '*') {
      size_t start = ++i;
      count = 0;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9' && count < (uint64_t(1) << 32)) count = count * 10 + (text[i++] - '0');
      if (i == start || count > (uint64_t(1) << 30)) return std::nullopt;
    }
    bytes.insert(bytes.end(), count, byte);
  }
  return bytes;
}

std::optional<std::vector<uint8_t>> load(const fs::path& path) {
  std::optional<std::string> read = machofix::test::read_whole_file(path.string());
  if (!read) return std::nullopt;
  const std::string& text = *read;
  if (path.extension() == ".hex") return parse_hex(text);
  return std::vector<uint8_t>(text.begin(), text.end());
}

bool skipped(const fs::path& path) {
  std::string name = path.filename().string();
  return name.empty() || name[0] == '.' || path.extension() == ".md";
}

struct Counts {
  int replayed = 0;
  int failed = 0;
  int unavailable = 0;
};

struct Limits {
  uint64_t max_rss_mb = 1024;
  double max_seconds = 30;
};



// Waits for `child` at most `max_seconds` (a looping reproducer must fail the test,
// not hang CI): false when it had to be killed. Polls, since wait4 has no timeout.
bool wait_within(pid_t child, double max_seconds, int& status, struct rusage& usage) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(max_seconds);
  for (;;) {
    pid_t done = wait4(child, &status, WNOHANG, &usage);
    if (done == child) return true;
    if (done < 0 && errno != EINTR) return true;  // no such child: nothing left to wait for
    if (std::chrono::steady_clock::now() >= deadline) break;
    usleep(5000);
  }
  kill(child, SIGKILL);
  while (wait4(child, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  return false;
}

// A target that never returns, for the test of the time limit itself (ctest
// fuzz_replay_time_limit); not a fuzz target.
void spin_forever(const uint8_t*, size_t) {
  for (volatile uint64_t i = 0;; i = i + 1) {
  }
}

// Runs one input in a child process, so that every reproducer is tried even when
// one crashes, and each is measured on its own. 0: fine, 1: failed, 2: unusable.
int replay_file(const fs::path& path, const std::string& forced_target, const Limits& limits, Counts& counts) {
  std::string target = forced_target.empty() ? path.parent_path().filename().string() : forced_target;
  machofix::fuzz::Target run = target == "spin-forever" ? spin_forever : machofix::fuzz::target_named(target);
  if (!run) {
    if (target == "pte") {  // core/io/pte.h absent from this build
      std::cout << "replay: " << path.string() << ": skipped, this build has no .pte support\n";
      ++counts.unavailable;
      return 0;
    }
    std::cerr << "replay: " << path.string() << ": no fuzz target named '" << target << "'\n";
    return 2;
  }
  std::optional<std::vector<uint8_t>> bytes = load(path);
  if (!bytes) {
    std::cerr << "replay: " << path.string() << ": unreadable (or not valid hex)\n";
    return 2;
  }
  std::cout << "replay: " << target << " " << path.string() << " (" << bytes->size() << " bytes) ... " << std::flush;
  auto start = std::chrono::steady_clock::now();
  pid_t child = fork();
  if (child < 0) {
    std::perror("fork");
    return 2;
  }
  if (child == 0) {
    // A copy in a buffer of exactly its size, so that ASan sees every overread.
    std::vector<uint8_t> exact(bytes->begin(), bytes->end());
    exact.shrink_to_fit();
    run(exact.data(), exact.size());
    std::fflush(nullptr);
    _exit(0);
  }
  int status = 0;
  struct rusage usage {};
  bool killed = !wait_within(child, limits.max_seconds, status, usage);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint64_t rss = static_cast<uint64_t>(usage.ru_maxrss) / 1024;  // KiB on Linux
  ++counts.replayed;
  if (killed) {
    std::cout << "FAILED: still running after " << limits.max_seconds << " s (limit), killed\n";
    return 1;
  }
  if (WIFSIGNALED(status)) {
    std::cout << "CRASHED (signal " << WTERMSIG(status) << ")\n";
    return 1;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::cout << "FAILED (exit status " << WEXITSTATUS(status) << ")\n";
    return 1;
  }
  if (rss > limits.max_rss_mb) {
    std::cout << "FAILED: the peak RSS reached " << rss << " MB (limit " << limits.max_rss_mb << " MB)\n";
    return 1;
  }
  if (seconds > limits.max_seconds) {
    std::cout << "FAILED: took " << seconds << " s (limit " << limits.max_seconds << " s)\n";
    return 1;
  }
  std::cout << "ok (" << static_cast<int>(seconds * 1000) << " ms, peak RSS " << rss << " MB)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage = "usage: fuzz_replay [--target macho|codesign|pte|tbd|plist|exports] [--max-rss-mb N] [--max-seconds S] PATH...\n";
  std::string target;
  Limits limits;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::string argument = argv[i];
    if (argument == "--target" && i + 1 < argc) {
      target = argv[++i];
    } else if (argument == "--max-rss-mb" && i + 1 < argc) {
      limits.max_rss_mb = std::strtoull(argv[++i], nullptr, 10);
    } else if (argument == "--max-seconds" && i + 1 < argc) {
      limits.max_seconds = std::strtod(argv[++i], nullptr);
    } else if (argument.rfind("--", 0) == 0) {
      std::cerr << usage;
      return 2;
    } else {
      inputs.emplace_back(argument);
    }
  }
  if (inputs.empty()) {
    std::cerr << usage;
    return 2;
  }
  Counts counts;
  for (const fs::path& input : inputs) {
    std::vector<fs::path> files;
    std::error_code error;
    if (fs::is_directory(input, error)) {
      for (const auto& entry : fs::recursive_directory_iterator(input))
        if (entry.is_regular_file() && !skipped(entry.path())) files.push_back(entry.path());
    } else if (fs::is_regular_file(input, error)) {
      files.push_back(input);
    } else {
      std::cerr << "replay: " << input.string() << ": no such file or directory\n";
      return 2;
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      int status = replay_file(file, target, limits, counts);
      if (status == 2) return 2;
      counts.failed += status;
    }
  }
  std::cout << "replay: " << counts.replayed << " inputs replayed, " << counts.failed << " failed";
  if (counts.unavailable) std::cout << ", " << counts.unavailable << " skipped (no .pte support in this build)";
  std::cout << "\n";
  return counts.failed ? 1 : 0;
}
