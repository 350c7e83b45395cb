#!/usr/bin/env bash
# Installs what machofix's build and every test need (only what is missing), then
# configures and builds it in ./build. Used by scripts/demo.sh and scripts/test.sh;
# safe to run again. One line per step; the package manager's and CMake's own
# output goes to build/setup.log, whose end is shown when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."

# macOS: Homebrew's packages instead (scripts/setup_macos.sh), then the same build.
if [ "$(uname)" = Darwin ]; then
  exec scripts/setup_macos.sh
fi

# Debian 12 packages. `.ci/run` proves the list complete: it runs the README's two
# commands in a freshly bootstrapped minimal Debian 12 root.
debian_packages=(
  # the build
  cmake ninja-build g++ pkg-config
  # a compiler cache: a second build of the same sources compiles nothing again
  ccache
  libcli11-dev libspdlog-dev doctest-dev
  # LIEF 0.9.0 for the builds other than ./build (sanitizers, fuzzers, the Python
  # package from source); ./build's is built below, Mach-O reader only
  liblief-dev
  libflatbuffers-dev flatbuffers-compiler libssl-dev
  # header-only: the contract file's TOML parser, the SARIF report's JSON
  libtomlplusplus-dev nlohmann-json3-dev
  # what `check --app` reads: Apple's .tbd stubs (YAML; libyaml-cpp.a, linked
  # statically) and an application's Info.plist, XML or binary (libplist: Debian has
  # no static archive of it, so a static build loads libplist3 when it reads one)
  libyaml-cpp-dev libplist-dev
  # mbedTLS's static archives, for what the LIEF plugin needs of it
  libmbedtls-dev
  # ld.lld, which links the LIEF plugin without libm (CMakeLists.txt says why)
  lld
  # libarchive, linked statically: the static archive of each library that
  # `pkg-config --static libarchive` names (libarchive-dev does not pull them in)
  libarchive-dev nettle-dev libacl1-dev liblzma-dev libzstd-dev liblz4-dev libbz2-dev zlib1g-dev
  # the tests: Mach-O files linked by LLVM's linker and read back by its tools, the
  # fuzzers and sanitizers (clang's runtimes), the test drivers
  clang-16 lld-16 llvm-16 libclang-rt-16-dev python3
  # SARIF reports validated against the SARIF 2.1.0 JSON schema
  python3-jsonschema
  # an XFS image on a loop device, where a .pte's output shares its input's blocks
  xfsprogs
  # the Python package's wheel, built with no package index and installed in a venv
  python3-setuptools python3-wheel python3-venv python3-pip
  # ExecuTorch's own export code, run by the export-step tests (typing_extensions:
  # exir/_warnings.py; flatbuffers: its .pte serializer), also with machofix's
  # patch to it applied
  python3-typing-extensions python3-flatbuffers patch
  # the second test tier fetches pinned npm packages over HTTPS (openssl: the
  # offline tests of that fetch make their own certificate authority)
  ca-certificates openssl
  # the pieces for CI run for real (tests/ci/): the pre-commit hook by pre-commit in a
  # scratch git repository, the GitHub Action's steps as action.yml (YAML) lists them
  pre-commit python3-yaml git curl
  # whole model stores on a Dask cluster (python/machofix/dask/): distributed's
  # scheduler and workers, started for real by the tests
  python3-distributed
  # the release's zig from ziglang.org, its signature checked (tests/release/: a
  # stand-in on loopback, signed with a key the test makes)
  minisign
)
# Any npm on the PATH will do (Debian's conflicts with other Node.js distributions).
command -v npm >/dev/null || debian_packages+=(npm)

log=build/setup.log
log_started=""

# Runs "$@" with its output in the log (new at each run of setup.sh); on failure
# shows the log's end and exits.
step() {
  local what=$1
  shift
  echo "setup: $what"
  [ -n "$log_started" ] || { mkdir -p build && : >"$log" && log_started=1; }
  if ! "$@" >>"$log" 2>&1; then
    echo "setup: FAILED: $what; the end of $log:"
    tail -n 30 "$log" | sed 's/^/  | /'
    exit 1
  fi
}

missing_debian_packages() {
  local package
  for package in "${debian_packages[@]}"; do
    dpkg-query -W -f='${Status}\n' "$package" 2>/dev/null | grep -q "install ok installed" || echo "$package"
  done
}

install_debian_packages() {
  local missing
  mapfile -t missing < <(missing_debian_packages)
  ((${#missing[@]})) || return 0
  local as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
      echo "setup: ${#missing[@]} Debian packages are missing and you are neither root nor have sudo:" \
        "run scripts/setup.sh as root, or as root run: apt-get install --no-install-recommends ${missing[*]}" >&2
      exit 1
    fi
    as_root=(sudo)
  fi
  step "installing ${#missing[@]} Debian packages with ${as_root[*]:+sudo }apt-get (log: $log)" \
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive sh -c \
    'apt-get update && apt-get install -y --no-install-recommends "$@"' apt-get "${missing[@]}"
}

if command -v apt-get >/dev/null && command -v dpkg-query >/dev/null; then
  install_debian_packages
else
  echo "setup: this script installs Debian 12 packages with apt-get, which this system does not have;" \
    "install the equivalents of: ${debian_packages[*]}" >&2
  exit 1
fi

# LIEF's Mach-O reader alone, the LIEF the releases carry, built once into the cache
# (about 20 s on 2 cores). Debian's libLIEF.a has every format: PE's static tables
# alone made the reader plugin's load cost 5.7 ms instead of 1.1 (BENCHMARKS.md).
cache="${MACHOFIX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/machofix}"
lief_prefix=$cache/lief-0.9.0-$(uname -m)-linux
step "LIEF 0.9.0, its Mach-O reader (scripts/build_lief.sh, once)" scripts/build_lief.sh "$lief_prefix"

build_type="${MACHOFIX_BUILD_TYPE:-RelWithDebInfo}"
step "configuring ($build_type, CMake + Ninja)" \
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DMACHOFIX_LIEF_PREFIX="$lief_prefix" ${MACHOFIX_CMAKE_ARGS:-}
echo "setup: building"
cmake --build build
