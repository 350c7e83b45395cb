#!/usr/bin/env bash
# Installs what is missing, builds machofix, and repairs the bundled sample: an
# ExecuTorch .pte whose Metal .so depends on PyTorch's libomp without using it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
[ "$(uname)" != Darwin ] || export PATH="$PWD/build/llvm-16/bin:$PATH"  # LLVM 16 by its Debian names (setup_macos.sh)
cmake --build build --target pte_writer >/dev/null
out=build/demo
samples/aoti_metal/build.sh "$out" build/tests/pte_writer

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
step build/machofix inspect "$out/metal_model.pte"
# check holds the model to the contract beside it (samples/aoti_metal/machofix.toml:
# no OpenMP under any name, nothing at @rpath, Metal never weak-linked).
step build/machofix check "$out/metal_model.pte" --sarif "$out/check.sarif" || echo "(exit status $?: findings)"
step build/machofix prune "$out/metal_model.pte" -o "$out/metal_model.fixed.pte"
step build/machofix inspect "$out/metal_model.fixed.pte"
step build/machofix check "$out/metal_model.fixed.pte" --contract samples/aoti_metal/machofix.toml
step build/machofix verify "$out/metal_model.fixed.pte"

# A CPU model whose .so really calls OpenMP: removing libomp is not the repair. Its
# install name, the build machine's /opt/llvm-openmp/lib/libomp.dylib, becomes
# @rpath/libomp.dylib, which the application ships (samples/aoti_cpu/machofix.toml).
samples/aoti_cpu/build.sh "$out/cpu" build/tests/pte_writer
step build/machofix check "$out/cpu/cpu_model.pte" || echo "(exit status $?: findings)"
step build/machofix edit "$out/cpu/cpu_model.pte" --change /opt/llvm-openmp/lib/libomp.dylib @rpath/libomp.dylib \
  -o "$out/cpu/cpu_model.fixed.pte"
step build/machofix check "$out/cpu/cpu_model.fixed.pte"
step build/machofix verify "$out/cpu/cpu_model.fixed.pte"
