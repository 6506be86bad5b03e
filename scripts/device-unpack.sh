#!/usr/bin/env bash
# Restores the runs a GPU call packed under $OUT (scripts/device-pack.py pack,
# which scripts/device-course.sh runs when LINA_COURSE_PACK names a folder):
#   scripts/device-unpack.sh FILES_AT [RUNS [--as DEVICE]]
# FILES_AT: the run tool's files_at (or any folder holding runs.tar.NN);
# RUNS: default runs/device (git-ignored, so the next call can carry it).
# The unfinished runs then resume from their checkpoints: carried to the next
# call (scripts/device-course.sh LINA runs/device SECONDS ...), or here with
#   lina train --resume RUNS/cuda/NAME.safetensors --device cpu
# (--as cpu puts RUNS/cuda/'s runs under RUNS/cpu/ instead: into the CPU's
# run store, LINA_RUNS of scripts/cpu-course.sh, where each takes the place
# of the CPU's run of that name unless that one is further on).
set -euo pipefail
files_at=${1:?usage: scripts/device-unpack.sh FILES_AT [RUNS [--as DEVICE]]}
runs=${2:-runs/device}
shift $(($# < 2 ? $# : 2))
exec python3 "$(dirname "$0")/device-pack.py" unpack "$files_at" "$runs" "$@"
