// A whole file in one read, for the test programs. They are compiled without
// optimisation (tests/CMakeLists.txt), where copying a file a character at a time
// through istreambuf_iterator took most of the unit suite's time.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace machofix::test {

// The bytes of PATH as a std::string or a std::vector<uint8_t>; empty when PATH
// cannot be read (a caller that must have the file checks that itself).
template <typename Buffer = std::string>
Buffer whole_file(const std::string& path) {
  Buffer buffer;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::streamoff size = in ? std::streamoff(in.tellg()) : -1;
  if (size <= 0) return buffer;
  buffer.resize(static_cast<size_t>(size));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(buffer.data()), size);
  buffer.resize(static_cast<size_t>(in.gcount()));
  return buffer;
}

}  // namespace machofix::test
