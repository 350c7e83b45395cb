#include "core/io/archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <locale.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <string_view>

#include "core/io/archive_internal.h"
#include "core/io/file_io.h"

#if defined(__APPLE__)
#include <xlocale.h>
#endif

namespace machofix {

using namespace archive_io;

namespace {

// libarchive converts names between UTF-8 (pax records, zip's UTF-8 flag) and the
// charset of the thread's locale. In the C locale a non-ASCII name cannot be converted:
// its bytes are still kept, but pax then marks it "hdrcharset=BINARY", which GNU tar
// warns about on every listing. Archive names are UTF-8 in practice, so the rewrite
// runs in a UTF-8 locale on this thread (where one exists) and restores the caller's.
class Utf8Locale {
 public:
  Utf8Locale() {
    for (const char* name : {"C.UTF-8", "C.utf8", "UTF-8", "en_US.UTF-8"})
      if ((utf8_ = newlocale(LC_CTYPE_MASK, name, locale_t(0)))) break;
    if (utf8_) previous_ = uselocale(utf8_);
  }
  ~Utf8Locale() {
    if (!utf8_) return;
    uselocale(previous_);
    freelocale(utf8_);
  }
  Utf8Locale(const Utf8Locale&) = delete;
  Utf8Locale& operator=(const Utf8Locale&) = delete;

 private:
  locale_t utf8_ = locale_t(0);
  locale_t previous_ = locale_t(0);
};

// ---- The temporary directory ----

// A directory only this run uses (mode 0700), removed with everything in it on every path.
class TempDirectory {
 public:
  explicit TempDirectory(const std::string& root) {
    std::string pattern = root + "/machofix-archive-XXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    if (!mkdtemp(name.data())) system_fail("cannot make a temporary directory in " + root);
    path_ = name.data();
  }
  ~TempDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDirectory(const TempDirectory&) = delete;
  TempDirectory& operator=(const TempDirectory&) = delete;

  // A generated name: a member's own name ("../x", "/etc/x") never becomes a path.
  std::string file_for(size_t index) const { return path_ + "/member-" + std::to_string(index); }

  uint64_t free_bytes() const {
    struct statvfs info;
    if (statvfs(path_.c_str(), &info) != 0) system_fail("cannot see the free space in " + path_);
    return static_cast<uint64_t>(info.f_bavail) * info.f_frsize;
  }

 private:
  std::string path_;
};

uint64_t temp_budget(const ArchiveOptions& options, const TempDirectory& temp) {
  if (options.max_temp_bytes != 0) return options.max_temp_bytes;
  uint64_t free = temp.free_bytes();
  return free - free / 20;  // the rest is left for the system and the output
}

// A fixer's error without the temporary file's name, which means nothing to the user.
std::string where_in_member(const Error& error) {
  std::string out;
  if (!error.part().empty()) out += error.part() + ": ";
  if (error.offset()) out += "offset " + hex(*error.offset()) + ": ";
  return out + error.problem();
}

// The format the writer uses: one that can say everything the input's headers said.
// libarchive reports the dialect per entry (a pax archive has plain ustar headers where
// nothing needs more), so the richest seen wins: pax, then GNU, then ustar. Ustar stays
// ustar (restricted pax would add a "path" record to every non-ASCII name); the one
// thing it cannot hold, a member fixed to over 8 GiB, fails the write with an Error.
int merged_format(int so_far, int entry_format) {
  if ((entry_format & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_ZIP) return ARCHIVE_FORMAT_ZIP;
  if (so_far == ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE || entry_format == ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE)
    return ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE;
  if (so_far == ARCHIVE_FORMAT_TAR_GNUTAR || entry_format == ARCHIVE_FORMAT_TAR_GNUTAR) return ARCHIVE_FORMAT_TAR_GNUTAR;
  return ARCHIVE_FORMAT_TAR_USTAR;
}

std::vector<int> filters_of(archive* reader) {
  std::vector<int> filters;
  for (int i = 0; i < archive_filter_count(reader); ++i)
    if (archive_filter_code(reader, i) != ARCHIVE_FILTER_NONE) filters.push_back(archive_filter_code(reader, i));
  return filters;
}

// ---- The first pass: fix ----

// Every regular member goes through a temporary file to the fixer. Fixed ones stay
// there for the write pass; the others are removed at once, so the directory holds at
// most the member being fixed plus the fixed ones.
class FixPass {
 public:
  FixPass(const MemberFixer& fix, const TempDirectory& temp, uint64_t budget, ArchiveResult& result)
      : fix_(fix), temp_(temp), budget_left_(budget), result_(result) {}

  ArchivePlan run(InputFile& input) {
    ArchivePlan plan;
    ReadHandle reader = input.open_reader();
    while (archive_entry* entry = next_entry_after(reader.get(), last_name(plan))) {
      MemberPlan member{entry_name(entry), archive_entry_size(entry), ""};
      try {
        if (is_regular(entry)) member.replacement = fix_member(reader.get(), entry, member.name, plan.members.size());
      } catch (Error& error) {
        error.in_part(printable(member.name));
        throw;
      }
      plan.format = merged_format(plan.format, archive_format(reader.get()));
      plan.members.push_back(std::move(member));
    }
    plan.filters = filters_of(reader.get());
    return plan;
  }

 private:
  static const std::string* last_name(const ArchivePlan& plan) {
    return plan.members.empty() ? nullptr : &plan.members.back().name;
  }

  // The temporary file with the fixed content, or "" when the member stays as it is.
  std::string fix_member(archive* reader, archive_entry* entry, const std::string& name, size_t index) {
    // Its data cannot be read, so it could not be copied into a new archive either.
    if (archive_entry_is_encrypted(entry)) fail("the member is encrypted: an archive with encrypted members cannot be rewritten");
    std::string path = temp_.file_for(index);
    std::optional<uint64_t> size = extract(reader, entry, path);
    if (!size) {
      result_.failures.push_back({name, "not fixed: it does not fit in the temporary space left (" +
                                            std::to_string(budget_left_) + " bytes); copied unchanged"});
      return "";
    }
    try {
      if (!fix_(ArchiveMember{name, true, *size}, path)) {
        ::unlink(path.c_str());
        return "";
      }
      uint64_t fixed_size = regular_file_size(path);
      budget_left_ -= std::min(fixed_size, budget_left_);
      result_.changed.push_back(name);
      return path;
    } catch (Error& error) {
      ::unlink(path.c_str());
      if (error.refusal()) throw;  // the whole archive is refused with the member
      result_.failures.push_back({name, where_in_member(error)});
      return "";
    }
  }

  // Streams the member's data into a new file at `path`; its size, or nothing (and no
  // file) when it would not fit in the budget: a zip bomb stops at the budget.
  std::optional<uint64_t> extract(archive* reader, archive_entry* entry, const std::string& path) {
    int64_t declared = archive_entry_size_is_set(entry) ? archive_entry_size(entry) : 0;
    if (declared < 0 || static_cast<uint64_t>(declared) > budget_left_) return std::nullopt;
    Descriptor out(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (out.get() < 0) system_fail("cannot create a temporary file");
    uint64_t end = static_cast<uint64_t>(declared);
    for (;;) {
      const void* block = nullptr;
      size_t length = 0;
      la_int64_t offset = 0;
      int status = archive_read_data_block(reader, &block, &length, &offset);
      if (status == ARCHIVE_EOF) break;
      // A warning here is a bad CRC: copying that data into a new archive would hide the damage.
      if (status != ARCHIVE_OK) library_fail(reader, "cannot read the member's data");
      if (offset < 0 || !fits(static_cast<uint64_t>(offset), length, budget_left_)) {
        ::unlink(path.c_str());
        return std::nullopt;
      }
      if (!write_fully_at(out.get(), static_cast<const uint8_t*>(block), length, static_cast<uint64_t>(offset)))
        system_fail("cannot write a temporary file");
      end = std::max<uint64_t>(end, static_cast<uint64_t>(offset) + length);
    }
    // A sparse member may end in a hole.
    if (ftruncate(out.get(), static_cast<off_t>(end)) != 0) system_fail("cannot size a temporary file");
    return end;
  }

  const MemberFixer& fix_;
  const TempDirectory& temp_;
  uint64_t budget_left_;
  ArchiveResult& result_;
};

}  // namespace

ArchiveResult rewrite_archive(const std::string& input_path, const std::string& output, mode_t mode,
                              const MemberFixer& fix, const ArchiveOptions& options) {
  ArchiveResult result;
  Utf8Locale names_in_utf8;
  try {
    InputFile input(input_path);
    // A zip that is only its end record has no members; libarchive's reader refuses it.
    if (input.starts_with(kEmptyZip)) return result;
    TempDirectory temp(options.temp_root.empty() ? temp_directory() : options.temp_root);
    ArchivePlan plan = FixPass(fix, temp, temp_budget(options, temp), result).run(input);
    result.members = plan.members.size();
    if (options.whole_or_nothing && !options.dry_run && !result.failures.empty())
      throw Error(result.failures.front().error + " (nothing written: every model member must be fixed)")
          .in_part(printable(result.failures.front().member));
    if (result.changed.empty() || options.dry_run) return result;
    result.output_size = write_archive(input, plan, output, mode, options.durable);
    result.written = true;
  } catch (Error& error) {
    error.in_file(options.input_name.empty() ? input_path : options.input_name);
    throw;
  }
  return result;
}

}  // namespace machofix
