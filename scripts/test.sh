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
# It ends, pass or fail, with each stage's seconds and every test that
# skipped itself, with its reason.
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
  local preset log
  for preset in "${presets_run[@]}"; do
    log=build/$preset/Testing/Temporary/LastTest.log
    [[ -f $log ]] || continue
    # "N/M Test: NAME" heads each test's output in the log
    awk -v preset="$preset" '/^[0-9]+\/[0-9]+ Test: /{sub(/^[0-9]+\/[0-9]+ Test: /, ""); name=$0}
      /SKIPPED: /{sub(/.*SKIPPED: /, ""); print "test.sh: " preset " skipped " name ": " $0}' "$log"
  done
  ((rc == 0)) && echo "test.sh: all stages passed" || echo "test.sh: FAILED (exit $rc)"
}
trap summary EXIT
stage_done() { stages+=("$1 $((SECONDS - stage_start)) s"); }

# ---- release ------------------------------------------------------------------
stage_start=$SECONDS
scripts/build.sh
cmake --preset debug >/dev/null
cmake --build --preset debug -j "$(nproc)" --target lina
presets_run+=(release)
ctest --preset release -j "$(nproc)"
stage_done release

# ---- cuda-sim -------------------------------------------------------------------
stage_start=$SECONDS
cmake --preset cuda-sim >/dev/null
cmake --build --preset cuda-sim -j "$(nproc)" --target lina lina_tests lina_cuda_tests cuda_sim_tests
presets_run+=(cuda-sim)
ctest --preset cuda-sim -j "$(nproc)" -R '^(cuda_sim/.*|device_check_sim|--device cuda.*|op table: cuda.*)$'
stage_done cuda-sim

# ---- asan (--sanitize) ------------------------------------------------------------
if [[ $sanitize != 0 ]]; then
  stage_start=$SECONDS
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$(nproc)"
  presets_run+=(asan)
  ctest --preset asan -j "$(nproc)"
  stage_done asan
fi
