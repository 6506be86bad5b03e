#!/usr/bin/env python3
"""ctest torch_compare: scripts/torch_compare.py on made-up timings names
PyTorch's fastest thread setting per row and divides lina's time by it.
Needs no PyTorch."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write(folder, name, rows, torch=None):
    doc = {"train": [{"preset": p, "shape": s, "ms_per_step": ms} for p, s, ms in rows]}
    if torch:
        doc["torch"] = torch
    with open(os.path.join(folder, name), "w") as f:
        json.dump(doc, f)


def main():
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "settings.txt"), "w") as f:
            f.write("installed=\nshort-spin=GOMP_SPINCOUNT=1000\none-blas-thread=OPENBLAS_NUM_THREADS=1\n")
        for r, ms in ((1, 110.0), (2, 100.0)):  # the best round of lina counts
            write(d, f"lina-attn-{r}.json", [("attn", "64x64", ms)])
        write(d, "torch-installed-attn-1.json", [("attn", "64x64", 900.0)], "1.13")
        write(d, "torch-short-spin-attn-1.json", [("attn", "64x64", 400.0)], "1.13")
        write(d, "torch-one-blas-thread-attn-1.json", [("attn", "64x64", 500.0)], "1.13")
        out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "torch_compare.py"), d],
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit("FAILED: torch_compare.py exited %d: %s" % (out.returncode, out.stderr))
        row = next((l for l in out.stdout.splitlines() if l.startswith("| attn | 64x64")), None)
        checks = [
            (row is not None, "a row for attn at 64x64"),
            (row and "| 100.0 |" in row, "lina's best round (100.0)"),
            (row and "400.0 (`short-spin`)" in row, "PyTorch's fastest setting, named"),
            (row and row.rstrip(" |").endswith("0.250"), "lina / PyTorch's fastest = 0.250"),
            ("`short-spin` 1" in out.stdout, "rows won per setting"),
        ]
        for ok, what in checks:
            if not ok:
                sys.exit("FAILED: " + what + "\n" + out.stdout)
            print("ok:", what)
        bad = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "torch_compare.py"), d + "/none"],
                             capture_output=True, text=True)
        if bad.returncode == 0 or len(bad.stderr.strip().splitlines()) != 1:
            sys.exit("FAILED: a missing folder ends with one line and a non-zero exit")
        print("ok: a missing folder: one line, non-zero exit")
    print("torch_compare passed")


if __name__ == "__main__":
    main()
