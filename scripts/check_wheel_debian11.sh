#!/usr/bin/env bash
# Installs the release's x86_64 wheel with pip in a Debian 11 root (glibc 2.31, older
# than any machine the development build runs on) and repairs the samples there:
#
#   scripts/check_wheel_debian11.sh OUTDIR MODEL.pte... [--reference MACHOFIX]
#
# The root is bootstrapped by mmdebstrap from Debian's bullseye (minbase, python3,
# python3-venv, python3-pip), cached as a tarball in ~/.cache/machofix/ci for a week
# like .ci/pristine_root.sh's. Inside it: a venv, `pip install` of the wheel (pip
# itself decides that the manylinux2014 tag fits), then the wheel's machofix prunes,
# inspects, checks and verifies each model, and the Python API prunes them too; the
# pruned models must equal, byte for byte, what MACHOFIX (default build/machofix, the
# development build) makes of them here. Needs root (chroot, mount).
# Ends with "N passed, M failed"; exit status 1 if anything failed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: $0 OUTDIR MODEL.pte... [--reference MACHOFIX]"
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
outdir=$(cd "$1" && pwd)
shift
models=()
reference=$repo/build/machofix
while [ $# -gt 0 ]; do
  case $1 in
    --reference) reference=$2 && shift 2 ;;
    *) models+=("$1") && shift ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "check_wheel_debian11: needs root (mmdebstrap, chroot, mount)" >&2; exit 2; }
version=$(sed -n 's/^project(machofix VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
wheel=$outdir/machofix-$version-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
[ -f "$wheel" ] || { echo "check_wheel_debian11: no $wheel (scripts/build_release.sh)" >&2; exit 2; }

suite=bullseye
# Debian 11 is served from deb.debian.org until Debian drops it there, then from the
# archive server, whose Release files are past their Valid-Until (their signatures
# are still checked): the mirrors are tried in turn (MACHOFIX_DEBIAN11_MIRRORS,
# space-separated base URLs).
read -r -a mirrors <<<"${MACHOFIX_DEBIAN11_MIRRORS:-http://deb.debian.org/debian http://archive.debian.org/debian}"
packages=python3,python3-venv,python3-pip
cache=${XDG_CACHE_HOME:-$HOME/.cache}/machofix/ci
root=$(mktemp -d "${MACHOFIX_CI_WORK:-/var/tmp}/machofix-debian11.XXXXXX")
mounts=()
cleanup() {
  local mount
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}" 2>/dev/null || umount --lazy "${mounts[i]}"; done
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "  ok: $*"; }
failure() { failed=$((failed + 1)); echo "  FAILED: $*"; }

command -v mmdebstrap >/dev/null ||
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null
# The same packages whichever mirror serves them: the key names no mirror.
key=$( (mmdebstrap --version; echo "$suite minbase $packages") | sha256sum | cut -c1-16)
tarball=$cache/debian11-$key.tar
mkdir -p "$cache"
bootstrap() {
  local mirror
  : >"$tarball.log"
  for mirror in "${mirrors[@]}"; do
    echo "check_wheel_debian11: bootstrapping Debian 11 from $mirror (mmdebstrap; log: $tarball.log)"
    mmdebstrap --mode=root --variant=minbase --include="$packages" --format=tar \
      --aptopt='Acquire::Check-Valid-Until "false"' "$suite" "$tarball.partial" "deb $mirror $suite main" \
      >>"$tarball.log" 2>&1 && mv "$tarball.partial" "$tarball" && return 0
  done
  tail -n 20 "$tarball.log"
  return 1
}
[ -n "$(find "$tarball" -mtime -7 2>/dev/null)" ] || bootstrap || exit 1
tar --numeric-owner -xf "$tarball" -C "$root"
for mount in proc dev; do
  if [ $mount = proc ]; then mount -t proc proc "$root/proc"; else mount --bind /dev "$root/dev"; fi
  mount --make-private "$root/$mount"
  mounts+=("$root/$mount")
done

mkdir -p "$root/check/models" "$root/check/expected"
cp "$wheel" "$root/check/"
for model in "${models[@]}"; do
  cp "$model" "$root/check/models/"
  "$reference" prune "$model" -o "$root/check/expected/$(basename "$model" .pte).fixed.pte" >/dev/null
done

inside() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 /bin/bash -c "$1"; }
expect_inside() {
  local what=$1 output
  if output=$(inside "$2" 2>&1); then pass "$what"; else failure "$what"; printf '%s\n' "$output" | tail -n 20 | sed 's/^/    /'; fi
}

echo "check_wheel_debian11: $(basename "$wheel") in Debian $(cat "$root/etc/debian_version")"
expect_inside "glibc 2.31 (ldd --version)" 'ldd --version | head -n1 | grep -q " 2\.31$"'
expect_inside "python3 -m venv" 'python3 -m venv /check/venv'
expect_inside "pip install $(basename "$wheel") (pip $(inside 'python3 -m pip --version' 2>/dev/null | cut -d" " -f2))" \
  "/check/venv/bin/pip install --no-index --no-cache-dir /check/$(basename "$wheel")"
expect_inside "machofix --version" "/check/venv/bin/machofix --version | grep -q $version"
for model in "${models[@]}"; do
  name=$(basename "$model" .pte)
  expect_inside "$name.pte: prune, then the output verifies and checks as a file the same bytes as build/machofix's" "
    cd /check && venv/bin/machofix inspect models/$name.pte >/dev/null &&
    venv/bin/machofix prune models/$name.pte -o $name.fixed.pte &&
    venv/bin/machofix verify $name.fixed.pte && venv/bin/machofix inspect $name.fixed.pte >/dev/null &&
    cmp $name.fixed.pte expected/$name.fixed.pte"
  expect_inside "$name.pte: the Python API's prune, the same bytes" "
    cd /check && venv/bin/python -c 'import machofix, sys; machofix.prune(sys.argv[1], output=sys.argv[2])' \
      models/$name.pte $name.api.pte && cmp $name.api.pte expected/$name.fixed.pte"
done

echo "check_wheel_debian11: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
