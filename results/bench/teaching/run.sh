#!/bin/bash
# Before/after of the teaching aids (tensor names, the trace hooks, backward
# in reverse recording order): `lina bench --quick --presets attn,gdn` of the
# binary before (87850e2, built CPU-only from a clean export) and after,
# interleaved, 2 rounds, with the load average before each run.
#   results/bench/teaching/run.sh BEFORE_LINA AFTER_LINA
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for round in 1 2; do
  for which in before after; do
    bin=$1; [[ $which == after ]] && bin=$2
    echo "round $round $which: load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$here/load.txt"
    "$bin" bench --quick --presets attn,gdn --json "$here/$which-$round.json" > "$here/$which-$round.txt" 2>&1
  done
done
