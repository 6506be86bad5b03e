#!/usr/bin/env bash
# The offline GPU check: one command for a lent GPU machine that has nvcc,
# cmake and g++ but no package registry (carry .device-deps, made here by
# scripts/device-deps.sh).
#   scripts/device-check.sh OUT
# Builds lina with CUDA (arch 90, Release) into build/device, runs the CUDA
# tests and (time allowing) the CPU suite, times a few training steps of
# every preset on the lm task on cuda, trains attn and gdn on cuda for as
# many steps as the budget allows (5000 at most), recording losses, ms/step
# and kernel launches per step, times the CPU beside it, and writes into OUT
# at most four files: build.log, tests.log, train.log and device-summary.json.
# Without a GPU the summary says so and lists the kernels that ran only
# through the host emulator.
# Everything ends within LINA_CHECK_BUDGET_S seconds (default 280).
# Exit status: 0 all ran and the tests passed (a preset that cannot train on
# cuda yet is recorded, not fatal); 1 no dependencies or no usable cmake;
# 2 configure or build failed; 3 no GPU here (after the build);
# 4 a test failed or timed out, or the CUDA tests skipped on a GPU machine.
set -euo pipefail
out=${1:?usage: scripts/device-check.sh OUT}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS
budget=${LINA_CHECK_BUDGET_S:-280}
jobs=$(nproc)
build=build/device
presets=(attn linear delta gdn hybrid retnet mamba2 gla)
export PATH="/usr/local/cuda/bin:/usr/local/nvidia/bin:$PATH"

left() { echo $((budget - (SECONDS - start))); }
say() { echo "device-check: $*"; }
state=$(mktemp -d)
trap 'write_summary; rm -rf "$state"' EXIT

# ---- the summary: facts as "dotted.key<TAB>value" lines, json at exit ------
note() { printf '%s\t%s\n' "$1" "$(printf '%s' "$2" | tr '\t\n' '  ')" >>"$state/facts"; }
write_summary() {
  note total_seconds $((SECONDS - start))
  python3 - "$state/facts" "$out/device-summary.json" <<'EOF'
import json, sys
summary = {}
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    key, _, value = line.rstrip("\n").partition("\t")
    for cast in (int, float):
        try:
            value = cast(value)
            break
        except ValueError:
            pass
    node = summary
    *path, last = key.split(".")
    for part in path:
        node = node.setdefault(part, {})
    node[last] = value
json.dump(summary, open(sys.argv[2], "w"), indent=2)
EOF
}
finish() {  # finish STATUS CODE MESSAGE
  note status "$1"
  say "$3"
  exit "$2"
}

note commit "$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
note date "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
note nvcc "$(nvcc --version 2>/dev/null | grep -oE 'release [0-9.]+, V[0-9.]+' || echo none)"

# ---- dependencies: the unpacked Debian packages ------------------------------
if ! timeout 120 scripts/device-deps.sh >"$out/build.log" 2>&1; then
  cat "$out/build.log"
  finish no-deps 1 "no .device-deps and no way to make it: run scripts/device-deps.sh where apt works and carry .device-deps"
fi

# ---- cmake: the project needs 3.25; take the newest one found ------------------
version_of() { "$1" --version 2>/dev/null | head -1 | grep -oE '[0-9]+\.[0-9]+(\.[0-9]+)?' || true; }
version_ge() { [[ $(printf '%s\n' "$1" "$2" | sort -V | head -1) == "$2" ]]; }
cmake=""
best=""
for candidate in "$(command -v cmake || true)" /usr/local/bin/cmake /usr/bin/cmake \
  "$(python3 -c 'import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))' 2>/dev/null || true)"; do
  [[ -n $candidate && -x $candidate ]] || continue
  v=$(version_of "$candidate")
  [[ -n $v ]] || continue
  if [[ -z $best ]] || ! version_ge "$best" "$v"; then
    cmake=$candidate
    best=$v
  fi
done
note cmake "${best:-none} ${cmake}"
if [[ -z $best ]] || ! version_ge "$best" 3.25; then
  finish no-cmake 1 "no cmake >= 3.25 here (found: ${best:-none}); CMakeLists.txt needs 3.25"
fi
ctest=$(dirname "$cmake")/ctest

# ---- configure and build (no presets: the same settings as "release") --------
say "configure and build with cmake $best, $jobs jobs"
t0=$SECONDS
if ! timeout 120 "$cmake" -S . -B "$build" \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O3 -DNDEBUG" \
      -DLINA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DCMAKE_PREFIX_PATH="$root/.device-deps/usr" >>"$out/build.log" 2>&1; then
  tail -20 "$out/build.log"
  finish configure-failed 2 "configure failed (see build.log)"
fi
grep -E '^(Eigen3|doctest|nlohmann_json|CLI11)_DIR' "$build/CMakeCache.txt" >>"$out/build.log"
if ! grep -q 'lina: CUDA backend ON' "$out/build.log"; then
  finish no-nvcc 2 "configure found no CUDA toolkit (nvcc), so nothing to check on a GPU"
fi
limit=$(($(left) - 20))
((limit > 30)) || limit=30
if ! timeout "$limit" "$cmake" --build "$build" --parallel "$jobs" \
      --target lina lina_tests lina_cuda_tests >>"$out/build.log" 2>&1; then
  tail -30 "$out/build.log"
  finish build-failed 2 "build failed or ran out of time (see build.log)"
fi
note build_seconds $((SECONDS - t0))
say "built in $((SECONDS - t0)) s"

# ---- a GPU? --------------------------------------------------------------------
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
if [[ -z $gpu ]]; then
  note gpu none
  # What has run then: the per-thread logic of every kernel through the host
  # emulator (tests/test_cuda_emulation_*.cpp, test_cuda_host_emulation.cpp),
  # except gemm, which is cuBLAS; nothing on a GPU.
  note kernels.ran_only_through_the_host_emulator \
    "$(grep -oE '^  X\(void, [a-z0-9_]+' core/kernel_list.h | awk '{print $2}' | grep -vx gemm | paste -sd' ')"
  note kernels.not_run "gemm (cuBLAS)"
  finish no-gpu 3 "NO GPU HERE (nvidia-smi absent or lists no GPU): built lina, lina_tests and lina_cuda_tests, skipped the GPU stages"
fi
note gpu "$gpu"
say "GPU: $gpu"

# ---- tests: the CUDA table, then the CPU suite --------------------------------
tests_ok=1
rc=0
timeout 90 "$build/lina_cuda_tests" >"$out/tests.log" 2>&1 || rc=$?
case $rc in
  0) result=passed ;;
  77) result=skipped ;;
  124 | 137) result=timed-out ;;
  *) result=failed ;;
esac
[[ $result == passed ]] || tests_ok=0
note cuda_tests.result "$result"
note cuda_tests.exit_code "$rc"
# doctest: "[doctest] test cases: 12 | 11 passed | 1 failed | 0 skipped"
line=$(grep -E '^\[doctest\] test cases:' "$out/tests.log" | tail -1 || true)
for field in passed failed skipped; do
  n=$(grep -oE "[0-9]+ $field" <<<"$line" | grep -oE '^[0-9]+' || true)
  [[ -n $n ]] && note "cuda_tests.$field" "$n"
done
line=$(grep -E '^\[doctest\] assertions:' "$out/tests.log" | tail -1 || true)
[[ -n $line ]] && note cuda_tests.assertions "${line#\[doctest\] assertions: }"
say "CUDA tests: $result ${line:-}"

# The CPU suite, in what time the training stage can spare (CI runs it in
# full anyway); a run cut short still reports the tests that finished.
limit=$(($(left) - 160))
((limit > 60)) && limit=60
((limit < 20)) && limit=20
{ echo; echo "==== ctest (CPU suite, at most $limit s) ===="; } >>"$out/tests.log"
total=$(cd "$build" && "$ctest" -N -E '^cuda_backend$' | grep -oE 'Total Tests: [0-9]+' | grep -oE '[0-9]+' || echo 0)
rc=0
mkdir -p "$state/tmp"   # the tests' temp folders: fresh, whatever a killed run left in /tmp
(cd "$build" && TMPDIR="$state/tmp" timeout "$limit" "$ctest" -j "$jobs" --timeout 60 -E '^cuda_backend$' \
  --output-on-failure) >>"$out/tests.log" 2>&1 || rc=$?
count() { grep -cE "Test +#[0-9]+: .*$1" "$out/tests.log" || true; }
passed=$(count ' Passed ')
failed=$(count '\*\*\*(Failed|Exception|Not Run)')
timed_out=$(count '\*\*\*Timeout')
skipped=$(count '\*\*\*Skipped')
note cpu_tests.total "$total"
note cpu_tests.passed "$passed"
note cpu_tests.failed "$failed"
note cpu_tests.timed_out "$timed_out"
note cpu_tests.skipped "$skipped"
if ((rc == 124 || rc == 137)); then
  note cpu_tests.result "cut short after $limit s"
elif ((failed + timed_out > 0 || rc != 0)); then
  note cpu_tests.result failed
  tests_ok=0
else
  note cpu_tests.result passed
fi
say "CPU suite of $total: $passed passed, $failed failed, $timed_out timed out, $skipped skipped (ctest exit $rc)"

# ---- training: every preset probed on cuda, then attn and gdn trained long ----
runs=$(mktemp -d)
# train DEVICE PRESET STEPS TIMEOUT: trains lm; prints "ms_per_step train_loss
# val_loss launches_per_step" from the run's json, or the error.
train() {
  local dir="$runs/$1-$2-$3" rc=0
  timeout "$4" "$build/lina" train --preset "$2" --task lm --steps "$3" --device "$1" \
    --data data/tinyshakespeare.txt --eval-every 100000 --eval-batches 4 --extrap-batches 0 \
    --checkpoint-every 100000 --quiet --out "$dir" >"$dir.log" 2>&1 || rc=$?
  { echo "==== $1 $2 $3 steps: exit $rc"; cat "$dir.log"; } >>"$out/train.log"
  if ((rc == 0)); then
    python3 - "$dir/$1/lm_$2.json" <<'EOF2'
import json, sys
j = json.load(open(sys.argv[1]))
final = j.get("final", {})
print(round(j["ms_per_step"], 3), final.get("train_loss", "nan"), final.get("val_loss", "nan"),
      j.get("cuda_step", {}).get("launches", -1))
EOF2
    return 0
  fi
  ((rc == 124 || rc == 137)) && echo "timed out after $4 s" && return 1
  grep -E 'error' "$dir.log" | tail -1 || tail -1 "$dir.log"
  return 1
}
record() {  # record PRESET DEVICE "ms train val launches" [PREFIX]
  local ms tl vl launches
  read -r ms tl vl launches <<<"$3"
  note "presets.$1.$2.${4:-}ms_per_step" "$ms"
  [[ -n ${4:-} ]] && return 0
  note "presets.$1.$2.train_loss" "$tl"
  note "presets.$1.$2.val_loss" "$vl"
  ((launches >= 0)) && note "presets.$1.$2.launches_per_step" "$launches"
  return 0
}
probe_steps=3
: >"$out/train.log"
declare -A cuda_ms=()
for p in "${presets[@]}"; do
  if result=$(train cuda "$p" $probe_steps 40); then
    cuda_ms[$p]=${result%% *}
    record "$p" cuda "$result" probe_
    say "$p, $probe_steps steps on cuda: ${cuda_ms[$p]} ms/step"
  else
    note "presets.$p.cuda.error" "$result"
    say "$p on cuda: $result"
  fi
done

# attn and gdn, each as many steps as half the time left allows (5000 at most):
# the final losses, ms/step and launches per step.
long_runs=(attn gdn)
for i in "${!long_runs[@]}"; do
  p=${long_runs[$i]}
  [[ -n ${cuda_ms[$p]:-} ]] || continue
  share=$(( ($(left) - 20) / (${#long_runs[@]} - i) ))
  ((share >= 10)) || break
  # 70 % of the share for the steps: startup, evaluation and the json take the rest
  steps=$(python3 -c "print(max($probe_steps, min(5000, int(0.7 * ($share - 5) * 1000 / max(${cuda_ms[$p]}, 0.01)))))")
  if result=$(train cuda "$p" "$steps" "$share"); then
    note "presets.$p.cuda.steps" "$steps"
    record "$p" cuda "$result"
    say "$p: $steps steps on cuda: $result (ms/step train_loss val_loss launches/step)"
  else
    note "presets.$p.cuda.long_run_error" "$result"
  fi
done

# The CPU beside it, a few steps per preset, in what time is left.
for p in "${presets[@]}"; do
  (($(left) > 25)) || break
  if result=$(train cpu "$p" $probe_steps 20); then
    record "$p" cpu "$result" ""
  else
    note "presets.$p.cpu.error" "$result"
  fi
done
rm -rf "$runs"

((tests_ok)) || finish tests-failed 4 "done in $((SECONDS - start)) s, but a test failed, or the CUDA tests skipped (see tests.log)"
finish ok 0 "done in $((SECONDS - start)) s; summary in $out/device-summary.json"
