#!/usr/bin/env bash
# Builds lina (scripts/build.sh) and the debug preset's lina (for the gdb
# tests) and runs every test with CTest, then the cuda-sim preset (the CUDA
# backend on lina's CUDA runtime on the CPU) and its CUDA tests, then builds
# the "asan" preset
# (-fsanitize=address,undefined, CPU only) and runs the suite again under
# the sanitizers; LINA_SANITIZE=0 skips that second part
# for a quick local run. Under the sanitizers the fuzz test runs fewer cases
# and the memory measurements report themselves as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
scripts/build.sh
# The debugger tests (gdb_printers, walkthrough_gdb) step through the debug
# preset's lina: -O0 -g, no OpenMP, no CUDA.
cmake --preset debug >/dev/null
cmake --build --preset debug -j "$(nproc)" --target lina
ctest --preset release -j "$(nproc)"
echo "test.sh: release build and suite took $((SECONDS - start)) s"
# The CUDA backend on lina's CUDA runtime on the CPU (cuda_sim/): the
# simulator's own tests, `lina train --device cuda`, and the device check
# end to end with --sim, which runs the whole CUDA test file.
cmake --preset cuda-sim >/dev/null
cmake --build --preset cuda-sim -j "$(nproc)" --target lina lina_tests lina_cuda_tests cuda_sim_tests
ctest --preset cuda-sim -j "$(nproc)" -R '^(cuda_sim/.*|device_check_sim|--device cuda.*)$'
echo "test.sh: with cuda-sim, $((SECONDS - start)) s"
if [[ "${LINA_SANITIZE:-1}" != 0 ]]; then
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$(nproc)"
  echo "test.sh: the sanitizer build took $((SECONDS - start)) s from the start; now its suite"
  ctest --preset asan -j "$(nproc)"
fi
