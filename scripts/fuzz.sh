#!/usr/bin/env bash
# Fuzzes the checkpoint reader with libFuzzer for a while (clang, ASan and
# UBSan): builds the "fuzz" preset, seeds the corpus with real checkpoints
# written by a tiny training run, then fuzzes.
#   scripts/fuzz.sh [seconds=600]
# Inputs that crash are written to build/fuzz/crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)" --target lina lina_fuzz_checkpoint
corpus=build/fuzz/corpus
mkdir -p "$corpus" build/fuzz/crashes
if [[ -z $(ls -A "$corpus") ]]; then
  seeds=$(mktemp -d)
  printf 'To be, or not to be, that is the question:\n%.0s' {1..50} > "$seeds/text.txt"
  for preset in gdn,attn attn; do
    ASAN_OPTIONS=detect_leaks=0 build/fuzz/lina train --preset "$preset" --task lm --steps 1 --context 8 --batch 1 \
      --eval-batches 1 --extrap-batches 0 --data "$seeds/text.txt" --out "$seeds" --quiet >/dev/null
  done
  cp "$seeds"/cpu/*.safetensors "$corpus"/
  rm -rf "$seeds"
fi
ASAN_OPTIONS=detect_leaks=0 build/fuzz/lina_fuzz_checkpoint "$corpus" -artifact_prefix=build/fuzz/crashes/ \
  -max_total_time="$seconds" -max_len=$((16 * 1024 * 1024)) -rss_limit_mb=4096
