#include "fuzz/targets.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tests/support/checked_options.h"
#include "core/lief/lief_check.h"
#include "core/format/codesign.h"
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
namespace {

// A memfd holding the input: repair_pte wants a MappedFile, and a dry run writes nothing.
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

Target target_named(const std::string& name) {
  if (name == "macho") return run_macho;
  if (name == "codesign") return run_codesign;
  if (name == "pte") return MACHOFIX_FUZZ_HAS_PTE ? run_pte : nullptr;
  return nullptr;
}

}  // namespace machofix::fuzz
