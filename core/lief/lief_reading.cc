#include "core/lief/lief_reading.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/io/file_io.h"
#include "core/lief/lief_check.h"
#include "core/lief/lief_plugin_abi.h"

namespace machofix {

void lief_disagrees(const std::string& problem) {
  fail_as(ErrorKind::ProofFailed, "LIEF reads the rewritten slice differently, nothing written: " + problem);
}

namespace {

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

MachofixLiefReadV2 load_plugin() {
  std::string tried;
  std::optional<std::string> path = find_plugin(tried);
  if (!path)
    fail("cannot find the LIEF reader " MACHOFIX_LIEF_PLUGIN_NAME " (tried " + tried +
         "); set MACHOFIX_LIEF_PLUGIN to its path");
  void* handle = dlopen(path->c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) fail(std::string("cannot load the LIEF reader: ") + dlerror());
  void* read = dlsym(handle, MACHOFIX_LIEF_READ_SYMBOL);
  if (!read) fail("the LIEF reader " + *path + " has no " MACHOFIX_LIEF_READ_SYMBOL " (a plugin of another machofix?)");
  return reinterpret_cast<MachofixLiefReadV2>(read);
}

// LIEF 0.9 keeps global state (its logger): one reading at a time, also when files
// are processed in parallel.
std::mutex lief_mutex;

std::atomic<bool> plugin_loaded{false};

MachofixLiefReadV2 plugin() {
  static MachofixLiefReadV2 read = load_plugin();  // a failed load is retried next time
  plugin_loaded = true;
  return read;
}

std::optional<std::string> optional_text(const char* text) {
  return text ? std::optional<std::string>(text) : std::nullopt;
}

LiefBindClass bind_class(uint32_t reported) {
  switch (reported) {
    case MACHOFIX_LIEF_BIND_WEAK: return LiefBindClass::Weak;
    case MACHOFIX_LIEF_BIND_LAZY: return LiefBindClass::Lazy;
  }
  return LiefBindClass::Standard;
}

MachofixLiefVisitorV2 recorder(LiefView& view) {
  return {
      &view,
      [](void* context, uint32_t cmd, uint64_t offset, uint32_t size, const char* dylib_name) {
        static_cast<LiefView*>(context)->commands.push_back({cmd, offset, size, optional_text(dylib_name)});
      },
      [](void* context, const char* name, uint8_t type, uint16_t description, uint64_t value) {
        static_cast<LiefView*>(context)->symbols.push_back({name, type, description, value});
      },
      [](void* context, uint32_t reported_class, int32_t ordinal, const char* symbol, int weak_import) {
        static_cast<LiefView*>(context)->binds.push_back(
            {bind_class(reported_class), ordinal, optional_text(symbol), weak_import != 0});
      },
      1};
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

LiefView read_with_lief(const LiefImage& image, bool read_binds) {
  std::vector<MachofixLiefPiece> pieces;
  for (const Bytes& piece : image.pieces()) pieces.push_back({piece.data(), piece.size()});
  LiefView view;
  MachofixLiefVisitorV2 visitor = recorder(view);
  visitor.read_binds = read_binds ? 1 : 0;
  char error[512] = "";
  std::lock_guard<std::mutex> lock(lief_mutex);
  if (plugin()(pieces.data(), pieces.size(), &visitor, error, sizeof error) != 0) lief_disagrees(error);
  return view;
}

}  // namespace machofix
