// The input side of an archive rewrite: the file read through one descriptor for both
// passes, libarchive's reader set up the one way both passes use it, member entries.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/base/error.h"
#include "core/base/util.h"
#include "core/io/archive_internal.h"

namespace machofix::archive_io {

[[noreturn]] void system_fail(const std::string& what) { fail_system(what); }

[[noreturn]] void library_fail(archive* handle, const std::string& what) {
  const char* why = archive_error_string(handle);
  fail(what + ": " + (why ? why : "libarchive gave no reason"));
}

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

bool has_bytes(const Bytes& bytes, uint64_t offset, std::string_view expected) {
  if (!fits(offset, expected.size(), bytes.size())) return false;
  for (size_t i = 0; i < expected.size(); ++i)
    if (bytes.u8(offset + i, "signature") != static_cast<uint8_t>(expected[i])) return false;
  return true;
}

void support_filters(archive* reader) {
  archive_read_support_filter_gzip(reader);
  archive_read_support_filter_xz(reader);
  archive_read_support_filter_zstd(reader);  // ARCHIVE_WARN: through the zstd program
}

InputFile::InputFile(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
  if (fd_.get() < 0) system_fail("cannot open the archive");
  struct stat info;
  if (fstat(fd_.get(), &info) != 0) system_fail("cannot stat the archive");
  if (!S_ISREG(info.st_mode)) fail("not a regular file");
  size_ = static_cast<uint64_t>(info.st_size);
  buffer_.resize(kChunk);
}

bool InputFile::starts_with(std::string_view signature) const {
  std::vector<uint8_t> head(signature.size());
  ssize_t got = pread(fd_.get(), head.data(), head.size(), 0);
  return got == static_cast<ssize_t>(head.size()) && has_bytes(Bytes(head), 0, signature);
}

ReadHandle InputFile::open_reader() {
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

la_ssize_t InputFile::read(archive* handle, void* self, const void** data) {
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

la_int64_t InputFile::skip(archive*, void* self, la_int64_t request) {
  auto* file = static_cast<InputFile*>(self);
  uint64_t left = file->size_ > file->position_ ? file->size_ - file->position_ : 0;
  uint64_t step = request > 0 ? std::min<uint64_t>(static_cast<uint64_t>(request), left) : 0;
  file->position_ += step;
  return static_cast<la_int64_t>(step);
}

la_int64_t InputFile::seek(archive* handle, void* self, la_int64_t offset, int whence) {
  auto* file = static_cast<InputFile*>(self);
  int64_t base = whence == SEEK_SET ? 0 : static_cast<int64_t>(whence == SEEK_CUR ? file->position_ : file->size_);
  if ((offset < 0 && -offset > base) || (offset > 0 && base > INT64_MAX - offset)) {
    archive_set_error(handle, EINVAL, "seek outside the archive");
    return ARCHIVE_FATAL;
  }
  file->position_ = static_cast<uint64_t>(base + offset);
  return static_cast<la_int64_t>(file->position_);
}

// The next entry, or null at the end. A warning (a name the locale cannot show) is not
// damage; ARCHIVE_RETRY (a bad header libarchive would skip) is: skipping loses a member.
namespace {

archive_entry* next_entry(archive* reader) {
  archive_entry* entry = nullptr;
  int status = archive_read_next_header(reader, &entry);
  if (status == ARCHIVE_EOF) return nullptr;
  if (status != ARCHIVE_OK && status != ARCHIVE_WARN) library_fail(reader, "cannot read the next member's header");
  return entry;
}

}  // namespace

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

bool is_regular(archive_entry* entry) {
  return archive_entry_filetype(entry) == AE_IFREG && archive_entry_hardlink(entry) == nullptr;
}

uint64_t regular_file_size(const std::string& path) {
  struct stat info;
  if (lstat(path.c_str(), &info) != 0) system_fail("the fixed member's file is gone");
  if (!S_ISREG(info.st_mode)) fail("the fixed member's file is not a regular file");
  return static_cast<uint64_t>(info.st_size);
}

}  // namespace machofix::archive_io
