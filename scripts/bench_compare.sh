#!/usr/bin/env bash
# Benchmarks two lina binaries back to back on this machine and writes a
# summary of the ratios and of the speed targets (docs/benchmarks.md):
#   scripts/bench_compare.sh BEFORE_LINA AFTER_LINA OUT_DIR [ROUNDS]
# For each round, `lina bench` (default settings) of BEFORE then AFTER, so
# that machine load hits both alike; then one `lina bench --profile` of each
# (per-kernel tables, timings with the profiling hook on); then the after
# binary's step times over attn's, measured on their own: nine rounds over the
# presets at B64xT64, 6 timed steps each, so that every round's presets run
# seconds apart and a busy minute moves one round's ratios, not the median;
# and, in the same run, each preset against attn in one process, 24 pairs of
# alternating steps (--pairs), on which the summary judges the ratio targets.
# OUT_DIR receives before-N.json/txt, after-N.json/txt,
# profile-before/after.json/txt, ratios.json/txt and summary.md
# (scripts/bench_compare.py). Take the best round of each.
set -euo pipefail
before=$1 after=$2 out=$3 rounds=${4:-2}
mkdir -p "$out"
uptime > "$out/load.txt"
for ((round = 1; round <= rounds; round++)); do
  for which in before after; do
    bin=$before; [[ $which == after ]] && bin=$after
    "$bin" bench --json "$out/$which-$round.json" > "$out/$which-$round.txt" 2>&1
    echo "round $round: $which done ($(cut -d, -f3- /proc/loadavg 2>/dev/null || true))"
  done
done
for which in before after; do
  bin=$before; [[ $which == after ]] && bin=$after
  "$bin" bench --profile --shapes 64x64 --contexts 64 --json "$out/profile-$which.json" \
    > "$out/profile-$which.txt" 2>&1
  echo "profile: $which done"
done
"$after" bench --shapes 64x64 --contexts 64 --infer-steps 1 --rounds 9 --steps 6 --warmup 2 --pairs 24 \
  --json "$out/ratios.json" > "$out/ratios.txt" 2>&1
echo "ratios: done"
uptime >> "$out/load.txt"
python3 "$(dirname "$0")/bench_compare.py" "$out" "$rounds" > "$out/summary.md"
cat "$out/summary.md"
