#!/usr/bin/env bash
# Configures and builds lina's Release preset (CUDA too when nvcc is found
# in /usr/local/cuda/bin or on PATH): build/release/lina and the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
