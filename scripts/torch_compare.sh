#!/usr/bin/env bash
# lina's training step against the same model in PyTorch (scripts/torch_reference.py,
# Debian's python3-torch), interleaved on this machine:
#   scripts/torch_compare.sh LINA OUT_DIR [ROUNDS] [PRESETS]
# Each round goes through the presets (default: attn,linear,delta,gdn,hybrid);
# for each, `lina bench` times it (B64xT64 and B16xT256), then PyTorch times it
# once per thread setting below, so lina and every setting of PyTorch see the
# same load within minutes of each other. PyTorch's OpenMP pool and Debian's
# OpenBLAS threads compete for the same cores, and which setting keeps them
# from spinning against each other depends on the machine: PyTorch's time is
# its fastest setting, named in the summary. OUT_DIR receives
# lina-PRESET-N.json/txt, torch-SETTING-PRESET-N.json/txt, load.txt and
# summary.md (scripts/torch_compare.py).
set -euo pipefail
if [[ $# -lt 2 || ! -x $1 ]]; then
  echo "usage: scripts/torch_compare.sh LINA OUT_DIR [ROUNDS] [PRESETS] (LINA: the lina binary to time)" >&2
  exit 2
fi
lina=$1 out=$2 rounds=${3:-2} presets=${4:-attn,linear,delta,gdn,hybrid}
[[ $rounds =~ ^[1-9][0-9]?$ ]] || { echo "torch_compare.sh: ROUNDS must be 1 to 99, not '$rounds'" >&2; exit 2; }
here=$(dirname "$0")
/usr/bin/python3 -c "import torch" 2>/dev/null ||
  { echo "torch_compare.sh: needs Debian's python3-torch (apt-get install python3-torch)" >&2; exit 1; }
# name=environment: the thread settings PyTorch is timed under.
settings=(
  "installed="
  "passive=OMP_WAIT_POLICY=passive"
  "short-spin=GOMP_SPINCOUNT=1000 OPENBLAS_THREAD_TIMEOUT=4"
  "one-blas-thread=OPENBLAS_NUM_THREADS=1"
  "short-spin-one-blas-thread=GOMP_SPINCOUNT=1000 OPENBLAS_THREAD_TIMEOUT=4 OPENBLAS_NUM_THREADS=1"
)
mkdir -p "$out"
uptime > "$out/load.txt"
printf '%s\n' "${settings[@]}" > "$out/settings.txt"
/usr/bin/python3 "$here/torch_reference.py" --check > "$out/torch-check.txt"
for ((round = 1; round <= rounds; round++)); do
  for preset in ${presets//,/ }; do
    "$lina" bench --presets "$preset" --shapes 64x64,16x256 --contexts 64 --infer-steps 1 --rounds 1 \
      --json "$out/lina-$preset-$round.json" > "$out/lina-$preset-$round.txt" 2>&1
    for setting in "${settings[@]}"; do
      name=${setting%%=*} environment=${setting#*=}
      env $environment /usr/bin/python3 "$here/torch_reference.py" --presets "$preset" --shapes 64x64,16x256 \
        --json "$out/torch-$name-$preset-$round.json" > "$out/torch-$name-$preset-$round.txt" 2>&1
    done
    echo "round $round: $preset done ($(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$out/load.txt"
  done
done
uptime >> "$out/load.txt"
python3 "$here/torch_compare.py" "$out" > "$out/summary.md"
cat "$out/summary.md"
