#!/usr/bin/env bash
# Installs lina's build dependencies from Debian packages (idempotent: does
# nothing when they are present). The CUDA toolkit is optional and is used
# when /usr/local/cuda/bin/nvcc exists.
set -euo pipefail
# python3-matplotlib and chromium: scripts/report.py and its explorer test;
# gdb and graphviz: stepping through a gradient and `lina graph`'s SVG (and their tests);
# libopenblas0: the float matrix products, found at run time (backend_cpu/openblas.h);
# libboost-context-dev: the fibers of lina's CUDA runtime on the CPU (cuda_sim/, the cuda-sim preset);
# slurm-wlm and munge: the sweep runner's test against a real single-node SLURM (tests/test_sweep_slurm.sh).
# python3-torch: the tests that load a lina checkpoint into the course's PyTorch model (tests/test_course_interop.py).
# universal-ctags: the function-length check (tests/test_function_length.py).
packages=(cmake g++ make libeigen3-dev doctest-dev nlohmann-json3-dev libcli11-dev python3-matplotlib chromium
          gdb graphviz libopenblas0 libboost-context-dev slurm-wlm munge python3-torch universal-ctags)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
# The PyTorch comparisons run under Debian's python3: say here when it cannot import torch.
if ! torch_error=$(/usr/bin/python3 -c "import torch" 2>&1); then
  echo "setup: warning: /usr/bin/python3 cannot import torch, so the PyTorch comparisons will skip: ${torch_error##*$'\n'}"
fi
