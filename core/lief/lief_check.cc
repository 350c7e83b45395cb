// The comparison of LIEF's reading (core/lief/lief_reading.h) of a rewritten slice's
// image (core/lief/lief_skeleton.h) with machofix's own reading of the slice.
#include "core/lief/lief_check.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "core/format/macho_format.h"
#include "core/lief/lief_reading.h"
#include "core/lief/lief_skeleton.h"

namespace machofix {

namespace {

// LIEF 0.9 reads at most this many load commands (BinaryParser::MAX_COMMANDS); the
// rest, and what only they point at, is compared by our reader only.
constexpr size_t kLiefMaxCommands = 255;

// Whether LIEF reads the first command `cmd` of `ours` (and what it points at).
bool lief_reads_command(const MachO& ours, std::initializer_list<uint32_t> cmds) {
  for (size_t index = 0; index < ours.commands.size(); ++index)
    if (std::find(cmds.begin(), cmds.end(), ours.commands[index].cmd) != cmds.end()) return index < kLiefMaxCommands;
  return false;
}

void compare_commands(const LiefView& lief, const MachO& ours) {
  size_t expected_count = std::min(ours.commands.size(), kLiefMaxCommands);
  if (lief.commands.size() > ours.commands.size()) lief_disagrees("LIEF sees more load commands");
  if (lief.commands.size() != expected_count) lief_disagrees("LIEF sees fewer load commands");
  std::vector<std::string> lief_dylibs;
  for (size_t index = 0; index < lief.commands.size(); ++index) {
    const LiefCommand& theirs = lief.commands[index];
    const LoadCommand& mine = ours.commands[index];
    if (theirs.cmd != mine.cmd || theirs.offset != mine.offset || theirs.size != mine.size)
      lief_disagrees("load command " + std::to_string(index) + " differs");
    if (macho::takes_library_ordinal(mine.cmd)) {
      if (!theirs.dylib_name) lief_disagrees("load command " + std::to_string(index) + " is not a dylib command to LIEF");
      lief_dylibs.push_back(*theirs.dylib_name);
    }
  }
  std::vector<std::string> our_dylibs;
  for (const Dylib& dylib : ours.dylibs)
    if (dylib.command_index < expected_count) our_dylibs.push_back(dylib.install_name);
  if (lief_dylibs != our_dylibs) lief_disagrees("the dependent dylib lists differ");
}

// The first element of `a` that `b` lacks, or of `b` that `a` lacks, described by
// `describe`: the sets must be equal.
template <typename Set, typename Describe>
void require_equal(const Set& ours, const Set& lief, Describe describe) {
  for (const auto& element : ours)
    if (!lief.count(element)) lief_disagrees(describe(element) + " is not read so by LIEF");
  for (const auto& element : lief)
    if (!ours.count(element)) lief_disagrees(describe(element) + " is read by LIEF only");
}

// Every entry of the symbol table is read, and every undefined one names the same
// library to both readers.
void compare_symbols(const LiefView& lief, const MachO& ours, const ImportScan& scan) {
  if (!ours.symtab.present || !lief_reads_command(ours, {macho::LC_SYMTAB})) return;
  if (lief.symbols.size() != ours.symtab.symbol_count)
    lief_disagrees("LIEF reads " + std::to_string(lief.symbols.size()) + " symbol table entries, machofix " +
                   std::to_string(ours.symtab.symbol_count));
  if (!ours.two_level()) return;  // flat namespace: n_desc holds no library ordinal
  using Binding = std::pair<std::string, std::string>;  // (symbol, library)
  std::set<Binding> our_bindings, lief_bindings;
  for (const Import& import : scan.imports)
    if (import.source == ImportSource::Symtab)
      our_bindings.emplace(std::string(import.symbol), resolve_ordinal(ours, import.ordinal));
  for (const LiefSymbol& symbol : lief.symbols) {
    if (symbol.type & macho::N_STAB || !(symbol.type & macho::N_EXT)) continue;
    uint8_t kind = symbol.type & macho::N_TYPE;
    if (!(kind == macho::N_UNDF && symbol.value == 0) && kind != macho::N_PBUD) continue;
    lief_bindings.emplace(symbol.name, resolve_ordinal(ours, macho::ndesc_ordinal(symbol.description)));
  }
  require_equal(our_bindings, lief_bindings,
                [](const Binding& b) { return "undefined symbol " + b.first + " from " + b.second; });
}

// The binds of the bind and lazy-bind streams: (stream, symbol, library, weak import),
// each distinct one once. LIEF 0.9 names a bind only through a symbol-table entry of
// that name; a bind whose symbol has none is compared without its name.
using BindKey = std::tuple<LiefBindClass, std::optional<std::string>, int, bool>;

std::string describe(const MachO& ours, const BindKey& key) {
  const auto& [stream, symbol, ordinal, weak] = key;
  return std::string(stream == LiefBindClass::Lazy ? "lazy-bind" : "bind") + " of " +
         symbol.value_or("(a symbol LIEF cannot name)") + " from " + resolve_ordinal(ours, ordinal) +
         (weak ? " (weak import)" : "");
}

void compare_binds(const LiefView& lief, const MachO& ours, const ImportScan& scan) {
  if (!ours.dyld_info.present || !lief_reads_command(ours, {macho::LC_DYLD_INFO, macho::LC_DYLD_INFO_ONLY})) return;
  // LIEF 0.9 drops a bind whose segment it cannot find (BinaryParser::do_bind): in an
  // image without segments (test images; dyld loads none) it reads none.
  if (ours.segments.empty()) return;
  std::set<std::string> lief_names;
  for (const LiefSymbol& symbol : lief.symbols) lief_names.insert(symbol.name);
  std::set<BindKey> our_binds, lief_binds;
  for (const Import& import : scan.imports) {
    if (import.source != ImportSource::Bind && import.source != ImportSource::LazyBind) continue;
    std::string name(import.symbol);
    our_binds.emplace(import.source == ImportSource::Bind ? LiefBindClass::Standard : LiefBindClass::Lazy,
                      lief_names.count(name) ? std::optional<std::string>(name) : std::nullopt, import.ordinal,
                      import.weak);
  }
  // Weak binds carry no ordinal (definitions coalesced by name); machofix's scan does
  // not read that stream, so LIEF's reading of it is not compared here.
  for (const LiefBind& bind : lief.binds)
    if (bind.bind_class != LiefBindClass::Weak)
      lief_binds.emplace(bind.bind_class, bind.symbol, bind.ordinal, bind.weak_import);
  require_equal(our_binds, lief_binds, [&](const BindKey& key) { return describe(ours, key); });
}

}  // namespace

void compare_lief_reading(const LiefView& lief, const MachO& ours, const ImportScan& scan, bool binds_read) {
  compare_commands(lief, ours);
  compare_symbols(lief, ours, scan);
  if (binds_read) compare_binds(lief, ours, scan);
}

bool lief_reads_binds_in_bounded_time(const MachO& ours, const ImportScan& scan) {
  constexpr uint64_t kMaxSymbolComparisons = uint64_t(1) << 28;  // about a second
  constexpr uint64_t kMaxBoundAddresses = uint64_t(1) << 20;     // LIEF keeps an object for each
  constexpr uint64_t kMaxBoundName = 4096;
  uint64_t symbols = (ours.symtab.present ? ours.symtab.symbol_count : 0) + 1;
  return scan.longest_bound_name <= kMaxBoundName && scan.bound_addresses <= kMaxBoundAddresses &&
         scan.bound_addresses <= kMaxSymbolComparisons / symbols;
}

void cross_check_with_lief(const Bytes& slice, const MachO& ours, const ImportScan& scan) {
  LiefImage image = lief_image(slice);
  // Only a skeleton leaves out what else LIEF's deep parse reads at quadratic cost
  // (the rebases, the exports trie: core/lief/lief_skeleton.h); a whole slice is read
  // without the dyld-info streams.
  bool binds = image.skeleton() && lief_reads_binds_in_bounded_time(ours, scan);
  compare_lief_reading(read_with_lief(image, binds), ours, scan, binds);
}

}  // namespace machofix
