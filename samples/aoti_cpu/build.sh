#!/bin/sh
# Builds the CPU sample into OUTDIR:
#   cpu_model.so     an arm64 dylib linked like an AOTInductor CPU .so: it calls
#                    OpenMP, from libomp at the build machine's absolute install name
#                    /opt/llvm-openmp/lib/libomp.dylib (-undefined dynamic_lookup,
#                    ad hoc linker-signed)
#   cpu_model.pte    an ExecuTorch program storing it with 1.4+ content-hash keys, the
#                    way the AOTI Metal backend stores its .so (tests/pte/pte_writer wrap)
#   machofix.toml    the application's contract (libomp is provided at @rpath), beside it
#
#   samples/aoti_cpu/build.sh OUTDIR PTE_WRITER
# PTE_WRITER is the test writer built by CMake (build/tests/pte_writer).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
stubs=$here/../aoti_metal/stubs
out=${1:?usage: build.sh OUTDIR PTE_WRITER}
writer=${2:?usage: build.sh OUTDIR PTE_WRITER}
mkdir -p "$out"
clang-16 -target arm64-apple-macos11 -O2 -fPIC -fno-builtin -c "$here/model.c" -o "$out/cpu_model.o"
ld64.lld-16 -arch arm64 -platform_version macos 11.0 11.0 -dylib -undefined dynamic_lookup \
  -install_name @rpath/cpu_model.so "$out/cpu_model.o" \
  "$stubs/libSystem.tbd" "$stubs/libomp.tbd" "$stubs/libcxx.tbd" -o "$out/cpu_model.so"
"$writer" wrap "$out/cpu_model.so" "$out/cpu_model.pte" hash
cp "$here/machofix.toml" "$out/machofix.toml"
