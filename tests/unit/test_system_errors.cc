// What the system refuses (a file that is not there, a directory that is missing) is an
// ErrorKind::System naming the file, whichever layer meets it: the report's error_kind
// tells a user to look at the machine, not at the file's bytes.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cerrno>
#include <string>

#include "tests/support/thrown.h"
#include "core/base/error.h"
#include "core/io/file_io.h"
#include "core/jobs/contract.h"

using namespace machofix;

TEST_CASE("fail_system: the system's words, its kind, the file") {
  errno = ENOENT;
  std::optional<Error> error = test::thrown_as(ErrorKind::System, [] { fail_system("cannot open", "/x/y"); });
  CHECK(error->problem() == "cannot open: No such file or directory");
  CHECK(error->file() == "/x/y");
  errno = EACCES;
  error = test::thrown_as(ErrorKind::System, [] { fail_system("cannot reserve memory"); });
  CHECK(error->file().empty());
}

TEST_CASE("a missing input, output directory or contract file is a system error naming the file") {
  std::optional<Error> input = test::thrown_as(ErrorKind::System, [] { MappedFile("/nonexistent/machofix"); });
  CHECK(input->file() == "/nonexistent/machofix");
  std::optional<Error> output =
      test::thrown_as(ErrorKind::System, [] { AtomicOutput("/nonexistent/machofix/out.dylib", 0644); });
  CHECK(output->file() == "/nonexistent/machofix/out.dylib");
  std::optional<Error> directory =
      test::thrown_as(ErrorKind::System, [] { require_output_directory("/nonexistent/machofix/out.dylib"); });
  CHECK(directory->problem() == "cannot create the output: /nonexistent/machofix does not exist");
  std::optional<Error> contract =
      test::thrown_as(ErrorKind::System, [] { read_contract("/nonexistent/machofix.toml"); });
  CHECK(contract->file() == "/nonexistent/machofix.toml");
}
