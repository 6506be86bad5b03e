#!/usr/bin/env bash
# The GPU check: one command for a lent GPU machine that has nvcc, cmake and
# g++ but no package registry (carry .device-deps, made here by
# scripts/device-deps.sh), and the same script on lina's CUDA runtime on the
# CPU, so the script itself is tested where there is no GPU:
#   scripts/device-check.sh OUT          on a GPU
#   scripts/device-check.sh --sim OUT    on cuda-sim (CI runs this)
# Phases, each started only while the budget allows it, each rewriting
# OUT/device-summary.json when it ends (a kill keeps what was measured):
#   build   lina and lina_cuda_tests only, with every core (CUDA arch 90, or
#           the cuda-sim build); LINA_CHECK_BUILD=DIR reuses a built DIR
#   tests   the whole CUDA test file (the op table against the CPU, training steps of
#           every preset, determinism, inference); a failing test case is
#           run again alone with CUDA_LAUNCH_BLOCKING=1 (and under
#           compute-sanitizer where present); no CPU suite (CI runs it)
#   graph   20 updates of gdn, attn, hybrid with the update replayed as a CUDA
#           graph and launched eagerly: the same bits (gdn only on cuda-sim)
#   timing  every preset on lm, 120 updates (12 on cuda-sim): ms per update
#           over the replays of the captured graph after its eager,
#           rehearsed and captured updates (the run json's cuda_step), and
#           the kernels one update runs; then 5 eager updates (--cuda-graph
#           off) for one update's GPU time kernel by kernel (kernel-times-P.json)
#   torch   the same model in PyTorch, eager, on the same GPU (where python3
#           has torch with CUDA): ms/step and lina's ratio to it
#   compiled  the same at PyTorch's best: torch.compile (reduce-overhead:
#           fused kernels replayed as CUDA graphs) and fused AdamW, 64×64
#   captured  the same with the whole eager step (forward, backward, AdamW)
#           captured once as a CUDA graph and replayed, 64×64
# (scripts/device-course.sh then runs the course's runs at full length.)
# OUT gets build.log, tests.log, train.log, torch-cuda.{log,json},
# torch-compiled.{log,json}, torch-captured.{log,json} and device-summary.json.
# LINA_CHECK_BUDGET_S: seconds in all (default 280 on a GPU, 900 on cuda-sim).
# Exit status: 0 all ran and the tests passed (a preset that cannot train on
# cuda is recorded, not fatal); 1 no dependencies or no usable cmake;
# 2 configure or build failed; 3 no GPU here (after the build); 4 a test
# failed or timed out, or the CUDA tests skipped.
set -euo pipefail
sim=0
if [[ ${1:-} == --sim ]]; then
  sim=1
  shift
fi
out=${1:?usage: scripts/device-check.sh [--sim] OUT}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS
if ((sim)); then
  budget=${LINA_CHECK_BUDGET_S:-900}
  build=${LINA_CHECK_BUILD:-build/device-sim}
  # lina's CUDA runtime on the CPU: small batches (its ms/step are a CPU's)
  train_shape=(--batch 2 --context 16)
  timing_updates=12
else
  budget=${LINA_CHECK_BUDGET_S:-280}
  build=${LINA_CHECK_BUILD:-build/device}
  train_shape=()
  timing_updates=120
fi
jobs=$(nproc)
presets=(attn linear delta gdn hybrid retnet mamba2 gla)
export PATH="/usr/local/cuda/bin:/usr/local/nvidia/bin:$PATH"

left() { echo $((budget - (SECONDS - start))); }
say() { echo "device-check: $*"; }
state=$(mktemp -d)
trap 'write_summary; rm -rf "$state"' EXIT

# ---- the summary: facts as "dotted.key<TAB>value" lines, json after each phase ----
note() { printf '%s\t%s\n' "$1" "$(printf '%s' "$2" | tr '\t\n' '  ')" >>"$state/facts"; }
write_summary() {
  [[ -f $state/facts ]] || return 0
  printf 'total_seconds\t%s\n' $((SECONDS - start)) >"$state/facts.total"
  python3 - "$state/facts" "$state/facts.total" "$out/device-summary.json" <<'EOF'
import json, os, sys
summary = {}
for name in sys.argv[1:3]:
    for line in open(name, encoding="utf-8", errors="replace"):
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
tmp = sys.argv[3] + ".tmp"
json.dump(summary, open(tmp, "w"), indent=2)
os.replace(tmp, sys.argv[3])
EOF
}
phase_done() {  # phase_done NAME: records its time and rewrites the summary
  note "phases.$1_seconds" $((SECONDS - phase_start))
  write_summary
}
phase_start=$SECONDS
room_for() {  # room_for SECONDS NAME: false (and noted) when the budget has not that much left
  if (($(left) < $1)); then
    note "phases.$2" "skipped: $(left) s left, needs $1"
    say "skipping $2: $(left) s left"
    return 1
  fi
  phase_start=$SECONDS
}
finish() {  # finish STATUS CODE MESSAGE
  note status "$1"
  say "$3"
  exit "$2"
}

note runtime "$( ((sim)) && echo "sim (lina's CUDA runtime on the CPU)" || echo cuda)"
note commit "$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
note date "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
note machine "$(uname -m), $(nproc) cores"
note nvcc "$(nvcc --version 2>/dev/null | grep -oE 'release [0-9.]+, V[0-9.]+' || echo none)"

# ---- build -----------------------------------------------------------------------
: >"$out/build.log"
if [[ -n ${LINA_CHECK_BUILD:-} && -x $build/lina && -x $build/lina_cuda_tests ]]; then
  note build "reused $build"
  say "reusing the build in $build"
else
  if ((!sim)) && ! timeout 120 scripts/device-deps.sh >>"$out/build.log" 2>&1; then
    cat "$out/build.log"
    finish no-deps 1 "no .device-deps and no way to make it: run scripts/device-deps.sh where apt works and carry .device-deps"
  fi
  # cmake: the project needs 3.25; take the newest one found
  version_of() { "$1" --version 2>/dev/null | head -1 | grep -oE '[0-9]+\.[0-9]+(\.[0-9]+)?' || true; }
  version_ge() { [[ $(printf '%s\n' "$1" "$2" | sort -V | head -1) == "$2" ]]; }
  cmake="" best=""
  for candidate in "$(command -v cmake || true)" /usr/local/bin/cmake /usr/bin/cmake \
    "$(python3 -c 'import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))' 2>/dev/null || true)"; do
    [[ -n $candidate && -x $candidate ]] || continue
    v=$(version_of "$candidate")
    [[ -n $v ]] || continue
    if [[ -z $best ]] || ! version_ge "$best" "$v"; then
      cmake=$candidate best=$v
    fi
  done
  note cmake "${best:-none} ${cmake}"
  if [[ -z $best ]] || ! version_ge "$best" 3.25; then
    finish no-cmake 1 "no cmake >= 3.25 here (found: ${best:-none}); CMakeLists.txt needs 3.25"
  fi
  say "configure and build with cmake $best, $jobs jobs"
  if ((sim)); then
    flags=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -g -DNDEBUG" -DLINA_CUDA=OFF -DLINA_CUDA_SIM=ON)
  else
    flags=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O3 -DNDEBUG" -DLINA_CUDA=ON
           -DCMAKE_CUDA_ARCHITECTURES=90 "-DCMAKE_PREFIX_PATH=$root/.device-deps/usr")
  fi
  if ! timeout 120 "$cmake" -S . -B "$build" "${flags[@]}" >>"$out/build.log" 2>&1; then
    tail -20 "$out/build.log"
    finish configure-failed 2 "configure failed (see build.log)"
  fi
  if ! grep -q 'lina: CUDA backend ON' "$out/build.log"; then
    finish no-nvcc 2 "configure found no CUDA toolkit (nvcc), so nothing to check on a GPU"
  fi
  limit=$(($(left) - 20))
  ((limit > 30)) || limit=30
  if ! timeout "$limit" "$cmake" --build "$build" --parallel "$jobs" --target lina lina_cuda_tests \
        >>"$out/build.log" 2>&1; then
    tail -30 "$out/build.log"
    finish build-failed 2 "build failed or ran out of time (see build.log)"
  fi
  say "built in $((SECONDS - phase_start)) s"
fi
phase_done build

# ---- a GPU? --------------------------------------------------------------------
if ((sim)); then
  note gpu "none: lina's CUDA runtime on the CPU (cuda_sim/)"
else
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
  if [[ -z $gpu ]]; then
    note gpu none
    finish no-gpu 3 "NO GPU HERE (nvidia-smi absent or lists no GPU): built lina and lina_cuda_tests, skipped the GPU stages"
  fi
  note gpu "$gpu"
  say "GPU: $gpu"
fi

# ---- tests: the whole CUDA test file --------------------------------------------
tests_ok=0
: >"$out/tests.log"
if room_for 30 tests; then
  rc=0
  timeout $(($(left) - 10)) "$build/lina_cuda_tests" >>"$out/tests.log" 2>&1 || rc=$?
  case $rc in
    0) result=passed ;;
    77) result=skipped ;;
    124 | 137) result=timed-out ;;
    *) result=failed ;;
  esac
  [[ $result == passed ]] && tests_ok=1
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
  # Each failing case again, alone, every launch synchronised (so an error
  # names its kernel), under compute-sanitizer where there is one. doctest's
  # -tc splits at commas, so a comma in a case's name is escaped.
  if [[ $result == failed ]]; then
    sanitizer=$(command -v compute-sanitizer || true)
    grep -oE '^TEST CASE: +.*' "$out/tests.log" | sed -E 's/^TEST CASE: +//' | sort -u | while read -r name; do
      (($(left) > 30)) || break
      { echo; echo "==== again alone, CUDA_LAUNCH_BLOCKING=1: $name ===="; } >>"$out/tests.log"
      CUDA_LAUNCH_BLOCKING=1 LINA_CUDA_SYNC=1 timeout $(($(left) - 20)) \
        ${sanitizer:+"$sanitizer" --print-limit 20} "$build/lina_cuda_tests" -tc="${name//,/\\,}" >>"$out/tests.log" 2>&1 || true
    done
  fi
  ((sim && !tests_ok)) && tail -60 "$out/tests.log"
  phase_done tests
fi

runs=$(mktemp -d)

# ---- graph: the replayed update against the eager one, on this device ------------
# 20 updates of gdn, attn and hybrid (gdn only on cuda-sim, whose CI suite
# runs every preset) with --cuda-graph on and off: the loss curves and every
# checkpoint tensor must be the same bits.
graph_presets=(gdn attn hybrid)
((sim)) && graph_presets=(gdn)
if room_for 45 graph; then
  graph_ok=1
  for p in "${graph_presets[@]}"; do
    for g in on off; do
      timeout 60 "$build/lina" train --preset "$p" --task lm --steps 20 --device cuda --cuda-graph "$g" \
        "${train_shape[@]}" --data data/tinyshakespeare.txt --eval-every 20 --eval-batches 2 --extrap-batches 0 \
        --quiet --out "$runs/graph-$g" >>"$out/train.log" 2>&1 || graph_ok=0
    done
    same=$(python3 - "$runs/graph-on/cuda/lm_$p" "$runs/graph-off/cuda/lm_$p" <<'EOF2' 2>&1
import json, sys
a, b = (json.load(open(p + ".json")) for p in sys.argv[1:])
ca, cb = (open(p + ".safetensors", "rb").read() for p in sys.argv[1:])
# the checkpoints' tensor bytes: everything after the header (whose json differs in nothing but may)
def tensors(blob):
    n = int.from_bytes(blob[:8], "little")
    return blob[8 + n:]
print("same" if a["loss_curve"] == b["loss_curve"] and tensors(ca) == tensors(cb) else "DIFFERENT")
EOF2
)
    note "graph.$p" "$same"
    [[ $same == same ]] || graph_ok=0
    say "graph replay against eager, $p, 20 updates: $same"
  done
  ((graph_ok)) || tests_ok=0
  phase_done graph
fi

# ---- timing: every preset on lm, ms per update over the graph's replays ------------
# train DEVICE PRESET STEPS TIMEOUT: trains lm; prints "train_time_s train_loss
# val_loss kernels_per_update runtime ms_per_update graph_launches_per_update
# updates_timed"
# from the run's json (cuda_step: the updates after the first three), or the error.
train() {
  local dir="$runs/$1-$2-$3" rc=0
  timeout "$4" "$build/lina" train --preset "$2" --task lm --steps "$3" --device "$1" "${train_shape[@]}" \
    --data data/tinyshakespeare.txt --eval-every 100000 --eval-batches 2 --extrap-batches 0 \
    --checkpoint-every 100000 --quiet --out "$dir" >"$dir.log" 2>&1 || rc=$?
  { echo "==== $1 $2 $3 steps: exit $rc"; cat "$dir.log"; } >>"$out/train.log"
  if ((rc == 0)); then
    python3 - "$dir/$1/lm_$2.json" <<'EOF2'
import json, sys
j = json.load(open(sys.argv[1]))
final = j.get("final", {})
step = j.get("cuda_step", {})
print(j["train_time_s"], final.get("last_update_loss", "nan"), final.get("val_loss", "nan"),
      int(step.get("kernels", -1)), j.get("cuda_runtime", "-"), round(step.get("ms", -1), 4),
      step.get("graph_launches", -1), step.get("updates", 0))
EOF2
    return 0
  fi
  ((rc == 124 || rc == 137)) && echo "timed out after $4 s" && return 1
  grep -E 'error' "$dir.log" | tail -1 || tail -1 "$dir.log"
  return 1
}
: >"$out/train.log"
declare -A cuda_ms=()
if room_for 60 timing; then
  for p in "${presets[@]}"; do
    (($(left) > 30)) || { note "presets.$p.cuda.error" "no time left"; continue; }
    if long=$(train cuda "$p" "$timing_updates" 120); then
      read -r _ tl _ kernels runtime ms graph_launches timed <<<"$long"
      cuda_ms[$p]=$ms
      note "presets.$p.cuda.ms_per_step" "$ms"
      note "presets.$p.cuda.train_loss_at_$timing_updates" "$tl"
      note "presets.$p.cuda.updates_timed" "$timed"
      ((kernels >= 0)) && note "presets.$p.cuda.kernels_per_update" "$kernels"
      note "presets.$p.cuda.graph_launches_per_update" "$graph_launches"
      note "presets.$p.cuda.runtime" "$runtime"
      say "$p on cuda: $ms ms per update (mean of $timed graph replays), $kernels kernels per update"
      # one eager update's GPU time, kernel by kernel (events need --cuda-graph off)
      if timeout 60 "$build/lina" train --preset "$p" --task lm --steps 5 --device cuda --cuda-graph off \
          "${train_shape[@]}" --data data/tinyshakespeare.txt --eval-every 100000 --eval-batches 2 \
          --extrap-batches 0 --checkpoint-every 100000 --quiet --out "$runs/kernels-$p" >>"$out/train.log" 2>&1; then
        python3 -c 'import json, sys; json.dump(json.load(open(sys.argv[1]))["cuda_step"], open(sys.argv[2], "w"), indent=1)' \
          "$runs/kernels-$p/cuda/lm_$p.json" "$out/kernel-times-$p.json"
      fi
    else
      note "presets.$p.cuda.error" "$long"
      say "$p on cuda: $long"
    fi
  done
  phase_done timing
fi

# ---- torch: the same model in PyTorch on the same GPU, where it has one ----
# torch_phase NAME KEY RATIO SHAPES [torch_reference.py options]: times the
# five course presets into OUT/NAME.{json,log}, notes presets.P.KEY.ms_per_step
# (B64×T64, as the timing above) and lina's ratio to it as presets.P.RATIO,
# and the PyTorch version (or the failure) as KEY_version
torch_phase() {
  local name=$1 key=$2 ratio=$3 shapes=$4 rc=0
  shift 4
  timeout $(($(left) - 10)) python3 scripts/torch_reference.py --device cuda --presets "$(IFS=,; echo "${presets[*]:0:5}")" \
    --shapes "$shapes" --steps 20 --json "$out/$name.json" "$@" >"$out/$name.log" 2>&1 || rc=$?
  if [[ -f $out/$name.json ]]; then  # every row it finished, also when cut short
    while read -r p ms; do
      note "presets.$p.$key.ms_per_step" "$ms"
      if [[ -n ${cuda_ms[$p]:-} ]]; then
        note "presets.$p.$ratio" "$(python3 -c "print(round(${cuda_ms[$p]} / $ms, 3))")"
      fi
    done < <(python3 -c '
import json, sys
for r in json.load(open(sys.argv[1]))["train"]:
    if r["shape"] == "64x64" and "ms_per_step" in r:
        print(r["preset"], round(r["ms_per_step"], 3))' "$out/$name.json")
  fi
  if ((rc == 0)); then
    note "${key}_version" "$(python3 -c 'import torch; print(torch.__version__)')"
    say "PyTorch on the GPU ($key): $(grep -E 'ms/step|failed' "$out/$name.log" | tr -s ' ' | tr '\n' ';')"
  else
    note "${key}_version" "failed (exit $rc): $(tail -1 "$out/$name.log")"
  fi
}
torch_on_gpu=0
if ((!sim)) && python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  torch_on_gpu=1
fi
#   torch     eager, as the model is written
if ((!sim)) && room_for 40 torch; then
  if ((torch_on_gpu)); then torch_phase torch-cuda torch_cuda lina_over_torch 64x64,16x256 --warmup 3
  else note torch_cuda_version "none: no PyTorch with CUDA here"; fi
  phase_done torch
fi
#   compiled  at its best: torch.compile with CUDA graphs, fused AdamW
if ((!sim)) && room_for 120 compiled; then
  if ((torch_on_gpu)); then torch_phase torch-compiled torch_compiled lina_over_torch_compiled 64x64 --warmup 5 --compile reduce-overhead
  else note torch_compiled_version "none: no PyTorch with CUDA here"; fi
  phase_done compiled
fi
#   captured  the whole eager step captured as one CUDA graph, as lina's update
if ((!sim)) && room_for 40 captured; then
  if ((torch_on_gpu)); then torch_phase torch-captured torch_captured lina_over_torch_captured 64x64 --warmup 3 --compile capture
  else note torch_captured_version "none: no PyTorch with CUDA here"; fi
  phase_done captured
fi
rm -rf "$runs"

((tests_ok)) || finish tests-failed 4 "done in $((SECONDS - start)) s, but the CUDA tests did not pass (see tests.log)"
finish ok 0 "done in $((SECONDS - start)) s; summary in $out/device-summary.json"
