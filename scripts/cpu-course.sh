#!/usr/bin/env bash
# The issue's full-length CPU runs, one group after another, two at a time at
# the lowest priority, so that a 2-core machine stays usable:
#   scripts/cpu-course.sh LINA RUNS [GROUP ...]
# Groups, in this order by default: lm (the course's five lm runs), recall
# (its four recall runs), survey (retnet, mamba2, gla on both tasks), seeds
# (lm seeds 1338 and 1339 of the five), ablation (the recipe ablation of
# docs/course-runs.md). Each group is one scripts/sweep.py
# into RUNS/cpu/: resumable, so the same command after an interruption goes
# on where the runs stopped (a finished run is skipped). LINA is copied to
# RUNS/lina first, so that rebuilding build/release while the runs go on
# cannot change them half way.
set -euo pipefail
lina=${1:?usage: scripts/cpu-course.sh LINA RUNS [lm|recall|survey|seeds|ablation ...]}
runs=${2:?usage: scripts/cpu-course.sh LINA RUNS [lm|recall|survey|seeds|ablation ...]}
shift 2
groups=("${@:-lm recall survey seeds ablation}")
read -r -a groups <<< "${groups[*]}"
[[ -x $lina ]] || { echo "cpu-course.sh: no lina at '$lina'" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$runs"
[[ -x $runs/lina ]] || cp "$lina" "$runs/lina"
declare -A grid=(
  [lm]="--presets attn,linear,delta,gdn,hybrid --tasks lm"
  [recall]="--presets attn,linear,delta,gdn --tasks recall"
  [survey]="--presets retnet,mamba2,gla --tasks lm,recall"
  [seeds]="--presets attn,linear,delta,gdn,hybrid --tasks lm --seeds 1338,1339"
  [ablation]="see ablation() below"
)
# The recipe ablation (docs/course-runs.md): each sweep changes the named
# flags of the main runs and nothing else. A changed --batch or --steps gives
# no suffix, so those runs go to folders of their own.
ablation() {
  local lina=$1 runs=$2
  local sweeps=(
    "--presets attn --tasks recall --recipe --values=16"
    "--presets attn,linear --tasks recall --recipe --schedule=cosine"
    "--presets linear --tasks recall --recipe --values=16"
    "--presets linear --tasks recall --recipe --clip=1"
    "--presets hybrid,gdn --tasks lm --recipe --dropout=0"
    "--presets hybrid --tasks lm --recipe --schedule=cosine"
    "--presets hybrid --tasks lm --recipe --weight-decay=0.1 --decay-matrices"
  )
  local s
  for s in "${sweeps[@]}"; do
    # shellcheck disable=SC2086
    LINA="$lina" nice -n 19 python3 "$here/sweep.py" ${s%% --recipe *} --recipe "${s#* --recipe }" --jobs 2 --out "$runs"
  done
  LINA="$lina" nice -n 19 python3 "$here/sweep.py" --presets attn --tasks recall --batch 64 --jobs 2 --out "$runs/ablation-batch64"
  LINA="$lina" nice -n 19 python3 "$here/sweep.py" --presets attn --tasks recall --steps 2000 --jobs 2 --out "$runs/ablation-steps2000"
}
for group in "${groups[@]}"; do
  [[ -n ${grid[$group]:-} ]] || { echo "cpu-course.sh: unknown group '$group' (lm, recall, survey, seeds, ablation)" >&2; exit 2; }
done
for group in "${groups[@]}"; do
  echo "cpu-course.sh: $group"
  if [[ $group == ablation ]]; then
    ablation "$runs/lina" "$runs"
    continue
  fi
  # shellcheck disable=SC2086
  LINA="$runs/lina" nice -n 19 python3 "$here/sweep.py" ${grid[$group]} --jobs 2 --out "$runs"
done
