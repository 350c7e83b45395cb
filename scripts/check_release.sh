#!/usr/bin/env bash
# Checks every artefact scripts/build_release.sh wrote, with independent readers and
# by running the Linux binaries on real ExecuTorch models:
#
#   scripts/check_release.sh OUTDIR            (the artefacts of build_release.sh)
#   scripts/check_release.sh --build OUTDIR    (scripts/build_release.sh first: CI)
#
#   - SHA256SUMS lists every archive, wheel and the formula, and each checksum holds;
#   - the source archive: HEAD's files (no Formula/) and the formula test's model; the
#     formula (machofix.rb): valid Ruby (ruby -c), its url's sha256 the archive's, its
#     LIEF resource's the one scripts/build_lief.sh pins, and otherwise
#     Formula/machofix.rb line for line;
#   - the macOS archive: scripts/check_macos_release.sh (llvm-lipo, llvm-objdump,
#     machofix verify/check/inspect/prune of every slice);
#   - the Linux archives, with binutils (objdump -T, readelf -d, the aarch64 ones for
#     aarch64) and llvm-readelf-16: an ELF executable and module of the right machine
#     that need nothing but glibc, no symbol version newer than GLIBC_2.17 (the
#     manylinux2014 policy), the plugin interface exported;
#   - each wheel: tagged as its name says, carrying byte for byte the binaries and
#     licences of its archive;
#   - run: the x86_64 binary natively and the aarch64 one under qemu-aarch64-static
#     (Debian's qemu-user-static, with libc6-arm64-cross's glibc) prune, inspect and
#     check the samples (../shared/samples/*.pte, build/demo's models); their outputs
#     and reports (timings aside) equal the development build's (build/machofix);
#   - the x86_64 wheel installed with pip in a venv: its machofix command and its
#     Python API repair the samples to the same bytes.
# Ends with "N passed, M failed"; exit status 1 if anything failed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: $0 OUTDIR | --build OUTDIR"
if [ "${1:-}" = --build ]; then
  [ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }
  build_start=$(date +%s)
  "$repo/scripts/build_release.sh" "$2"
  echo "check_release: scripts/build_release.sh took $(($(date +%s) - build_start)) s"
  shift
fi
[ $# -eq 1 ] || { echo "$usage" >&2; exit 2; }
outdir=$(cd "$1" && pwd)
version=$(sed -n 's/^project(machofix VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
reference=$repo/build/machofix
work=$(mktemp -d "${TMPDIR:-/tmp}/machofix-check-release.XXXXXX")
trap 'rm -rf "$work"' EXIT

# What the checks run: Debian's qemu-user-static, libc6-arm64-cross (the aarch64
# glibc qemu loads), binutils for aarch64, python3-venv, ruby (ruby -c).
say() { echo "check_release: $*"; }
source "$repo/scripts/release/packages.sh"
install_missing_packages qemu-user-static libc6-arm64-cross binutils-aarch64-linux-gnu python3-venv python3-pip unzip ruby

source "$repo/scripts/release/expect.sh"

source "$repo/scripts/release/pins.sh"
source "$repo/scripts/release/checks.sh"
source "$repo/scripts/release/build_paths.sh"

echo "check_release: $outdir"
expect "SHA256SUMS: every checksum holds" bash -c 'cd "$1" && sha256sum --strict -c SHA256SUMS' _ "$outdir"
artefacts=(machofix-$version.tar.gz machofix.rb machofix-$version-macos.tar.gz machofix-$version-linux-x86_64.tar.gz
  machofix-$version-linux-aarch64.tar.gz machofix-$version-py3-none-macosx_11_0_universal2.whl
  machofix-$version-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
  machofix-$version-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl)
for artefact in "${artefacts[@]}"; do
  expect "$artefact: written and in SHA256SUMS" bash -c 'test -s "$1/$2" && grep -q "  $2\$" "$1/SHA256SUMS"' _ \
    "$outdir" "$artefact"
done

echo "source archive and Homebrew formula:"
check_source_and_formula

echo "macOS archive:"
if "$repo/scripts/check_macos_release.sh" "$outdir/machofix-$version-macos.tar.gz" "$reference" >"$work/macos.log" 2>&1; then
  pass "scripts/check_macos_release.sh: $(tail -n1 "$work/macos.log")"
else
  failure "scripts/check_macos_release.sh"
  grep -E "FAILED|check_macos_release" "$work/macos.log" | sed 's/^/    /'
fi
check_wheel macos macosx_11_0_universal2

samples=()
for model in "$repo"/../shared/samples/*.pte "$repo"/build/demo/metal_model.pte "$repo"/build/demo/cpu/cpu_model.pte; do
  if [ -f "$model" ]; then samples+=("$model"); fi
done
[ ${#samples[@]} -gt 0 ] || failure "no sample models (../shared/samples/*.pte, build/demo: scripts/demo.sh)"
run_reference "${samples[@]}"
for arch in x86_64 aarch64; do
  echo "Linux $arch archive:"
  check_linux_archive "$arch"
  check_wheel "linux-$arch" "manylinux_2_17_$arch.manylinux2014_$arch"
  runner=()
  [ "$arch" = x86_64 ] || runner=(qemu-aarch64-static -L /usr/aarch64-linux-gnu)
  check_runs "$arch" "${runner[@]}"
done
echo "x86_64 wheel in a venv:"
check_venv

echo "check_release: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
