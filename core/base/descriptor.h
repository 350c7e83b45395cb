// One owner for a file descriptor: closed on every path out, an exception included.
//
// Each descriptor machofix opens is held by a Descriptor from the moment it exists, so
// no error path between open and close can leak it (a constructor that throws after
// opening runs the destructors of the members it built). The only close whose result
// matters, an output's before its rename, goes through close_checked().
#pragma once

#include <unistd.h>

#include <utility>

namespace machofix {

class Descriptor {
 public:
  Descriptor() = default;
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() { reset(); }
  Descriptor(Descriptor&& other) noexcept : fd_(other.release()) {}
  Descriptor& operator=(Descriptor&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  // close(2)'s result: a failed close of a written file can mean its data is lost
  // (NFS reports write errors there). The descriptor is gone either way.
  int close_checked() { return fd_ >= 0 ? ::close(release()) : 0; }

 private:
  int fd_ = -1;
};

}  // namespace machofix
