// remove_stale_temporaries (core/io/file_io.h): a temporary file beside a target is
// removed when the machofix that made it (the pid in its name) no longer runs, a
// zombie included: a writer killed with its parent (a distributed worker's) is a
// zombie until reaped, and the task retried elsewhere must not keep its file.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/io/file_io.h"

using namespace machofix;
namespace fs = std::filesystem;

namespace {

std::string temporary_of(const fs::path& directory, pid_t pid, const char* suffix) {
  fs::path path = directory / (".out.dylib.machofix-" + std::to_string(pid) + "-" + suffix);
  std::ofstream(path) << "partial";
  return path.string();
}

pid_t exited_child() {
  pid_t child = fork();
  if (child == 0) _exit(0);
  return child;
}

}  // namespace

TEST_CASE("remove_stale_temporaries: a dead or zombie writer's file goes, a running one's stays") {
  char pattern[] = "/tmp/machofix-stale-XXXXXX";
  REQUIRE(mkdtemp(pattern));
  fs::path directory = pattern;
  std::string target = (directory / "out.dylib").string();

  pid_t zombie = exited_child();
  REQUIRE(zombie > 0);
  // Until it is reaped, the child is a zombie that kill(pid, 0) still finds.
  std::string zombie_file = temporary_of(directory, zombie, "zombie");
  for (int tries = 0; tries < 200 && !fs::exists("/proc/" + std::to_string(zombie) + "/stat"); ++tries) usleep(1000);
  pid_t reaped = exited_child();
  REQUIRE(reaped > 0);
  REQUIRE(waitpid(reaped, nullptr, 0) == reaped);
  std::string reaped_file = temporary_of(directory, reaped, "reaped");
  std::string running_file = temporary_of(directory, getpid(), "running");
  usleep(20000);  // the zombie's exit is done by now

  remove_stale_temporaries(target);
  CHECK_FALSE(fs::exists(zombie_file));
  CHECK_FALSE(fs::exists(reaped_file));
  CHECK(fs::exists(running_file));

  REQUIRE(waitpid(zombie, nullptr, 0) == zombie);
  fs::remove_all(directory);
}
