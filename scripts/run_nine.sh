#!/usr/bin/env bash
# The nine runs of the comparison, one after the other, with the spec's
# settings (lm: 5000 steps, batch 64, context 64; recall: 2000 steps,
# batch 64; seed 1337):
#   lm     × attn, linear, delta, gdn, hybrid
#   recall × attn, linear, delta, gdn
#
#   scripts/run_nine.sh [--device cpu|cuda] [--steps N] [--batch N] [--out DIR]
#                       [--eval-batches N] [--presets all|LIST] [--tasks lm,recall]
#
# --presets all adds the survey's rules (retnet, mamba2, gla) on both tasks
# to the nine: fifteen runs. --presets LIST runs those presets on every task
# of --tasks (default both); a name such as linear-relu means preset linear
# with --feature-map relu (its run is lm_linear-relu / recall_linear-relu).
#
# --steps N gives every run N updates (evaluations then come every N/10 on
# lm, N/20 on recall, as in the spec's 500/5000 and 100/2000). Resumable:
# a run whose json says "finished": true is skipped; an interrupted one
# goes on from its checkpoint (lina train --resume). After each recall run,
# `lina eval --task recall` writes <run>.predictions.json beside it (a few
# held-out sequences and the model's answers, for the report's explorer).
# --eval-batches N (for quick looks) also sets lm's --extrap-batches.
# One line per run. LINA=path/to/lina overrides build/release/lina.
set -euo pipefail
cd "$(dirname "$0")/.."
device=cpu steps="" batch="" out=runs eval_batches="" presets="" tasks=lm,recall
die() { echo "run_nine: $*" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --device) device=${2:-}; shift 2 || die "--device needs a value" ;;
    --steps) steps=${2:-}; shift 2 || die "--steps needs a value" ;;
    --batch) batch=${2:-}; shift 2 || die "--batch needs a value" ;;
    --eval-batches) eval_batches=${2:-}; shift 2 || die "--eval-batches needs a value" ;;
    --out) out=${2:-}; shift 2 || die "--out needs a value" ;;
    --presets) presets=${2:-}; shift 2 || die "--presets needs a value" ;;
    --tasks) tasks=${2:-}; shift 2 || die "--tasks needs a value" ;;
    -h|--help) sed -n 2,27p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $device == cpu || $device == cuda ]] || die "--device must be cpu or cuda, got '$device'"
[[ -z $steps || $steps =~ ^[1-9][0-9]*$ ]] || die "--steps must be a positive integer, got '$steps'"
[[ -z $batch || $batch =~ ^[1-9][0-9]*$ ]] || die "--batch must be a positive integer, got '$batch'"
[[ -z $eval_batches || $eval_batches =~ ^[1-9][0-9]*$ ]] || die "--eval-batches must be a positive integer, got '$eval_batches'"
[[ -n $out ]] || die "--out must not be empty"
lina=${LINA:-build/release/lina}
[[ -x $lina ]] || die "$lina not found: build it first (scripts/build.sh)"

# field FILE EXPR: a value from a json file (python3's json module only).
field() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null || echo "?"; }

runs=(lm:attn lm:linear lm:delta lm:gdn lm:hybrid recall:attn recall:linear recall:delta recall:gdn)
if [[ -n $presets ]]; then
  all=0
  [[ $presets == all ]] && all=1 && presets=attn,linear,delta,gdn,hybrid,retnet,mamba2,gla
  runs=()
  for task in ${tasks//,/ }; do
    [[ $task == lm || $task == recall ]] || die "--tasks: unknown task '$task' (lm, recall)"
    for name in ${presets//,/ }; do
      ((all)) && [[ $task == recall && $name == hybrid ]] && continue  # as in the nine
      runs+=("$task:$name")
    done
  done
fi
i=0
for r in "${runs[@]}"; do
  i=$((i + 1))
  task=${r%%:*} name=${r##*:}
  preset=${name%%-*} feature_map=""
  [[ $name == *-* ]] && feature_map=${name#*-}
  json="$out/$device/${task}_${name}.json" ckpt="$out/$device/${task}_${name}.safetensors"
  tag="[$i/${#runs[@]}] $task $name"
  start=$SECONDS
  if [[ -f $json && $(field "$json" "j.get('finished') is True") == True ]]; then
    what="already finished"
  elif [[ -f $ckpt ]]; then
    what="resumed from update $(field "$json" "j.get('checkpoint_step', '?')")"
    "$lina" train --resume "$ckpt" --quiet >/dev/null
  else
    args=(train --preset "$preset" --task "$task" --device "$device" --out "$out" --quiet)
    [[ -n $feature_map ]] && args+=(--feature-map "$feature_map")
    if [[ -n $steps ]]; then
      per=20
      [[ $task == lm ]] && per=10
      every=$((steps / per))
      args+=(--steps "$steps" --eval-every $((every > 0 ? every : 1)))
    fi
    [[ -n $batch ]] && args+=(--batch "$batch")
    [[ -n $eval_batches ]] && args+=(--eval-batches "$eval_batches")
    [[ -n $eval_batches && $task == lm ]] && args+=(--extrap-batches "$eval_batches")
    "$lina" "${args[@]}" >/dev/null
    what="trained"
  fi
  summary="$(field "$json" "'%d steps, val loss %.4f%s' % (j['steps_done'], j['final']['val_loss'], ', accuracy %.3f' % j['final']['val_accuracy'] if 'val_accuracy' in j['final'] else '')")"
  if [[ $task == recall ]]; then
    pred="$out/$device/${task}_${name}.predictions.json"
    if [[ ! -f $pred || $pred -ot $ckpt ]]; then
      "$lina" eval --task recall --checkpoint "$ckpt" --predictions "$pred" >/dev/null
    fi
  fi
  echo "$tag: $what, $summary ($((SECONDS - start)) s) -> $json"
done
