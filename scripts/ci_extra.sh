#!/usr/bin/env bash
# CI extras, run by .ci/run after scripts/test.sh (which installs the packages):
#  1. every libFuzzer target for a bounded time (fuzz/run_fuzzers.sh, clang-16),
#     seeded with the fixtures, the samples and every stored reproducer;
#  2. the whole test suite once more, built with -DMACHOFIX_SANITIZE=ON
#     (AddressSanitizer + UndefinedBehaviorSanitizer, leak detection on).
# About 8 minutes on 2 cores. Environment:
#   MACHOFIX_CI_FUZZ_SECONDS  seconds per fuzz target (default 60)
#   MACHOFIX_CI_SKIP_FUZZ=1 / MACHOFIX_CI_SKIP_SANITIZE=1  to leave a part out
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

failed=()

if [ "${MACHOFIX_CI_SKIP_FUZZ:-0}" != 1 ]; then
  echo "ci_extra: fuzzing, ${MACHOFIX_CI_FUZZ_SECONDS:-60} s per target"
  fuzz/run_fuzzers.sh "${MACHOFIX_CI_FUZZ_SECONDS:-60}" || failed+=("fuzzing (fuzz/run_fuzzers.sh)")
fi

if [ "${MACHOFIX_CI_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "ci_extra: the test suite under AddressSanitizer + UndefinedBehaviorSanitizer"
  # Debug: -O0 (GCC compiles the doctest suites 5x faster than at -O2 with ASan) and
  # assertions on.
  cmake -S . -B build-asan -G Ninja -DMACHOFIX_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
  cmake --build build-asan
  # Leaks are reported, without suppressions (none is needed, LIEF included). UBSan
  # stops at the first report (-fno-sanitize-recover=undefined).
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export MACHOFIX_FAULT_MB=${MACHOFIX_FAULT_MB:-64}  # the SIGKILL test's input: smaller under ASan
  ctest --test-dir build-asan --output-on-failure --output-junit ctest-results.xml -j "$(nproc)" ||
    failed+=("the test suite under ASan + UBSan (build-asan)")
  python3 scripts/ctest_skips.py build-asan/ctest-results.xml
fi
echo "ci_extra: done in $(($(date +%s) - start)) s"
if ((${#failed[@]})); then
  printf 'ci_extra: FAILED: %s\n' "${failed[@]}"
  exit 1
fi
