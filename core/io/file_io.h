// Reading files without copying them, and writing them so nothing is ever lost.
//
// Outputs go to a temporary file in the target's directory, are flushed, then
// renamed over the target (a new inode: the kernel caches code signatures per
// vnode). Until commit() the target is untouched; a failure, or a process killed
// half-way, leaves at most a temporary file that the next run in that directory
// removes (its name carries the writer's pid).
//
// "-" names standard input as an input and standard output as an output, so that
// pipelines (and the Python package) need no files of their own. Both go through an
// unlinked temporary file in $TMPDIR: machofix maps its input, and a pipe cannot be
// mapped; and standard output receives the output only once it is complete and
// verified (commit), so a failure writes nothing there.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/base/bytes.h"
#include "core/base/descriptor.h"
#include "core/base/progress.h"
#include "core/base/util.h"  // retry_on_eintr

namespace machofix {

inline constexpr const char* kStandardStream = "-";
inline bool is_standard_stream(const std::string& path) { return path == kStandardStream; }

// A file that is only read back (an output, before it is committed) is read into
// memory rather than mapped when it is smaller than this: for a small file a mapping
// costs more than the copy. A mapping's setup and teardown take the process's
// address-space lock for writing, and its munmap interrupts every other CPU the
// process runs on to flush its TLB: with --jobs 2 on a tree of small models, the
// workers' waits were almost all for that lock (perf: 89% of their context
// switches), and --jobs 2 ran 1.1x as many files a second as --jobs 1. 128 KiB:
// glibc's malloc serves smaller blocks from its heap, larger ones with a mapping of
// their own (M_MMAP_THRESHOLD), which is what reading is to avoid (a first version
// that read outputs up to 1 MiB made a 600 KB dylib's prune -o 4.20 -> 4.57 ms).
constexpr uint64_t kReadNotMappedBelow = 128ull << 10;

// How a MappedFile holds a small file.
enum class SmallFile {
  Mapped,  // mapped like any other: an input, whose pages a rewrite borrows (core/base/output_image.h)
  Read,    // under kReadNotMappedBelow, read into memory
};

// A read-only memory map of a whole file; "-": of standard input. A small file that
// is only read back may be read into memory instead (SmallFile::Read).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path, SmallFile small = SmallFile::Mapped);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  Bytes bytes() const { return Bytes(data_, size_); }
  uint64_t size() const { return size_; }
  int fd() const { return fd_.get(); }
  mode_t mode() const { return mode_; }
  const std::string& path() const { return path_; }
  // A path that opens this very file: path() itself, or for standard input the
  // descriptor's name (/proc/self/fd/N), since "-" names no file.
  std::string reopen_path() const;

 private:
  void open_standard_input();
  void read_small_file();

  std::string path_;
  Descriptor fd_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  mode_t mode_ = 0644;
  std::unique_ptr<uint8_t[]> read_;  // what data_ points into when the file is read, not mapped
};

class AtomicOutput {
 public:
  // Creates the temporary file beside `target` (whose directory must exist);
  // `mode` is applied at commit.
  // `durable`: flush the data and the rename to disk at commit. That is what keeps
  // an original that is replaced in place safe across a power loss; a new file
  // beside an untouched original (-o) does not need it, no more than `cp` does.
  AtomicOutput(const std::string& target, mode_t mode, bool durable = true);
  ~AtomicOutput();  // removes the temporary file unless committed
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  void write_at(uint64_t offset, const uint8_t* data, uint64_t size);
  void write_at(uint64_t offset, const std::vector<uint8_t>& data) { write_at(offset, data.data(), data.size()); }
  // The same, 8 MiB at a time, each part reported to `progress` (if any) once written.
  void write_reporting(uint64_t offset, const uint8_t* data, uint64_t size, ProgressMeter* progress);
  // Copies [in_offset, in_offset + length) of `in_fd` to out_offset, in the kernel
  // where it can (copy_file_range), else through a small buffer. On macOS a copy of a
  // whole file into a fresh output is a clone (clone_from) or fcopyfile, and ranges
  // the clone already holds in place are not copied again.
  void copy_from(int in_fd, uint64_t in_offset, uint64_t out_offset, uint64_t length);
  // Makes the still empty output a clone of the whole of `in_fd`: the two share every
  // block until either file is written (APFS through fclonefileat; XFS, btrfs and
  // bcachefs through FICLONE), so a .pte's weights cost nothing to copy. False, with
  // the output as it was, where the file system cannot (ext4, tmpfs, another file
  // system).
  bool clone_from(int in_fd);
  void truncate(uint64_t size);
  uint64_t size() const;  // of what was written so far
  // fsync, set the mode, rename over the target, fsync the directory. For standard
  // output: copy the whole temporary file there.
  void commit();
  const std::string& temp_path() const { return temp_path_; }
  bool durable() const { return durable_; }

 private:
  void commit_to_standard_output();

  std::string target_;
  std::string temp_path_;
  Descriptor fd_;
  mode_t mode_;
  bool durable_;
  bool committed_ = false;
  bool fresh_ = true;  // nothing written or copied yet
  // What clone_from() cloned: that file's [0, cloned_size_) is in place in the output.
  dev_t cloned_device_ = 0;
  ino_t cloned_inode_ = 0;
  uint64_t cloned_size_ = 0;

  void copy_range(int in_fd, uint64_t in_offset, uint64_t out_offset, uint64_t length);
  bool copy_whole_file(int in_fd, uint64_t length);
  bool holds_clone_of(int in_fd, uint64_t in_offset, uint64_t out_offset, uint64_t length) const;
};

// Like cp: an output file goes into a directory that exists. Throws an Error naming
// `target` ("cannot create the output: DIR does not exist") otherwise.
void require_output_directory(const std::string& target);

// A last look at an output before it goes live: while a gate is open on this thread,
// the commit of an AtomicOutput to `target` first hands its complete temporary file to
// `approve`, which throws to keep the target as it was (`fix` writes a repaired file
// only if it passes `check`). Outputs to other targets (an archive's members, written
// to temporary files of their own) pass as before. One gate per thread at a time.
class CommitGate {
 public:
  using Approve = std::function<void(const std::string& temp_path)>;
  CommitGate(std::string target, Approve approve);
  ~CommitGate();
  CommitGate(const CommitGate&) = delete;
  CommitGate& operator=(const CommitGate&) = delete;
  // Called by AtomicOutput::commit: throws what `approve` throws.
  static void pass(const std::string& target, const std::string& temp_path);

 private:
  std::string target_;
  Approve approve_;
};

// `progress`, if any, hears of the bytes written.
void write_file_atomically(const std::string& target, const std::vector<uint8_t>& data, mode_t mode, bool durable = true,
                           ProgressMeter* progress = nullptr);

// Removes temporary files left in `target`'s directory by an earlier machofix process
// that no longer runs.
void remove_stale_temporaries(const std::string& target);

// The running executable's path, links resolved; "" if it cannot be known.
std::string executable_path();

// Where temporary files without a place of their own go: $TMPDIR, else /tmp.
std::string temp_directory();

}  // namespace machofix
