# shellcheck shell=bash
# The libraries machofix links statically into a release, built from Debian 12's
# source packages for one target each. Sourced by scripts/build_release.sh (after
# scripts/release/toolchain.sh), which defines cache, work, jobs, say, die, logged,
# sha256_of.
#
# Each source package is fetched once with apt-get source (a private apt
# configuration: the machine's own is not touched; apt checks the index signatures),
# checked against the pinned sha256 of its .dsc (dpkg-source checks the rest against
# it), and built once per target into its own part of the cache, keyed by the .dsc,
# the target, the toolchain and the recipe.

# Debian 12 source packages (pins.lock): "name version sha256-of-the-.dsc", for every
# target, and for Linux only (SHA through OpenSSL's libcrypto; macOS has CommonCrypto).
mapfile -t DEBIAN_SOURCES < <(debian_pins all)
mapfile -t LINUX_SOURCES < <(debian_pins linux)
((${#DEBIAN_SOURCES[@]} && ${#LINUX_SOURCES[@]})) || die "pins.lock: no Debian source packages pinned"

# Where Debian's packages come from: settings, so that a mirror can take the place of
# each (the tests serve them on loopback: tests/release/test_fetch_sources.py).
DEBIAN_MIRROR=${MACHOFIX_DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SECURITY_MIRROR=${MACHOFIX_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
DEBIAN_SNAPSHOT=${MACHOFIX_DEBIAN_SNAPSHOT:-https://snapshot.debian.org}

# apt-get with a configuration of its own in the cache: deb-src lines for bookworm,
# its own lists; the machine's sources and state are left alone.
apt_private() {
  local dir=$cache/apt
  apt-get -q -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts=/nonexistent \
    -o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" -o Debug::NoLocking=1 \
    -o APT::Sandbox::User="$(id -un)" "$@"
}

# Reads Debian's index once per run; fails (no exit) when the archive cannot be read.
apt_update_once() {
  [ -z "${apt_updated:-}" ] || return "$apt_updated"
  local dir=$cache/apt
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
  local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  {
    echo "deb-src [signed-by=$keyring] $DEBIAN_MIRROR bookworm main"
    echo "deb-src [signed-by=$keyring] $DEBIAN_MIRROR bookworm-updates main"
    echo "deb-src [signed-by=$keyring] $DEBIAN_SECURITY_MIRROR bookworm-security main"
  } >"$dir/sources.list"
  # apt says "W: Failed to fetch" and goes on: a run that read no index failed.
  apt_updated=0
  apt_private update >"$work/apt-update.log" 2>&1 && ! grep -q '^[WE]: Failed to fetch' "$work/apt-update.log" ||
    apt_updated=1
  return "$apt_updated"
}

# Where NAME=VERSION's .dsc is kept in the cache (the epoch is not in its file name).
dsc_of() { echo "$cache/src/$1/${1}_${2#*:}.dsc"; }

# Downloads NAME=VERSION's source package into the cache (once) and checks its .dsc:
# from Debian's archive, else (a version Debian no longer serves, or an archive out of
# reach) from its snapshot archive. A cold build never fails because Debian moved on.
fetch_debian_source() {
  local name=$1 debian_version=$2 dsc_sha256=$3
  local dir=$cache/src/$name log=$work/apt-source-$name.log
  local dsc
  dsc=$(dsc_of "$name" "$debian_version")
  if [ ! -f "$dsc" ] || [ "$(sha256_of "$dsc")" != "$dsc_sha256" ]; then
    say "fetching the Debian source package $name $debian_version"
    rm -rf "$dir" && mkdir -p "$dir"
    if ! { apt_update_once && (cd "$dir" && apt_private source --download-only "$name=$debian_version") >"$log" 2>&1; }; then
      say "$name $debian_version: not in Debian's archive ($DEBIAN_MIRROR; logs: $work/apt-update.log, $log):" \
        "from the snapshot archive ($DEBIAN_SNAPSHOT)"
      rm -rf "$dir" && mkdir -p "$dir"
      logged "$work/snapshot-$name.log" /usr/bin/python3 "$repo/scripts/release/snapshot_fetch.py" \
        "$DEBIAN_SNAPSHOT" "$name" "$debian_version" "$dir"
    fi
  fi
  [ -f "$dsc" ] || die "$name $debian_version: no $(basename "$dsc") among the files fetched"
  [ "$(sha256_of "$dsc")" = "$dsc_sha256" ] || die "$dsc: sha256 $(sha256_of "$dsc"), expected $dsc_sha256"
}

# Extracts the checked .dsc with Debian's patches applied; dpkg-source checks every
# file against the checksums the .dsc lists.
extract_debian_source() {
  local dsc=$1 into=$2
  rm -rf "$into"
  logged "$work/dpkg-source-$(basename "$dsc").log" dpkg-source -x "$dsc" "$into"
}

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

# liblzma alone, static, with xz's own CMake build (its configure script's checks
# take twice as long under zig). Unix Makefiles: its Ninja files name one
# symlink twice.
build_xz() {
  logged "$work/xz-configure-$target.log" cmake -S "$1" -B "$1/build-release" -G "Unix Makefiles" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$toolchain_dir/toolchain.cmake" -DBUILD_SHARED_LIBS=OFF
  logged "$work/xz-make-$target.log" cmake --build "$1/build-release" -j "$jobs" --target liblzma
  install -D -m644 "$1/build-release/liblzma.a" "$2/lib/liblzma.a"
  mkdir -p "$2/include" && cp -a "$1/src/liblzma/api/lzma.h" "$1/src/liblzma/api/lzma" "$2/include/"
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
    -DENABLE_WERROR=OFF -DENABLE_ACL=OFF -DENABLE_XATTR=OFF
    '-DCMAKE_C_FLAGS=-D_PATH_TMP=\"/tmp/\"')  # <paths.h>'s, missing from zig's macOS headers
  # zig's macOS headers have CommonDigest.h but not CommonCryptor.h nor CommonHMAC.h,
  # which libarchive's zip encryption uses on Apple: that code is built without a
  # crypto library instead (machofix refuses encrypted members in any case).
  local header
  for header in archive_cryptor_private.h archive_hmac_private.h; do
    [ "$(grep -c '^#ifdef __APPLE__$' "$1/libarchive/$header")" = 1 ] || die "libarchive/$header: not the expected source"
    sed -i 's|^#ifdef __APPLE__$|#if 0 /* machofix cross-build: no CommonCryptor.h, CommonHMAC.h */|' "$1/libarchive/$header"
  done
  logged "$work/libarchive-configure-$target.log" cmake -S "$1" -B "$1/build-release" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$toolchain_dir/toolchain.cmake" \
    -DCMAKE_INSTALL_PREFIX="$2" "${flags[@]}"
  logged "$work/libarchive-build-$target.log" cmake --build "$1/build-release" -j "$jobs" --target archive_static
  install -D -m644 "$1/build-release/libarchive/libarchive.a" "$2/lib/libarchive.a"
  install -m644 -t "$2/include" -D "$1/libarchive/archive.h" "$1/libarchive/archive_entry.h"
  install -D -m644 "$1/build-release/build/pkgconfig/libarchive.pc" "$2/lib/pkgconfig/libarchive.pc"
}

# yaml-cpp's library alone (no tools, tests nor contrib), static.
build_yaml_cpp() {
  logged "$work/yaml-cpp-configure-$target.log" cmake -S "$1" -B "$1/build-release" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$toolchain_dir/toolchain.cmake" \
    -DYAML_BUILD_SHARED_LIBS=OFF -DYAML_CPP_BUILD_TESTS=OFF -DYAML_CPP_BUILD_TOOLS=OFF -DYAML_CPP_BUILD_CONTRIB=OFF \
    -DYAML_CPP_INSTALL=OFF
  logged "$work/yaml-cpp-build-$target.log" cmake --build "$1/build-release" -j "$jobs" --target yaml-cpp
  install -D -m644 "$1/build-release/libyaml-cpp.a" "$2/lib/libyaml-cpp.a"
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

# What machofix uses of OpenSSL: the SHA-1/256/384 functions (core/base/sha.cc),
# with their assembly (SHA extensions, NEON) and the CPU detection it dispatches on.
# Only those objects are compiled (crypto/sha/ and the CPU detection: 13 of the
# 884 objects of libcrypto, and the whole link closure of the SHA functions), into a
# libcrypto.a of their own: a link that needed more would fail, not fall back.
build_openssl() {
  local platform
  case $target in
    linux-x86_64) platform=linux-x86_64 ;; linux-aarch64) platform=linux-aarch64 ;;
    *) die "no OpenSSL platform for $target" ;;
  esac
  (cd "$1" && logged "$work/openssl-configure-$target.log" ./Configure "$platform" no-shared no-tests \
    no-engine no-dso no-module no-async no-comp no-legacy no-ui-console --prefix="$2" --libdir=lib \
    CC="$cc" AR="$toolchain_dir/ar" RANLIB="$toolchain_dir/ranlib" &&
    logged "$work/openssl-make-$target.log" make -j "$jobs" build_generated)
  local objects
  objects=$(sed -n 's/^\(crypto\/[a-z0-9_/]*libcrypto-lib-[A-Za-z0-9_-]*\.o\):.*/\1/p' "$1/Makefile" |
    grep -E '^crypto/sha/|^crypto/libcrypto-lib-(cpuid|armcap|ctype|x86_64cpuid|arm64cpuid)\.o$' | sort -u)
  [ -n "$objects" ] || die "OpenSSL's Makefile names no SHA objects"
  # shellcheck disable=SC2086  # object names are words
  (cd "$1" && logged "$work/openssl-make-$target.log" make -j "$jobs" $objects &&
    logged "$work/openssl-make-$target.log" "$toolchain_dir/ar" rcs libcrypto.a $objects)
  install -D -m644 "$1/libcrypto.a" "$2/lib/libcrypto.a"
  mkdir -p "$2/include" && cp -a "$1/include/openssl" "$2/include/"
}

# The source packages of every target's libraries, fetched before the targets build
# side by side (they would otherwise fetch one package at the same time).
fetch_all_sources() {
  local entry name debian_version dsc_sha256
  for entry in "${DEBIAN_SOURCES[@]}" "${LINUX_SOURCES[@]}"; do
    read -r name debian_version dsc_sha256 <<<"$entry"
    fetch_debian_source "$name" "$debian_version" "$dsc_sha256"
  done
}

# Builds each Debian library for $target into its own part of the cache (keyed by
# the .dsc, the target, the toolchain and its flags, and this recipe), then links the
# parts into the target's prefix.
build_debian_libraries() {
  local prefix=$cache/prefix-$target entry name debian_version dsc_sha256
  mkdir -p "$prefix/include" "$prefix/lib/pkgconfig"
  local sources=("${DEBIAN_SOURCES[@]}")
  [ "$(target_os "$target")" = linux ] && sources+=("${LINUX_SOURCES[@]}")
  for entry in "${sources[@]}"; do
    read -r name debian_version dsc_sha256 <<<"$entry"
    local key part
    key=$( (echo "$dsc_sha256 $(zig_triple "$target") zig-$ZIG_VERSION"; toolchain_fingerprint
      declare -f "$(recipe_of "$name")") | sha256sum | cut -c1-16)
    part=$cache/parts/$name-$target-$key
    if ! up_to_date "$part" "$key"; then
      local dsc
      dsc=$(dsc_of "$name" "$debian_version")
      say "building $name $debian_version for $target"
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
    yaml-cpp) echo build_yaml_cpp ;; libplist) echo build_libplist ;; openssl) echo build_openssl ;;
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

