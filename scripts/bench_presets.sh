#!/usr/bin/env bash
# ms per training step of every preset on the lm task (batch 64, context 64
# by default), measured back to back in one run so the ratios to `attn` are
# comparable on a shared, noisy machine. Needs a built build/release/lina.
#   scripts/bench_presets.sh [steps] [device]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-10}
device=${2:-cpu}
data=${LINA_DATA:-data/tinyshakespeare.txt}
out=$(mktemp -d)
printf "%-8s %10s %10s\n" preset ms/step "vs attn"
attn_ms=""
for preset in attn linear delta gdn hybrid; do
  build/release/lina train --preset "$preset" --task lm --device "$device" --steps "$steps" \
    --data "$data" --eval-every 100000 --eval-batches 1 --extrap-batches 0 --quiet --out "$out" >/dev/null
  ms=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['ms_per_step'])" "$out/$device/lm_$preset.json")
  [[ -z $attn_ms ]] && attn_ms=$ms
  printf "%-8s %10.1f %10.2f\n" "$preset" "$ms" "$(python3 -c "print($ms/$attn_ms)")"
done
rm -rf "$out"
