#include "fuzz/targets.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "tests/support/checked_options.h"
#include "tests/support/macho_builder.h"
#include "core/app/bundle.h"
#include "core/app/library_files.h"
#include "core/lief/lief_check.h"
#include "core/format/codesign.h"
#include "core/format/exports.h"
#include "core/format/tbd.h"
#include "core/base/error.h"
#include "core/format/fat.h"
#include "core/format/imports.h"
#include "core/jobs/job.h"
#include "core/format/loader_rules.h"
#include "core/format/macho.h"
#include "core/format/macho_format.h"
#include "core/rewrite/macho_repair.h"
#include "core/rewrite/prune.h"
#include "core/rewrite/weak_link.h"

#if __has_include("core/io/pte.h")
#include "core/io/file_io.h"
#include "core/io/pte.h"
#define MACHOFIX_FUZZ_HAS_PTE 1
#else
#define MACHOFIX_FUZZ_HAS_PTE 0
#endif

namespace machofix::fuzz {

namespace {

// An invariant that does not depend on the input being valid failed: a bug.
[[noreturn]] void invariant_failed(const char* what, const std::string& detail) {
  std::fprintf(stderr, "machofix fuzz: invariant failed: %s: %s\n", what, detail.c_str());
  std::fflush(stderr);
  std::abort();
}

// The options vary with the input (deterministically: a reproducer replays the
// same way) so that every policy and signing branch is reached.
RepairOptions options_for(size_t size) {
  RepairOptions options = test::checked();
  options.sign_unsigned = size & 1;
  options.replace_identity = size & 2;
  if (size & 4) options.prune.keep = {"*libSystem*"};
  if ((size & 24) == 8) options.prune.only = {"*lib0*", "libomp.dylib"};
  options.file_name = "fuzz.dylib";
  return options;
}

// Every 64-bit slice of a thin or universal file, as the core sees them.
std::vector<Bytes> slices_of(const Bytes& file) {
  std::vector<Bytes> slices;
  if (!looks_like_universal(file)) {
    slices.push_back(file);
    return slices;
  }
  Universal universal = parse_universal(file);
  fat_header_size(universal);
  for (const FatSlice& entry : universal.slices)
    if (entry.cputype & macho::CPU_ARCH_ABI64) slices.push_back(file.sub(entry.offset, entry.size, "universal slice"));
  return slices;
}

// The stages one by one, as prune_slice runs them, and every helper on the way.
void analyze_slice(const Bytes& slice, const RepairOptions& options) {
  MachO image = parse_macho(slice);
  image.two_level();
  image.arch();
  image.filetype_name();
  image.load_commands_end();
  image.first_section_offset();
  ImportScan scan = scan_imports(image);
  for (const Import& import : scan.imports) resolve_ordinal(image, import.ordinal);
  SliceAnalysis analysis = analyze(image, scan);
  PrunePlan plan = plan_prune(image, analysis, options.prune);
  std::vector<uint8_t> after = apply_prune(image, scan, plan);
  if (plan.removal_count() > 0) verify_prune(image, scan, plan, Bytes(after), cross_check_with_lief);
  if (after.size() != slice.size()) invariant_failed("apply_prune", "the slice changed size");
  // --weak-link of every dependency it allows.
  WeakLinkPlan weak = plan_weak_link(image, scan, {"*"});
  std::vector<uint8_t> weakened = apply_weak_link(image, scan, weak.ordinals());
  verify_weak_link(image, scan, weak.ordinals(), Bytes(weakened), cross_check_with_lief);
}

template <typename F>
bool expect_error(F&& f) {
  try {
    f();
    return true;
  } catch (const Error& error) {
    error.describe();
    return false;
  }
}

// A memfd holding the input: repair_pte and LibraryFiles want a file, and nothing is
// written anywhere.
class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, size_t size) {
    fd_ = memfd_create("machofix-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) return;
    for (size_t done = 0; done < size;) {
      ssize_t written = write(fd_, data + done, size - done);
      if (written <= 0) {
        close(fd_);
        fd_ = -1;
        return;
      }
      done += static_cast<size_t>(written);
    }
  }
  ~MemoryFile() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_ = -1;
};

}  // namespace

void run_macho(const uint8_t* data, size_t size) {
  Bytes file(data, size);
  detect_kind(file);
  RepairOptions options = options_for(size);
  // The loader rules judge any bytes: they report what is wrong, never throw.
  try {
    check_image_rules(file);
  } catch (const Error& error) {
    invariant_failed("check_image_rules threw", error.describe());
  }
  expect_error([&] {
    for (const Bytes& slice : slices_of(file)) expect_error([&] { analyze_slice(slice, options); });
  });
  expect_error([&] {
    MachOReport report = inspect_macho(file, options);
    signature_failures(report);
    report.removed_count();
  });
  expect_error([&] {
    MachORepair repair = prune_macho(file, options);
    if (!repair.report.changed) return;
    // What machofix writes, machofix must read back, and dyld must accept.
    try {
      inspect_macho(repair.output.bytes(), options);
    } catch (const Error& error) {
      invariant_failed("prune_macho output is rejected by inspect_macho", error.describe());
    }
    std::vector<RuleViolation> violations = check_image_rules(repair.output.bytes());
    if (!violations.empty()) invariant_failed("prune_macho output breaks a loader rule", describe(violations.front()));
  });
  expect_error([&] { sign_macho(file, options); });
}

void run_codesign(const uint8_t* data, size_t size) {
  Bytes file(data, size);
  std::vector<Bytes> slices;
  if (!expect_error([&] { slices = slices_of(file); })) return;
  for (const Bytes& slice : slices) {
    std::optional<MachO> parsed;
    if (!expect_error([&] { parsed = parse_macho(slice); })) continue;
    const MachO& image = *parsed;
    std::optional<CodeSignature> signature;
    bool readable = expect_error([&] { signature = read_code_signature(image); });
    if (readable && signature) {
      signature->linker_signed();
      signature->style();
      signature->identifier();
      signature->hash_type_names();
      signature->page_size();
      for (const CodeDirectory& directory : signature->code_directories) directory.name();
    }
    expect_error([&] { check_code_signature(image); });
    expect_error([&] { describe(check_code_signature(image).problems); });
    default_identifier(image, "fuzz.dylib");
    std::vector<uint8_t> original(slice.data(), slice.data() + slice.size());
    // Renewing, replacing and adding work on copies; each result is read again.
    auto recheck = [&](const std::vector<uint8_t>& bytes) {
      expect_error([&] {
        MachO again = parse_macho(Bytes(bytes.data(), bytes.size(), slice.base()));
        check_code_signature(again);
      });
    };
    if (readable && signature) {
      std::vector<uint8_t> renewed = original;
      if (expect_error([&] { renew_code_signature(renewed, slice.base()); })) recheck(renewed);
      std::vector<uint8_t> replaced = original;
      if (expect_error([&] { replace_with_adhoc_signature(replaced, slice.base()); })) recheck(replaced);
    }
    if (readable && !signature) {
      std::vector<uint8_t> added;
      if (expect_error([&] { added = add_adhoc_signature(image, "fuzz"); })) recheck(added);
    }
  }
}

#if MACHOFIX_FUZZ_HAS_PTE
void run_pte(const uint8_t* data, size_t size) {
  Bytes file(data, size);
  looks_like_pte(file);
  looks_like_ptd(file);
  RepairOptions options = options_for(size);
  bool inspected = expect_error([&] { inspect_pte(file, options); });
  if (!inspected) return;
  MemoryFile memory(data, size);
  if (!memory.ok()) return;
  expect_error([&] {
    MappedFile input(memory.path());
    repair_pte(input, memory.path(), options, /*dry_run=*/true);
  });
}
#else
void run_pte(const uint8_t*, size_t) {}  // core/io/pte.h does not exist yet
#endif

// ---- check --app's other readers: .tbd stubs, Info.plists, exports tries ----------

namespace {

// The targets check --app asks a stub for: what the fixtures' applications run as, and
// those that take another branch (i386's ObjC 1 names, Catalyst taking macOS).
constexpr const char* kStubTargets[] = {"arm64-macos", "x86_64-macos", "arm64e-macos", "i386-macos", "arm64-maccatalyst"};

void check_library(const TbdLibrary& library) {
  std::vector<std::string> targets(std::begin(kStubTargets), std::end(kStubTargets));
  targets.insert(targets.end(), library.targets.begin(), library.targets.end());
  for (const std::string& target : targets) {
    library.has_target(target);
    std::vector<std::string> names = library.exports(target);
    if (!std::is_sorted(names.begin(), names.end()) || std::adjacent_find(names.begin(), names.end()) != names.end())
      invariant_failed("TbdLibrary::exports", "the names are not sorted and unique for " + target);
    std::vector<std::string> libraries = library.reexported_libraries(target);
    if (std::set<std::string>(libraries.begin(), libraries.end()).size() != libraries.size())
      invariant_failed("TbdLibrary::reexported_libraries", "a library is listed twice for " + target);
  }
}

// LibraryFiles turns every problem of a file into OpenedLibrary::problem.
OpenedLibrary open_library(LibraryFiles& files, const std::string& path, const std::string& arch, uint32_t platform) {
  try {
    return files.open(path, arch, platform);
  } catch (const Error& error) {
    invariant_failed("LibraryFiles::open threw", error.describe());
  }
}

}  // namespace

void run_tbd(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  looks_like_tbd(text);
  TbdFile file;
  if (!expect_error([&] { file = parse_tbd(text); })) return;
  if (file.libraries.empty()) invariant_failed("parse_tbd", "a file without a library was accepted");
  for (const TbdLibrary& library : file.libraries) check_library(library);
  // As check --app meets it: a file among an application's libraries or in a sysroot.
  MemoryFile memory(data, size);
  if (!memory.ok()) return;
  LibraryFiles files;
  for (auto [arch, platform] : {std::pair{"arm64", kPlatformMacOS}, {"x86_64", kPlatformMacOS}, {"arm64", 6u}}) {
    OpenedLibrary opened = open_library(files, memory.path(), arch, platform);
    if (opened.image && !opened.image->stub) invariant_failed("LibraryFiles::open", "a stub was not read as one");
  }
  for (size_t index = 1; index < file.libraries.size(); ++index) {
    try {
      files.inlined(file.libraries[index].install_name, "arm64", kPlatformMacOS);
    } catch (const Error& error) {
      invariant_failed("LibraryFiles::inlined threw", error.describe());
    }
  }
}

namespace {

// A bundle in a fresh temporary directory, removed with it: in /dev/shm when there is
// one and TMPDIR is not set (on a disk, files cost several times what parsing does).
class TempBundle {
 public:
  TempBundle() {
    std::error_code ignored;
    std::filesystem::path parent = !std::getenv("TMPDIR") && std::filesystem::is_directory("/dev/shm", ignored)
                                       ? std::filesystem::path("/dev/shm")
                                       : std::filesystem::temp_directory_path();
    std::string pattern = (parent / "machofix-fuzz-XXXXXX").string();
    if (mkdtemp(pattern.data())) dir_ = pattern;
  }
  ~TempBundle() {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

bool write_file(const std::filesystem::path& path, const uint8_t* data, size_t size) {
  std::error_code ignored;
  std::filesystem::create_directories(path.parent_path(), ignored);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return static_cast<bool>(out.flush());
}

}  // namespace

void run_plist(const uint8_t* data, size_t size) {
  std::string name;
  bool named = expect_error([&] { name = info_plist_executable(Bytes(data, size)); });
  if (named && (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
                name.find('\0') != std::string::npos))
    invariant_failed("info_plist_executable", "'" + name + "' is not a file name");
  // The same bytes in a bundle on disk, as check --app finds its executable: for
  // every list that names one, and one refused list in 16 (files cost more than
  // parsing; which ones depends on the input alone, so that a reproducer replays).
  if (!named && size % 16 != 0) return;
  TempBundle bundle;
  if (bundle.dir().empty()) return;
  bool flat = size & 1;
  std::filesystem::path plist = flat ? bundle.dir() / "Info.plist" : bundle.dir() / "Contents" / "Info.plist";
  std::filesystem::path executables = flat ? bundle.dir() : bundle.dir() / "Contents" / "MacOS";
  if (!write_file(plist, data, size)) return;
  if (!is_app_bundle(bundle.dir().string())) invariant_failed("is_app_bundle", "a bundle with an Info.plist is not one");
  std::filesystem::path expected = executables / name;
  // A name the file system refuses (too long) is a bundle without its executable. In a
  // flat bundle "Info.plist" names the list itself, which is there: the bundle is
  // accepted, and its "executable" refused later as not Mach-O.
  bool names_the_list = flat && name == "Info.plist";
  bool present = named && (names_the_list || (name != "Info.plist" && name != "Contents" && write_file(expected, nullptr, 0)));
  std::string found;
  bool accepted = expect_error([&] { found = bundle_executable(bundle.dir().string()); });
  if (accepted && !present) invariant_failed("bundle_executable", "accepted a bundle without its executable: " + found);
  if (present && !accepted) invariant_failed("bundle_executable", "refused a bundle whose executable '" + name + "' is there");
  if (accepted && found != expected.string()) invariant_failed("bundle_executable", found + " instead of " + expected.string());
}

namespace {

// A dylib carrying `trie`: libSystem (1), libunused (2), libfoo (3), as the Mach-O
// seeds have them, so that a re-export ordinal may be valid or not.
std::vector<uint8_t> dylib_with_trie(const std::vector<uint8_t>& trie, bool dyld_info) {
  test::MachOBuilder builder;
  builder.header_padding(64).id_dylib("/usr/lib/libme.dylib");
  if (dyld_info) builder.dyld_info({{}, {}, {}, {}, trie});
  else builder.exports_trie(trie);
  return builder.symtab()
      .load_dylib("/usr/lib/libSystem.B.dylib")
      .load_dylib("/usr/lib/libunused.dylib")
      .load_dylib("/usr/lib/libfoo.dylib")
      .defined("_mine", 0x10)
      .build()
      .bytes;
}

}  // namespace

void run_exports(const uint8_t* data, size_t size) {
  // The walker alone, on the exact bytes: each terminal read as dyld reads it.
  expect_error([&] {
    Bytes trie(data, size);
    walk_exports_trie(trie, [&](const std::string&, uint64_t, Cursor& terminal) {
      uint64_t flags = terminal.uleb("export flags").value;
      if (flags & macho::EXPORT_SYMBOL_FLAGS_REEXPORT) {
        terminal.uleb("re-export library ordinal");
        terminal.cstr("re-exported symbol name");
      } else {
        terminal.uleb("export address");
        if (flags & macho::EXPORT_SYMBOL_FLAGS_STUB_AND_RESOLVER) terminal.uleb("resolver address");
      }
    });
  });
  std::vector<uint8_t> image_bytes = dylib_with_trie(std::vector<uint8_t>(data, data + size), size & 1);
  Bytes file(image_bytes.data(), image_bytes.size());
  std::optional<MachO> image;
  if (!expect_error([&] { image = parse_macho(file); })) invariant_failed("parse_macho", "the trie's dylib is refused");
  std::optional<ExportTable> table;
  std::optional<ImportScan> scan;
  expect_error([&] { table = read_exports(*image); });
  expect_error([&] {
    scan = scan_imports(*image);
    bound_imports(*scan);
  });
  if (table && scan) {
    // Each name's first terminal is its entry; scan_imports takes every re-export.
    std::set<std::pair<std::string, int>> scanned;
    for (const Import& import : scan->imports)
      if (import.source == ImportSource::ExportsTrie) scanned.emplace(std::string(import.symbol), import.ordinal);
    for (const auto& [name, entry] : table->names)
      if (entry.reexport && !scanned.count({name, entry.reexport_ordinal}))
        invariant_failed("read_exports and scan_imports", "re-export " + name + " is missing from scan_imports");
  }
  MemoryFile memory(image_bytes.data(), image_bytes.size());
  if (!memory.ok()) return;
  LibraryFiles files;
  OpenedLibrary opened = open_library(files, memory.path(), "arm64", kPlatformMacOS);
  if (opened.image && !table) invariant_failed("LibraryFiles::open", "opened a dylib whose exports read_exports refuses");
}

Target target_named(const std::string& name) {
  if (name == "macho") return run_macho;
  if (name == "codesign") return run_codesign;
  if (name == "pte") return MACHOFIX_FUZZ_HAS_PTE ? run_pte : nullptr;
  if (name == "tbd") return run_tbd;
  if (name == "plist") return run_plist;
  if (name == "exports") return run_exports;
  return nullptr;
}

}  // namespace machofix::fuzz
