#!/usr/bin/env bash
# Builds every artefact of a machofix release on Debian 12, cross-compiled with zig
# from pinned sources, into OUTDIR:
#
#   scripts/build_release.sh OUTDIR [TARGET...]
#
#   machofix-VERSION-macos.tar.gz          universal (arm64, x86_64), macOS 11.0 and later
#   machofix-VERSION-linux-x86_64.tar.gz   glibc 2.17 and later, nothing else needed
#   machofix-VERSION-linux-aarch64.tar.gz
#     each: bin/machofix, lib/machofix/machofix-lief.so, README.md, docs/, licences/
#   machofix-VERSION-py3-none-macosx_11_0_universal2.whl
#   machofix-VERSION-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
#   machofix-VERSION-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl
#     each: the Python package (licences in machofix/licences/), the same executable as
#     the wheel's script (bin/machofix) and its reader as data (lib/machofix/)
#   machofix-VERSION.tar.gz                the sources (of HEAD) and the sample model the
#                                          Homebrew formula's test repairs
#   machofix.rb                            Formula/machofix.rb with that archive's sha256
#   SHA256SUMS                             of all of the above
#
# TARGETs (default: all) are macos-aarch64, macos-x86_64, linux-x86_64, linux-aarch64;
# an artefact is written when all of its targets are built. scripts/check_release.sh
# checks what this writes. --prepare fills the cache only (toolchain, sources, each
# target's libraries and LIEF), needing neither build/ nor an OUTDIR: CI runs it
# in the background, at the lowest priority, while the tests run.
#
# Inputs, each checked before use:
#   - zig 0.11.0 (scripts/release/toolchain.sh): the one compiler, for macOS 11.0 and
#     for glibc 2.17 (the manylinux2014 policy), libc++ linked statically; from npm,
#     or with MACHOFIX_ZIG_SOURCE=ziglang from ziglang.org ($MACHOFIX_ZIGLANG), its
#     minisign signature checked (the release workflow); either way its files must
#     have the content hash pins.lock records for ziglang.org's tarball;
#   - LIEF 0.9.0 (scripts/build_lief.sh), Mach-O only, static;
#   - libarchive and its compressors, yaml-cpp, libplist and (Linux) OpenSSL's
#     libcrypto from Debian 12's source packages (scripts/release/libraries.sh);
#   - header-only libraries (CLI11, spdlog, fmt, flatbuffers, toml++, nlohmann-json)
#     from the Debian packages scripts/setup.sh installs, and the host's flatc.
# The macOS arm64 slices come out ad hoc signed by zig's linker; the x86_64 ones are
# signed by machofix itself (build/machofix, the development build).
#
# Downloads and built libraries are cached in ~/.cache/machofix/release (or
# $MACHOFIX_CACHE_DIR/release): sources fetched once for all targets, each library
# built once per target; a second run only builds machofix itself. -j2 unless
# MACHOFIX_JOBS.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: $0 OUTDIR [TARGET...] | --prepare [TARGET...]"
prepare_only=0
if [ "${1:-}" = --prepare ]; then
  prepare_only=1
  outdir=""
else
  [ $# -ge 1 ] && [[ $1 != -* ]] || { echo "$usage" >&2; exit 2; }
  mkdir -p "$1"
  outdir=$(cd "$1" && pwd)
fi
shift
ALL_TARGETS=(macos-aarch64 macos-x86_64 linux-x86_64 linux-aarch64)
targets=("$@")
((${#targets[@]})) || targets=("${ALL_TARGETS[@]}")

cache="${MACHOFIX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/machofix}/release"
jobs="${MACHOFIX_JOBS:-2}"
host_machofix="${MACHOFIX_HOST_TOOL:-$repo/build/machofix}"
version=$(sed -n 's/^project(machofix VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
work=$(mktemp -d "${TMPDIR:-/tmp}/machofix-release.XXXXXX")
# The logs stay when the build fails.
trap 'status=$?; if [ "$status" = 0 ]; then rm -rf "$work"; else echo "build_release: logs in $work" >&2; fi' EXIT
export ZIG_GLOBAL_CACHE_DIR="$cache/zig-cache" ZIG_LOCAL_CACHE_DIR="$cache/zig-cache"
# ccache (CMake's launcher where it is installed) knows a compiler by its file: here a
# zig wrapper, written anew on every run (so by its content, not its mtime), which
# runs clang.
export CCACHE_COMPILERCHECK=content CCACHE_COMPILERTYPE=clang
# Paths under this run's temporary directory (machofix's build tree, its unity
# sources) are hashed relative to it: without this no release object of an earlier
# run is ever found, and a warm CI recompiled machofix for four targets (~10 min).
export CCACHE_BASEDIR=$work
# Archives and wheels with fixed times: the same inputs give the same bytes.
export SOURCE_DATE_EPOCH=315532800
started=$(date +%s)

source "$repo/scripts/release/common.sh"
source "$repo/scripts/release/pins.sh"
source "$repo/scripts/release/toolchain.sh"
source "$repo/scripts/release/libraries.sh"
source "$repo/scripts/release/package.sh"
source "$repo/scripts/release/packages.sh"

for target in "${targets[@]}"; do
  [[ " ${ALL_TARGETS[*]} " == *" $target "* ]] || die "unknown target $target (known: ${ALL_TARGETS[*]})"
done
[ "$prepare_only" = 1 ] || [ -x "$host_machofix" ] ||
  die "$host_machofix is missing: run scripts/setup.sh first (or set MACHOFIX_HOST_TOOL)"
for tool in npm apt-get cmake ninja flatc llvm-lipo-16 pkg-config; do
  command -v "$tool" >/dev/null || die "$tool is missing: run scripts/setup.sh first"
done
# What the cross-build needs beyond scripts/setup.sh's packages: dpkg-source, make
# (xz's, zstd's and OpenSSL's builds), git (LIEF's CMakeLists looks for it), perl
# (OpenSSL's Configure and assembly), the wheel package (bdist_wheel).
install_missing_packages dpkg-dev make git perl python3-wheel python3-setuptools
# zig from ziglang.org: its signature is checked with minisign.
[ "${MACHOFIX_ZIG_SOURCE:-npm}" != ziglang ] || install_missing_packages minisign curl xz-utils

# Unity build: a release is compiled whole, never piece by piece, and the headers that
# dominate machofix's compile (spdlog and fmt, CLI11, nlohmann-json, toml++) are then
# parsed once a layer instead of once a file (CMakeLists.txt: each layer of core/, and
# tool/, is one unity file): 43% less compile time in batches of 8 (g++ -O2, core and
# tool: 117 s of CPU instead of 206 s), and 18% less again as one file a layer
# (clang -O2: 132 s instead of 162).
build_machofix() {
  local build=$work/machofix-$target strip_debug
  # Debug information out of the binaries: on Linux the static libraries' DWARF
  # (OpenSSL's, libarchive's) is 90% of an ELF binary's size; a Mach-O link leaves the
  # DWARF in the objects but writes a debug map naming each object by its path (the
  # build tree, the zig cache: 61,908 stabs), which no two builds share. The reader
  # plugin is a module on Linux, a shared library (a dylib) on macOS.
  case $(target_os "$target") in
    linux) strip_debug=-Wl,--strip-debug ;;
    macos) strip_debug=-Wl,-S ;;
  esac
  # No path of this machine in the binaries: the checkout's and the cache's (LIEF's
  # headers) are mapped to fixed names wherever __FILE__ or a debug path names them.
  local prefix_map="-ffile-prefix-map=$repo=/machofix -ffile-prefix-map=$cache=/machofix-cache"
  # pkg-config (the static libraries libarchive needs) reads the target's prefix only.
  logged "$work/machofix-configure-$target.log" env PKG_CONFIG_LIBDIR="$cache/prefix-$target/lib/pkgconfig" \
    cmake -S "$repo" -B "$build" -G Ninja \
    -DCMAKE_TOOLCHAIN_FILE="$toolchain_dir/toolchain.cmake" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS="$prefix_map" -DCMAKE_CXX_FLAGS="$prefix_map" \
    -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DMACHOFIX_TESTS=OFF -DMACHOFIX_STATIC_DEPS=ON -DCMAKE_UNITY_BUILD=ON \
    -DMACHOFIX_PLUGIN_BUILD_PATH=OFF -DOPENSSL_ROOT_DIR="$cache/prefix-$target" \
    -DCMAKE_EXE_LINKER_FLAGS="$strip_debug" -DCMAKE_MODULE_LINKER_FLAGS="$strip_debug" \
    -DCMAKE_SHARED_LINKER_FLAGS="$strip_debug"
  logged "$work/machofix-build-$target.log" cmake --build "$build" -j "$jobs" --target machofix machofix_lief
  mkdir -p "$work/thin/$target"
  cp "$build/machofix" "$build/machofix-lief.so" "$work/thin/$target/"
}

build_target() {
  local t0
  make_toolchain "$target"
  build_debian_libraries
  t0=$(date +%s)
  logged "$work/lief-$target.log" env MACHOFIX_CACHE_DIR="$cache" "$repo/scripts/build_lief.sh" \
    "$cache/prefix-$target/lief" -DCMAKE_TOOLCHAIN_FILE="$toolchain_dir/toolchain.cmake"
  say "LIEF for $target: $(($(date +%s) - t0)) s"
  [ "$prepare_only" = 0 ] || return 0
  t0=$(date +%s)
  build_machofix
  say "machofix for $target: $(($(date +%s) - t0)) s"
}

# Targets $parallel at a time (MACHOFIX_PARALLEL_TARGETS, default 2), each in a
# subshell: a configure script or a link uses one core, so a second target's build
# keeps the other busy. Its log lines carry the target's name.
build_in_parallel() {
  local parallel=${MACHOFIX_PARALLEL_TARGETS:-2} pids=() names=() i status=0
  for target in "${targets[@]}"; do
    (build_target) &
    pids+=($!)
    names+=("$target")
    if [ ${#pids[@]} -ge "$parallel" ]; then
      wait "${pids[0]}" || { status=1; say "${names[0]}: failed"; }
      pids=("${pids[@]:1}")
      names=("${names[@]:1}")
    fi
  done
  for i in "${!pids[@]}"; do wait "${pids[i]}" || { status=1; say "${names[i]}: failed"; }; done
  [ "$status" -eq 0 ] || die "a target failed to build (its log is named above)"
}

# All in a function, read whole before it runs: an edit of this file during a run
# does not change the run.
main() {
  fetch_zig
  stage_host_headers
  fetch_all_sources
  build_in_parallel
  if [ "$prepare_only" = 1 ]; then
    say "prepared ${targets[*]} in $(($(date +%s) - started)) s"
    return
  fi
  built() { local t; for t in "$@"; do [ -d "$work/thin/$t" ] || return 1; done; }
  if built macos-aarch64 macos-x86_64; then package_macos; fi
  for target in linux-x86_64 linux-aarch64; do
    if built "$target"; then package_linux "$target"; fi
  done
  if built "${ALL_TARGETS[@]}"; then package_source; fi
  write_checksums
  say "wrote $outdir in $(($(date +%s) - started)) s"
}

main "$@"
exit
