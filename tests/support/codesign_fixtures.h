// Mach-O files for the code-signature tests, linked at test time by clang-16 and
// ld64.lld-16 (installed by scripts/setup.sh) into a temporary directory, with a
// small .tbd stub for libSystem, once per test run; and the small helpers those
// tests share (parse, verify, errors, big-endian access).
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/base/bytes.h"
#include "core/format/codesign.h"
#include "core/format/macho.h"
#include "tests/support/whole_file.h"

namespace machofix::codesign_test {

namespace fs = std::filesystem;

inline constexpr const char* kLibSystemTbd = R"(--- !tapi-tbd
tbd-version: 4
targets: [ arm64-macos, x86_64-macos ]
install-name: '/usr/lib/libSystem.B.dylib'
exports:
  - targets: [ arm64-macos, x86_64-macos ]
    symbols: [ _printf, _puts, dyld_stub_binder ]
...
)";

// Code spanning several 4 KiB pages (the table lands in __TEXT,__const).
inline constexpr const char* kLibrarySource = R"(int printf(const char*, ...);
const char table[9000] = {1, 2, 3};
int hello(int x) { printf("hello %d\n", x); return table[x] + 1; }
)";

inline constexpr const char* kMainSource = R"(int printf(const char*, ...);
int main(void) { printf("hi\n"); return 0; }
)";

// Large enough for hash_pages to use two threads (more than 512 pages).
inline constexpr const char* kLargeSource = R"(const char large[2500000] = {1};
int get(int i) { return large[i]; }
)";

inline void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::vector<uint8_t> read_file(const fs::path& path) {
  auto bytes = machofix::test::read_whole_file<std::vector<uint8_t>>(path.string());
  REQUIRE(bytes.has_value());
  return *bytes;
}

inline void write_file(const fs::path& path, const std::vector<uint8_t>& data) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

inline void run(const std::string& command) {
  INFO(command);
  REQUIRE(std::system((command + " >/dev/null 2>&1").c_str()) == 0);
}

class Fixtures {
 public:
  static Fixtures& get() {
    static Fixtures fixtures;
    return fixtures;
  }
  ~Fixtures() { fs::remove_all(dir_); }

  const fs::path& dir() const { return dir_; }

  // Links `source` ("lib", "main", "large") for `arch`; `flags` go to ld64.lld-16.
  // `kind` is "dylib" or "exec". Cached by output name.
  std::vector<uint8_t> link(const std::string& output, const std::string& source, const std::string& arch,
                            const std::string& kind, const std::string& flags = "") {
    fs::path out = dir_ / output;
    if (!fs::exists(out)) {
      fs::path object = compile(source, arch);
      std::string command = "ld64.lld-16 -arch " + arch + " -platform_version macos 11.0 11.0 ";
      if (kind == "dylib") command += "-dylib -install_name @rpath/lib" + source + ".dylib ";
      run(command + flags + " " + object.string() + " " + (dir_ / "libSystem.tbd").string() + " -o " + out.string());
    }
    return read_file(out);
  }

 private:
  Fixtures() {
    char pattern[] = "/tmp/machofix-codesign-XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    dir_ = pattern;
    write_text(dir_ / "libSystem.tbd", kLibSystemTbd);
    write_text(dir_ / "lib.c", kLibrarySource);
    write_text(dir_ / "main.c", kMainSource);
    write_text(dir_ / "large.c", kLargeSource);
  }

  fs::path compile(const std::string& source, const std::string& arch) {
    fs::path object = dir_ / (source + "_" + arch + ".o");
    if (!fs::exists(object))
      run("clang-16 -target " + arch + "-apple-macos11 -O1 -c " + (dir_ / (source + ".c")).string() + " -o " +
          object.string());
    return object;
  }

  fs::path dir_;
};

inline std::vector<uint8_t> lld_arm64_dylib() {
  return Fixtures::get().link("lib_arm64.dylib", "lib", "arm64", "dylib");
}
inline std::vector<uint8_t> lld_arm64_exec() { return Fixtures::get().link("main_arm64", "main", "arm64", "exec"); }
inline std::vector<uint8_t> lld_x86_dylib_signed() {
  return Fixtures::get().link("lib_x86_64_signed.dylib", "lib", "x86_64", "dylib", "-adhoc_codesign");
}
inline std::vector<uint8_t> lld_x86_exec_signed() {
  return Fixtures::get().link("main_x86_64_signed", "main", "x86_64", "exec", "-adhoc_codesign");
}
inline std::vector<uint8_t> lld_x86_dylib_unsigned() {
  return Fixtures::get().link("lib_x86_64.dylib", "lib", "x86_64", "dylib");
}

inline MachO parse(const std::vector<uint8_t>& file) { return parse_macho(Bytes(file)); }

// The problems verifying finds, typed; verify() gives their words, for the tests of
// the messages.
inline std::vector<SignatureFinding> problems_of(const std::vector<uint8_t>& file) {
  return check_code_signature(parse(file)).problems;
}
inline std::vector<std::string> verify(const std::vector<uint8_t>& file) { return describe(problems_of(file)); }

inline std::vector<uint8_t> renewed(std::vector<uint8_t> file) {
  renew_code_signature(file, 0);
  return file;
}

template <typename F>
inline Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& error) {
    return error;
  }
  FAIL("no machofix::Error thrown");
  return Error("unreachable");
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Test-side big-endian access to a file being corrupted or built.
inline uint32_t be32(const std::vector<uint8_t>& data, uint64_t at) { return Bytes(data).be32(at); }
inline void set_be32(std::vector<uint8_t>& data, uint64_t at, uint32_t value) { put_be32(data, at, value); }

inline uint64_t signature_offset(const std::vector<uint8_t>& file) { return parse(file).code_signature.offset; }

// lld: SuperBlob header + one index entry, padded to 24; the CodeDirectory follows.
constexpr uint64_t kLldCd = 24;

}  // namespace machofix::codesign_test
