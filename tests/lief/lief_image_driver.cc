// The LIEF cross-check's skeleton (core/lief/lief_skeleton.h) on real files.
//
//   lief_image_driver check [--require-skeleton] PATH...
//       Every 64-bit Mach-O slice of every file under PATH (files or directories,
//       thin or universal): LIEF's reading of the skeleton must equal its reading of
//       the whole slice (load commands, symbol table, every bind of the three
//       dyld-info streams); machofix's own reading of the skeleton must name the same
//       dylibs, symbols and imports as of the slice; the cross-check must pass; and it
//       must refuse the slice, read through its skeleton, after each of these changes
//       to its bytes: a dylib's install name, an undefined symbol's library ordinal
//       and name, a bind and a lazy-bind opcode's library ordinal. With
//       --require-skeleton a slice that falls back to the whole slice is a failure.
//       Exit 0 when every slice passes, 1 otherwise; one line per slice.
//
//   lief_image_driver measure [--whole] FILE
//       The cross-check alone on FILE's first slice, the way a rewrite runs it after
//       its own reading: its wall time and its peak resident memory above what was
//       resident before it (/proc/self/clear_refs, VmHWM). --whole hands LIEF the
//       whole slice, copied into memory first as the rewrite held it before: the
//       cross-check as it was before the skeleton. (BENCHMARKS.md)
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>
#include <tuple>

#include "core/base/error.h"
#include "core/format/fat.h"
#include "core/format/imports.h"
#include "core/format/macho.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"
#include "core/io/file_io.h"
#include "core/lief/lief_check.h"
#include "core/lief/lief_skeleton.h"

using namespace machofix;

namespace {

struct Slice {
  std::string name;
  Bytes bytes;
};

std::vector<Slice> slices_of(const std::string& path, const Bytes& file) {
  if (looks_like_universal(file)) {
    std::vector<Slice> slices;
    for (const FatSlice& slice : parse_universal(file).slices)
      slices.push_back({path + " " + cpu_name(slice.cputype, slice.cpusubtype), file.sub(slice.offset, slice.size, "slice")});
    return slices;
  }
  return {{path, file}};
}

bool is_64bit_macho(const Bytes& slice) { return slice.size() >= 4 && slice.u32(0) == macho::MH_MAGIC_64; }

// ---- The skeleton's reading against the whole slice's ----

void require(bool condition, const std::string& what) {
  if (!condition) fail(what);
}

std::string describe_bind(const LiefBind& bind) {
  return std::to_string(int(bind.bind_class)) + "/" + bind.symbol.value_or("?") + "/" + std::to_string(bind.ordinal) +
         (bind.weak_import ? "/weak" : "");
}

void same_lief_reading(const LiefView& whole, const LiefView& skeleton) {
  require(whole.commands == skeleton.commands, "LIEF reads other load commands in the skeleton");
  require(whole.symbols.size() == skeleton.symbols.size(), "LIEF reads " + std::to_string(skeleton.symbols.size()) +
                                                              " symbols in the skeleton, " +
                                                              std::to_string(whole.symbols.size()) + " in the slice");
  for (size_t i = 0; i < whole.symbols.size(); ++i)
    require(whole.symbols[i] == skeleton.symbols[i], "LIEF reads symbol " + std::to_string(i) + " (" +
                                                         whole.symbols[i].name + ") differently in the skeleton");
  require(whole.binds.size() == skeleton.binds.size(), "LIEF reads " + std::to_string(skeleton.binds.size()) +
                                                          " binds in the skeleton, " + std::to_string(whole.binds.size()) +
                                                          " in the slice");
  for (size_t i = 0; i < whole.binds.size(); ++i)
    require(whole.binds[i] == skeleton.binds[i], "LIEF reads bind " + std::to_string(i) + " differently in the skeleton: " +
                                                     describe_bind(whole.binds[i]) + " / " + describe_bind(skeleton.binds[i]));
}

// The skeleton with __LINKEDIT's filesize given back (the skeleton makes it 0 so that
// LIEF copies nothing; our reader wants every LINKEDIT range inside the segment).
std::vector<uint8_t> with_linkedit_size(const LiefImage& image) {
  std::vector<uint8_t> joined = image.joined();
  Bytes bytes(joined);
  uint64_t at = sizeof(macho::MachHeader64);
  for (uint32_t i = 0; i < bytes.get<macho::MachHeader64>(0, "header").ncmds; ++i) {
    auto command = bytes.get<macho::LoadCommand>(at, "load command");
    if (command.cmd == macho::LC_SEGMENT_64) {
      auto segment = bytes.get<macho::SegmentCommand64>(at, "segment");
      if (std::string(segment.segname, strnlen(segment.segname, 16)) == "__LINKEDIT") {
        segment.filesize = image.tail.size();
        put(joined, at, segment);
      }
    }
    at += command.cmdsize;
  }
  return joined;
}

// Our own reader on the skeleton: the same dylibs and imports (but the re-exports of
// LC_DYLD_INFO's exports trie, which the skeleton leaves out).
void same_own_reading(const MachO& ours, const ImportScan& scan, const LiefImage& image) {
  std::vector<uint8_t> joined = with_linkedit_size(image);
  MachO skeleton = parse_macho(Bytes(joined));
  ImportScan skeleton_scan = scan_imports(skeleton);
  std::vector<std::string> dylibs, skeleton_dylibs;
  for (const Dylib& dylib : ours.dylibs) dylibs.push_back(dylib.install_name);
  for (const Dylib& dylib : skeleton.dylibs) skeleton_dylibs.push_back(dylib.install_name);
  require(dylibs == skeleton_dylibs, "machofix reads other dylibs in the skeleton");
  require(skeleton.symtab.symbol_count == ours.symtab.symbol_count, "machofix reads another symbol count in the skeleton");
  using Key = std::tuple<ImportSource, std::string, int, bool>;
  auto keys = [&](const ImportScan& imports) {
    std::set<Key> set;
    for (const Import& import : imports.imports)
      if (!(import.source == ImportSource::ExportsTrie && ours.dyld_info.present))
        set.emplace(import.source, std::string(import.symbol), import.ordinal, import.weak);
    return set;
  };
  require(keys(scan) == keys(skeleton_scan), "machofix reads other imports in the skeleton");
}

// ---- Changes the cross-check must refuse through the skeleton ----

struct Change {
  std::string what;
  uint64_t offset;
  uint8_t value;
};

int other_ordinal(const MachO& ours, int ordinal) {
  return ordinal == 1 ? (ours.dylibs.size() >= 2 ? 2 : 0) : 1;
}

std::vector<Change> changes(const MachO& ours, const ImportScan& scan) {
  std::vector<Change> out;
  if (!ours.dylibs.empty()) {
    uint64_t command = ours.commands[ours.dylibs[0].command_index].offset;
    uint64_t name = command + ours.bytes.u32(command + offsetof(macho::DylibCommand, name_offset));
    out.push_back({"install name", name + 1, static_cast<uint8_t>(ours.bytes.u8(name + 1) ^ 0x20)});
  }
  std::set<ImportSource> done;
  for (const OrdinalSite& site : scan.sites) {
    if (done.count(site.source) || site.ordinal <= 0) continue;
    int other = other_ordinal(ours, site.ordinal);
    if (site.source == ImportSource::Symtab && ours.two_level()) {
      out.push_back({"n_desc ordinal", site.offset, static_cast<uint8_t>(other)});
    } else if ((site.source == ImportSource::Bind || site.source == ImportSource::LazyBind) &&
               site.encoding == SiteEncoding::OpcodeImm) {
      out.push_back({std::string(import_source_name(site.source)) + " ordinal", site.offset,
                     static_cast<uint8_t>(macho::BIND_OPCODE_SET_DYLIB_ORDINAL_IMM | other)});
    } else {
      continue;
    }
    done.insert(site.source);
  }
  for (const Import& import : scan.imports)
    if (import.source == ImportSource::Symtab && ours.two_level() && import.symbol.size() > 1) {
      uint64_t name = static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(import.symbol.data()) + 1 - ours.bytes.data());
      out.push_back({"symbol name", name, static_cast<uint8_t>(ours.bytes.u8(name) ^ 0x20)});
      break;
    }
  return out;
}

// The cross-check of the changed bytes against our reading of the original: the
// message of its refusal.
std::string refusal(const Bytes& slice, const Change& change, const MachO& ours, const ImportScan& scan) {
  std::vector<uint8_t> changed(slice.data(), slice.data() + slice.size());
  changed.at(change.offset) = change.value;
  require(lief_image(Bytes(changed)).skeleton(), change.what + ": the changed slice has no skeleton");
  try {
    cross_check_with_lief(Bytes(changed), ours, scan);
  } catch (const Error& error) {
    return error.problem();
  }
  fail("a changed " + change.what + " at " + hex(change.offset) + " passes the cross-check");
}

std::string check_slice(const Bytes& slice, bool require_skeleton) {
  MachO ours = parse_macho(slice);
  ImportScan scan = scan_imports(ours);
  LiefImage image = lief_image(slice);
  if (!image.skeleton()) {
    require(!require_skeleton, "no skeleton: " + image.whole_slice_because);
    cross_check_with_lief(slice, ours, scan);
    return "whole slice (" + image.whole_slice_because + "); cross-check passes";
  }
  LiefImage whole;
  whole.tail = slice;
  LiefView whole_reading = read_with_lief(whole);
  same_lief_reading(whole_reading, read_with_lief(image));
  same_own_reading(ours, scan, image);
  cross_check_with_lief(slice, ours, scan);
  std::ostringstream line;
  line << "skeleton " << image.size() << " of " << slice.size() << " bytes; LIEF reads " << whole_reading.commands.size()
       << " commands, " << whole_reading.symbols.size() << " symbols, " << whole_reading.binds.size()
       << " binds alike; refused after a changed";
  for (const Change& change : changes(ours, scan)) {
    refusal(slice, change, ours, scan);
    line << " " << change.what << ",";
  }
  std::string text = line.str();
  return text.back() == ',' ? text.substr(0, text.size() - 1) : text + " (nothing to change)";
}

std::vector<std::string> files_under(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    if (!std::filesystem::is_directory(path)) {
      files.push_back(path);
      continue;
    }
    for (const auto& entry : std::filesystem::recursive_directory_iterator(path))
      if (entry.is_regular_file()) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

int check(const std::vector<std::string>& paths, bool require_skeleton) {
  int slices = 0, failures = 0;
  for (const std::string& path : files_under(paths)) {
    MappedFile file(path);
    if (!looks_like_universal(file.bytes()) && !looks_like_thin_macho(file.bytes())) continue;
    for (const Slice& slice : slices_of(path, file.bytes())) {
      if (!is_64bit_macho(slice.bytes) || !rewritable_filetype(header_filetype(slice.bytes).value_or(0))) continue;
      ++slices;
      try {
        std::cout << slice.name << ": " << check_slice(slice.bytes, require_skeleton) << "\n";
      } catch (const Error& error) {
        ++failures;
        std::cout << slice.name << ": FAILED: " << error.describe() << "\n";
      }
    }
  }
  std::cout << slices << " slices, " << failures << " failed\n";
  return failures || slices == 0 ? 1 : 0;
}

// ---- Measuring ----

uint64_t status_kib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1));
  fail("no " + field + " in /proc/self/status");
}

int measure(const std::string& path, bool whole) {
  MappedFile file(path);
  Slice slice = slices_of(path, file.bytes()).at(0);
  std::vector<uint8_t> held;  // --whole: the slice in memory, as the rewrite held it
  Bytes bytes = slice.bytes;
  if (whole) {
    held.assign(slice.bytes.data(), slice.bytes.data() + slice.bytes.size());
    bytes = Bytes(held);
  }
  MachO ours = parse_macho(bytes);
  ImportScan scan = scan_imports(ours);
  cross_check_with_lief(bytes, ours, scan);  // loads the plugin, outside the measurement
  std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM to the current VmRSS
  uint64_t before = status_kib("VmRSS");
  auto start = std::chrono::steady_clock::now();
  LiefImage image;
  if (whole) {
    image.tail = bytes;
    image.whole_slice_because = "--whole";
  } else {
    image = lief_image(bytes);
  }
  compare_lief_reading(read_with_lief(image), ours, scan);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  uint64_t peak = status_kib("VmHWM");
  const Segment* linkedit = ours.segment("__LINKEDIT");
  std::cout << slice.name << " (" << bytes.size() / 1048576.0 << " MiB, __LINKEDIT "
            << (linkedit ? linkedit->file_size : 0) / 1048576.0 << " MiB), "
            << (whole ? "whole slice" : image.skeleton() ? "skeleton" : "whole slice (" + image.whole_slice_because + ")")
            << " of " << image.size() / 1048576.0 << " MiB: " << ms << " ms, peak RSS +" << (peak - before) / 1024.0
            << " MiB above " << before / 1024.0 << " MiB\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() >= 2 && args[0] == "check") {
      bool require_skeleton = args[1] == "--require-skeleton";
      return check(std::vector<std::string>(args.begin() + (require_skeleton ? 2 : 1), args.end()), require_skeleton);
    }
    if (args.size() == 2 && args[0] == "measure") return measure(args[1], false);
    if (args.size() == 3 && args[0] == "measure" && args[1] == "--whole") return measure(args[2], true);
  } catch (const Error& error) {
    std::cerr << "lief_image_driver: " << error.describe() << "\n";
    return 2;
  }
  std::cerr << "usage: lief_image_driver check [--require-skeleton] PATH... | measure [--whole] FILE\n";
  return 2;
}
