#!/bin/sh
# Links the Mach-O images that the .pte tests embed, like an AOTInductor .so:
# -undefined dynamic_lookup, libomp linked but unused, ad hoc linker-signed.
#
#   tests/pte/make_blobs.sh OUTDIR      (~1 s; needs clang-16, ld64.lld-16, llvm-lipo-16)
#
# OUTDIR receives:
#   forward.so    arm64, dyld-info; libomp removable, later ordinals shift
#   decode.so     arm64, chained fixups, other code (another hash)
#   universal.so  arm64 + x86_64; libomp removable in both slices
#   clean.so      arm64, every dylib used: nothing to remove
#   flat.so       arm64, -flat_namespace: left unchanged
#   unsigned.so   arm64, no signature: grows when --sign adds one
set -eu
out=${1:?usage: make_blobs.sh OUTDIR}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

stub() {  # stub NAME INSTALL_NAME SYMBOL...
  name=$1 install=$2
  shift 2
  symbols=$(echo "$@" | sed 's/ /, /g')
  cat >"$name.tbd" <<TBD
--- !tapi-tbd
tbd-version: 4
targets: [ arm64-macos, x86_64-macos ]
install-name: '$install'
exports:
  - targets: [ arm64-macos, x86_64-macos ]
    symbols: [ $symbols ]
...
TBD
}
stub libSystem /usr/lib/libSystem.B.dylib _malloc _free dyld_stub_binder
stub libomp /opt/llvm-openmp/lib/libomp.dylib ___kmpc_fork_call
stub libcxx /usr/lib/libc++.1.dylib __ZdlPv __Znwm
stub libfoo @rpath/libfoo.dylib _foo_run

# No #include: there is no SDK. Every extern below is imported from a stub, except
# aoti_missing, which -undefined dynamic_lookup leaves to a flat lookup at run time.
cat >kernel.c <<'C'
extern void *malloc(unsigned long);
extern void free(void *);
extern void *_Znwm(unsigned long);
extern void _ZdlPv(void *);
extern int foo_run(int);
extern int aoti_missing(int);
int KERNEL(int x) {
  void *p = malloc(16), *q = _Znwm(32);
  free(p);
  _ZdlPv(q);
  return foo_run(x) + aoti_missing(x) + SALT;
}
C
cat >clean.c <<'C'
extern void *malloc(unsigned long);
extern void free(void *);
int clean_kernel(int x) { void *p = malloc(8); free(p); return x; }
C

cc() {  # cc ARCH OUT.o -D...
  arch=$1 obj=$2
  shift 2
  clang-16 -target "$arch-apple-macos11" -O2 -fno-builtin -fno-stack-protector "$@" -c -o "$obj"
}
link() {  # link ARCH OUT OBJ [ld flags...]
  arch=$1 so=$2 obj=$3
  shift 3
  ld64.lld-16 -arch "$arch" -platform_version macos 11.0 11.0 -dylib -undefined dynamic_lookup \
    -install_name "@rpath/$so" "$@" "$obj" libSystem.tbd libomp.tbd libcxx.tbd libfoo.tbd -o "$so"
}

cc arm64 forward.o -DKERNEL=forward_kernel -DSALT=1 kernel.c
cc arm64 decode.o -DKERNEL=decode_kernel -DSALT=2 kernel.c
cc x86_64 forward_x86.o -DKERNEL=forward_kernel -DSALT=1 kernel.c
link arm64 forward.so forward.o
link arm64 decode.so decode.o -fixup_chains
link x86_64 forward_x86.so forward_x86.o
llvm-lipo-16 -create forward.so forward_x86.so -output universal.so
link arm64 flat.so forward.o -flat_namespace
link arm64 unsigned.so forward.o -no_adhoc_codesign
cc arm64 clean.o clean.c
ld64.lld-16 -arch arm64 -platform_version macos 11.0 11.0 -dylib -install_name @rpath/clean.so clean.o libSystem.tbd -o clean.so

cp forward.so decode.so universal.so clean.so flat.so unsigned.so "$out/"
