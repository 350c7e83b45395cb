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

#include "core/io/file_io.h"

#if defined(__APPLE__)
#include <xlocale.h>
#endif

namespace machofix {

namespace {

// Reads of the input and copies of member data go in chunks this big: large enough for
// throughput, small enough that no member is ever held whole.
constexpr size_t kChunk = size_t{1} << 20;
// looks_like_archive decompresses at most this much of a compressed head.
constexpr uint64_t kProbeInput = uint64_t{1} << 20;
constexpr uint64_t kTarBlock = 512;
constexpr std::string_view kEmptyZip = "PK\x05\x06";  // a zip's end record, first: no members
constexpr const char* kChangedMeanwhile = "the archive changed while it was being rewritten";

[[noreturn]] void system_fail(const std::string& what) { fail(what + ": " + std::strerror(errno)); }

[[noreturn]] void library_fail(archive* handle, const std::string& what) {
  const char* why = archive_error_string(handle);
  fail(what + ": " + (why ? why : "libarchive gave no reason"));
}

// Member names come from the archive: messages show control characters escaped.
std::string printable(const std::string& name) {
  std::string out;
  for (unsigned char c : name) {
    if (c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
      continue;
    }
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
    out += escaped;
  }
  return out;
}

struct ReadFree {
  void operator()(archive* handle) const { archive_read_free(handle); }
};
struct WriteFree {
  void operator()(archive* handle) const { archive_write_free(handle); }
};
struct EntryFree {
  void operator()(archive_entry* entry) const { archive_entry_free(entry); }
};
using ReadHandle = std::unique_ptr<archive, ReadFree>;
using WriteHandle = std::unique_ptr<archive, WriteFree>;
using EntryCopy = std::unique_ptr<archive_entry, EntryFree>;

// ---- Signatures ----

bool has_bytes(const Bytes& bytes, uint64_t offset, std::string_view expected) {
  if (!fits(offset, expected.size(), bytes.size())) return false;
  for (size_t i = 0; i < expected.size(); ++i)
    if (bytes.u8(offset + i, "signature") != static_cast<uint8_t>(expected[i])) return false;
  return true;
}

// A tar numeric field: octal digits, perhaps led by spaces and ended by a space or NUL.
std::optional<uint64_t> octal_field(const Bytes& block, uint64_t offset, uint64_t length) {
  uint64_t value = 0;
  bool digits = false, ended = false;
  for (uint64_t i = 0; i < length; ++i) {
    uint8_t c = block.u8(offset + i, "tar header field");
    if (c >= '0' && c <= '7' && !ended) {
      value = value * 8 + (c - '0');
      digits = true;
    } else if (c == ' ' || c == 0) {
      ended = digits;
    } else {
      return std::nullopt;
    }
  }
  if (!digits) return std::nullopt;
  return value;
}

// A ustar header (POSIX "ustar\0" or GNU "ustar ") whose checksum is right: the magic
// alone could occur in other data by chance. Old writers summed signed chars; both count.
bool is_tar_header(const Bytes& block) {
  if (block.size() < kTarBlock || !has_bytes(block, 257, "ustar")) return false;
  std::optional<uint64_t> stored = octal_field(block, 148, 8);
  if (!stored) return false;
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (uint64_t i = 0; i < kTarBlock; ++i) {
    uint8_t c = (i >= 148 && i < 156) ? ' ' : block.u8(i, "tar header");
    unsigned_sum += c;
    signed_sum += static_cast<int8_t>(c);
  }
  return unsigned_sum == *stored || signed_sum == static_cast<int64_t>(*stored);
}

bool is_compressed(const Bytes& head) {
  return has_bytes(head, 0, "\x1f\x8b") || has_bytes(head, 0, std::string_view("\xfd" "7zXZ\0", 6)) ||
         has_bytes(head, 0, "\x28\xb5\x2f\xfd");
}

// The compressions machofix reads and writes back: the ones the issue names.
void support_filters(archive* reader) {
  archive_read_support_filter_gzip(reader);
  archive_read_support_filter_xz(reader);
  archive_read_support_filter_zstd(reader);  // ARCHIVE_WARN: through the zstd program
}

// Whether the first 512 bytes a compressed head decompresses to are a tar header.
bool decompresses_to_tar(const Bytes& head) {
  Bytes probe = head.sub(0, std::min(head.size(), kProbeInput), "compressed head");
  ReadHandle reader(archive_read_new());
  if (!reader) throw std::bad_alloc();
  support_filters(reader.get());
  archive_read_support_format_raw(reader.get());
  if (archive_read_open_memory(reader.get(), probe.data(), probe.size()) != ARCHIVE_OK) return false;
  archive_entry* entry = nullptr;
  if (archive_read_next_header(reader.get(), &entry) != ARCHIVE_OK) return false;
  std::vector<uint8_t> block(kTarBlock);
  size_t got = 0;
  while (got < block.size()) {
    la_ssize_t more = archive_read_data(reader.get(), block.data() + got, block.size() - got);
    if (more <= 0) break;
    got += static_cast<size_t>(more);
  }
  return got == block.size() && is_tar_header(Bytes(block));
}

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

// ---- The input ----

// The input archive, read with pread through one descriptor: both passes read the same
// file even when its path is replaced meanwhile (in place, our own rename does that).
class InputFile {
 public:
  explicit InputFile(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_.get() < 0) system_fail("cannot open the archive");
    struct stat info;
    if (fstat(fd_.get(), &info) != 0) system_fail("cannot stat the archive");
    if (!S_ISREG(info.st_mode)) fail("not a regular file");
    size_ = static_cast<uint64_t>(info.st_size);
    buffer_.resize(kChunk);
  }

  bool starts_with(std::string_view signature) const {
    std::vector<uint8_t> head(signature.size());
    ssize_t got = pread(fd_.get(), head.data(), head.size(), 0);
    return got == static_cast<ssize_t>(head.size()) && has_bytes(Bytes(head), 0, signature);
  }

  // A reader of the archive from its start; this object must outlive it.
  ReadHandle open_reader() {
    ReadHandle reader(archive_read_new());
    if (!reader) throw std::bad_alloc();
    support_filters(reader.get());
    archive_read_support_format_tar(reader.get());
    // The seekable zip reader follows the central directory, which is what unzip trusts;
    // the streaming one would take a zip cut before its directory for a shorter whole one.
    archive_read_support_format_zip_seekable(reader.get());
    position_ = 0;
    archive_read_set_read_callback(reader.get(), &InputFile::read);
    archive_read_set_skip_callback(reader.get(), &InputFile::skip);
    archive_read_set_seek_callback(reader.get(), &InputFile::seek);
    archive_read_set_callback_data(reader.get(), this);
    if (archive_read_open1(reader.get()) != ARCHIVE_OK) library_fail(reader.get(), "cannot read it as an archive");
    return reader;
  }

 private:
  static la_ssize_t read(archive* handle, void* self, const void** data) {
    auto* file = static_cast<InputFile*>(self);
    for (;;) {
      ssize_t got = retry_on_eintr([&] { return pread(file->fd_.get(), file->buffer_.data(), file->buffer_.size(), static_cast<off_t>(file->position_)); });
      if (got < 0) {
        int error = errno;
        archive_set_error(handle, error, "cannot read the archive: %s", std::strerror(error));
        return -1;
      }
      file->position_ += static_cast<uint64_t>(got);
      *data = file->buffer_.data();
      return got;
    }
  }

  static la_int64_t skip(archive*, void* self, la_int64_t request) {
    auto* file = static_cast<InputFile*>(self);
    uint64_t left = file->size_ > file->position_ ? file->size_ - file->position_ : 0;
    uint64_t step = request > 0 ? std::min<uint64_t>(static_cast<uint64_t>(request), left) : 0;
    file->position_ += step;
    return static_cast<la_int64_t>(step);
  }

  static la_int64_t seek(archive* handle, void* self, la_int64_t offset, int whence) {
    auto* file = static_cast<InputFile*>(self);
    int64_t base = whence == SEEK_SET ? 0 : static_cast<int64_t>(whence == SEEK_CUR ? file->position_ : file->size_);
    if ((offset < 0 && -offset > base) || (offset > 0 && base > INT64_MAX - offset)) {
      archive_set_error(handle, EINVAL, "seek outside the archive");
      return ARCHIVE_FATAL;
    }
    file->position_ = static_cast<uint64_t>(base + offset);
    return static_cast<la_int64_t>(file->position_);
  }

  Descriptor fd_;
  uint64_t size_ = 0;
  uint64_t position_ = 0;
  std::vector<uint8_t> buffer_;
};

// The next entry, or null at the end. A warning (a name the locale cannot show) is not
// damage; ARCHIVE_RETRY (a bad header libarchive would skip) is: skipping loses a member.
archive_entry* next_entry(archive* reader) {
  archive_entry* entry = nullptr;
  int status = archive_read_next_header(reader, &entry);
  if (status == ARCHIVE_EOF) return nullptr;
  if (status != ARCHIVE_OK && status != ARCHIVE_WARN) library_fail(reader, "cannot read the next member's header");
  return entry;
}

// next_entry, with an error naming the member the damage follows.
archive_entry* next_entry_after(archive* reader, const std::string* previous) {
  try {
    return next_entry(reader);
  } catch (Error& error) {
    error.in_part(previous ? "after member " + printable(*previous) : "first member");
    throw;
  }
}

std::string entry_name(archive_entry* entry) {
  if (const char* name = archive_entry_pathname(entry)) return name;
  if (const char* name = archive_entry_pathname_utf8(entry)) return name;
  return "";
}

// A hard link shares the data of the member it names; only the named one is fixed.
bool is_regular(archive_entry* entry) {
  return archive_entry_filetype(entry) == AE_IFREG && archive_entry_hardlink(entry) == nullptr;
}

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

uint64_t regular_file_size(const std::string& path) {
  struct stat info;
  if (lstat(path.c_str(), &info) != 0) system_fail("the fixed member's file is gone");
  if (!S_ISREG(info.st_mode)) fail("the fixed member's file is not a regular file");
  return static_cast<uint64_t>(info.st_size);
}

// A fixer's error without the temporary file's name, which means nothing to the user.
std::string where_in_member(const Error& error) {
  std::string out;
  if (!error.part().empty()) out += error.part() + ": ";
  if (error.offset()) out += "offset " + hex(*error.offset()) + ": ";
  return out + error.problem();
}

// ---- What the first pass learns ----

struct MemberPlan {
  std::string name;
  int64_t size = 0;         // as the header says: the write pass checks it reads the same archive
  std::string replacement;  // the temporary file with the fixed content; empty: copied unchanged
};

struct ArchivePlan {
  int format = 0;            // libarchive's format code for the writer
  std::vector<int> filters;  // compression filter codes, the one next to the tar first
  std::vector<MemberPlan> members;
};

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

// ---- The second pass: write ----

// libarchive's output, appended to an AtomicOutput. An exception must not cross
// libarchive's C frames: it is kept and rethrown once libarchive has returned.
class OutputSink {
 public:
  explicit OutputSink(AtomicOutput& output) : output_(output) {}

  void attach(archive* writer) {
    if (archive_write_open(writer, this, nullptr, &OutputSink::write, nullptr) != ARCHIVE_OK)
      library_fail(writer, "cannot start the new archive");
  }

  // After a libarchive call on `writer` failed: what the output failed with, else
  // libarchive's reason.
  [[noreturn]] void fail(archive* writer, const std::string& what) {
    if (failure_) std::rethrow_exception(failure_);
    library_fail(writer, what);
  }

 private:
  static la_ssize_t write(archive* handle, void* self, const void* data, size_t length) {
    auto* sink = static_cast<OutputSink*>(self);
    try {
      sink->output_.write_at(sink->position_, static_cast<const uint8_t*>(data), length);
      sink->position_ += length;
      return static_cast<la_ssize_t>(length);
    } catch (...) {
      sink->failure_ = std::current_exception();
      archive_set_error(handle, EIO, "cannot write the output");
      return -1;
    }
  }

  AtomicOutput& output_;
  uint64_t position_ = 0;
  std::exception_ptr failure_;
};

void set_format(archive* writer, int format) {
  int status = format == ARCHIVE_FORMAT_ZIP                  ? archive_write_set_format_zip(writer)
               : format == ARCHIVE_FORMAT_TAR_GNUTAR          ? archive_write_set_format_gnutar(writer)
               : format == ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE ? archive_write_set_format_pax(writer)
                                                              : archive_write_set_format_ustar(writer);
  if (status != ARCHIVE_OK) library_fail(writer, "cannot write this archive format");
}

void add_filter(archive* writer, int code) {
  // ARCHIVE_WARN: libarchive runs the compressor program instead of its library.
  if (archive_write_add_filter(writer, code) < ARCHIVE_WARN) library_fail(writer, "cannot write this compression");
  // gzip's header would carry the time of writing: the same input must give the same bytes.
  if (code == ARCHIVE_FILTER_GZIP && archive_write_set_filter_option(writer, "gzip", "timestamp", nullptr) != ARCHIVE_OK)
    library_fail(writer, "cannot leave the time out of the gzip header");
}

WriteHandle open_writer(const ArchivePlan& plan, OutputSink& sink) {
  WriteHandle writer(archive_write_new());
  if (!writer) throw std::bad_alloc();
  set_format(writer.get(), plan.format);
  for (int code : plan.filters) add_filter(writer.get(), code);
  // A plain tar ends padded to whole 10 KiB records, as tar writes it; padding after a
  // compressed stream or a zip's end record would be trailing garbage.
  if (!plan.filters.empty() || plan.format == ARCHIVE_FORMAT_ZIP) archive_write_set_bytes_in_last_block(writer.get(), 1);
  sink.attach(writer.get());
  return writer;
}

// libarchive names the member's zip method in the format name ("ZIP 1.0 (uncompressed)",
// "ZIP 2.0 (deflation)"). A stored member stays stored (a model may be stored to be
// mapped in place); any other method becomes deflate, the only other one libarchive writes.
void keep_zip_method(archive* reader, archive* writer) {
  const char* name = archive_format_name(reader);
  bool stored = name && std::strstr(name, "(uncompressed)");
  int status = stored ? archive_write_zip_set_compression_store(writer) : archive_write_zip_set_compression_deflate(writer);
  if (status != ARCHIVE_OK) library_fail(writer, "cannot choose the member's compression");
}

void write_data(archive* writer, OutputSink& sink, const uint8_t* data, size_t length) {
  while (length > 0) {
    la_ssize_t taken = archive_write_data(writer, data, length);
    if (taken < 0) sink.fail(writer, "cannot write the member's data");
    if (taken == 0) fail("libarchive took no more of the member's data");
    data += taken, length -= static_cast<size_t>(taken);
  }
}

// The member's data from the input to the output, through `buffer`. libarchive fills the
// holes of a sparse member with zeros; the count is checked because a tar writer pads a
// short member with zeros without a word.
void stream_data(archive* reader, archive* writer, OutputSink& sink, int64_t size, std::vector<uint8_t>& buffer) {
  uint64_t copied = 0;
  for (;;) {
    la_ssize_t got = archive_read_data(reader, buffer.data(), buffer.size());
    if (got == 0) break;
    if (got < 0) library_fail(reader, "cannot read the member's data");
    write_data(writer, sink, buffer.data(), static_cast<size_t>(got));
    copied += static_cast<uint64_t>(got);
  }
  if (copied != static_cast<uint64_t>(std::max<int64_t>(size, 0)))
    fail("the member has " + std::to_string(copied) + " bytes of data where its header says " + std::to_string(size));
}

void copy_file_data(const std::string& path, archive* writer, OutputSink& sink, uint64_t size, std::vector<uint8_t>& buffer) {
  Descriptor in(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (in.get() < 0) system_fail("cannot open the fixed member");
  for (uint64_t offset = 0; offset < size;) {
    ssize_t got = retry_on_eintr([&] { return pread(in.get(), buffer.data(), std::min<uint64_t>(buffer.size(), size - offset), static_cast<off_t>(offset)); });
    if (got < 0) system_fail("cannot read the fixed member");
    if (got == 0) fail("the fixed member became shorter while it was being written");
    write_data(writer, sink, buffer.data(), static_cast<size_t>(got));
    offset += static_cast<uint64_t>(got);
  }
}

void write_header(archive* writer, OutputSink& sink, archive_entry* header) {
  // ARCHIVE_WARN: a name not in the locale's charset, written as the bytes it was read as.
  int status = archive_write_header(writer, header);
  if (status != ARCHIVE_OK && status != ARCHIVE_WARN) sink.fail(writer, "cannot write the member's header");
}

// One member into the new archive: its header as read (every field libarchive knows:
// name, mode, owner, times with nanoseconds, link target, xattrs, ACLs), with the
// fixed content and its size when there is one, else with its own data.
void copy_member(archive* reader, archive* writer, OutputSink& sink, archive_entry* entry, const MemberPlan& member,
                 bool zip, std::vector<uint8_t>& buffer) {
  EntryCopy header(archive_entry_clone(entry));
  if (!header) throw std::bad_alloc();
  // The holes of a sparse member are written as zeros: the content is what is kept.
  archive_entry_sparse_clear(header.get());
  if (zip) keep_zip_method(reader, writer);
  if (member.replacement.empty()) {
    write_header(writer, sink, header.get());
    stream_data(reader, writer, sink, archive_entry_size(header.get()), buffer);
    return;
  }
  uint64_t size = regular_file_size(member.replacement);
  archive_entry_set_size(header.get(), static_cast<la_int64_t>(size));
  write_header(writer, sink, header.get());
  copy_file_data(member.replacement, writer, sink, size, buffer);
}

const MemberPlan& same_member(const ArchivePlan& plan, size_t index, archive_entry* entry) {
  if (index >= plan.members.size() || plan.members[index].name != entry_name(entry) ||
      plan.members[index].size != archive_entry_size(entry))
    fail(kChangedMeanwhile);
  return plan.members[index];
}

// Returns the size of the archive written.
uint64_t write_archive(InputFile& input, const ArchivePlan& plan, const std::string& target, mode_t mode, bool durable) {
  AtomicOutput output(target, mode, durable);
  OutputSink sink(output);
  WriteHandle writer = open_writer(plan, sink);
  ReadHandle reader = input.open_reader();
  std::vector<uint8_t> buffer(kChunk);
  size_t index = 0;
  while (archive_entry* entry = next_entry_after(reader.get(), index ? &plan.members[index - 1].name : nullptr)) {
    const MemberPlan& member = same_member(plan, index++, entry);
    try {
      copy_member(reader.get(), writer.get(), sink, entry, member, plan.format == ARCHIVE_FORMAT_ZIP, buffer);
    } catch (Error& error) {
      error.in_part(printable(member.name));
      throw;
    }
  }
  if (index != plan.members.size()) fail(kChangedMeanwhile);
  if (archive_write_close(writer.get()) != ARCHIVE_OK) sink.fail(writer.get(), "cannot finish the new archive");
  uint64_t size = output.size();
  output.commit();
  return size;
}

}  // namespace

bool looks_like_archive(const Bytes& head) {
  if (has_bytes(head, 0, "PK\x03\x04") || has_bytes(head, 0, kEmptyZip)) return true;
  if (is_tar_header(head)) return true;
  return is_compressed(head) && decompresses_to_tar(head);
}

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
