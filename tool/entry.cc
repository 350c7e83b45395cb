// The machofix executable: the command line (tool/main.h) and how the process ends.
#include <cstdio>
#include <iostream>

#include <unistd.h>

#include "tool/main.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MACHOFIX_EXIT_NORMALLY 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define MACHOFIX_EXIT_NORMALLY 1
#endif

int main(int argc, char** argv) {
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
