# shellcheck shell=bash
# What every part of the release build uses: its messages, its logs, a file's sha256.
# Sourced by scripts/build_release.sh (and the tests of its parts, tests/release/).
say() { echo "build_release: $*" >&2; }
die() { echo "build_release: $*" >&2; exit 1; }
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
# Runs a command with its output in a log, shown only when it fails.
logged() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 || { tail -n 60 "$log" >&2; die "failed: $* (log: $log)"; }
}
