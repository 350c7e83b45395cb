#include "core/base/error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace machofix {

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

std::string Error::describe() const {
  std::string out;
  if (!file_.empty()) out += file_ + ": ";
  if (!part_.empty()) out += part_ + ": ";
  if (offset_) out += "offset " + hex(*offset_) + ": ";
  return out + what_;
}

void fail(const std::string& problem) { throw Error(problem); }

void fail_at(uint64_t offset, const std::string& problem) { throw Error(problem, offset); }

void fail_as(ErrorKind kind, const std::string& problem, std::optional<uint64_t> offset) {
  throw Error(problem, offset).as(kind);
}

void fail_system(const std::string& what, const std::string& file) {
  std::string reason = std::strerror(errno);
  Error error(what + ": " + reason);
  if (!file.empty()) error.in_file(file);
  throw error.as(ErrorKind::System);
}

}  // namespace machofix
