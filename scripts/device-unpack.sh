#!/usr/bin/env bash
# Restores the runs a GPU call packed under $OUT (scripts/device-pack.py pack,
# which scripts/device-course.sh runs when LINA_COURSE_PACK names a folder):
#   scripts/device-unpack.sh FILES_AT [RUNS]
# FILES_AT: the run tool's files_at (or any folder holding runs.tar.NN);
# RUNS: default runs/device (git-ignored, so the next call can carry it).
# The unfinished runs then resume from their checkpoints: carried to the next
# call (scripts/device-course.sh LINA runs/device SECONDS ...), or here with
#   lina train --resume RUNS/cuda/NAME.safetensors --device cpu
set -euo pipefail
files_at=${1:?usage: scripts/device-unpack.sh FILES_AT [RUNS]}
exec python3 "$(dirname "$0")/device-pack.py" unpack "$files_at" "${2:-runs/device}"
