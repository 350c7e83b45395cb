// run_job (core/jobs/job.h), the entry point of every front end, as a library user meets
// it: the command line's batch layer resolves the paths it is given before calling
// it, a program linking machofix_core does not.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/support/checked_options.h"
#include "core/jobs/job.h"
#include "core/format/macho_format.h"
#include "core/rewrite/macho_repair.h"
#include "tests/support/macho_builder.h"
#include "tests/support/whole_file.h"

using namespace machofix;
using namespace machofix::test;
namespace fs = std::filesystem;

namespace {

// A directory of its own, removed with what is in it.
struct ScratchDirectory {
  fs::path path = fs::temp_directory_path() / ("machofix-test-job-" + std::to_string(getpid()));
  ScratchDirectory() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

std::vector<uint8_t> read_bytes(const fs::path& path) {
  return whole_file<std::vector<uint8_t>>(path.string());
}

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// libSystem supplies _malloc; libunused supplies nothing: prune removes it.
Image prunable() {
  return MachOBuilder()
      .cpu(macho::CPU_TYPE_X86_64, 3)
      .load_dylib("/usr/lib/libSystem.B.dylib")
      .load_dylib("/usr/lib/libunused.dylib")
      .undefined("_malloc", 1)
      .build();
}

}  // namespace

TEST_CASE("run_job in place on a symlink rewrites the file it points to; the link stays the same link") {
  ScratchDirectory scratch;
  Image image = prunable();
  write_bytes(scratch.path / "model.dylib", image.bytes);
  fs::create_symlink("model.dylib", scratch.path / "link.dylib");
  JobOptions options;
  options.in_place = true;
  FileReport report = run_job((scratch.path / "link.dylib").string(), Operation::Prune, options);
  REQUIRE(report.status == FileStatus::Changed);
  CHECK(fs::is_symlink(scratch.path / "link.dylib"));
  CHECK(fs::read_symlink(scratch.path / "link.dylib") == "model.dylib");
  CHECK(read_bytes(scratch.path / "model.dylib") == prune_macho(image.view(), test::checked()).output.to_vector());
  CHECK(read_bytes(scratch.path / "model.dylib") != image.bytes);
}
