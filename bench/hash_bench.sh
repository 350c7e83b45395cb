#!/usr/bin/env bash
# Code-page hashing speed: machofix (core/base/sha.cc, OpenSSL EVP) against sha256sum
# over the same 200 MB file. The requirement: signing a large dylib hashes within
# 1.2x of sha256sum's time.
#
#   bash bench/hash_bench.sh [SIZE_MB]      (from the repository root)
#
# Builds bench/hash_bench.cc by hand (it is not a CMake target) into a temp dir.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
size_mb=${1:-200}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The whole of core/base (the layer sha.cc is in, which links nothing above it), so
# that what sha.cc comes to use there is linked too.
g++ -std=c++20 -O2 -I"$root" -o "$work/hash_bench" "$root/bench/hash_bench.cc" "$root"/core/base/*.cc -lcrypto -pthread

head -c "$((size_mb * 1024 * 1024))" /dev/urandom >"$work/blob"
cat "$work/blob" >/dev/null  # into the page cache for both contenders

# Best of five wall-clock runs of a command over the blob.
time_command() {
  local label=$1 best=999999 start end
  shift
  for _ in 1 2 3 4 5; do
    start=$(date +%s.%N)
    "$@" "$work/blob" >/dev/null
    end=$(date +%s.%N)
    best=$(echo "if ($end - $start < $best) $end - $start else $best" | bc -l)
  done
  printf '%-40s %8.3f s %8.0f MB/s\n' "$label" "$best" "$(echo "$size_mb * 1048576 / $best / 1000000" | bc -l)"
}

time_command "sha256sum (coreutils)" sha256sum
# The same OpenSSL the library uses, one digest over the file: the throughput ceiling.
time_command "openssl dgst -sha256" openssl dgst -sha256

"$work/hash_bench" "$work/blob" 4096
echo "(16 KiB pages:)"
"$work/hash_bench" "$work/blob" 16384 | grep 'per page'
