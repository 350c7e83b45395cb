// The one error type of machofix's core library.
//
// Every failure that concerns the input carries where it happened: the file, the
// part of it (a universal slice, a .pte named-data key) and the absolute byte offset,
// so a user can look at the bytes with xxd. Lower layers know the offset; upper
// layers add the file and part as the error travels up (see Error::in_file).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace machofix {

// What kind of failure an Error is, for the code that decides what to do with it
// (an archive refused whole, an exit status, a test); its words are for people.
enum class ErrorKind {
  Malformed,    // the input is not a valid file of its kind: the default
  Refused,      // a valid file machofix decides not to rewrite (an invalid input
                // signature, an identity signature, a loader rule the input breaks)
  Inapplicable, // what was asked does not apply to this input: an edit that matches
                // nothing or would duplicate an rpath, standard input where it cannot go
  ProofFailed,  // a rewrite did not pass its proof before writing: nothing written
  System,       // the operating system failed a call (I/O, space, permissions)
  Internal,     // an invariant of machofix itself broke
};

class Error : public std::runtime_error {
 public:
  explicit Error(std::string what, std::optional<uint64_t> offset = std::nullopt)
      : std::runtime_error(what), what_(std::move(what)), offset_(offset) {}

  const std::string& problem() const { return what_; }
  const std::string& file() const { return file_; }
  const std::string& part() const { return part_; }
  std::optional<uint64_t> offset() const { return offset_; }

  // Adds context unless an inner layer already set it (the innermost is the most precise).
  Error& in_file(const std::string& file) {
    if (file_.empty()) file_ = file;
    return *this;
  }
  Error& in_part(const std::string& part) {
    part_ = part_.empty() ? part : part + ": " + part_;
    return *this;
  }
  // A reader over a sub-range reports offsets relative to it; this makes them absolute.
  Error& shifted_by(uint64_t base) {
    if (offset_) *offset_ += base;
    return *this;
  }

  // A decision not to rewrite the file (its input signature is invalid, it is signed
  // with an identity), rather than a failure to read or write it: an archive with a
  // member refused so is refused as a whole, instead of being written with that
  // member copied unchanged.
  Error& as_refusal() { return as(ErrorKind::Refused); }
  bool refusal() const { return kind_ == ErrorKind::Refused; }

  Error& as(ErrorKind kind) {
    kind_ = kind;
    return *this;
  }
  ErrorKind kind() const { return kind_; }

  // "file: part: offset 0x1c0: problem"
  std::string describe() const;

 private:
  std::string what_;
  std::string file_;
  std::string part_;
  std::optional<uint64_t> offset_;
  ErrorKind kind_ = ErrorKind::Malformed;
};

[[noreturn]] void fail(const std::string& problem);
[[noreturn]] void fail_at(uint64_t offset, const std::string& problem);
// An Error of `kind` (fail() and fail_at() make Malformed ones).
[[noreturn]] void fail_as(ErrorKind kind, const std::string& problem, std::optional<uint64_t> offset = std::nullopt);
// "WHAT: strerror(errno)", an ErrorKind::System, in `file` when one is named. errno is
// read first, before anything can change it.
[[noreturn]] void fail_system(const std::string& what, const std::string& file = {});

std::string hex(uint64_t value);

}  // namespace machofix
