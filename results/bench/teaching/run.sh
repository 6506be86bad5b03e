#!/bin/bash
# Before/after of the teaching aids (tensor names, the trace hooks, backward
# in reverse recording order): `lina bench --quick --presets attn,gdn` of the
# binary before (87850e2, built CPU-only from a clean export) and after,
# interleaved, with the load average before each run.
#   results/bench/teaching/run.sh BEFORE_LINA AFTER_LINA [ROUNDS [TAG [more bench flags]]]
# writes {before,after}-{TAG}{round}.json/.txt (TAG empty by default).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
before=$1 after=$2 rounds=${3:-2} tag=${4:-}
shift $(($# < 4 ? $# : 4))
for round in $(seq 1 "$rounds"); do
  for which in before after; do
    bin=$before; [[ $which == after ]] && bin=$after
    echo "round $tag$round $which: load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$here/load.txt"
    "$bin" bench --quick --presets attn,gdn "$@" --json "$here/$which-$tag$round.json" \
      > "$here/$which-$tag$round.txt" 2>&1
  done
done
