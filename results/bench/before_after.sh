#!/bin/bash
# ms per training step of two lina binaries, interleaved in one run, 2 rounds:
# BEFORE (default /tmp/before/build/release/lina) and AFTER (build/release/lina);
# lm, batch 64, context 64, 10 steps each.
#   results/bench/before_after.sh [BEFORE] [AFTER]
set -euo pipefail
cd "$(dirname "$0")/../.."
scratch=$(mktemp -d)
for round in 1 2; do
for p in attn linear delta gdn hybrid; do
for which in before after; do
  if [[ $which == before ]]; then bin=${1:-/tmp/before/build/release/lina}; else bin=${2:-build/release/lina}; fi
  out=$scratch/$which
  $bin train --preset $p --task lm --steps 10 --data data/tinyshakespeare.txt --eval-every 100000 --eval-batches 1 --extrap-batches 0 --quiet --out $out >/dev/null
  ms=$(python3 -c "import json; print(round(json.load(open('$out/cpu/lm_$p.json'))['ms_per_step'],1))")
  echo "$round $p $which $ms"
done; done; done
rm -rf "$scratch"
