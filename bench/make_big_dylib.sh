#!/bin/sh
# Links a dylib of about KIBIBYTES KiB (arm64 unless ARCH says x86_64), as ld64.lld-16
# signs it (ad hoc, linker style), with an unused libomp for prune to remove: the input
# of the Mach-O benchmarks.
#
#   bench/make_big_dylib.sh OUT KIBIBYTES [ARCH]
set -eu
out=${1:?usage: make_big_dylib.sh OUT KIBIBYTES [ARCH]}
kibibytes=${2:?usage: make_big_dylib.sh OUT KIBIBYTES [ARCH]}
arch=${3:-arm64}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# Random bytes, so no page hash repeats and nothing compresses.
head -c "$((kibibytes * 1024))" /dev/urandom >payload.bin
cat >big.c <<'C'
__asm__(".section __TEXT,__const\n.globl _payload\n_payload:\n.incbin \"payload.bin\"\n");
extern const unsigned char payload[];
extern void *malloc(unsigned long);
int read_payload(unsigned long i) { return payload[i] + (malloc(1) != 0); }
C
for lib in "libSystem /usr/lib/libSystem.B.dylib _malloc, dyld_stub_binder" \
           "libomp /opt/llvm-openmp/lib/libomp.dylib ___kmpc_fork_call"; do
  set -- $lib
  name=$1 install=$2
  shift 2
  printf -- "--- !tapi-tbd\ntbd-version: 4\ntargets: [ %s-macos ]\ninstall-name: '%s'\nexports:\n  - targets: [ %s-macos ]\n    symbols: [ %s ]\n...\n" \
    "$arch" "$install" "$arch" "$*" >"$name.tbd"
done
clang-16 -target "$arch"-apple-macos11 -O2 -c big.c -o big.o
ld64.lld-16 -arch "$arch" -platform_version macos 11.0 11.0 -dylib -install_name @rpath/big.dylib \
  big.o libSystem.tbd libomp.tbd -o "$out"
