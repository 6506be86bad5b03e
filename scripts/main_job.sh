#!/usr/bin/env bash
# The main job: sets up, builds the `lina` binary, and shows in a few minutes
# on a CPU what a 32×32 memory per head buys on exact recall. gdn (gated
# delta rule) and linear (plain linear attention) are trained on the recall
# task with 16 key–value pairs out of 32 keys (sequences of 64 tokens,
# batch 32, 600 updates); gdn sits on a plateau, then its held-out accuracy
# jumps to near 1, while linear's elu+1 keys overlap and it stays low. Then
# the report: a table, plots and the explorer page.
#   scripts/main_job.sh [--out DIR]      (default DIR: runs/main)
# Writes DIR/cpu/recall_{linear,gdn}_p16_k32.{json,safetensors,predictions.json}
# and DIR/report/{report.md,recall.png,memory.png,explorer.html,...}.
set -euo pipefail
cd "$(dirname "$0")/.."
out=runs/main
if (($#)); then
  [[ $1 == --out && -n ${2:-} ]] || { echo "main_job: usage: scripts/main_job.sh [--out DIR]" >&2; exit 2; }
  out=$2
fi
start=$SECONDS
scripts/setup.sh
export PATH="/usr/local/cuda/bin:$PATH"
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target lina
echo "main_job: built lina in $((SECONDS - start)) s"

lina=build/release/lina
settings=(--task recall --pairs 16 --keys 32 --batch 32 --steps 600 --eval-every 50 --quiet --out "$out")
for preset in linear gdn; do
  t0=$SECONDS
  "$lina" train --preset "$preset" "${settings[@]}" >/dev/null
  run="$out/cpu/recall_${preset}_p16_k32"
  "$lina" eval --task recall --checkpoint "$run.safetensors" --predictions "$run.predictions.json" >/dev/null
  python3 - "$run.json" "$preset" "$((SECONDS - t0))" <<'EOF'
import json, sys
run = json.load(open(sys.argv[1]))
curve = " ".join(f"{e['step']}:{e['val_accuracy']:.2f}" for e in run["eval"])
print(f"main_job: {sys.argv[2]:6s} held-out recall accuracy by update  {curve}   ({sys.argv[3]} s)")
EOF
done
scripts/report.py "$out" --out "$out/report" >/dev/null
echo "main_job: report: $out/report/report.md (table, findings), $out/report/recall.png,"
echo "          $out/report/explorer.html (open in a browser); $((SECONDS - start)) s in all"
# The same comparison at the course's full length, from the runs kept in the repository.
python3 - results/cpu-full/cpu <<'EOF'
import json, os, sys
COURSE = ("attn", "linear", "delta", "gdn", "hybrid")
def finished(name):
    """The run json `name` in the folder if it finished, else None."""
    path = os.path.join(sys.argv[1], name)
    run = json.load(open(path)) if os.path.exists(path) else None
    return run if run and run.get("finished") else None
def line(task, key, fmt):
    runs = {p: finished(f"{task}_{p}.json") for p in COURSE}
    return ", ".join(f"{p} {fmt % r['final'][key]}" for p, r in runs.items() if r) or "none finished yet"
def seeds(preset):
    """Final lm val losses of a preset's finished runs at every seed (seed 1337 has no suffix)."""
    names = [n for n in sorted(os.listdir(sys.argv[1]))
             if n == f"lm_{preset}.json" or (n.startswith(f"lm_{preset}_s") and n.endswith(".json"))]
    return [r["final"]["val_loss"] for r in map(finished, names) if r]
def capacity(preset):
    """Held-out recall accuracy by pair count (64 keys): 32 pairs is the main run."""
    runs = {n: finished(f"recall_{preset}.json" if n == 32 else f"recall_{preset}_p{n}.json") for n in (8, 16, 32, 48)}
    return " ".join(f"{n}:{r['final']['val_accuracy']:.3f}" for n, r in runs.items() if r) or "none"
print("main_job: at the course's full length (results/cpu-full/report.md):")
print("          recall, 32 pairs of 64 keys, 2000 steps, held-out accuracy: " + line("recall", "val_accuracy", "%.3f"))
print("          lm (tiny shakespeare), 5000 steps, val loss: " + line("lm", "val_loss", "%.4f"))
means = []
for preset in COURSE:
    v = seeds(preset)
    if len(v) >= 2:
        means.append(f"{preset} {sum(v) / len(v):.4f} ({len(v)} seeds)")
if means:
    print("          lm val loss, mean over seeds: " + ", ".join(means))
for preset in ("linear", "delta", "gdn"):
    print(f"          recall capacity, {preset:6s} accuracy by pairs: " + capacity(preset))
EOF
