// Small helpers that several parts of core/ need, written once.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>

namespace machofix {

// `value` rounded up to a multiple of `alignment` (not 0); no overflow check: callers
// pass sizes and offsets already known to be far below 2^64.
constexpr uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

// The size of a memory page (4 KiB on x86_64 Linux, 16 KiB on Apple silicon).
inline uint64_t system_page_size() {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// What follows the last '/' of a path or install name (all of it when there is none).
inline std::string last_path_component(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A system call repeated while a signal interrupts it (EINTR), as every read and write
// loop needs: its result otherwise.
template <typename Call>
auto retry_on_eintr(Call call) {
  for (;;) {
    auto result = call();
    if (!(result < 0 && errno == EINTR)) return result;
  }
}

// Reads `length` bytes of `fd` from `offset` into `into`, in as many calls as it
// takes: how many it read (fewer only where the file ends), or -1 on an error (errno).
inline int64_t read_fully_at(int fd, uint8_t* into, uint64_t length, uint64_t offset) {
  uint64_t done = 0;
  while (done < length) {
    ssize_t got =
        retry_on_eintr([&] { return pread(fd, into + done, length - done, static_cast<off_t>(offset + done)); });
    if (got < 0) return -1;
    if (got == 0) break;
    done += static_cast<uint64_t>(got);
  }
  return static_cast<int64_t>(done);
}

// Writes `length` bytes at `offset` of `fd`, in as many calls as it takes: false on an
// error (errno; a write of 0 bytes, which a full device can give, counts as ENOSPC).
inline bool write_fully_at(int fd, const uint8_t* data, uint64_t length, uint64_t offset) {
  while (length > 0) {
    ssize_t written = retry_on_eintr([&] { return pwrite(fd, data, length, static_cast<off_t>(offset)); });
    if (written == 0) errno = ENOSPC;
    if (written <= 0) return false;
    data += written, offset += static_cast<uint64_t>(written), length -= static_cast<uint64_t>(written);
  }
  return true;
}

// The bytes in lowercase hex, two digits each.
inline std::string hex_bytes(const uint8_t* data, size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < size; ++i) {
    text += digits[data[i] >> 4];
    text += digits[data[i] & 15];
  }
  return text;
}

}  // namespace machofix
