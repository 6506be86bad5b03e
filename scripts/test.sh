#!/usr/bin/env bash
# Builds lina (scripts/build.sh) and runs every test with CTest. Set
# LINA_SANITIZE=1 to also run the suite under -fsanitize=address,undefined
# (the "asan" preset, CPU only).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --preset release -j "$(nproc)"
if [[ "${LINA_SANITIZE:-0}" == 1 ]]; then
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$(nproc)"
  ctest --preset asan -j "$(nproc)"
fi
