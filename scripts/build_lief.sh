#!/usr/bin/env bash
# Builds the pinned LIEF (0.9.0, the version Debian 12 packages) as a static library
# with only its Mach-O reader, and installs it in PREFIX (include/, lib/libLIEF.a).
# The machofix LIEF reader must build against this very version on every platform:
# Debian's liblief-dev has it, with every format; this script builds it from source
# with the Mach-O reader alone, for the releases, for macOS (Homebrew's LIEF is a
# later, incompatible version) and for scripts/setup.sh's build (the plugin loads in
# a fifth of the time: BENCHMARKS.md).
#
#   scripts/build_lief.sh PREFIX [CMAKE_ARG...]      (e.g. a toolchain file)
#   scripts/build_lief.sh --fetch-only               get and check the source, build nothing
#
# The source: $MACHOFIX_LIEF_TARBALL, else ../shared/third_party/LIEF-0.9.0.tar.gz
# beside the repository (checked against its sha256), else upstream's archive of the
# tag, downloaded into the cache ($MACHOFIX_GITHUB stands in for https://github.com, as
# for scripts/fetch_third_party.py: a mirror, or a test's server). Whatever the archive, its extracted content must
# have the pinned content hash (archives of one tree made by different tools differ
# in their compressed bytes, not in their files). PREFIX is left as it is when its
# stamp says it was built from the same source with the same arguments.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 PREFIX [CMAKE_ARG...] | --fetch-only" >&2; exit 2; }
prefix=$1
shift
fetch_only=false
[ "$prefix" = --fetch-only ] && fetch_only=true

# The pins (pins.lock): the tarball's sha256, and the sha256 of `sha256sum` of every
# extracted file, sorted by path (tree_sha256 below).
source "$repo/scripts/release/pins.sh"
LIEF_VERSION=$(pin_field 1 tarball LIEF)
LIEF_TARBALL_SHA256=$(pin_field 2 tarball LIEF)
LIEF_TREE_SHA256=$(pin_field 2 tree LIEF)
[ "$(pin_field 1 tree LIEF)" = "$LIEF_VERSION" ] || { echo "build_lief: pins.lock: LIEF's tarball and tree differ in version" >&2; exit 1; }
LIEF_URL=${MACHOFIX_GITHUB:-https://github.com}/lief-project/LIEF/archive/refs/tags/$LIEF_VERSION.tar.gz
cache="${MACHOFIX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/machofix}/lief"
jobs="${MACHOFIX_JOBS:-2}"

if command -v sha256sum >/dev/null; then sha256=(sha256sum); else sha256=(shasum -a 256); fi  # Debian / macOS
sha256_of() { "${sha256[@]}" "$1" | cut -d' ' -f1; }

# The content hash of a directory: independent of how it was archived.
tree_sha256() { (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 "${sha256[@]}" | "${sha256[@]}" | cut -d' ' -f1); }

# The tarball to extract: the one beside the repository if its checksum is right,
# else a download (on a machine with the internet, e.g. a Mac without ../shared).
find_tarball() {
  local shared=${MACHOFIX_LIEF_TARBALL:-$repo/../shared/third_party/LIEF-$LIEF_VERSION.tar.gz}
  if [ -f "$shared" ]; then
    local sum
    sum=$(sha256_of "$shared")
    if [ "$sum" != "$LIEF_TARBALL_SHA256" ]; then
      echo "build_lief: $shared: sha256 $sum, expected $LIEF_TARBALL_SHA256" >&2
      exit 1
    fi
    echo "$shared"
    return
  fi
  local download=$cache/LIEF-$LIEF_VERSION-upstream.tar.gz
  if [ ! -f "$download" ]; then
    echo "build_lief: $shared not found; downloading $LIEF_URL" >&2
    mkdir -p "$cache"
    if ! curl -fsSL --retry 3 -o "$download.part" "$LIEF_URL"; then
      rm -f "$download.part"
      echo "build_lief: cannot download $LIEF_URL; put LIEF-$LIEF_VERSION.tar.gz (sha256 $LIEF_TARBALL_SHA256)" \
        "in ../shared/third_party beside the repository, or name it with MACHOFIX_LIEF_TARBALL" >&2
      exit 3
    fi
    mv "$download.part" "$download"
  fi
  echo "$download"
}

# Extracts the tarball into the directory $1 and checks its files against the pin.
extract_checked() {
  tar -xzf "$tarball" -C "$1"
  local tree
  tree=$(tree_sha256 "$1/LIEF-$LIEF_VERSION")
  if [ "$tree" != "$LIEF_TREE_SHA256" ]; then
    rm -f "$cache/LIEF-$LIEF_VERSION-upstream.tar.gz"  # never kept for the next run
    echo "build_lief: $tarball: its files are not LIEF $LIEF_VERSION's (content hash $tree, expected $LIEF_TREE_SHA256)" >&2
    exit 1
  fi
}

tarball=$(find_tarball)
if $fetch_only; then
  check_dir=$(mktemp -d "${TMPDIR:-/tmp}/machofix-lief.XXXXXX")
  trap 'rm -rf "$check_dir"' EXIT
  extract_checked "$check_dir"
  echo "$tarball"
  exit 0
fi
# The key names no path of the cache, so that a copy of the cache at another path (a
# second user's: scripts/check_reproducible.sh) finds this LIEF built, as it finds the
# other libraries. A toolchain file counts by its content and that of the compiler
# wrappers beside it (their flags), the cache's path left out the same way.
cache_root=${MACHOFIX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/machofix}
key_of_arguments() {
  local arg file content
  for arg in "$@"; do
    printf '%s\n' "${arg//"$cache_root"/<cache>}"
    [[ $arg == -DCMAKE_TOOLCHAIN_FILE=* ]] || continue
    for file in "$(dirname "${arg#*=}")"/*; do
      [ -f "$file" ] || continue
      content=$(<"$file")
      printf '%s\n%s\n' "${file##*/}" "${content//"$cache_root"/<cache>}"
    done
  done
}
key=$( (echo "$LIEF_TREE_SHA256"; key_of_arguments "$@"; cat "$repo/scripts/lief/LIEFGit.cmake" "$repo/scripts/lief/LIEFDependencies.cmake" "$repo/scripts/lief/options.cmake" "$0") | "${sha256[@]}" | cut -d' ' -f1)
if [ -f "$prefix/.machofix-lief-stamp" ] && [ "$(cat "$prefix/.machofix-lief-stamp")" = "$key" ]; then
  echo "build_lief: LIEF $LIEF_VERSION in $prefix is up to date"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/machofix-lief.XXXXXX")
trap 'rm -rf "$work"' EXIT
extract_checked "$work"
source_dir=$work/LIEF-$LIEF_VERSION

start=$(date +%s)
echo "build_lief: building LIEF $LIEF_VERSION (Mach-O only, static) into $prefix"
# The options (Mach-O only, static, our LIEFGit.cmake) are scripts/lief/options.cmake's,
# which the Homebrew formula uses too.
# __FILE__ (LIEF's logging, when it is on) and debug paths would otherwise name this
# run's temporary directory, so that two builds of one LIEF differed
# (scripts/check_reproducible.sh).
prefix_map="-ffile-prefix-map=$work=/machofix-lief"
cmake -S "$source_dir" -B "$work/build" -G Ninja -C "$repo/scripts/lief/options.cmake" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS="$prefix_map" -DCMAKE_CXX_FLAGS="$prefix_map" \
  -DCMAKE_INSTALL_PREFIX="$prefix" "$@" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log" >&2; exit 1; }
cmake --build "$work/build" -j "$jobs" --target LIB_LIEF_STATIC
rm -rf "$prefix"
cmake --install "$work/build" >/dev/null
# The licences of what libLIEF.a contains: LIEF and the sources it compiles in.
mkdir -p "$prefix/share/licenses"
cp "$source_dir/LICENSE" "$prefix/share/licenses/LIEF.txt"
# (easylogging++ is not: scripts/lief/options.cmake turns LIEF's logging off.)
mbedtls=$(find "$work/build" -path '*mbed_tls/src/lief_mbed_tls/LICENSE' | head -n1)
[ -n "$mbedtls" ] || { echo "build_lief: mbed TLS's LICENSE is not where LIEF unpacks it" >&2; exit 1; }
cp "$mbedtls" "$prefix/share/licenses/mbedTLS-2.6.0.txt"
echo "$key" >"$prefix/.machofix-lief-stamp"
echo "build_lief: done in $(($(date +%s) - start)) s"
