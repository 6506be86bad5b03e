#!/bin/bash
# Before/after of the vectorised unary functions and the GEMM thread
# threshold: `lina bench` of the binary before (6e0c9f3, built CPU-only in
# /tmp/before) and after (a607daf and later), interleaved, 2 rounds each.
#   results/bench/vectorised_unary/run.sh BEFORE_LINA AFTER_LINA
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for round in 1 2; do
  for which in before after; do
    bin=$1; [[ $which == after ]] && bin=$2
    "$bin" bench --shapes 64x64,16x256 --contexts 64,1024 --json "$here/$which-$round.json" \
      > "$here/$which-$round.txt" 2>&1
    echo "round $round $which done"
  done
done
