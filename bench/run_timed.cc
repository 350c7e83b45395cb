// Runs one command and reports its wall time and peak memory: the timer of
// bench/run_benchmarks.py.
//
//   run_timed REPORT COMMAND [ARGUMENT...]
//
// Writes "NANOSECONDS PEAK_KIB EXIT_STATUS" to the file REPORT once the command has
// ended, and nothing else; the command keeps this process's descriptors. The time
// runs from just before the fork to the end of wait4, so this process's own start is
// not in it (as /usr/bin/time's is, when its caller times it: about 1 ms here). The
// peak is the child's ru_maxrss, as GNU time's %M: the child is forked from this
// small process, not spawned from the caller (Linux carries the address space's
// high-water mark over exec, so a child spawned from a Python process of 20 MiB
// reports at least that).
// An exit status of 128 + N means the command was killed by signal N.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace {

long long nanoseconds_between(const timespec& start, const timespec& end) {
  return (end.tv_sec - start.tv_sec) * 1000000000LL + (end.tv_nsec - start.tv_nsec);
}

int exit_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 255;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: run_timed REPORT COMMAND [ARGUMENT...]\n");
    return 2;
  }
  const char* report_path = argv[1];
  char** command = argv + 2;
  timespec start{}, end{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "run_timed: cannot fork: %s\n", std::strerror(errno));
    return 2;
  }
  if (child == 0) {
    execvp(command[0], command);
    std::fprintf(stderr, "run_timed: cannot run %s: %s\n", command[0], std::strerror(errno));
    _exit(127);
  }
  int wait_status = 0;
  rusage usage{};
  while (wait4(child, &wait_status, 0, &usage) < 0) {
    if (errno != EINTR) {
      std::fprintf(stderr, "run_timed: cannot wait for %s: %s\n", command[0], std::strerror(errno));
      return 2;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  int report = open(report_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool written = report >= 0 && dprintf(report, "%lld %ld %d\n", nanoseconds_between(start, end), usage.ru_maxrss,
                                        exit_status(wait_status)) > 0;
  if (report >= 0 && close(report) != 0) written = false;
  if (!written) {
    std::fprintf(stderr, "run_timed: cannot write the report to %s: %s\n", report_path, std::strerror(errno));
    return 2;
  }
  return 0;
}
