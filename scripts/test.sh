#!/usr/bin/env bash
# The test command (README.md; CI runs exactly this after scripts/setup.sh).
# Builds lina and runs its tests in stages:
#   release   scripts/build.sh (CUDA compiled and linked with nvcc where the
#             toolkit is) and the debug preset's lina, which the gdb tests step
#             through; then the whole suite with CTest
#   cuda-sim  the CUDA backend on lina's CUDA runtime on the CPU (cuda_sim/):
#             every test whose name says cuda (cuda_sim_tests below): the
#             simulator's own tests, `lina train --device cuda`, the op table
#             against the CPU and the CUDA half of every op test (which the
#             release stage skips without a GPU, saying so:
#             tests/cuda_half.h), and the device check end to end with
#             --sim, which runs the whole CUDA test file
#   asan      the sanitizer suite under -fsanitize=address,undefined: the
#             tests of the readers of untrusted input (texts, checkpoints,
#             options), of the autograd core and of the CPU kernels
#             (LINA_SANITIZED_TEST_FILES in CMakeLists.txt), and the
#             simulator's own tests; under the sanitizers the fuzz test runs
#             fewer cases and the memory measurements skip themselves.
#             --sanitize-all (LINA_SANITIZE=all): the whole suite instead
#             (the asan-all preset); --no-sanitize (LINA_SANITIZE=0): no
#             asan stage (a quicker run; CI runs it)
# It ends, pass or fail, with each stage's seconds and, for each stage, how
# many tests passed, skipped and failed, every test that skipped itself (in
# whole or in part) with its reason, and every test that failed; then the
# numbered list of what no stage ran (skipped wherever it was registered:
# what this machine cannot run), with its count (scripts/ctest_summary.py,
# from the JUnit file ctest writes: a test that failed is listed as failed
# whatever it printed).
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=${LINA_SANITIZE:-1}
for arg in "$@"; do
  case $arg in
    --sanitize-all) sanitize=all ;;
    --no-sanitize) sanitize=0 ;;
    *) echo "test.sh: unknown argument '$arg' (use --sanitize-all or --no-sanitize)" >&2; exit 2 ;;
  esac
done
# The cuda-sim stage's tests: every test whose name says cuda
# (tests/test_cuda_halves.py checks that each test case with a CUDA half is
# one), and the device check.
cuda_sim_tests='cuda|^device_check_sim$'

start=$SECONDS
stages=()
presets_run=()
summary() {
  local rc=$?
  echo
  echo "test.sh: ${stages[*]:-no stage finished}; $((SECONDS - start)) s in all"
  local preset results=()
  for preset in "${presets_run[@]}"; do
    if [[ -f $(junit "$preset") ]]; then
      results+=("$preset" "$(junit "$preset")")
    else
      echo "test.sh: $preset: ctest wrote no results (it stopped before the end)"
    fi
  done
  ((${#results[@]} == 0)) || python3 scripts/ctest_summary.py "${results[@]}" || true
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
run_ctest cuda-sim -R "$cuda_sim_tests"
stage_done cuda-sim

# ---- asan (the sanitizer suite; --sanitize-all: every test) -------------------------
if [[ $sanitize == all ]]; then
  stage_start=$SECONDS
  cmake --preset asan-all >/dev/null
  cmake --build --preset asan-all -j "$(nproc)"
  run_ctest asan-all
  stage_done asan-all
elif [[ $sanitize != 0 ]]; then
  stage_start=$SECONDS
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$(nproc)" --target lina lina_tests cuda_sim_tests
  run_ctest asan
  stage_done asan
fi
