#!/usr/bin/env python3
"""The layers of lina include only the layers below them.

    core/          Tensor, shapes, dtypes, the kernel list; reaches a device's
                   memory through core/device_memory.h, which the backends fill   (nothing)
    backend_cpu/   the CPU kernels; the host's DeviceMemory        (core/)
    backend_cuda/  the CUDA kernels; the CUDA DeviceMemory         (core/; cuda_sim/ stands in for the CUDA runtime)
    dispatch/      the entry points of dispatch/kernels.h and the
                   layout ops on them (dispatch/layout.h)          (core/, both backends: the only folder that sees both)
    autograd/      Var, ops, backward                              (core/, dispatch/)
    models/        layers, presets, optimiser                      (core/, dispatch/, autograd/)
    experiments/   the lina binary's commands                      (all of the above but the backends; its
                                                                    benchmarks bench*.cpp may read the CPU
                                                                    backend's counters and its GEMM)

Every quoted #include "<folder>/..." of every source file is checked against
the table; the test fails with each include that breaks it.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALLOWED = {
    "core": {"core"},
    "backend_cpu": {"core", "backend_cpu"},
    "backend_cuda": {"core", "backend_cuda", "cuda_sim"},
    "dispatch": {"core", "backend_cpu", "backend_cuda", "dispatch"},
    "autograd": {"core", "dispatch", "autograd"},
    "models": {"core", "dispatch", "autograd", "models"},
    "experiments": {"core", "dispatch", "autograd", "models", "experiments"},
    "cuda_sim": {"cuda_sim"},
}
EXCEPTIONS = {("experiments", "backend_cpu"): re.compile(r"^experiments/bench\w*\.cpp$")}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def violations(root):
    found = []
    for layer, allowed in ALLOWED.items():
        for dirpath, _, names in os.walk(os.path.join(root, layer)):
            for name in sorted(names):
                if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or m.group(1) in allowed:
                            continue
                        exception = EXCEPTIONS.get((layer, m.group(1)))
                        if exception and exception.match(rel):
                            continue
                        found.append(f"{rel}:{number}: {layer}/ includes {m.group(1)}/ ({line.strip()})")
    return found


def main():
    # The check itself must be able to fail: a core file including a backend is caught.
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "core"))
        with open(os.path.join(tmp, "core", "bad.cpp"), "w") as f:
            f.write('#include "core/tensor.h"\n#include "backend_cpu/cpu_kernels.h"\n')
        caught = violations(tmp)
        if len(caught) != 1 or "core/bad.cpp:2" not in caught[0]:
            print("FAIL: the check missed core/ including backend_cpu/:", caught)
            return 1
    found = violations(ROOT)
    for v in found:
        print("FAIL:", v)
    if found:
        return 1
    print(f"layering: every include of {', '.join(ALLOWED)} is allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
