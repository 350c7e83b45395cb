#!/bin/sh
# Builds the bundled sample into OUTDIR:
#   model.so           an arm64 dylib linked like an AOTInductor Metal .so
#                      (-undefined dynamic_lookup, libomp linked but unused, ad hoc linker-signed)
#   metal_model.pte    an ExecuTorch program storing it the way the Metal backend
#                      does (1.4+ content-hash keys, "so_key\nweights_key" payload)
#   machofix.toml      the application's portability contract, beside the model, where
#                      `machofix check` finds it
#
#   samples/aoti_metal/build.sh OUTDIR PTE_WRITER
# PTE_WRITER is the test writer built by CMake (build/tests/pte_writer).
# MACHOFIX_SAMPLE_CC and MACHOFIX_SAMPLE_LD name another C compiler and Mach-O linker
# that take the same arguments: Apple's clang and ld, for the Homebrew formula.
set -eu
cc=${MACHOFIX_SAMPLE_CC:-clang-16}
ld=${MACHOFIX_SAMPLE_LD:-ld64.lld-16}
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUTDIR PTE_WRITER}
writer=${2:?usage: build.sh OUTDIR PTE_WRITER}
mkdir -p "$out"
"$cc" -target arm64-apple-macos11 -O2 -fPIC -fno-builtin -c "$here/model.c" -o "$out/model.o"
# The library order of Inductor's link line: libomp sits between used libraries,
# so removing it renumbers the ordinals of everything after it.
"$ld" -arch arm64 -platform_version macos 11.0 11.0 -dylib -undefined dynamic_lookup \
  -install_name @rpath/model.so "$out/model.o" \
  "$here/stubs/libSystem.tbd" "$here/stubs/libomp.tbd" "$here/stubs/libcxx.tbd" \
  "$here/stubs/libobjc.tbd" "$here/stubs/Metal.tbd" -o "$out/model.so"
"$writer" wrap "$out/model.so" "$out/metal_model.pte" hash
cp "$here/machofix.toml" "$out/machofix.toml"
