#!/usr/bin/env bash
# scripts/sweep.py --slurm against a real single-node SLURM that this test
# starts and stops: munged with a key of its own, slurmctld and slurmd from
# one slurm.conf (auth/munge, proctrack/linuxproc, task/none,
# select/cons_tres, the node named by `hostname -s`), all under WORK. Submits
# a 2-element array of 3-step runs and checks that both jsons are finished
# and the queue is empty afterwards. Where SLURM cannot start (not
# installed, not root, ports taken) it says why and is reported as skipped.
#   tests/test_sweep_slurm.sh LINA WORK
set -uo pipefail
lina=$(realpath "${1:?usage: test_sweep_slurm.sh LINA WORK}")
work=${2:?usage: test_sweep_slurm.sh LINA WORK}
root=$(cd "$(dirname "$0")/.." && pwd)
skip() { echo "SKIPPED: $*"; exit 0; }
fail() { echo "FAIL: $*"; for f in "$work"/log/*.log; do echo "== $f"; tail -20 "$f"; done; exit 1; }

for c in munged slurmctld slurmd sbatch squeue; do
  command -v "$c" >/dev/null || skip "$c not found (Debian packages slurm-wlm and munge)"
done
[[ $(id -u) == 0 ]] || skip "starting munged, slurmctld and slurmd here needs root"
for port in 6817 6818; do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && skip "port $port is taken (another SLURM running?)"
done

rm -rf "$work"
mkdir -p "$work"/{etc,state,spool,log,run,runs}
work=$(cd "$work" && pwd)
host=$(hostname -s)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
}
trap cleanup EXIT

# munge: a fresh key, a socket of our own
dd if=/dev/urandom of="$work/etc/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/etc/munge.key"
munged --force --foreground --key-file="$work/etc/munge.key" --socket="$work/run/munge.socket" \
  --pid-file="$work/run/munged.pid" --log-file="$work/log/munged.log" --seed-file="$work/state/munge.seed" \
  >>"$work/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [[ -S $work/run/munge.socket ]] && break; sleep 0.1; done
[[ -S $work/run/munge.socket ]] || skip "munged did not start ($(tail -1 "$work/log/munged.log" 2>/dev/null))"

cat >"$work/etc/slurm.conf" <<EOF
ClusterName=lina
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/run/munge.socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/run/slurmctld.pid
SlurmdPidFile=$work/run/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=main Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$work/etc/slurm.conf
slurmctld -D -f "$SLURM_CONF" >>"$work/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >>"$work/log/slurmd.out" 2>&1 &
pids+=($!)
up=0
for _ in $(seq 100); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then up=1; break; fi
  sleep 0.2
done
((up)) || skip "slurmctld and slurmd did not come up: $(tail -1 "$work/log/slurmctld.log" 2>/dev/null)"
echo "SLURM up on $host"

export LINA=$lina LINA_SLURM_CPUS=1
grid=(--presets gdn,linear --tasks recall --steps 3 --batch 2 --eval-batches 1 --out "$work/runs")
python3 "$root/scripts/sweep.py" "${grid[@]}" --slurm || fail "sweep.py --slurm failed"
for _ in $(seq 600); do
  [[ -z $(squeue -h 2>/dev/null) ]] && break
  sleep 0.2
done
[[ -z $(squeue -h) ]] || fail "the queue is not empty after 120 s: $(squeue -h)"
for name in recall_gdn recall_linear; do
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j['finished'] and j['steps_done'] == 3 else 1)" \
    "$work/runs/cpu/$name.json" || fail "$name.json missing or not finished ($(cat "$work"/runs/slurm/*.log 2>/dev/null | tail -5))"
  echo "ok   $name.json finished by its array element"
done
echo "ok   the queue is empty"
