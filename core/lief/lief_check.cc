#include "core/lief/lief_check.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "core/io/file_io.h"
#include "core/lief/lief_plugin_abi.h"
#include "core/format/macho_format.h"

namespace machofix {

namespace {

[[noreturn]] void disagree(const std::string& problem) {
  fail("LIEF reads the rewritten slice differently, nothing written: " + problem);
}

// ---- Loading the plugin (core/lief/lief_plugin_abi.h says why it is one) ----

std::string executable_directory() {
  std::string executable = executable_path();
  if (executable.empty()) return {};
  return executable.substr(0, executable.rfind('/'));
}

// Where the plugin may be: named by the environment; beside the executable (the
// build tree); in the install tree's <libdir>/machofix; where this build put it.
std::vector<std::string> plugin_candidates() {
  std::vector<std::string> candidates;
  if (const char* named = std::getenv("MACHOFIX_LIEF_PLUGIN"); named && *named) return {named};
  std::string directory = executable_directory();
  if (!directory.empty()) {
    candidates.push_back(directory + "/" MACHOFIX_LIEF_PLUGIN_NAME);
#ifdef MACHOFIX_LIEF_PLUGIN_FROM_BINDIR
    candidates.push_back(directory + "/" MACHOFIX_LIEF_PLUGIN_FROM_BINDIR "/" MACHOFIX_LIEF_PLUGIN_NAME);
#endif
  }
#ifdef MACHOFIX_LIEF_PLUGIN_BUILD_PATH
  candidates.push_back(MACHOFIX_LIEF_PLUGIN_BUILD_PATH);
#endif
  return candidates;
}

std::optional<std::string> find_plugin(std::string& tried) {
  for (const std::string& candidate : plugin_candidates()) {
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
    tried += (tried.empty() ? "" : ", ") + candidate;
  }
  return std::nullopt;
}

MachofixLiefRead load_plugin() {
  std::string tried;
  std::optional<std::string> path = find_plugin(tried);
  if (!path)
    fail("cannot find the LIEF reader " MACHOFIX_LIEF_PLUGIN_NAME " (tried " + tried +
         "); set MACHOFIX_LIEF_PLUGIN to its path");
  void* handle = dlopen(path->c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) fail(std::string("cannot load the LIEF reader: ") + dlerror());
  void* read = dlsym(handle, MACHOFIX_LIEF_READ_SYMBOL);
  if (!read) fail("the LIEF reader " + *path + " has no " MACHOFIX_LIEF_READ_SYMBOL);
  return reinterpret_cast<MachofixLiefRead>(read);
}

// LIEF 0.9 keeps global state (its logger): one reading at a time, also when files
// are processed in parallel.
std::mutex lief_mutex;

std::atomic<bool> plugin_loaded{false};

MachofixLiefRead plugin() {
  static MachofixLiefRead read = load_plugin();  // a failed load is retried next time
  plugin_loaded = true;
  return read;
}

// ---- What LIEF saw ----

struct LiefCommand {
  uint32_t cmd;
  uint64_t offset;
  uint32_t size;
  std::optional<std::string> dylib_name;
};

struct LiefSymbol {
  std::string name;
  uint8_t type;
  uint16_t description;
  uint64_t value;
};

struct LiefView {
  std::vector<LiefCommand> commands;
  std::vector<LiefSymbol> symbols;
};

LiefView read_with_lief(const Bytes& slice) {
  LiefView view;
  MachofixLiefVisitor visitor{
      &view,
      [](void* context, uint32_t cmd, uint64_t offset, uint32_t size, const char* dylib_name) {
        auto& commands = static_cast<LiefView*>(context)->commands;
        commands.push_back({cmd, offset, size, dylib_name ? std::optional<std::string>(dylib_name) : std::nullopt});
      },
      [](void* context, const char* name, uint8_t type, uint16_t description, uint64_t value) {
        static_cast<LiefView*>(context)->symbols.push_back({name, type, description, value});
      }};
  char error[512] = "";
  std::lock_guard<std::mutex> lock(lief_mutex);
  if (plugin()(slice.data(), slice.size(), &visitor, error, sizeof error) != 0) disagree(error);
  return view;
}

// ---- Comparison with machofix's own reading ----

bool is_dependent_dylib(uint32_t cmd) {
  return cmd == macho::LC_LOAD_DYLIB || cmd == macho::LC_LOAD_WEAK_DYLIB || cmd == macho::LC_REEXPORT_DYLIB ||
         cmd == macho::LC_LOAD_UPWARD_DYLIB;
}

// LIEF 0.9 reads at most this many load commands; the rest is compared by our reader only.
constexpr size_t kLiefMaxCommands = 255;

void compare_commands(const LiefView& lief, const MachO& ours) {
  size_t expected_count = std::min(ours.commands.size(), kLiefMaxCommands);
  if (lief.commands.size() > ours.commands.size()) disagree("LIEF sees more load commands");
  if (lief.commands.size() != expected_count) disagree("LIEF sees fewer load commands");
  std::vector<std::string> lief_dylibs;
  for (size_t index = 0; index < lief.commands.size(); ++index) {
    const LiefCommand& theirs = lief.commands[index];
    const LoadCommand& mine = ours.commands[index];
    if (theirs.cmd != mine.cmd || theirs.offset != mine.offset || theirs.size != mine.size)
      disagree("load command " + std::to_string(index) + " differs");
    if (is_dependent_dylib(mine.cmd)) {
      if (!theirs.dylib_name) disagree("load command " + std::to_string(index) + " is not a dylib command to LIEF");
      lief_dylibs.push_back(*theirs.dylib_name);
    }
  }
  std::vector<std::string> our_dylibs;
  for (const Dylib& dylib : ours.dylibs)
    if (dylib.command_index < expected_count) our_dylibs.push_back(dylib.install_name);
  if (lief_dylibs != our_dylibs) disagree("the dependent dylib lists differ");
}

void compare_symbols(const LiefView& lief, const MachO& ours, const ImportScan& scan) {
  std::set<std::pair<std::string, std::string>> our_bindings;  // (symbol, library)
  for (const Import& import : scan.imports)
    if (import.source == ImportSource::Symtab)
      our_bindings.emplace(std::string(import.symbol), resolve_ordinal(ours, import.ordinal));
  for (const LiefSymbol& symbol : lief.symbols) {
    if (symbol.type & macho::N_STAB || !(symbol.type & macho::N_EXT)) continue;
    uint8_t kind = symbol.type & macho::N_TYPE;
    if (!(kind == macho::N_UNDF && symbol.value == 0) && kind != macho::N_PBUD) continue;
    int ordinal = macho::ndesc_ordinal(symbol.description);
    if (!our_bindings.count({symbol.name, resolve_ordinal(ours, ordinal)}))
      disagree("undefined symbol " + symbol.name + " names " + resolve_ordinal(ours, ordinal));
  }
}

}  // namespace

LiefPreload::LiefPreload() {
  if (plugin_loaded) return;
  thread_ = std::thread([] {
    try {
      plugin();
    } catch (...) {
      // Reported by the cross-check that needs it, which tries again.
    }
  });
}

LiefPreload::~LiefPreload() {
  if (thread_.joinable()) thread_.join();
}

std::string lief_reader_location() {
  std::string tried;
  return find_plugin(tried).value_or("not found (tried " + tried + ")");
}

void cross_check_with_lief(const Bytes& slice, const MachO& ours, const ImportScan& scan) {
  LiefView lief = read_with_lief(slice);
  compare_commands(lief, ours);
  if (ours.two_level()) compare_symbols(lief, ours, scan);
}

}  // namespace machofix
