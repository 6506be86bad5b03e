#!/usr/bin/env python3
"""ctest torch_lm: scripts/torch_lm.py reads tiny shakespeare as docs/spec.md
§2.1 says (65 characters, the first 90 % to train on), its targets are the
inputs shifted by one character, and a 3-update run writes its evaluations
(train and val loss at update 0, every --eval-every and after the last), the
val loss at longer contexts and the recipe (dropout 0.1, lr 1e-3, weight
decay 0.01).
Needs Debian's python3-torch (run under /usr/bin/python3); prints
"SKIPPED: ..." without it."""
import json
import os
import subprocess
import sys
import tempfile

import system_torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "torch_lm.py")
PROBE = r"""
import sys
sys.path.insert(0, sys.argv[1])
import torch, torch_lm as tl
train, val, vocab = tl.load(sys.argv[2])
x, y = tl.batch(train, 8, 64, torch.Generator().manual_seed(3))
bad = []
if vocab != 65: bad.append("65 characters")
if len(train) != int(0.9 * (len(train) + len(val))): bad.append("the first 90 % to train on")
if tuple(x.shape) != (8, 64) or tuple(y.shape) != (8, 64): bad.append("shapes")
if not torch.equal(x[:, 1:], y[:, :-1]): bad.append("targets are the inputs shifted by one")
print("BAD: " + ", ".join(bad) if bad else "GOOD")
"""


def main():
    py = "/usr/bin/python3"
    system_torch.skip_unless_available()
    data = os.path.join(ROOT, "data", "tinyshakespeare.txt")
    failures = []
    probe = subprocess.run([py, "-c", PROBE, os.path.join(ROOT, "scripts"), data], capture_output=True, text=True)
    print(probe.stdout.strip() or probe.stderr.strip())
    if probe.stdout.strip() != "GOOD":
        failures.append("the data: " + (probe.stdout.strip() or probe.stderr.strip()[-300:]))
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "l.json")
        run = subprocess.run([py, SCRIPT, "--preset", "hybrid", "--steps", "3", "--eval-every", "2",
                              "--eval-batches", "2", "--extrap-batches", "1", "--batch", "4", "--threads", "1",
                              "--json", out], capture_output=True, text=True)
        doc = json.load(open(out)) if run.returncode == 0 and os.path.exists(out) else {}
        evals = doc.get("eval", [])
        if not ([e["step"] for e in evals] == [0, 2, 3]
                and all(3.0 < e[k] < 6.0 for e in evals for k in ("train_loss", "val_loss"))):
            failures.append("a 3-update run's json: %r %s" % (evals, run.stderr[-300:]))  # about ln 65 = 4.17
        if sorted(doc.get("val_loss_by_context", {}), key=int) != ["64", "128", "256", "512"]:
            failures.append("the val loss at contexts 64..512: %r" % doc.get("val_loss_by_context"))
        if (doc.get("dropout"), doc.get("lr"), doc.get("weight_decay")) != (0.1, 1e-3, 0.01):
            failures.append("the json records spec 2's recipe (dropout 0.1, lr 1e-3, weight decay 0.01)")
        for args, word in ((["--steps", "0"], "--steps"), (["--data", os.path.join(d, "none.txt")], "no text")):
            bad = subprocess.run([py, SCRIPT] + args, capture_output=True, text=True)
            if bad.returncode == 0 or word not in bad.stderr:
                failures.append(" ".join(args) + " is refused with one line")
    for f in failures:
        print("FAILED: " + f)
    if failures:
        sys.exit(1)
    print("torch_lm passed")


if __name__ == "__main__":
    main()
