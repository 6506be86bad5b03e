#!/usr/bin/env bash
# lina's training step against the same model in PyTorch (scripts/torch_reference.py,
# Debian's python3-torch), back to back on this machine:
#   scripts/torch_compare.sh LINA OUT_DIR [ROUNDS]
# Each round runs `lina bench` (every preset, B64xT64 and B16xT256), then the
# PyTorch step twice: as installed, and with OMP_WAIT_POLICY=passive (PyTorch's
# OpenMP threads then stop spinning between ops, which otherwise sit on the
# cores Debian's OpenBLAS wants for its own threads: the faster of the two is
# PyTorch's time). OUT_DIR receives lina-N.json/txt, torch-N.json/txt,
# torch-passive-N.json/txt and summary.md (scripts/torch_compare.py), which
# compares the best round of each.
set -euo pipefail
if [[ $# -lt 2 || ! -x $1 ]]; then
  echo "usage: scripts/torch_compare.sh LINA OUT_DIR [ROUNDS] (LINA: the lina binary to time)" >&2
  exit 2
fi
lina=$1 out=$2 rounds=${3:-2}
here=$(dirname "$0")
/usr/bin/python3 -c "import torch" 2>/dev/null ||
  { echo "torch_compare.sh: needs Debian's python3-torch (apt-get install python3-torch)" >&2; exit 1; }
mkdir -p "$out"
uptime > "$out/load.txt"
/usr/bin/python3 "$here/torch_reference.py" --check > "$out/torch-check.txt"
for ((round = 1; round <= rounds; round++)); do
  "$lina" bench --shapes 64x64,16x256 --contexts 64 --infer-steps 1 --rounds 1 \
    --json "$out/lina-$round.json" > "$out/lina-$round.txt" 2>&1
  echo "round $round: lina done ($(cut -d' ' -f1-3 /proc/loadavg))"
  /usr/bin/python3 "$here/torch_reference.py" --shapes 64x64,16x256 \
    --json "$out/torch-$round.json" > "$out/torch-$round.txt" 2>&1
  echo "round $round: torch done ($(cut -d' ' -f1-3 /proc/loadavg))"
  OMP_WAIT_POLICY=passive /usr/bin/python3 "$here/torch_reference.py" --shapes 64x64,16x256 \
    --json "$out/torch-passive-$round.json" > "$out/torch-passive-$round.txt" 2>&1
  echo "round $round: torch (passive) done ($(cut -d' ' -f1-3 /proc/loadavg))"
done
uptime >> "$out/load.txt"
python3 "$here/torch_compare.py" "$out" "$rounds" > "$out/summary.md"
cat "$out/summary.md"
