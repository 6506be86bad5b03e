#!/usr/bin/env bash
# The course's full-length runs on this machine's CPU: one queue whose state
# lives outside the repository, so that it survives a new work tree.
#
#   scripts/cpu-course.sh                 resume the queue in the background (start it the
#                                         first time) and return; safe to repeat
#   scripts/cpu-course.sh --status        one line per run: updates done of total, ms per
#                                         update since its last start, hours left, its state
#   scripts/cpu-course.sh --pause         SIGSTOP the queue (a benchmark window) ...
#   scripts/cpu-course.sh --continue      ... and SIGCONT it afterwards
#   scripts/cpu-course.sh --stop          SIGTERM: each run writes its checkpoint and stops
#   scripts/cpu-course.sh --collect [DIR] copy the finished runs' jsons (never checkpoints) to
#                                         DIR (results/runs/cpu/) and write the report there again
#   scripts/cpu-course.sh --foreground [GROUP ...]   the queue (or some groups) in this shell
#
# The run store is $LINA_RUNS, by default ~/.local/share/lina/runs: the runs'
# checkpoints, jsons and predictions (RUNS/cpu/), the queue's log
# (RUNS/queue.log) and the copy of lina the runs use (RUNS/lina). That copy
# is taken from $LINA (default build/release/lina) the first time only, so a
# resume needs no build and a rebuild cannot change a run half way;
# `LINA=path scripts/cpu-course.sh --new-lina` replaces it while the queue is
# stopped.
#
# The queue, in this order (docs/course-runs.md): recall (the course's four
# recall runs), survey-recall, ablation-recall, seeds (the lm seeds not in
# yet: attn's are in results/runs/cpu/), survey-lm, ablation-lm. Two runs at a time with one thread each, at
# nice 19 (measured faster than one two-thread run at a time: docs/course-runs.md),
# each checkpointing every 50 updates, so an interruption costs a few minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
runs=${LINA_RUNS:-$HOME/.local/share/lina/runs}
queue_groups=(recall survey-recall ablation-recall seeds survey-lm ablation-lm)
jobs=2
checkpoint_every=50

die() { echo "cpu-course.sh: $*" >&2; exit 2; }

# One scripts/sweep.py per line: GROUP OUT-SUBFOLDER SWEEP-ARGUMENTS ($LINA_COURSE_GRID,
# a file of such lines, replaces the table: the tests' tiny queue).
# A --recipe changes the named flags of the main run (the ablation); a changed
# --batch or --steps gives no suffix to a run's name, so those go to folders of
# their own.
sweeps() {
  if [[ -n ${LINA_COURSE_GRID:-} ]]; then cat "$LINA_COURSE_GRID"; return; fi  # another table (the tests')
  cat <<'EOF'
lm              .                    --presets attn,linear,delta,gdn,hybrid --tasks lm
recall          .                    --presets attn,linear,gdn,delta --tasks recall
survey-recall   .                    --presets retnet,mamba2,gla --tasks recall
ablation-recall .                    --presets attn --tasks recall --recipe --values=16
ablation-recall .                    --presets attn,linear --tasks recall --recipe --schedule=cosine
ablation-recall .                    --presets linear --tasks recall --recipe --values=16
ablation-recall .                    --presets linear --tasks recall --recipe --clip=1
ablation-recall ablation-batch64     --presets attn --tasks recall --batch 64
ablation-recall ablation-steps2000   --presets attn --tasks recall --steps 2000
seeds           .                    --presets linear,delta,gdn,hybrid --tasks lm --seeds 1338,1339
survey-lm       .                    --presets retnet,mamba2,gla --tasks lm
ablation-lm     .                    --presets hybrid,gdn --tasks lm --recipe --dropout=0
ablation-lm     .                    --presets hybrid --tasks lm --recipe --schedule=cosine
ablation-lm     .                    --presets hybrid --tasks lm --recipe --weight-decay=0.1 --decay-matrices
EOF
}

# The sweep.py arguments of one line (a --recipe's flags passed as one string).
sweep_args() {
  local line=$1 out=$2
  local grid=${line%% --recipe *}
  # shellcheck disable=SC2206
  local args=($grid --jobs "$jobs" --checkpoint-every "$checkpoint_every" --out "$out")
  [[ $line == *" --recipe "* ]] && args+=("--recipe=${line#* --recipe }")  # = : the flags start with --
  printf '%s\0' "${args[@]}"
}

# Calls FUNCTION GROUP ARGS... for each sweep of GROUP, ARGS its sweep.py arguments.
each_sweep() {
  local fn=$1 group=$2 g sub line out found=0
  while read -r g sub line; do
    [[ $g == "$group" ]] || continue
    found=1
    out=$runs; [[ $sub == . ]] || out=$runs/$sub
    local args=()
    mapfile -d '' args < <(sweep_args "$line" "$out")
    "$fn" "$group" "${args[@]}"
  done < <(sweeps)
  ((found)) || die "unknown group '$group' ($(sweeps | awk '{print $1}' | uniq | paste -sd ' '))"
}

# One sweep in this shell.
run_sweep() {
  local group=$1
  shift
  echo "cpu-course.sh: $(date -u +%FT%TZ) $group: sweep.py $*"
  LINA="$runs/lina" nice -n 19 python3 "$here/sweep.py" "$@" || echo "cpu-course.sh: a run of '$group' did not finish (see above)"
}

# One line per run of one sweep.
status_sweep() {
  local group=$1
  shift
  LINA="$status_lina" LINA_RUNS="$runs" python3 "$here/course_status.py" --group "$group" -- "$@"
}

# The pid of the running queue, or nothing.
queue_pid() {
  local pid
  pid=$(cat "$runs/queue.pid" 2>/dev/null) || return 0
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && grep -qa cpu-course "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
  return 0
}

install_lina() {
  local lina=${LINA:-$root/build/release/lina}
  [[ -x $lina ]] || die "no lina at '$lina' to copy into $runs (scripts/build.sh, or LINA=path)"
  cp "$lina" "$runs/lina.new" && mv "$runs/lina.new" "$runs/lina"
  echo "cpu-course.sh: $runs/lina is now a copy of $lina"
}

signal_queue() {
  local sig=$1 pid
  pid=$(queue_pid)
  [[ -n $pid ]] || die "no queue is running (scripts/cpu-course.sh starts it)"
  kill "-$sig" -- "-$pid"  # the whole process group: sweep.py and its lina runs
  echo "cpu-course.sh: SIG$sig sent to the queue (process group $pid)"
}

mkdir -p "$runs"
case ${1:-} in
  --status)
    pid=$(queue_pid)
    state="not running"
    [[ -n $pid ]] && state="running (process group $pid)"
    [[ -n $pid ]] && grep -q '^State:.*T' "/proc/$pid/status" 2>/dev/null && state="paused (process group $pid)"
    echo "queue: $state; store $runs"
    status_lina=$runs/lina; [[ -x $status_lina ]] || status_lina=${LINA:-$root/build/release/lina}
    groups=("${@:2}"); ((${#groups[@]})) || groups=("${queue_groups[@]}")
    for group in "${groups[@]}"; do each_sweep status_sweep "$group"; done
    ;;
  --pause) signal_queue STOP ;;
  --continue) signal_queue CONT ;;
  --stop) signal_queue TERM ;;
  --new-lina)
    [[ -z $(queue_pid) ]] || die "the queue is running: --stop it first"
    install_lina
    ;;
  --collect)
    results=${2:-$root/results/runs/cpu}
    python3 "$here/course_status.py" --collect "$runs/cpu" "$results"
    python3 "$here/report.py" "$results" --out "$results"
    ;;
  --foreground)
    [[ -z ${LINA_COURSE_AUTOGROUP:-} ]] || echo "$LINA_COURSE_AUTOGROUP" > /proc/self/autogroup 2>/dev/null || true
    [[ -x $runs/lina ]] || install_lina
    groups=("${@:2}"); ((${#groups[@]})) || groups=("${queue_groups[@]}")
    for group in "${groups[@]}"; do each_sweep run_sweep "$group"; done
    echo "cpu-course.sh: $(date -u +%FT%TZ) the queue is done"
    ;;
  ''|[a-z]*)
    pid=$(queue_pid)
    [[ -z $pid ]] || { echo "cpu-course.sh: the queue is already running (process group $pid); --status says where"; exit 0; }
    [[ -x $runs/lina ]] || install_lina
    # setsid: a session (and process group) of its own, which outlives this shell. Where the
    # kernel groups the scheduling by session (autogroup), nice applies only inside a group,
    # so the group itself is made nice 19 too: otherwise the queue takes half the machine.
    LINA_COURSE_AUTOGROUP=19 setsid nohup "$here/cpu-course.sh" --foreground "$@" >> "$runs/queue.log" 2>&1 < /dev/null &
    echo $! > "$runs/queue.pid"
    echo "cpu-course.sh: the queue runs in the background (process group $!), log $runs/queue.log;"
    echo "  scripts/cpu-course.sh --status says where each run is"
    ;;
  *) die "unknown option '$1' (--status, --pause, --continue, --stop, --collect, --new-lina, --foreground, or groups)" ;;
esac; exit  # on the line of esac: bash reads a script as it runs, so a queue of hours must not read on into a file edited meanwhile
