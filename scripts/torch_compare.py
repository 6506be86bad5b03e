#!/usr/bin/env python3
"""summary.md of scripts/torch_compare.sh: lina's ms per training step against
PyTorch's (scripts/torch_reference.py) under each thread setting, the best
round of each; PyTorch's time is its fastest setting, named.

    scripts/torch_compare.py OUT_DIR
"""
import json
import re
import sys
from pathlib import Path


def best(paths):
    """(preset, shape) -> the lowest ms_per_step over the files."""
    rows = {}
    for p in paths:
        for r in json.loads(p.read_text())["train"]:
            key = (r["preset"], r["shape"])
            rows[key] = min(rows.get(key, float("inf")), r["ms_per_step"])
    return rows


def settings(out):
    """[(name, environment)] in the order torch_compare.sh ran them."""
    lines = (out / "settings.txt").read_text().splitlines()
    return [tuple(line.split("=", 1)) for line in lines if line]


def main():
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit("usage: scripts/torch_compare.py OUT_DIR (the folder torch_compare.sh wrote)")
    out = Path(sys.argv[1])
    names = [n for n, _ in settings(out)]
    lina = best(out.glob("lina-*.json"))
    torch = {n: best(p for p in out.glob(f"torch-{n}-*.json")
                     if re.fullmatch(rf"torch-{re.escape(n)}-[a-z0-9]+-\d+\.json", p.name)) for n in names}
    rounds = len({p.name.rsplit("-", 1)[1] for p in out.glob("lina-*.json")})
    version = json.loads(next(out.glob("torch-*.json")).read_text())["torch"]
    print("# lina against PyTorch at its best: ms per training step\n")
    print(f"`scripts/torch_compare.sh`, {rounds} round(s), each preset timed in lina and then in PyTorch "
          f"under every thread setting, one after the other; the best round of each. PyTorch {version} "
          "(Debian's python3-torch, OpenBLAS), the same model and step (`scripts/torch_reference.py`). "
          "PyTorch's time is its fastest setting:\n")
    for n, env in settings(out):
        print(f"- `{n}`: {env or 'as installed'}")
    print("\n| preset | B×T | lina | " + " | ".join(f"PyTorch `{n}`" for n in names)
          + " | PyTorch's fastest | lina / PyTorch |")
    print("|---|---|---|" + "---|" * len(names) + "---|---|")
    wins = {n: 0 for n in names}
    for key in sorted(lina, key=lambda k: (k[1], k[0])):
        times = {n: torch[n][key] for n in names if key in torch[n]}
        if not times:
            continue
        fastest = min(times, key=times.get)
        wins[fastest] += 1
        print(f"| {key[0]} | {key[1]} | {lina[key]:.1f} | "
              + " | ".join(f"{times[n]:.1f}" if n in times else "—" for n in names)
              + f" | {times[fastest]:.1f} (`{fastest}`) | {lina[key] / times[fastest]:.3f} |")
    print("\nFastest setting, rows won: " + ", ".join(f"`{n}` {w}" for n, w in wins.items()) + ".")


if __name__ == "__main__":
    main()
