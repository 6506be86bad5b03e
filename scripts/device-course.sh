#!/usr/bin/env bash
# The course's runs at full length on --device cuda, all at once on the one
# GPU, for a lent GPU machine whose calls each end within minutes:
#   scripts/device-course.sh LINA RUNS SECONDS [GROUP ...]
# GROUP is nine (lm × attn linear delta gdn hybrid, recall × attn linear
# delta gdn: the spec's settings), recall or lm (the nine's four recall or
# five lm runs alone) or six (lm and recall × retnet mamba2 gla); default nine. Each group is one scripts/sweep.py (resumable) started in a
# process session of its own, so that it outlives the call that started it;
# a group whose sweep is still running is left running. The script then
# waits up to SECONDS for the sweeps and prints one line per run of
# RUNS/cuda/: finished or how far, training time, final loss or accuracy.
# Calling it again with the same RUNS waits for the same sweeps (or resumes
# the unfinished runs from their checkpoints).
# LINA_COURSE_PACK=DIR (the run tool's $OUT): at the end, pack RUNS into
# DIR/runs.tar.NN (scripts/device-pack.py: the jsons and logs, the unfinished
# runs' latest checkpoints, finished runs first; LINA_COURSE_PACK_PARTS parts
# of 15 MiB, default 4); scripts/device-unpack.sh FILES_AT restores them here.
set -euo pipefail
lina=${1:?usage: scripts/device-course.sh LINA RUNS SECONDS [nine|recall|lm|six ...]}
runs=${2:?usage: scripts/device-course.sh LINA RUNS SECONDS [nine|recall|lm|six ...]}
seconds=${3:?usage: scripts/device-course.sh LINA RUNS SECONDS [nine|recall|lm|six ...]}
shift 3
groups=("${@:-nine}")
[[ -x $lina ]] || { echo "device-course.sh: no lina at '$lina'" >&2; exit 2; }
[[ $seconds =~ ^[0-9]+$ ]] || { echo "device-course.sh: SECONDS must be a whole number, not '$seconds'" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$runs"
runs=$(cd "$runs" && pwd)
lina=$(cd "$(dirname "$lina")" && pwd)/$(basename "$lina")

# name → the sweep's arguments; one sweep per task, every run of it at once
declare -A sweeps=(
  [nine-lm]="--presets attn,linear,delta,gdn,hybrid --tasks lm --jobs 5"
  [nine-recall]="--presets attn,linear,delta,gdn --tasks recall --jobs 4"
  [six-lm]="--presets retnet,mamba2,gla --tasks lm --jobs 3"
  [six-recall]="--presets retnet,mamba2,gla --tasks recall --jobs 3"
)
running() { [[ -f $runs/$1.pid ]] && kill -0 "$(cat "$runs/$1.pid")" 2>/dev/null; }
for group in "${groups[@]}"; do
  [[ $group =~ ^(nine|recall|lm|six)$ ]] || { echo "device-course.sh: unknown group '$group' (nine, recall, lm or six)" >&2; exit 2; }
done
started=()
for group in "${groups[@]}"; do
  case $group in
    recall|lm) names=("nine-$group") ;;
    *) names=("$group-lm" "$group-recall") ;;
  esac
  for name in "${names[@]}"; do
    started+=("$name")
    if running "$name"; then
      echo "device-course: $name is still running (pid $(cat "$runs/$name.pid"))"
      continue
    fi
    # shellcheck disable=SC2086  # the arguments are words
    # a checkpoint every 100 updates: a call that ends mid-run packs one at most 100 updates old
    LINA=$lina setsid nohup python3 "$here/sweep.py" --device cuda --out "$runs" --checkpoint-every 100 ${sweeps[$name]} \
      >>"$runs/$name.log" 2>&1 </dev/null &
    echo $! >"$runs/$name.pid"
    echo "device-course: started $name (pid $!): sweep.py ${sweeps[$name]}"
  done
done

start=$SECONDS
while ((SECONDS - start < seconds)); do
  busy=0
  for name in "${started[@]}"; do running "$name" && busy=1; done
  ((busy)) || break
  sleep 2
done
for name in "${started[@]}"; do
  running "$name" && echo "device-course: $name still running after ${seconds} s; it goes on in the background"
done

# one line per run json so far
python3 - "$runs/cuda" <<'EOF'
import glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    if path.endswith(".predictions.json"):
        continue
    try:
        j = json.load(open(path))
    except ValueError:
        continue
    final = j.get("final", {})
    result = (f"accuracy {final['val_accuracy']:.3f}" if "val_accuracy" in final
              else f"val loss {final['val_loss']:.4f}" if "val_loss" in final else "no result yet")
    state = "finished" if j.get("finished") else f"at update {j.get('steps_done', '?')}"
    step = j.get("cuda_step", {})
    print(f"{os.path.basename(path)[:-5]:22s} {state:16s} {j.get('train_time_s', 0):8.1f} s {j.get('ms_per_step', 0):7.2f} ms/step  "
          f"{result:20s} {step.get('kernels', '?')} kernels, {step.get('graph_launches', '?')} graph launches, "
          f"{step.get('allocations', '?')} allocations per update, {step.get('ms', '?')} ms per replayed update, "
          f"runtime {j.get('cuda_runtime', '?')}")
EOF

if [[ -n ${LINA_COURSE_PACK:-} ]]; then
  python3 "$here/device-pack.py" pack "$LINA_COURSE_PACK" "$runs" --parts "${LINA_COURSE_PACK_PARTS:-4}" |
    grep -v '^in ' || echo "device-course: packing $runs into $LINA_COURSE_PACK failed" >&2
fi
