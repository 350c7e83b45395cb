#!/usr/bin/env bash
# scripts/setup.sh on macOS: installs what machofix needs from Homebrew (only what is
# missing), builds the pinned LIEF (scripts/build_lief.sh: Homebrew's LIEF is
# another version), then configures and builds machofix in ./build like on Debian.
# The tests call LLVM 16's tools by their Debian names (clang-16, ld64.lld-16,
# llvm-objdump-16, ...): build/llvm-16/bin links those names to Homebrew's llvm@16,
# and scripts/demo.sh and scripts/test.sh put it on the PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v brew >/dev/null || { echo "setup: macOS needs Homebrew (https://brew.sh) for machofix's packages" >&2; exit 1; }

formulae=(cmake ninja pkgconf cli11 spdlog fmt doctest flatbuffers tomlplusplus nlohmann-json yaml-cpp libplist
  libarchive llvm@16 pre-commit)
missing=()
for formula in "${formulae[@]}"; do
  brew list --versions "$formula" >/dev/null 2>&1 || missing+=("$formula")
done
# Any python3 and npm on the PATH will do (the tests use Python's standard library only).
command -v python3 >/dev/null || missing+=(python)
command -v npm >/dev/null || missing+=(node)
if ((${#missing[@]})); then
  echo "setup: brew install ${missing[*]}"
  brew install "${missing[@]}"
fi

cache="${MACHOFIX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/machofix}"
lief_prefix=$cache/lief-0.9.0-$(uname -m)-macos
scripts/build_lief.sh "$lief_prefix"

llvm=$(brew --prefix llvm@16)
mkdir -p build/llvm-16/bin
for tool in clang clang++ ld64.lld lld llvm-lipo llvm-objdump llvm-nm llvm-otool llvm-readobj llvm-strip \
  llvm-install-name-tool llvm-objcopy llvm-ar llvm-profdata llvm-symbolizer; do
  if [ -x "$llvm/bin/$tool" ]; then ln -sf "$llvm/bin/$tool" "build/llvm-16/bin/$tool-16"; fi
done

# libarchive is keg-only in Homebrew: CMake and pkg-config are told where it is.
archive=$(brew --prefix libarchive)
export PKG_CONFIG_PATH="$archive/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
build_type="${MACHOFIX_BUILD_TYPE:-RelWithDebInfo}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" \
  -DCMAKE_PREFIX_PATH="$lief_prefix;$archive;$(brew --prefix)" ${MACHOFIX_CMAKE_ARGS:-} >/dev/null
cmake --build build
