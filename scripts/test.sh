#!/usr/bin/env bash
# The test command (README.md; CI runs exactly this after scripts/setup.sh).
# Builds lina and runs its tests in stages:
#   release   scripts/build.sh (CUDA compiled and linked with nvcc where the
#             toolkit is) and the debug preset's lina, which the gdb tests step
#             through; then the whole suite with CTest
#   cuda-sim  the CUDA backend on lina's CUDA runtime on the CPU (cuda_sim/):
#             the simulator's own tests, `lina train --device cuda`, the op
#             table against the CPU (which the release stage skips without a
#             GPU), and the device check end to end with --sim, which runs
#             the whole CUDA test file
#   asan      only with --sanitize (or LINA_SANITIZE=1): the suite again under
#             -fsanitize=address,undefined (under the sanitizers the fuzz test
#             runs fewer cases and the memory measurements skip themselves)
# It ends, pass or fail, with each stage's seconds and, for each stage, how
# many tests passed, skipped and failed, every test that skipped itself (in
# whole or in part) with its reason, and every test that failed
# (scripts/ctest_summary.py, from the JUnit file ctest writes: a test that
# failed is listed as failed whatever it printed).
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=${LINA_SANITIZE:-0}
for arg in "$@"; do
  case $arg in
    --sanitize) sanitize=1 ;;
    *) echo "test.sh: unknown argument '$arg' (use --sanitize)" >&2; exit 2 ;;
  esac
done

start=$SECONDS
stages=()
presets_run=()
summary() {
  local rc=$?
  echo
  echo "test.sh: ${stages[*]:-no stage finished}; $((SECONDS - start)) s in all"
  local preset
  for preset in "${presets_run[@]}"; do
    if [[ -f $(junit "$preset") ]]; then
      python3 scripts/ctest_summary.py "$preset" "$(junit "$preset")" || true
    else
      echo "test.sh: $preset: ctest wrote no results (it stopped before the end)"
    fi
  done
  ((rc == 0)) && echo "test.sh: all stages passed" || echo "test.sh: FAILED (exit $rc)"
}
trap summary EXIT
stage_done() { stages+=("$1 $((SECONDS - stage_start)) s"); }
# Where ctest writes a stage's results (--output-junit), read by summary.
junit() { echo "$PWD/build/$1/Testing/lina-junit.xml"; }
# ctest for a stage (preset), its results written afresh to junit.
run_ctest() {
  local preset=$1
  shift
  presets_run+=("$preset")
  rm -f "$(junit "$preset")"
  ctest --preset "$preset" -j "$(nproc)" --output-junit "$(junit "$preset")" "$@"
}

# ---- release ------------------------------------------------------------------
stage_start=$SECONDS
scripts/build.sh
cmake --preset debug >/dev/null
cmake --build --preset debug -j "$(nproc)" --target lina
run_ctest release
stage_done release

# ---- cuda-sim -------------------------------------------------------------------
stage_start=$SECONDS
cmake --preset cuda-sim >/dev/null
cmake --build --preset cuda-sim -j "$(nproc)" --target lina lina_tests lina_cuda_tests cuda_sim_tests
run_ctest cuda-sim -R '^(cuda_sim/.*|device_check_sim|--device cuda.*|op table: cuda.*)$'
stage_done cuda-sim

# ---- asan (--sanitize) ------------------------------------------------------------
if [[ $sanitize != 0 ]]; then
  stage_start=$SECONDS
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$(nproc)"
  run_ctest asan
  stage_done asan
fi
