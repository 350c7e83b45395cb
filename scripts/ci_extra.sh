#!/usr/bin/env bash
# CI extras, run by .ci/run after scripts/test.sh (which installs the packages), in
# one build (build-asan: clang-16, AddressSanitizer + UndefinedBehaviorSanitizer, leak
# detection on; the core also carries libFuzzer's coverage):
#  1. every libFuzzer target for a fixed time (fuzz/run_fuzzers.sh), seeded with the
#     fixtures, the samples and every stored reproducer: six targets at the default
#     60 s each, one per core at a time (3 minutes on 2 cores);
#  2. the whole test suite once more, in that build.
# One sanitizer build serves both, so the core is compiled once for them, not twice.
# From nothing on 2 cores 1,147 s (the build about 6 minutes, the fuzzers 3, the
# suite 687 s, its LLVM readers replayed from test.sh's runs: tests/README.md); with
# the compiler cache of an earlier run the build takes a minute or two
# (docs/release.md, Timings).
# Environment:
#   MACHOFIX_CI_FUZZ_SECONDS  seconds per fuzz target (default 60)
#   MACHOFIX_CI_SKIP_FUZZ=1 / MACHOFIX_CI_SKIP_SANITIZE=1  to leave a part out
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
build=build-asan

failed=()

# The product at -O1 (ASan's advice: several times faster than -O0, stacks still
# whole); the doctest suites at -O0 (tests/CMakeLists.txt), which clang compiles
# several times faster. A unity build, as the release's: built whole on every CI run
# (ccache or not), and the headers that dominate a compile are parsed once a batch
# (the whole build: 569 s of CPU instead of 696 s).
CC=clang-16 CXX=clang++-16 cmake -S . -B "$build" -G Ninja -DMACHOFIX_SANITIZE=ON -DMACHOFIX_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DCMAKE_UNITY_BUILD=ON >/dev/null
cmake --build "$build"

if [ "${MACHOFIX_CI_SKIP_FUZZ:-0}" != 1 ]; then
  echo "ci_extra: fuzzing, ${MACHOFIX_CI_FUZZ_SECONDS:-60} s per target"
  MACHOFIX_FUZZ_BUILD=$PWD/$build fuzz/run_fuzzers.sh "${MACHOFIX_CI_FUZZ_SECONDS:-60}" ||
    failed+=("fuzzing (fuzz/run_fuzzers.sh)")
fi

if [ "${MACHOFIX_CI_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "ci_extra: the test suite under AddressSanitizer + UndefinedBehaviorSanitizer"
  # Leaks are reported, without suppressions (none is needed, LIEF included). UBSan
  # stops at the first report (-fno-sanitize-recover=undefined).
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export MACHOFIX_FAULT_MB=${MACHOFIX_FAULT_MB:-64}  # the SIGKILL test's input: smaller under ASan
  # The tests of the source tree alone (label source-tree) and of the packaging
  # (label packaging: the commands they run are the suite's) ran in scripts/test.sh.
  ctest --test-dir "$build" --output-on-failure --output-junit ctest-results.xml -j "$(nproc)" -LE 'source-tree|packaging' ||
    failed+=("the test suite under ASan + UBSan ($build)")
  python3 scripts/ctest_skips.py "$build/ctest-results.xml"
fi
echo "ci_extra: done in $(($(date +%s) - start)) s"
if ((${#failed[@]})); then
  printf 'ci_extra: FAILED: %s\n' "${failed[@]}"
  exit 1
fi
