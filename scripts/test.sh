#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (ctest); then lists every
# skipped test with its reason. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
[ "$(uname)" != Darwin ] || export PATH="$PWD/build/llvm-16/bin:$PATH"  # LLVM 16 by its Debian names (setup_macos.sh)
status=0
ctest --test-dir build --output-on-failure --output-junit ctest-results.xml -j "$(nproc 2>/dev/null || sysctl -n hw.ncpu)" "$@" ||
  status=$?
python3 scripts/ctest_skips.py build/ctest-results.xml
exit $status
