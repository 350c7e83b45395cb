#!/usr/bin/env bash
# The steps of the GitHub Action (action.yml at the repository's root), as a script
# that runs outside GitHub too (ctest `ci_action` runs it against a local release).
#
#   run.sh install   download the release archive for this runner, check it against
#                    the release's SHA256SUMS, unpack it, put bin/ on the PATH
#   run.sh check     machofix check the paths, SARIF to a file; exits with check's
#                    status (1: an error finding, 2: a file it could not check)
#
# Inputs come in the environment (action.yml maps each `inputs.*` to one):
#   install: MACHOFIX_VERSION (empty: the version of the action's own CMakeLists.txt),
#            MACHOFIX_DOWNLOAD_URL (the release's base URL; {version} is replaced),
#            RUNNER_OS, RUNNER_ARCH (GitHub's names; uname's when unset), RUNNER_TEMP
#   check:   MACHOFIX (the executable; else machofix on the PATH), MACHOFIX_PATHS (one
#            path per line), MACHOFIX_CONTRACT, MACHOFIX_APP, MACHOFIX_SYSROOT,
#            MACHOFIX_ARGS (more arguments, split at white space), MACHOFIX_SARIF
# Outputs go to $GITHUB_OUTPUT (install: machofix, version; check: sarif, exit-code)
# and the bin directory to $GITHUB_PATH, when those are set.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
action_path=${GITHUB_ACTION_PATH:-$(cd "$here/../.." && pwd)}

say() { echo "machofix-action: $*"; }
fail() {  # STATUS MESSAGE: an ::error annotation under GitHub Actions, a plain line elsewhere
  local status=$1
  shift
  if [ "${GITHUB_ACTIONS:-}" = true ]; then echo "::error title=machofix::$*"; fi
  echo "machofix-action: error: $*" >&2
  exit "$status"
}
die() { fail 1 "$@"; }
output() { if [ -n "${GITHUB_OUTPUT:-}" ]; then echo "$1=$2" >>"$GITHUB_OUTPUT"; fi; }

# The archive for this runner: machofix-VERSION-PLATFORM.tar.gz, as
# scripts/release/package.sh names them (docs/release.md); sets platform_name.
platform() {
  local os=${RUNNER_OS:-} arch=${RUNNER_ARCH:-}
  if [ -z "$os" ]; then
    case $(uname -s) in Linux) os=Linux ;; Darwin) os=macOS ;; *) os=$(uname -s) ;; esac
  fi
  if [ -z "$arch" ]; then
    case $(uname -m) in x86_64 | amd64) arch=X64 ;; aarch64 | arm64) arch=ARM64 ;; *) arch=$(uname -m) ;; esac
  fi
  case "$os/$arch" in
    macOS/X64 | macOS/ARM64) platform_name=macos ;;  # one universal archive
    Linux/X64) platform_name=linux-x86_64 ;;
    Linux/ARM64) platform_name=linux-aarch64 ;;
    *) die "no machofix release for a $os runner on $arch (there are macOS, and Linux on X64 and ARM64)" ;;
  esac
}

sha256_of() {
  if command -v sha256sum >/dev/null; then
    sha256sum "$1" | cut -d' ' -f1
  else
    shasum -a 256 "$1" | cut -d' ' -f1  # macOS runners
  fi
}

fetch() {  # URL FILE
  curl --fail --silent --show-error --location --retry 3 --retry-delay 2 --output "$2" "$1" ||
    die "could not download $1"
}

install() {
  local version=${MACHOFIX_VERSION:-}
  if [ -z "$version" ]; then
    version=$(sed -n 's/^project(machofix VERSION \([0-9][0-9.]*\).*/\1/p' "$action_path/CMakeLists.txt" 2>/dev/null || true)
    [ -n "$version" ] || die "no version given and none in $action_path/CMakeLists.txt"
  fi
  [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "version '$version' is not X.Y.Z"
  platform
  local name=machofix-$version-$platform_name
  local base=${MACHOFIX_DOWNLOAD_URL:-https://github.com/machofix/machofix/releases/download/v\{version\}}
  base=${base//\{version\}/$version}
  base=${base%/}

  work=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/machofix-download.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  say "downloading $base/$name.tar.gz"
  fetch "$base/SHA256SUMS" "$work/SHA256SUMS"
  fetch "$base/$name.tar.gz" "$work/$name.tar.gz"

  # sha256sum's format: "HASH  NAME" (or "HASH *NAME" in binary mode).
  local expected actual
  expected=$(awk -v n="$name.tar.gz" '$2 == n || $2 == "*" n { print $1; exit }' "$work/SHA256SUMS")
  [ -n "$expected" ] || die "$name.tar.gz is not listed in $base/SHA256SUMS"
  actual=$(sha256_of "$work/$name.tar.gz")
  [ "$actual" = "$expected" ] ||
    die "checksum mismatch: $name.tar.gz has sha256 $actual, $base/SHA256SUMS says $expected; not installed"
  say "sha256 $actual matches SHA256SUMS"

  local prefix=${RUNNER_TEMP:-${TMPDIR:-/tmp}}/machofix-$version
  rm -rf "${prefix:?}/$name"
  mkdir -p "$prefix"
  tar -xzf "$work/$name.tar.gz" -C "$prefix" || die "could not unpack $name.tar.gz"
  local machofix=$prefix/$name/bin/machofix
  [ -x "$machofix" ] || die "$name.tar.gz holds no bin/machofix"
  "$machofix" --version || die "$machofix does not run on this runner"
  say "installed $machofix"
  if [ -n "${GITHUB_PATH:-}" ]; then echo "$prefix/$name/bin" >>"$GITHUB_PATH"; fi
  output machofix "$machofix"
  output version "$version"
}

check() {
  local machofix=${MACHOFIX:-}
  [ -n "$machofix" ] || machofix=$(command -v machofix) || die "machofix is not installed (run.sh install)"
  local sarif=${MACHOFIX_SARIF:-machofix.sarif}
  local paths=() arguments=() extra=() line
  while IFS= read -r line || [ -n "$line" ]; do
    line=${line#"${line%%[![:space:]]*}"}  # white space around a line is YAML's, not the path's
    line=${line%"${line##*[![:space:]]}"}
    [ -n "$line" ] || continue
    [[ $line != -* ]] || line=./$line  # a path, never an option
    paths+=("$line")
  done <<<"${MACHOFIX_PATHS:-.}"
  ((${#paths[@]})) || die "no paths to check"
  [ -z "${MACHOFIX_CONTRACT:-}" ] || arguments+=(--contract "$MACHOFIX_CONTRACT")
  [ -z "${MACHOFIX_APP:-}" ] || arguments+=(--app "$MACHOFIX_APP")
  [ -z "${MACHOFIX_SYSROOT:-}" ] || arguments+=(--sysroot "$MACHOFIX_SYSROOT")
  if [ -n "${MACHOFIX_ARGS:-}" ]; then
    set -f  # no glob expansion: --forbid '*omp*' is written --forbid *omp*
    read -r -d '' -a extra <<<"$MACHOFIX_ARGS" || true
    set +f
  fi
  mkdir -p "$(dirname "$sarif")"
  rm -f "$sarif"
  say "machofix check ${paths[*]} ${arguments[*]-} ${extra[*]-} --sarif $sarif"
  local status=0
  # ${a[@]+...}: an empty array under set -u in any bash (macOS's /bin/bash is 3.2)
  "$machofix" check "${paths[@]}" ${arguments[@]+"${arguments[@]}"} ${extra[@]+"${extra[@]}"} --sarif "$sarif" ||
    status=$?
  if [ ! -s "$sarif" ]; then
    # machofix writes the SARIF whenever it checked anything; a run refused before
    # that (an option it does not know, a contract it cannot read) still leaves a
    # report for upload-sarif, with the failure as a notification.
    sarif_of_failure "$status" >"$sarif"
  fi
  output sarif "$sarif"
  output exit-code "$status"
  case $status in
    0) say "passed; SARIF: $sarif" ;;
    1) fail 1 "machofix check found errors (exit status 1); SARIF: $sarif" ;;
    2) fail 2 "machofix check could not check a file (exit status 2); SARIF: $sarif" ;;
    *) fail "$status" "machofix check failed (exit status $status); SARIF: $sarif" ;;
  esac
}

sarif_of_failure() {
  cat <<EOF
{
  "\$schema": "https://json.schemastore.org/sarif-2.1.0.json",
  "version": "2.1.0",
  "runs": [{
    "tool": {"driver": {"name": "machofix", "informationUri": "https://github.com/machofix/machofix", "rules": []}},
    "invocations": [{
      "executionSuccessful": false,
      "exitCode": $1,
      "toolExecutionNotifications": [{"level": "error", "message": {"text": "machofix check exited with status $1 before writing a report; see the job's log"}}]
    }],
    "results": []
  }]
}
EOF
}

case ${1:-} in
  install) install ;;
  check) check ;;
  *) echo "usage: run.sh install | run.sh check (inputs in the environment; see the comment at the top)" >&2; exit 2 ;;
esac
