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
  Error& as_refusal() {
    refusal_ = true;
    return *this;
  }
  bool refusal() const { return refusal_; }

  // "file: part: offset 0x1c0: problem"
  std::string describe() const;

 private:
  std::string what_;
  std::string file_;
  std::string part_;
  std::optional<uint64_t> offset_;
  bool refusal_ = false;
};

[[noreturn]] void fail(const std::string& problem);
[[noreturn]] void fail_at(uint64_t offset, const std::string& problem);

std::string hex(uint64_t value);

}  // namespace machofix
