// The second pass of an archive rewrite: the new archive, member by member, each
// header as read and each member's data from the input or, fixed, from its temporary
// file, in the input's format and compression, into an AtomicOutput.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>

#include "core/base/error.h"
#include "core/base/util.h"
#include "core/io/archive_internal.h"
#include "core/io/file_io.h"

namespace machofix::archive_io {

namespace {

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

}  // namespace

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

}  // namespace machofix::archive_io
