#!/bin/bash
# Builds /tmp/scan_ab: backend_cpu/scan_chunked_fixed.cpp (and the
# small_matmul.h it includes) as of revision REV (default HEAD) against the
# working tree's, both in one binary (scan_ab.cpp), so that alternating
# rounds see the same machine load. The new one is compiled into namespace
# lina::cpu::scan_chunk_new, its small:: helpers renamed, so neither copy's
# inline functions replace the other's at link time.
# Run from the repository root after building build/cpu; then
#   OMP_NUM_THREADS=1 /tmp/scan_ab
set -euo pipefail
REV=${1:-HEAD}
old=$(mktemp -d) new=$(mktemp -d)  # apart: an #include looks beside its file first
trap 'rm -rf "$old" "$new"' EXIT
git archive "$REV" backend_cpu core | tar -x -C "$old"
sed -e 's/^namespace lina::cpu::scan_chunk {/namespace lina::cpu::scan_chunk_new { using namespace lina::cpu::scan_chunk; }\nnamespace lina::cpu::scan_chunk_new {/' \
  backend_cpu/scan_chunked_fixed.cpp > "$new/scan.cpp"
flags="-O3 -march=native -fopenmp -DNDEBUG -std=c++17 -I/usr/include/eigen3 ${EXTRA_FLAGS:-}"
g++ $flags -I"$old" -c "$old/backend_cpu/scan_chunked_fixed.cpp" -o "$old/old.o"
g++ $flags -I. -Dsmall=small_new -c "$new/scan.cpp" -o "$new/scan.o"
g++ $flags -I. results/bench/kernels-2026-12/scan_ab.cpp "$old/old.o" "$new/scan.o" \
  build/cpu/liblina_engine.a -ldl -o /tmp/scan_ab
echo "built /tmp/scan_ab: $REV against the working tree"
