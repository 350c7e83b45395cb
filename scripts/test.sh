#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (ctest). Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
[ "$(uname)" != Darwin ] || export PATH="$PWD/build/llvm-16/bin:$PATH"  # LLVM 16 by its Debian names (setup_macos.sh)
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || sysctl -n hw.ncpu)" "$@"
