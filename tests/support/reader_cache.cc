// reader_cache: runs an LLVM reader once for each content of its inputs, and replays
// what it printed after that.
//
// The suite reads what machofix writes with LLVM's own tools, some 4,000 runs of
// llvm-objdump-16 and llvm-nm-16, and each run costs 115 ms on 2 cores here, almost
// all of it loading and relocating libLLVM-16 (55 ms user, 60 ms system, for a
// 50 KB dylib). The sanitizer suite then reads the same bytes again, and the next CI
// run reads what the last one wrote. A replay costs a few milliseconds.
//
// Installed as a link named after each reader in a directory put first on the tests'
// PATH (tests/CMakeLists.txt); the real reader is the next one of that name on PATH.
// The key: the reader's name; the size, modification time and inode of the real
// reader and of each file named by $MACHOFIX_READER_CACHE_IDENTITY (the LLVM
// library it loads); and each argument, either literally or, when it names a regular
// file, as that file's SHA-256. What is replayed: the exit status, standard output
// and standard error, each file argument's path written as it is given this time.
// So a reader is run again whenever the bytes it would read, its options, or the
// reader itself differ.
//
// Run as is, never cached: an argument "-" (standard input) or "@file" (a response
// file); standard output and error on the same file (their interleaving would be
// lost); a reader killed by a signal. Not stored: an output that names an input's
// path other than as the argument (the path occurs in an input's bytes, or its file
// name is left in the output once every whole path is replaced), or that holds the
// placeholder.
//
// The cache: $MACHOFIX_READER_CACHE, else ~/.cache/machofix/readers (XDG_CACHE_HOME
// honoured); "off" runs the reader every time. An entry is written to a temporary
// file and renamed; one not replayed for 14 days is removed, once a day at most.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "core/base/bytes.h"
#include "core/base/sha.h"
#include "core/base/util.h"

#ifdef __APPLE__
#include <mach-o/dyld.h>
#endif

namespace {

constexpr const char* kFormat = "machofix-reader-cache 1";
constexpr const char* kPlaceholder = "\x1bmachofix-reader-cache-path-";
constexpr time_t kUnusedDays = 14;

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "reader_cache: %s\n", message.c_str());
  std::exit(125);
}

std::optional<std::string> read_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string bytes;
  char buffer[1 << 16];
  ssize_t got;
  while ((got = read(fd, buffer, sizeof buffer)) > 0) bytes.append(buffer, static_cast<size_t>(got));
  close(fd);
  if (got < 0) return std::nullopt;
  return bytes;
}

// False when the bytes could not all be written (errno).
bool write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t wrote = machofix::retry_on_eintr([&] { return write(fd, bytes.data() + done, bytes.size() - done); });
    if (wrote <= 0) return false;
    done += static_cast<size_t>(wrote);
  }
  return true;
}

// What the reader printed, to this call's stdout or stderr: a reader's caller that
// cannot take its output is told so, as by the reader itself.
void print(int fd, const std::string& bytes) {
  if (!write_all(fd, bytes)) std::exit(125);
}

// The entries of a colon-separated list ($PATH, the identity files), empty ones too.
std::vector<std::string> colon_list(const char* text) {
  std::vector<std::string> entries;
  std::string list = text ? text : "";
  for (size_t start = 0;;) {
    size_t end = list.find(':', start);
    entries.push_back(list.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return entries;
    start = end + 1;
  }
}

std::string sha256_of(const std::string& bytes) {
  return machofix::sha256_hex(machofix::Bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

std::string identity_of(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return path + " missing\n";
#ifdef __APPLE__
  long long mtime_ns = st.st_mtimespec.tv_sec * 1000000000LL + st.st_mtimespec.tv_nsec;
#else
  long long mtime_ns = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
#endif
  return path + " " + std::to_string(st.st_size) + " " + std::to_string(mtime_ns) + " " +
         std::to_string(st.st_ino) + "\n";
}

std::string own_executable() {
#ifdef __APPLE__
  char path[4096];
  uint32_t size = sizeof path;
  if (_NSGetExecutablePath(path, &size) != 0) fail("cannot find its own executable");
  return path;
#else
  return "/proc/self/exe";
#endif
}

// The next reader of this name on PATH that is not this program.
std::string real_reader(const std::string& name) {
  struct stat self;
  if (stat(own_executable().c_str(), &self) != 0) fail("cannot stat its own executable");
  for (const std::string& dir : colon_list(std::getenv("PATH"))) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;  // an empty entry: the working directory
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0 &&
        !(st.st_dev == self.st_dev && st.st_ino == self.st_ino))
      return candidate;
  }
  fail(name + ": no reader of that name on PATH after this cache");
}

[[noreturn]] void run_as_is(const std::string& reader, char** argv) {
  execv(reader.c_str(), argv);
  fail(reader + ": cannot run it: " + std::strerror(errno));
}

bool same_file(int a, int b) {
  struct stat sa, sb;
  return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

struct Call {
  std::string key;                  // hex SHA-256
  std::vector<std::string> paths;   // the arguments naming regular files, longest first
  std::vector<std::string> inputs;  // their bytes
};

Call describe(const std::string& name, const std::string& reader, int argc, char** argv) {
  Call call;
  std::string key = std::string(kFormat) + "\n" + name + "\n" + identity_of(reader);
  for (const std::string& file : colon_list(std::getenv("MACHOFIX_READER_CACHE_IDENTITY")))
    if (!file.empty()) key += identity_of(file);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    struct stat st;
    if (stat(arg.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      std::optional<std::string> bytes = read_file(arg);
      if (!bytes) run_as_is(reader, argv);  // unreadable: the reader says why
      key += "file " + sha256_of(*bytes) + "\n";
      if (std::find(call.paths.begin(), call.paths.end(), arg) == call.paths.end()) {
        call.paths.push_back(arg);
        call.inputs.push_back(std::move(*bytes));
      }
    } else {
      key += "arg " + std::to_string(arg.size()) + " " + arg + "\n";
    }
  }
  call.key = sha256_of(key);
  return call;
}

std::string placeholder(size_t index) { return kPlaceholder + std::to_string(index) + "\x1b"; }

// `text` with every occurrence of from[i] replaced by to[i], in one pass: where
// two overlap the longest wins, and nothing is looked for inside what was put in.
std::string replace_each(const std::string& text, const std::vector<std::string>& from,
                         const std::vector<std::string>& to) {
  std::vector<size_t> order(from.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return from[a].size() > from[b].size(); });
  std::string result;
  for (size_t at = 0; at < text.size();) {
    auto match = std::find_if(order.begin(), order.end(),
                              [&](size_t i) { return !from[i].empty() && text.compare(at, from[i].size(), from[i]) == 0; });
    if (match == order.end()) {
      result += text[at++];
    } else {
      result += to[*match];
      at += from[*match].size();
    }
  }
  return result;
}

std::vector<std::string> placeholders(const Call& call) {
  std::vector<std::string> all;
  for (size_t i = 0; i < call.paths.size(); ++i) all.push_back(placeholder(i));
  return all;
}

bool occurs_in_inputs(const Call& call, const std::string& text) {
  return std::any_of(call.inputs.begin(), call.inputs.end(),
                     [&](const std::string& input) { return input.find(text) != std::string::npos; });
}

// The output with each path replaced by its placeholder, or nothing when the output
// cannot be replayed for other paths.
std::optional<std::string> generalise(const Call& call, std::string output) {
  if (output.find(kPlaceholder) != std::string::npos) return std::nullopt;
  for (size_t i = 0; i < call.paths.size(); ++i) {
    if (occurs_in_inputs(call, call.paths[i])) return std::nullopt;
  }
  output = replace_each(output, call.paths, placeholders(call));
  for (const std::string& path : call.paths) {
    std::string name = machofix::last_path_component(path);
    if (output.find(name) != std::string::npos && !occurs_in_inputs(call, name)) return std::nullopt;
  }
  return output;
}

std::string specialise(const Call& call, const std::string& output) {
  return replace_each(output, placeholders(call), call.paths);
}

std::string cache_dir() {
  if (const char* dir = std::getenv("MACHOFIX_READER_CACHE")) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/machofix/readers";
  const char* home = std::getenv("HOME");
  if (!home || !*home) return "off";
  return std::string(home) + "/.cache/machofix/readers";
}

struct Outcome {
  int status = 0;
  std::string out, err;
};

// The entry: a header line "FORMAT STATUS OUT-LENGTH ERR-LENGTH", then both outputs.
std::optional<Outcome> load(const std::string& entry) {
  std::optional<std::string> bytes = read_file(entry);
  if (!bytes) return std::nullopt;
  size_t newline = bytes->find('\n');
  if (newline == std::string::npos || bytes->compare(0, std::strlen(kFormat), kFormat) != 0) return std::nullopt;
  Outcome outcome;
  unsigned long long out_size = 0, err_size = 0;
  if (std::sscanf(bytes->c_str() + std::strlen(kFormat), " %d %llu %llu", &outcome.status, &out_size, &err_size) != 3 ||
      bytes->size() - newline - 1 != out_size + err_size)
    return std::nullopt;
  outcome.out = bytes->substr(newline + 1, out_size);
  outcome.err = bytes->substr(newline + 1 + out_size);
  return outcome;
}

void mkdirs(const std::string& dir) {
  for (size_t at = dir.find('/', 1); at != std::string::npos; at = dir.find('/', at + 1)) mkdir(dir.substr(0, at).c_str(), 0755);
  mkdir(dir.c_str(), 0755);
}

// Entries not replayed for kUnusedDays go, checked at most once a day.
void prune(const std::string& root) {
  std::string stamp = root + "/last-prune";
  struct stat st;
  time_t now = std::time(nullptr);
  if (stat(stamp.c_str(), &st) == 0 && now - st.st_mtime < 86400) return;
  int fd = open(stamp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
  DIR* top = opendir(root.c_str());
  if (!top) return;
  while (dirent* shard = readdir(top)) {
    if (std::strlen(shard->d_name) != 2) continue;
    std::string dir = root + "/" + shard->d_name;
    DIR* entries = opendir(dir.c_str());
    if (!entries) continue;
    while (dirent* entry = readdir(entries)) {
      std::string path = dir + "/" + entry->d_name;
      if (entry->d_name[0] != '.' && stat(path.c_str(), &st) == 0 && now - st.st_mtime > kUnusedDays * 86400)
        unlink(path.c_str());
    }
    closedir(entries);
  }
  closedir(top);
}

void store(const std::string& root, const std::string& entry, const Outcome& outcome) {
  std::string dir = entry.substr(0, entry.find_last_of('/'));
  mkdirs(dir);
  std::string temp = entry + ".tmp" + std::to_string(getpid());
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return;  // a cache that cannot be written only costs time
  bool written = write_all(fd, std::string(kFormat) + " " + std::to_string(outcome.status) + " " +
                                   std::to_string(outcome.out.size()) + " " + std::to_string(outcome.err.size()) +
                                   "\n" + outcome.out + outcome.err);
  if (close(fd) != 0 || !written || rename(temp.c_str(), entry.c_str()) != 0) unlink(temp.c_str());
  prune(root);
}

// Runs the reader with both outputs captured; nothing when a signal ended it.
std::optional<Outcome> run(const std::string& reader, char** argv) {
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) fail(std::string("pipe: ") + std::strerror(errno));
  pid_t child = fork();
  if (child < 0) fail(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]), close(out_pipe[1]), close(err_pipe[0]), close(err_pipe[1]);
    execv(reader.c_str(), argv);
    _exit(127);
  }
  close(out_pipe[1]), close(err_pipe[1]);
  Outcome outcome;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&outcome.out, &outcome.err};
  int open_pipes = 2;
  char buffer[1 << 16];
  while (open_pipes > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      fail(std::string("poll: ") + std::strerror(errno));
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = read(fds[i].fd, buffer, sizeof buffer);
      if (got > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_pipes;
      }
    }
  }
  int status;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  print(1, outcome.out);
  print(2, outcome.err);
  if (!WIFEXITED(status)) {
    signal(WTERMSIG(status), SIG_DFL);
    kill(getpid(), WTERMSIG(status));
    return std::nullopt;
  }
  outcome.status = WEXITSTATUS(status);
  return outcome;
}

}  // namespace

int main(int argc, char** argv) {
  std::string name = machofix::last_path_component(argv[0]);
  std::string reader = real_reader(name);
  std::string root = cache_dir();
  bool cacheable = root != "off" && !same_file(1, 2);
  for (int i = 1; i < argc && cacheable; ++i) cacheable = std::strcmp(argv[i], "-") != 0 && argv[i][0] != '@';
  if (!cacheable) run_as_is(reader, argv);

  Call call = describe(name, reader, argc, argv);
  std::string entry = root + "/" + call.key.substr(0, 2) + "/" + call.key;
  if (std::optional<Outcome> cached = load(entry)) {
    utimes(entry.c_str(), nullptr);  // replayed: kept by prune()
    print(1, specialise(call, cached->out));
    print(2, specialise(call, cached->err));
    return cached->status;
  }
  std::optional<Outcome> outcome = run(reader, argv);
  if (!outcome) return 125;
  std::optional<std::string> out = generalise(call, outcome->out), err = generalise(call, outcome->err);
  if (out && err) store(root, entry, Outcome{outcome->status, *out, *err});
  return outcome->status;
}
