// What the passes of an archive rewrite share (core/io/archive*.cc): the input read
// through one descriptor, libarchive's handles, the plan the fix pass makes and the
// write pass follows. Internal to core/io: archive.h is the interface.
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/bytes.h"
#include "core/base/descriptor.h"

namespace machofix::archive_io {

// Reads of the input and copies of member data go in chunks this big: large enough for
// throughput, small enough that no member is ever held whole.
constexpr size_t kChunk = size_t{1} << 20;
constexpr uint64_t kTarBlock = 512;
constexpr std::string_view kEmptyZip = "PK\x05\x06";  // a zip's end record, first: no members
constexpr const char* kChangedMeanwhile = "the archive changed while it was being rewritten";

[[noreturn]] void system_fail(const std::string& what);
[[noreturn]] void library_fail(archive* handle, const std::string& what);
// Member names come from the archive: messages show control characters escaped.
std::string printable(const std::string& name);

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

bool has_bytes(const Bytes& bytes, uint64_t offset, std::string_view expected);
// The compressions machofix reads and writes back: gzip, xz, zstd.
void support_filters(archive* reader);

// The input archive, read with pread through one descriptor: both passes read the same
// file even when its path is replaced meanwhile (in place, our own rename does that).
class InputFile {
 public:
  explicit InputFile(const std::string& path);
  bool starts_with(std::string_view signature) const;
  // A reader of the archive from its start; this object must outlive it.
  ReadHandle open_reader();

 private:
  static la_ssize_t read(archive* handle, void* self, const void** data);
  static la_int64_t skip(archive*, void* self, la_int64_t request);
  static la_int64_t seek(archive* handle, void* self, la_int64_t offset, int whence);

  Descriptor fd_;
  uint64_t size_ = 0;
  uint64_t position_ = 0;
  std::vector<uint8_t> buffer_;
};

// The next entry, or null at the end, with an error naming the member the damage
// follows (`previous`, null before the first).
archive_entry* next_entry_after(archive* reader, const std::string* previous);
std::string entry_name(archive_entry* entry);
// A hard link shares the data of the member it names; only the named one is fixed.
bool is_regular(archive_entry* entry);
uint64_t regular_file_size(const std::string& path);

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

// The second pass: the new archive, member by member as the plan says, written
// atomically to `target`; returns its size.
uint64_t write_archive(InputFile& input, const ArchivePlan& plan, const std::string& target, mode_t mode, bool durable);

}  // namespace machofix::archive_io
