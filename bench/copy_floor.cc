// What copying a file and proving the copy can cost on this machine, with nothing
// else of machofix around it: the floor under `machofix prune -o` of a large .pte.
//
//   copy_floor WAY INPUT OUTPUT
//
// Every way copies INPUT to a new OUTPUT and reads every byte of OUTPUT back, compared
// with the input's; exit 1 on a difference or an error. WAY is one of:
//   read-once-1  one thread: pread a block of the input, pwrite it, pread it back, memcmp;
//   read-once-2  the same on two threads, each taking the next 1 MiB part;
//   kernel-copy  copy_file_range on one thread (machofix's way), and two threads
//                comparing behind it, each reading both files (pread) into its buffers.
// `bench/run_benchmarks.py --only floor` times each against `cp` (BENCHMARKS.md).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

namespace {

constexpr size_t kBlock = 256 << 10;  // machofix's read block
constexpr size_t kPart = 1 << 20;     // what a thread takes at a time
constexpr size_t kChunk = 2 << 20;    // a copy_file_range call

[[noreturn]] void fail(const char* what) {
  std::perror(what);
  std::exit(1);
}

void read_at(int fd, char* into, size_t length, off_t at) {
  while (length > 0) {
    ssize_t got = pread(fd, into, length, at);
    if (got <= 0) fail("pread");
    into += got, length -= static_cast<size_t>(got), at += got;
  }
}

void write_at(int fd, const char* from, size_t length, off_t at) {
  while (length > 0) {
    ssize_t put = pwrite(fd, from, length, at);
    if (put <= 0) fail("pwrite");
    from += put, length -= static_cast<size_t>(put), at += put;
  }
}

struct Files {
  int input, output, read_back;
  size_t size;
};

// Parts of 1 MiB, handed out in order to whichever thread asks; `ready` (if given)
// says how far the output holds the copy.
void prove_parts(const Files& files, std::atomic<size_t>& next, bool copy, const std::atomic<size_t>* ready) {
  std::unique_ptr<char[]> expected(new char[kBlock]), written(new char[kBlock]);
  for (size_t part; (part = next.fetch_add(kPart)) < files.size;) {
    size_t end = std::min(files.size, part + kPart);
    while (ready && ready->load() < end) std::this_thread::yield();
    for (size_t at = part; at < end; at += kBlock) {
      size_t length = std::min(kBlock, end - at);
      read_at(files.input, expected.get(), length, static_cast<off_t>(at));
      if (copy) write_at(files.output, expected.get(), length, static_cast<off_t>(at));
      read_at(files.read_back, written.get(), length, static_cast<off_t>(at));
      if (std::memcmp(expected.get(), written.get(), length) != 0) fail("the copy differs");
    }
  }
}

void kernel_copy(const Files& files, std::atomic<size_t>& copied) {
  for (size_t at = 0; at < files.size;) {
    loff_t from = static_cast<loff_t>(at), to = from;
    ssize_t done = copy_file_range(files.input, &from, files.output, &to, std::min(kChunk, files.size - at), 0);
    if (done <= 0) fail("copy_file_range");
    at += static_cast<size_t>(done);
    copied.store(at);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: copy_floor read-once-1|read-once-2|kernel-copy INPUT OUTPUT\n");
    return 2;
  }
  std::string way = argv[1];
  if (way != "read-once-1" && way != "read-once-2" && way != "kernel-copy") {
    std::fprintf(stderr, "copy_floor: unknown way %s\n", way.c_str());
    return 2;
  }
  Files files{};
  struct stat info;
  if ((files.input = open(argv[2], O_RDONLY)) < 0 || fstat(files.input, &info) != 0) fail(argv[2]);
  files.size = static_cast<size_t>(info.st_size);
  if ((files.output = open(argv[3], O_WRONLY | O_CREAT | O_EXCL, 0644)) < 0) fail(argv[3]);
  if ((files.read_back = open(argv[3], O_RDONLY)) < 0) fail(argv[3]);
  std::atomic<size_t> next{0};
  if (way == "read-once-1") {
    prove_parts(files, next, true, nullptr);
  } else if (way == "read-once-2") {
    std::thread other([&] { prove_parts(files, next, true, nullptr); });
    prove_parts(files, next, true, nullptr);
    other.join();
  } else {  // kernel-copy
    std::atomic<size_t> copied{0};
    std::thread copier([&] { kernel_copy(files, copied); });
    std::thread other([&] { prove_parts(files, next, false, &copied); });
    prove_parts(files, next, false, &copied);
    copier.join();
    other.join();
  }
  if (close(files.output) != 0) fail("close");
  return 0;
}
