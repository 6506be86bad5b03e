#!/bin/bash
# Builds /tmp/conv_ab: backend_cpu/norm_conv_rope.cpp as of revision REV
# (default HEAD) against the working tree's, in one binary (conv_ab.cpp); the
# new copy is compiled into namespace lina::cpu_new. The old copy replaces
# the library's at link time. Run from the repository root after building
# build/cpu; then OMP_NUM_THREADS=1 /tmp/conv_ab
set -euo pipefail
REV=${1:-HEAD}
old=$(mktemp -d)
trap 'rm -rf "$old"' EXIT
git show "$REV:backend_cpu/norm_conv_rope.cpp" > "$old/old.cpp"
sed -e 's/^namespace lina::cpu {/namespace lina::cpu_new { using namespace lina::cpu; }\nnamespace lina::cpu_new {/' \
  backend_cpu/norm_conv_rope.cpp > "$old/new.cpp"
flags="-O3 -march=native -fopenmp -DNDEBUG -std=c++17 -I. -I/usr/include/eigen3"
g++ $flags results/bench/kernels-2026-12/conv_ab.cpp "$old/old.cpp" "$old/new.cpp" \
  build/cpu/liblina_engine.a -ldl -o /tmp/conv_ab
echo "built /tmp/conv_ab: $REV against the working tree"
