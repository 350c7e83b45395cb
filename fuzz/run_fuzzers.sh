#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for a bounded time.
#
#   fuzz/run_fuzzers.sh [SECONDS]       (default 60 seconds per target)
#
# Environment:
#   MACHOFIX_FUZZ_BUILD    build directory (default: build-fuzz in the project root)
#   MACHOFIX_FUZZ_TARGETS  which targets (default: "macho codesign pte tbd plist exports")
#   MACHOFIX_FUZZ_PARALLEL how many targets run at a time (default: the number of cores)
#   MACHOFIX_SAMPLES       directory of sample .pte files (default: ../shared/samples beside the checkout)
#   MACHOFIX_FUZZ_APP_FIXTURES  check --app's fixtures (default: build/app_fixtures, when
#                          scripts/test.sh made them): their libraries' tries seed fuzz_exports
#
# Needs clang-16 (Debian: clang-16, libclang-rt-16-dev). The whole core is compiled
# with -fsanitize=fuzzer-no-link,address,undefined (see fuzz/CMakeLists.txt).
#
# Seeds are made at run time, in the build directory, never in the source tree:
# fuzz_make_seeds (synthetic images, .pte files through tests/pte's writer, exports
# tries: synthetic ones and those of every Mach-O fixture), tests/fixtures/make_fixtures.py
# (Mach-O files linked by ld64.lld-16; those of build/fixtures when scripts/test.sh
# made them, else made once and cached), fuzz/make_text_seeds.py (the .tbd stubs and
# Info.plists of tests/fixtures and tests/app), the sample .pte files, and every
# reproducer of fuzz/regressions. The corpus each run grows is kept in
# BUILD/fuzz-corpus/<target> for the next run.
#
# Exit status 1 when a target crashed, leaked, hung (-timeout) or ran out of memory:
# the reproducer's path is printed. Turn it into a regression test with
#   fuzz/minimize.sh TARGET REPRODUCER NAME
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=${MACHOFIX_FUZZ_BUILD:-$root/build-fuzz}
targets=${MACHOFIX_FUZZ_TARGETS:-macho codesign pte tbd plist exports}
samples=${MACHOFIX_SAMPLES:-$root/../shared/samples}  # where tests/e2e/run_samples.py looks

max_len() {
  case $1 in
    macho | codesign) echo 98304 ;;  # the largest linker-made fixture (universal) is 83 KB
    pte) echo 393216 ;;              # the ExecuTorch samples are up to 352 KB
    tbd) echo 16384 ;;               # the largest stub seed is under 2 KB; room for many documents
    plist | exports) echo 8192 ;;    # Info.plists and the fixtures' tries are under 1 KB
  esac
}
dictionary() {
  case $1 in
    macho | codesign) echo "$root/fuzz/macho.dict" ;;
    pte) echo "$root/fuzz/pte.dict" ;;
    tbd) echo "$root/fuzz/tbd.dict" ;;
    plist) echo "$root/fuzz/plist.dict" ;;
    exports) echo "$root/fuzz/exports.dict" ;;
  esac
}

echo "run_fuzzers: building in $build"
# A build configured with the fuzzers already (scripts/ci_extra.sh's sanitizer build,
# which runs the test suite too) is used as it is.
if ! grep -qs '^MACHOFIX_FUZZ:BOOL=ON$' "$build/CMakeCache.txt"; then
  CC=${CC:-clang-16} CXX=${CXX:-clang++-16} cmake -S "$root" -B "$build" -G Ninja -DMACHOFIX_FUZZ=ON -DMACHOFIX_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" --target fuzzers

seeds=$build/fuzz-seeds
rm -rf "$seeds"

# The fixtures scripts/test.sh's ctest run made (build/fixtures), else made here.
fixtures=${MACHOFIX_FUZZ_FIXTURES:-$root/build/fixtures}
[ -f "$fixtures/manifest.json" ] || fixtures=$build/fuzz-fixtures
if [ ! -f "$fixtures/manifest.json" ]; then
  if python3 "$root/tests/fixtures/make_fixtures.py" "$fixtures" >"$build/fuzz-fixtures.log" 2>&1; then
    echo "run_fuzzers: linker-made fixtures in $fixtures"
  else
    echo "run_fuzzers: NOTE: tests/fixtures/make_fixtures.py failed (see $build/fuzz-fixtures.log); synthetic seeds only"
    rm -rf "$fixtures"
  fi
fi
# The Mach-O files whose exports tries seed fuzz_exports: the fixtures, and the
# libraries and executables of check --app's fixtures when scripts/test.sh made them.
machos=()
[ -d "$fixtures" ] && machos+=("$fixtures"/*.in "$fixtures"/*.ref)
app_fixtures=${MACHOFIX_FUZZ_APP_FIXTURES:-$root/build/app_fixtures}
if [ -f "$app_fixtures/manifest.json" ]; then
  while IFS= read -r -d '' file; do machos+=("$file"); done < <(find "$app_fixtures/apps" "$app_fixtures/models" -type f -print0 | sort -z)
else
  echo "run_fuzzers: NOTE: no check --app fixtures in $app_fixtures; fuzz_exports without their tries"
fi
"$build/fuzz/fuzz_make_seeds" "$seeds" "${machos[@]}"
python3 "$root/fuzz/make_text_seeds.py" "$seeds"
if [ -d "$fixtures" ]; then
  for file in "$fixtures"/*.in "$fixtures"/*.ref; do
    cp "$file" "$seeds/macho/fixture-$(basename "$file")"
    cp "$file" "$seeds/codesign/fixture-$(basename "$file")"
  done
fi
if compgen -G "$samples/*.pte" >/dev/null; then
  cp "$samples"/*.pte "$seeds/pte/"
else
  echo "run_fuzzers: NOTE: no sample .pte files in $samples"
fi
for target in $targets; do
  mkdir -p "$seeds/$target"
  for hex in "$root"/fuzz/regressions/"$target"/*.hex; do
    [ -e "$hex" ] || continue
    python3 "$root/fuzz/to_hex.py" decode "$hex" "$seeds/$target/regression-$(basename "$hex" .hex)"
  done
done

# Leaks are findings too (no suppressions: none has been needed, LIEF included).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

# One target's run; its summary line in $results/TARGET, its failure report in
# $results/TARGET.failed. Exit status 1 when it failed.
run_target() {
  local target=$1 corpus=$build/fuzz-corpus/$1 artifacts=$build/fuzz-artifacts/$1 log=$build/fuzz-$1.log
  local start rc=0 elapsed runs speed cov line reproducer
  mkdir -p "$corpus" "$artifacts"
  start=$(date +%s)
  "$build/fuzz/fuzz_$target" -max_len="$(max_len "$target")" -dict="$(dictionary "$target")" \
    -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "$seeds/$target" >"$log" 2>&1 || rc=$?
  elapsed=$(($(date +%s) - start))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  line="fuzz_$target: ${elapsed} s, ${runs:-?} executions, ${speed:-?} exec/s, ${cov:-cov: ?}, corpus $(ls "$corpus" | wc -l) files"
  reproducer=$(grep -o "Test unit written to .*" "$log" | sed 's/Test unit written to //' | tail -1 || true)
  if [ "$rc" -ne 0 ] || [ -n "$reproducer" ]; then
    echo "$line: FAILED (exit $rc)" >"$results/$target"
    {
      echo "run_fuzzers: fuzz_$target FAILED; the end of its log:"
      grep -E "ERROR|SUMMARY|#[0-9]+ 0x|invariant failed|terminate|what\(\)" "$log" | head -40 || true
      echo "run_fuzzers: reproducer: ${reproducer:-(none written; see $log)}"
      if [ -n "$reproducer" ]; then
        echo "run_fuzzers: to replay: $build/fuzz/fuzz_$target $reproducer"
        echo "run_fuzzers: to keep as a regression: fuzz/minimize.sh $target $reproducer NAME"
      fi
    } >"$results/$target.failed"
    return 1
  fi
  echo "$line" >"$results/$target"
}

# Each target is one process on one core: $parallel of them at a time (default: one
# per core), each still for $seconds, so the whole run takes the time of
# ceil(targets / parallel) targets instead of all of them.
parallel=${MACHOFIX_FUZZ_PARALLEL:-$(nproc)}
results=$(mktemp -d "${TMPDIR:-/tmp}/machofix-fuzz-results.XXXXXX")
trap 'rm -rf "$results"' EXIT
running=0
for target in $targets; do
  if [ "$running" -ge "$parallel" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  echo "run_fuzzers: fuzz_$target for $seconds s (log: $build/fuzz-$target.log)"
  run_target "$target" &
  running=$((running + 1))
done
wait || true

status=0
summary=()
for target in $targets; do
  if [ -f "$results/$target.failed" ] || [ ! -f "$results/$target" ]; then
    status=1
    cat "$results/$target.failed" 2>/dev/null || echo "run_fuzzers: fuzz_$target left no result"
  fi
  summary+=("$(cat "$results/$target" 2>/dev/null || echo "fuzz_$target: no result: FAILED")")
done
echo "run_fuzzers: summary"
printf '  %s\n' "${summary[@]}"
exit $status
