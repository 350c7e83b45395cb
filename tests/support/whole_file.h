// A whole file in one read, for the test programs and the fuzzers' drivers. They are
// compiled without optimisation (tests/CMakeLists.txt), where copying a file a
// character at a time through istreambuf_iterator took most of the unit suite's time.
// Not core/io/file_io.h's MappedFile: the tests read their fixtures and the outputs
// they check with a reader that is not the code under test.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace machofix::test {

// The bytes of PATH as a std::string or a std::vector<uint8_t>; nothing when PATH
// cannot be opened or read to its end.
template <typename Buffer = std::string>
std::optional<Buffer> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;
  std::streamoff size = in.tellg();
  if (size < 0) return std::nullopt;
  Buffer buffer(static_cast<size_t>(size), 0);
  in.seekg(0);
  if (size > 0 && !in.read(reinterpret_cast<char*>(buffer.data()), size)) return std::nullopt;
  return buffer;
}

// The same, empty when PATH cannot be read: for a caller whose next check fails on
// an empty buffer anyway.
template <typename Buffer = std::string>
Buffer whole_file(const std::string& path) {
  return read_whole_file<Buffer>(path).value_or(Buffer{});
}

}  // namespace machofix::test
