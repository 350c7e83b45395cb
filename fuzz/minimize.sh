#!/usr/bin/env bash
# Minimizes a crashing input and stores it as a regression test (hex text).
#
#   fuzz/minimize.sh TARGET REPRODUCER NAME [SECONDS]
#
# Writes fuzz/regressions/TARGET/NAME.hex, which ctest's fuzz_regressions test
# replays through the plain build (fuzz_replay). Uses the fuzz build of
# fuzz/run_fuzzers.sh (MACHOFIX_FUZZ_BUILD, default build-fuzz).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
target=${1:?usage: minimize.sh TARGET REPRODUCER NAME [SECONDS]}
input=${2:?usage: minimize.sh TARGET REPRODUCER NAME [SECONDS]}
name=${3:?usage: minimize.sh TARGET REPRODUCER NAME [SECONDS]}
seconds=${4:-60}
build=${MACHOFIX_FUZZ_BUILD:-$root/build-fuzz}
fuzzer=$build/fuzz/fuzz_$target
minimized=$build/fuzz-minimized-$target-$name
"$fuzzer" -minimize_crash=1 -max_total_time="$seconds" -timeout=10 -exact_artifact_path="$minimized" "$input" \
  >"$minimized.log" 2>&1 || true
[ -s "$minimized" ] || cp "$input" "$minimized"
echo "minimize: $(stat -c %s "$input") -> $(stat -c %s "$minimized") bytes"
# The stack of the minimized input, for the record.
"$fuzzer" "$minimized" >"$minimized.stack" 2>&1 && { echo "minimize: the minimized input no longer crashes" >&2; exit 1; }
summary=$(grep -m1 -E "^SUMMARY|invariant failed|terminate called" "$minimized.stack" || echo "crash")
summary=${summary//$root\//}  # the build's path relative to the checkout: no path of this machine in the file
mkdir -p "$root/fuzz/regressions/$target"
python3 "$root/fuzz/to_hex.py" encode "$minimized" "$root/fuzz/regressions/$target/$name.hex" \
  "fuzz_$target reproducer, minimized by libFuzzer ($(stat -c %s "$minimized") bytes)" "$summary"
echo "minimize: wrote fuzz/regressions/$target/$name.hex (stack: $minimized.stack)"
