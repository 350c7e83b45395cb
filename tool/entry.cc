// The machofix executable: the command line (tool/main.h) and how the process ends.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "tool/main.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MACHOFIX_EXIT_NORMALLY 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define MACHOFIX_EXIT_NORMALLY 1
#endif

namespace {

// MACHOFIX_DIE_WITH_PARENT=PID: the process that started this one (a Dask worker,
// python/machofix/dask) asks that it be killed when that process dies, SIGKILL
// included, so that a task retried elsewhere never races it for its output; if PID
// is already gone, nothing is done at all. Set here, after exec, so that the starter
// can spawn without a fork of its own (Python's preexec_fn forks the whole worker:
// 27 ms a task). Linux only: elsewhere the variable is ignored.
void die_with_parent() {
#if defined(__linux__)
  const char* parent = std::getenv("MACHOFIX_DIE_WITH_PARENT");
  if (!parent || !*parent) return;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != static_cast<pid_t>(std::atol(parent))) _exit(125);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  die_with_parent();
  int status = machofix::cli::main(argc, argv);
#ifndef MACHOFIX_EXIT_NORMALLY
  // Every output is written, renamed and closed by now. Ending here skips the
  // destructors of static objects, those of the LIEF plugin's tables above all
  // (0.5 ms of a 10 ms .pte run), which would only free memory the kernel is
  // about to take back (mold ends the same way). Sanitizer builds return, so
  // that LeakSanitizer still runs.
  std::cout.flush();
  std::fflush(nullptr);
  _exit(status);
#endif
  return status;
}
