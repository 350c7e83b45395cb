#!/usr/bin/env bash
# Installs what machofix needs from Debian's packages (only what is missing), then
# configures and builds it in ./build. Used by scripts/demo.sh, scripts/test.sh
# and .ci/run; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

# macOS: Homebrew's packages instead (scripts/setup_macos.sh), then the same build.
if [ "$(uname)" = Darwin ]; then
  exec scripts/setup_macos.sh
fi

packages=(
  cmake ninja-build g++ python3
  liblief-dev libcli11-dev libspdlog-dev doctest-dev
  libflatbuffers-dev flatbuffers-compiler libssl-dev libarchive-dev
  libzstd-dev liblz4-dev libacl1-dev pkg-config
  clang-16 lld-16 llvm-16 libclang-rt-16-dev
  libmbedtls-dev python3-setuptools python3-wheel python3-venv python3-pip
)
# npm fetches the second test tier (real macOS binaries); any npm on the PATH will do.
command -v npm >/dev/null || packages+=(npm)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

build_type="${MACHOFIX_BUILD_TYPE:-RelWithDebInfo}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" ${MACHOFIX_CMAKE_ARGS:-} >/dev/null
cmake --build build
