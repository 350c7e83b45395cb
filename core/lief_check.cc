#include "core/lief_check.h"

#include <LIEF/MachO.hpp>
#include <LIEF/logging.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "core/macho_format.h"

namespace machofix {

namespace {

// LIEF 0.9 keeps global logging state; one parse at a time keeps it out of trouble
// when files are processed in parallel.
std::mutex lief_mutex;

[[noreturn]] void disagree(const std::string& problem) {
  fail("LIEF reads the rewritten slice differently, nothing written: " + problem);
}

bool is_dependent_dylib(uint32_t cmd) {
  return cmd == macho::LC_LOAD_DYLIB || cmd == macho::LC_LOAD_WEAK_DYLIB || cmd == macho::LC_REEXPORT_DYLIB ||
         cmd == macho::LC_LOAD_UPWARD_DYLIB;
}

// LIEF 0.9 reads at most this many load commands; the rest is compared by our reader only.
constexpr size_t kLiefMaxCommands = 255;

void compare_commands(const LIEF::MachO::Binary& binary, const MachO& ours) {
  std::vector<std::string> lief_dylibs;
  size_t index = 0;
  size_t expected_count = std::min(ours.commands.size(), kLiefMaxCommands);
  for (const LIEF::MachO::LoadCommand& command : binary.commands()) {
    if (index >= ours.commands.size()) disagree("LIEF sees more load commands");
    const LoadCommand& mine = ours.commands[index++];
    if (static_cast<uint32_t>(command.command()) != mine.cmd || command.command_offset() != mine.offset ||
        command.size() != mine.size)
      disagree("load command " + std::to_string(index - 1) + " differs");
    if (is_dependent_dylib(mine.cmd))
      lief_dylibs.push_back(static_cast<const LIEF::MachO::DylibCommand&>(command).name());
  }
  if (index != expected_count) disagree("LIEF sees fewer load commands");
  std::vector<std::string> our_dylibs;
  for (const Dylib& dylib : ours.dylibs)
    if (dylib.command_index < expected_count) our_dylibs.push_back(dylib.install_name);
  if (lief_dylibs != our_dylibs) disagree("the dependent dylib lists differ");
}

void compare_symbols(const LIEF::MachO::Binary& binary, const MachO& ours, const ImportScan& scan) {
  std::set<std::pair<std::string, std::string>> our_bindings;  // (symbol, library)
  for (const Import& import : scan.imports)
    if (import.source == ImportSource::Symtab) our_bindings.emplace(std::string(import.symbol), resolve_ordinal(ours, import.ordinal));
  for (const LIEF::MachO::Symbol& symbol : binary.symbols()) {
    uint8_t type = symbol.type();
    if (type & macho::N_STAB || !(type & macho::N_EXT)) continue;
    uint8_t kind = type & macho::N_TYPE;
    if (!(kind == macho::N_UNDF && symbol.value() == 0) && kind != macho::N_PBUD) continue;
    uint8_t stored = symbol.description() >> 8;
    int ordinal = stored == macho::NDESC_DYNAMIC_LOOKUP ? macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP
                  : stored == macho::NDESC_EXECUTABLE   ? macho::BIND_SPECIAL_DYLIB_MAIN_EXECUTABLE
                                                        : stored;
    if (!our_bindings.count({symbol.name(), resolve_ordinal(ours, ordinal)}))
      disagree("undefined symbol " + symbol.name() + " names " + resolve_ordinal(ours, ordinal));
  }
}

}  // namespace

void cross_check_with_lief(const std::vector<uint8_t>& slice, const MachO& ours, const ImportScan& scan) {
  std::lock_guard<std::mutex> lock(lief_mutex);
  LIEF::Logger::disable();
  std::unique_ptr<LIEF::MachO::FatBinary> parsed;
  try {
    parsed = LIEF::MachO::Parser::parse(slice, "slice", LIEF::MachO::ParserConfig::quick());
  } catch (const std::exception& e) {
    disagree(std::string("LIEF cannot parse it: ") + e.what());
  }
  if (!parsed || parsed->size() != 1) disagree("LIEF does not see one Mach-O image");
  const LIEF::MachO::Binary& binary = parsed->at(0);
  compare_commands(binary, ours);
  if (ours.two_level()) compare_symbols(binary, ours, scan);
}

}  // namespace machofix
