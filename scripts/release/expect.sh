# shellcheck shell=bash
# The tally of a check script (scripts/check_release.sh, scripts/check_macos_release.sh):
# each check says "ok:" or "FAILED:", and the script ends with the counts. Sourced
# after $work (a scratch directory) is set.
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "  ok: $*"; }
failure() { failed=$((failed + 1)); echo "  FAILED: $*"; }
# expect DESCRIPTION COMMAND...: the command must succeed; its output is shown when not.
expect() {
  local what=$1
  shift
  if "$@" >"$work/out" 2>&1; then pass "$what"; else failure "$what"; sed 's/^/    /' "$work/out" | tail -n 20; fi
}
