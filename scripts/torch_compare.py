#!/usr/bin/env python3
"""summary.md of scripts/torch_compare.sh: lina's ms per training step against
PyTorch's (scripts/torch_reference.py), the best round of each."""
import json
import sys
from pathlib import Path


def best(paths):
    """(preset, shape) -> the lowest ms_per_step over the runs."""
    rows = {}
    for p in paths:
        for r in json.loads(p.read_text())["train"]:
            key = (r["preset"], r["shape"])
            rows[key] = min(rows.get(key, float("inf")), r["ms_per_step"])
    return rows


def main():
    out, rounds = Path(sys.argv[1]), int(sys.argv[2])
    lina = best(out / f"lina-{i}.json" for i in range(1, rounds + 1))
    torch_default = best(out / f"torch-{i}.json" for i in range(1, rounds + 1))
    torch_passive = best(out / f"torch-passive-{i}.json" for i in range(1, rounds + 1))
    version = json.loads((out / "torch-1.json").read_text())["torch"]
    print("# lina against PyTorch: ms per training step\n")
    print(f"`scripts/torch_compare.sh`, {rounds} rounds; the best round of each. PyTorch "
          f"{version} (Debian's python3-torch, OpenBLAS), the same model and step "
          "(`scripts/torch_reference.py`), as installed and with OMP_WAIT_POLICY=passive; "
          "its time is the faster of the two.\n")
    print("| preset | B×T | lina | PyTorch | PyTorch (passive) | lina / PyTorch |")
    print("|---|---|---|---|---|---|")
    for key in sorted(lina, key=lambda k: (k[1], k[0])):
        if key not in torch_default:
            continue
        t = min(torch_default[key], torch_passive.get(key, float("inf")))
        print(f"| {key[0]} | {key[1]} | {lina[key]:.1f} | {torch_default[key]:.1f} | "
              f"{torch_passive.get(key, float('nan')):.1f} | {lina[key] / t:.3f} |")


if __name__ == "__main__":
    main()
