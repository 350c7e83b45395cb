#!/usr/bin/env bash
# Rewriting a large .pte costs about a file copy: `machofix prune` on a .pte with
# SIZE_MB of weights against `cp` (and `cp` + `sync FILE`, since machofix fsyncs
# its output before renaming it into place), wall time and peak RSS.
# Requirement: about 1.2x the time of cp, peak RSS under 256 MiB at any size.
#
#   bash bench/pte_bench.sh [SIZE_MB] [RUNS]     (from anywhere; default 1024 MB, 5 runs)
#   BUILD=/path/to/build DIR=/dev/shm bash bench/pte_bench.sh
#
# BUILD: a CMake build directory (default: build/ in the repository; configured and
# built if needed). DIR: where the files go (default: a temporary directory in
# /tmp; /dev/shm takes the disk out of the numbers).
# Uses tests/pte/make_blobs.sh (LLVM 16) and the test writer (tests/pte/pte_writer.cc)
# to make the .pte: a Mach-O .so under a content-hash key plus one weights segment.
# Runs the CLI if it takes .pte files, else bench/pte_bench_driver.cc (same call).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
size_mb=${1:-1024}
runs=${2:-5}
build=${BUILD:-$root/build}
work=$(mktemp -d "${DIR:-/tmp}/pte_bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target machofix_core machofix >/dev/null
link=(-I"$root" -I"$build/generated" "$build/libmachofix_core.a" -lLIEF -lcrypto -pthread)
g++ -std=c++20 -O2 -o "$work/pte_writer" "$root/tests/pte/pte_writer.cc" "${link[@]}"
g++ -std=c++20 -O2 -o "$work/driver" "$root/bench/pte_bench_driver.cc" "${link[@]}"
"$root/tests/pte/make_blobs.sh" "$work/blobs" >/dev/null

"$work/pte_writer" big "$work/blobs" "$work/model.pte" "$((size_mb * 1024 * 1024))" 4096
"$work/pte_writer" big "$work/blobs" "$work/small.pte" 4096 4096
if "$build/machofix" prune "$work/small.pte" -o "$work/small.out.pte" >/dev/null 2>&1; then
  tool=("$build/machofix" prune "$work/model.pte" -o "$work/out.pte")
  tool_name="machofix prune"
else
  tool=("$work/driver" "$work/model.pte" "$work/out.pte")
  tool_name="pte_bench_driver (the CLI does not take .pte yet)"
fi
echo "file: $(stat -c %s "$work/model.pte") bytes in $(df --output=fstype "$work" | tail -1) ($work)"
echo "tool: $tool_name"
cat "$work/model.pte" >/dev/null  # in the page cache for every contender

# Appends "seconds peak_kb" of one run of a command to the file named by $1.
measure() {
  local into=$1
  shift
  sync
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" >/dev/null
  cat "$work/time" >>"$into"
}
for _ in $(seq "$runs"); do
  measure "$work/cp.times" cp "$work/model.pte" "$work/copy.pte"
  rm -f "$work/copy.pte"
  measure "$work/cpsync.times" sh -c 'cp "$1" "$2" && sync "$2"' sh "$work/model.pte" "$work/copy.pte"
  rm -f "$work/copy.pte"
  measure "$work/tool.times" "${tool[@]}"
  cmp -s "$work/model.pte" "$work/out.pte" && { echo "the output equals the input: nothing was pruned" >&2; exit 1; }
  rm -f "$work/out.pte"
done

# min and median seconds, max peak RSS (MiB) of a times file
stats() { sort -n "$1" | awk '{t[NR]=$1; if ($2>m) m=$2} END {printf "%.2f %.2f %.0f\n", t[1], t[int((NR+1)/2)], m/1024}'; }
read -r cp_min cp_median cp_rss < <(stats "$work/cp.times")
read -r cs_min cs_median cs_rss < <(stats "$work/cpsync.times")
read -r tool_min tool_median tool_rss < <(stats "$work/tool.times")
printf '%-14s %8s %8s %10s\n' "" "min s" "median s" "peak RSS"
printf '%-14s %8s %8s %7s MiB\n' "cp" "$cp_min" "$cp_median" "$cp_rss"
printf '%-14s %8s %8s %7s MiB\n' "cp + sync" "$cs_min" "$cs_median" "$cs_rss"
printf '%-14s %8s %8s %7s MiB\n' "machofix" "$tool_min" "$tool_median" "$tool_rss"
awk -v t="$tool_median" -v c="$cp_median" -v s="$cs_median" \
  'BEGIN {printf "median ratio: %.2fx cp, %.2fx cp + sync (target 1.2x cp)\n", t / c, t / s}'
awk -v r="$tool_rss" 'BEGIN {printf "peak RSS: %d MiB (limit 256 MiB): %s\n", r, r < 256 ? "ok" : "TOO HIGH"}'
