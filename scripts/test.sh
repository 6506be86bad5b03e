#!/usr/bin/env bash
# Builds lina (Release, CUDA too when nvcc is found) and runs every test with
# CTest. Set LINA_SANITIZE=1 to also run the suite under
# -fsanitize=address,undefined (the "asan" preset).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"
jobs=$(nproc)
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"
if [[ "${LINA_SANITIZE:-0}" == 1 ]]; then
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$jobs"
  ctest --preset asan -j "$jobs"
fi
