#include "core/io/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#if defined(__APPLE__)
#include <copyfile.h>
#include <limits.h>
#include <mach-o/dyld.h>
#include <stdlib.h>
#include <sys/clonefile.h>
#endif

#include "core/base/mapped_pages.h"
#include "core/base/util.h"

namespace machofix {

namespace {

#ifdef __linux__
// glibc has a copy_file_range wrapper from 2.27 on; a release binary is built for
// glibc 2.17 (the manylinux2014 floor), so it makes the system call itself. Kernels
// before 4.5 answer ENOSYS, and the copy falls back to pread and write.
ssize_t copy_file_range_call(int in_fd, loff_t* in_offset, int out_fd, loff_t* out_offset, size_t length) {
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 27)
  return copy_file_range(in_fd, in_offset, out_fd, out_offset, length, 0);
#else
  return syscall(SYS_copy_file_range, in_fd, in_offset, out_fd, out_offset, length, 0u);
#endif
}
#endif

std::string directory_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// ".<name>.machofix-<pid>-": the prefix of every temporary file for `target`.
std::string temp_prefix(const std::string& target) { return "." + last_path_component(target) + ".machofix-"; }

// ---- Standard input and output ----

// A name that opens the file behind a descriptor, for code that opens files by name.
std::string descriptor_path(int fd) {
#ifdef __linux__
  return "/proc/self/fd/" + std::to_string(fd);
#else
  return "/dev/fd/" + std::to_string(fd);
#endif
}

// A file in $TMPDIR without a name (O_TMPFILE) or that loses it at once: it goes
// with the process however that ends, and nothing else can open it meanwhile.
// O_TMPFILE gives it 0666 less the umask, what `cat > file` would give a copy of a
// pipe; the fallback (macOS) 0644.
Descriptor anonymous_file() {
  std::string directory = temp_directory();
#ifdef O_TMPFILE
  Descriptor unnamed(::open(directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0666));
  if (unnamed.valid()) return unnamed;
#endif
  std::string pattern = directory + "/.machofix-stdio-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  Descriptor named(mkstemp(name.data()));
  if (!named.valid()) fail_system("cannot create a temporary file", directory);
  ::unlink(name.data());
  fcntl(named.get(), F_SETFD, FD_CLOEXEC);
  fchmod(named.get(), 0644);
  return named;
}

// Blocks until `fd` takes more (a pipe a parent made non-blocking).
void wait_until_writable(int fd) {
  pollfd wanted{fd, POLLOUT, 0};
  poll(&wanted, 1, -1);
}

void write_all(int fd, const uint8_t* data, uint64_t size, const std::string& problem, const std::string& path) {
  while (size > 0) {
    ssize_t written = retry_on_eintr([&] { return ::write(fd, data, std::min<uint64_t>(size, 1 << 30)); });
    if (written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_until_writable(fd);
      continue;
    }
    if (written <= 0) fail_system(problem, path);
    data += written, size -= written;
  }
}

// Standard input, which may be a pipe, copied into `fd`.
void spool_standard_input(int fd) {
  std::vector<uint8_t> buffer(1 << 20);
  for (;;) {
    ssize_t got = retry_on_eintr([&] { return ::read(STDIN_FILENO, buffer.data(), buffer.size()); });
    if (got < 0) fail_system("cannot read standard input", kStandardStream);
    if (got == 0) return;
    write_all(fd, buffer.data(), static_cast<uint64_t>(got), "cannot copy standard input to a temporary file in " + temp_directory(),
              kStandardStream);
  }
}

// Flushes a file's data (or a directory's entries) to stable storage. On macOS fsync
// only hands the data to the drive, which may keep it in its cache across a power
// loss; F_FULLFSYNC also flushes that cache. Where the file system does not support
// it (some network file systems), fsync is what there is.
int flush_to_disk(int fd) {
#if defined(__APPLE__)
  if (fcntl(fd, F_FULLFSYNC) == 0) return 0;
#endif
  return fsync(fd);
}

}  // namespace

void MappedFile::open_standard_input() {
  if (isatty(STDIN_FILENO)) fail("standard input is a terminal: pipe or redirect a file into it");
  struct stat info;
  if (fstat(STDIN_FILENO, &info) != 0) fail_system("cannot read standard input", path_);
  if (S_ISREG(info.st_mode) && lseek(STDIN_FILENO, 0, SEEK_CUR) == 0) {
    // Redirected from a file (< model.pte): that file itself is mapped.
    fd_.reset(fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0));
    if (!fd_.valid()) fail_system("cannot read standard input", path_);
    return;
  }
  Descriptor spool = anonymous_file();
  spool_standard_input(spool.get());
  fd_ = std::move(spool);
}

std::string MappedFile::reopen_path() const { return is_standard_stream(path_) ? descriptor_path(fd_.get()) : path_; }

MappedFile::MappedFile(const std::string& path, SmallFile small) : path_(path) {
  // O_NONBLOCK: opening a fifo would otherwise wait for a writer; it is refused below.
  if (is_standard_stream(path)) open_standard_input();
  else fd_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd_.valid()) fail_system("cannot open", path);
  struct stat info;
  if (fstat(fd_.get(), &info) != 0) fail_system("cannot stat", path);
  if (!S_ISREG(info.st_mode)) {
    Error error("not a regular file");
    error.in_file(path);
    throw error;
  }
  mode_ = info.st_mode & 07777;
  size_ = static_cast<uint64_t>(info.st_size);
  if (size_ == 0) return;
  if (small == SmallFile::Read && size_ < kReadNotMappedBelow) {
    read_small_file();
    return;
  }
  void* mapped = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_.get(), 0);
  if (mapped == MAP_FAILED) fail_system("cannot map", path);
  data_ = static_cast<const uint8_t*>(mapped);
  register_read_only_mapping(data_, size_, fd_.get());
}

void MappedFile::read_small_file() {
  read_.reset(new uint8_t[size_]);
  int64_t got = read_fully_at(fd_.get(), read_.get(), size_, 0);
  if (got < 0) fail_system("cannot read", path_);
  if (static_cast<uint64_t>(got) < size_)
    fail_at(static_cast<uint64_t>(got), "the file changed while it was read (it is shorter than when it was opened)");
  data_ = read_.get();
}

MappedFile::~MappedFile() {
  if (data_ && !read_) {
    unregister_read_only_mapping(data_);
    munmap(const_cast<uint8_t*>(data_), size_);
  }
}

void require_output_directory(const std::string& target) {
  std::string directory = directory_of(target);
  struct stat info;
  bool found = stat(directory.c_str(), &info) == 0;
  if (found && S_ISDIR(info.st_mode)) return;
  std::string problem = found || errno == ENOTDIR ? " is not a directory"
                        : errno == ENOENT        ? " does not exist"
                                                 : std::string(": ") + std::strerror(errno);
  Error error("cannot create the output: " + directory + problem);
  error.in_file(target);
  throw error.as(ErrorKind::System);
}

AtomicOutput::AtomicOutput(const std::string& target, mode_t mode, bool durable)
    : target_(target), mode_(mode), durable_(durable) {
  if (is_standard_stream(target)) {
    durable_ = false;
    fd_ = anonymous_file();
    temp_path_ = descriptor_path(fd_.get());
    return;
  }
  require_output_directory(target);
  remove_stale_temporaries(target);
  std::string pattern = directory_of(target) + "/" + temp_prefix(target) + std::to_string(getpid()) + "-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  fd_.reset(mkstemp(name.data()));
  if (!fd_.valid()) fail_system("cannot create a temporary file beside the output", target);
  temp_path_ = name.data();
}

AtomicOutput::~AtomicOutput() {
  fd_.reset();
  if (!committed_ && !is_standard_stream(target_)) ::unlink(temp_path_.c_str());
}

uint64_t AtomicOutput::size() const {
  struct stat info;
  if (fstat(fd_.get(), &info) != 0) fail_system("cannot stat the output", target_);
  return static_cast<uint64_t>(info.st_size);
}

void AtomicOutput::write_at(uint64_t offset, const uint8_t* data, uint64_t size) {
  fresh_ = false;
  if (!write_fully_at(fd_.get(), data, size, offset)) fail_system("cannot write the output", target_);
}

void AtomicOutput::write_reporting(uint64_t offset, const uint8_t* data, uint64_t size, ProgressMeter* progress) {
  constexpr uint64_t kPart = 8ull << 20;  // a progress report at most this far apart
  for (uint64_t done = 0; done < size; done += kPart) {
    uint64_t length = std::min(kPart, size - done);
    write_at(offset + done, data + done, length);
    if (progress) progress->add(length);
  }
}

void AtomicOutput::copy_from(int in_fd, uint64_t in_offset, uint64_t out_offset, uint64_t length) {
#if defined(__APPLE__)
  if (fresh_ && in_offset == 0 && out_offset == 0 && copy_whole_file(in_fd, length)) return;
#endif
  fresh_ = false;
  if (holds_clone_of(in_fd, in_offset, out_offset, length)) return;
  copy_range(in_fd, in_offset, out_offset, length);
}

bool AtomicOutput::clone_from(int in_fd) {
#if defined(__APPLE__)
  struct stat source;
  // Standard output's file has no name to clone to: it is copied.
  if (!fresh_ || is_standard_stream(target_) || fstat(in_fd, &source) != 0 || !S_ISREG(source.st_mode)) return false;
  // The clone is made under a name of its own (clonefile creates its target), then
  // renamed over this output's temporary file: the output's name never changes
  // hands. The name shares the temporary prefix, so a leftover is removed as stale.
  std::string clone_path = temp_path_ + "c";
  if (fclonefileat(in_fd, AT_FDCWD, clone_path.c_str(), CLONE_NOFOLLOW | CLONE_NOOWNERCOPY) != 0) return false;
  Descriptor clone(::open(clone_path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
  struct stat cloned;
  if (!clone.valid() || fstat(clone.get(), &cloned) != 0 || cloned.st_size != source.st_size ||
      rename(clone_path.c_str(), temp_path_.c_str()) != 0) {
    ::unlink(clone_path.c_str());
    return false;
  }
  fd_ = std::move(clone);
  fresh_ = false;
  cloned_device_ = source.st_dev;
  cloned_inode_ = source.st_ino;
  cloned_size_ = static_cast<uint64_t>(source.st_size);
  return true;
#elif defined(FICLONE)
  // XFS (reflink=1), btrfs, bcachefs: the output shares every block with the input
  // until either is written. Elsewhere (ext4, tmpfs, another file system) the
  // ioctl fails and nothing changed: the ranges are copied as before.
  struct stat source;
  if (!fresh_ || is_standard_stream(target_) || fstat(in_fd, &source) != 0 || !S_ISREG(source.st_mode)) return false;
  if (ioctl(fd_.get(), FICLONE, in_fd) != 0) return false;
  fresh_ = false;
  cloned_device_ = source.st_dev;
  cloned_inode_ = source.st_ino;
  cloned_size_ = static_cast<uint64_t>(source.st_size);
  return true;
#else
  (void)in_fd;
  return false;
#endif
}

// A whole file into a fresh output, the way the platform copies files best: a
// clone, else fcopyfile (both as Rust's std::fs::copy does on macOS). False when
// `length` is not the whole file or neither worked; the output is then still empty.
bool AtomicOutput::copy_whole_file(int in_fd, uint64_t length) {
#if defined(__APPLE__)
  struct stat source;
  if (fstat(in_fd, &source) != 0 || static_cast<uint64_t>(source.st_size) != length) return false;
  if (clone_from(in_fd)) return true;
  // fcopyfile copies from the descriptors' positions: both are at 0 (the input is
  // read with pread and mapped, the output is new).
  struct stat copied;
  if (lseek(in_fd, 0, SEEK_SET) == 0 && fcopyfile(in_fd, fd_.get(), nullptr, COPYFILE_DATA) == 0 &&
      fstat(fd_.get(), &copied) == 0 && copied.st_size == source.st_size) {
    fresh_ = false;
    return true;
  }
  if (ftruncate(fd_.get(), 0) != 0) fail_system("cannot empty the output", target_);
  return false;
#else
  (void)in_fd, (void)length;
  return false;
#endif
}

// Whether the clone already holds the input's [in_offset, +length) at that offset.
// (What a .pte rewrite copies is compared byte for byte afterwards all the same.)
bool AtomicOutput::holds_clone_of(int in_fd, uint64_t in_offset, uint64_t out_offset, uint64_t length) const {
  if (cloned_size_ == 0 || in_offset != out_offset || in_offset + length > cloned_size_) return false;
  struct stat source;
  return fstat(in_fd, &source) == 0 && source.st_dev == cloned_device_ && source.st_ino == cloned_inode_;
}

void AtomicOutput::copy_range(int in_fd, uint64_t in_offset, uint64_t out_offset, uint64_t length) {
#ifdef __linux__
  while (length > 0) {
    loff_t from = static_cast<loff_t>(in_offset), to = static_cast<loff_t>(out_offset);
    ssize_t copied = retry_on_eintr([&] { return copy_file_range_call(in_fd, &from, fd_.get(), &to, length); });
    if (copied < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL)) break;
    if (copied < 0) fail_system("cannot write the output", target_);
    if (copied == 0) break;  // the source is shorter than it was: caught by the fallback
    in_offset += copied, out_offset += copied, length -= copied;
  }
#endif
  std::vector<uint8_t> buffer(std::min<uint64_t>(length, 1 << 20));
  while (length > 0) {
    ssize_t got = retry_on_eintr([&] { return pread(in_fd, buffer.data(), std::min<uint64_t>(length, buffer.size()), static_cast<off_t>(in_offset)); });
    if (got < 0) fail_system("cannot read the input", target_);
    if (got == 0) {
      Error error("the input became shorter while it was being copied");
      error.in_file(target_);
      throw error;
    }
    write_at(out_offset, buffer.data(), got);
    in_offset += got, out_offset += got, length -= got;
  }
}

void AtomicOutput::truncate(uint64_t size) {
  fresh_ = false;
  cloned_size_ = std::min(cloned_size_, size);
  if (ftruncate(fd_.get(), static_cast<off_t>(size)) != 0) fail_system("cannot size the output", target_);
}

// The output is complete and verified: only now does standard output see a byte of it.
void AtomicOutput::commit_to_standard_output() {
  uint64_t length = size(), offset = 0;
  const char* problem = "cannot write the output to standard output";
#ifdef __linux__
  while (offset < length) {
    off_t from = static_cast<off_t>(offset);
    ssize_t sent = retry_on_eintr([&] { return sendfile(STDOUT_FILENO, fd_.get(), &from, std::min<uint64_t>(length - offset, 1 << 30)); });
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_until_writable(STDOUT_FILENO);
      continue;
    }
    if (sent < 0 && (errno == EINVAL || errno == ENOSYS)) break;  // an O_APPEND file, say: the loop below
    if (sent <= 0) fail_system(problem, target_);
    offset = static_cast<uint64_t>(from);
  }
#endif
  std::vector<uint8_t> buffer(std::min<uint64_t>(length - offset, 1 << 20));
  while (offset < length) {
    ssize_t got = retry_on_eintr([&] { return pread(fd_.get(), buffer.data(), std::min<uint64_t>(length - offset, buffer.size()), static_cast<off_t>(offset)); });
    if (got <= 0) fail_system("cannot read the output back", target_);
    write_all(STDOUT_FILENO, buffer.data(), static_cast<uint64_t>(got), problem, target_);
    offset += static_cast<uint64_t>(got);
  }
  fd_.reset();
  committed_ = true;
}

namespace {
thread_local CommitGate* open_gate = nullptr;
}  // namespace

CommitGate::CommitGate(std::string target, Approve approve) : target_(std::move(target)), approve_(std::move(approve)) {
  open_gate = this;
}

CommitGate::~CommitGate() { open_gate = nullptr; }

void CommitGate::pass(const std::string& target, const std::string& temp_path) {
  if (open_gate && open_gate->target_ == target) open_gate->approve_(temp_path);
}

void AtomicOutput::commit() {
  CommitGate::pass(target_, temp_path_);
  if (is_standard_stream(target_)) return commit_to_standard_output();
  if (fchmod(fd_.get(), mode_) != 0) fail_system("cannot set the output's mode", target_);
  if (durable_ && flush_to_disk(fd_.get()) != 0) fail_system("cannot flush the output", target_);
  if (fd_.close_checked() != 0) fail_system("cannot close the output", target_);
  if (rename(temp_path_.c_str(), target_.c_str()) != 0) fail_system("cannot rename the output into place", target_);
  committed_ = true;
  if (!durable_) return;
  Descriptor directory(::open(directory_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (directory.valid()) flush_to_disk(directory.get());  // makes the rename itself durable
}

void write_file_atomically(const std::string& target, const std::vector<uint8_t>& data, mode_t mode, bool durable,
                           ProgressMeter* progress) {
  AtomicOutput output(target, mode, durable);
  output.write_reporting(0, data.data(), data.size(), progress);
  output.commit();
}

namespace {

// A process that runs, or may: kill(0) finds it (EPERM: another user's). On Linux a
// zombie does not: it is dead, only not yet reaped, which takes a moment after a
// killed writer's parent died too (a distributed worker and its machofix: the
// retried task's writer must not keep the dead one's temporary file).
bool process_may_run(pid_t pid) {
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
#if defined(__linux__)
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (std::getline(stat, line)) {
    size_t end = line.rfind(')');  // the command name may hold anything but this is its end
    if (end != std::string::npos && end + 2 < line.size() && line[end + 2] == 'Z') return false;
  }
#endif
  return true;
}

}  // namespace

void remove_stale_temporaries(const std::string& target) {
  std::string directory = directory_of(target);
  std::string prefix = temp_prefix(target);
  DIR* listing = opendir(directory.c_str());
  if (!listing) return;
  while (dirent* entry = readdir(listing)) {
    std::string name = entry->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    // A pid that still runs might be another machofix writing this very file right now.
    if (pid > 0 && process_may_run(static_cast<pid_t>(pid))) continue;
    ::unlink((directory + "/" + name).c_str());
  }
  closedir(listing);
}

std::string temp_directory() {
  const char* root = std::getenv("TMPDIR");
  return root && *root ? root : "/tmp";
}

std::string executable_path() {
#if defined(__APPLE__)
  uint32_t size = 0;
  _NSGetExecutablePath(nullptr, &size);  // the size it needs
  std::string started_as(size, '\0');
  if (_NSGetExecutablePath(started_as.data(), &size) != 0) return {};
  char resolved[PATH_MAX];  // the path it was started by may go through links
  return realpath(started_as.c_str(), resolved) ? resolved : std::string();
#else
  char path[4096];
  ssize_t length = readlink("/proc/self/exe", path, sizeof path - 1);
  if (length <= 0) return {};
  return std::string(path, static_cast<size_t>(length));
#endif
}

}  // namespace machofix
