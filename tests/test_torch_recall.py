#!/usr/bin/env python3
"""ctest torch_recall: scripts/torch_recall.py's recall batches follow
docs/spec.md §2.2 (32 distinct keys of 64 each followed by its value of 64
value tokens, ids 64..127, the same keys with the same values in a new
order, the loss only on the second half's values; the capacity probe's
shorter sequences likewise), and a 2-update run writes its evaluations
and its capacity probe. Needs Debian's
python3-torch (run under /usr/bin/python3); prints "SKIPPED: ..." without it."""
import json
import os
import subprocess
import sys
import tempfile

import system_torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "torch_recall.py")
PROBE = r"""
import sys
sys.path.insert(0, sys.argv[1])
import torch, torch_recall as tr
x, y, m = tr.batch(16, torch.Generator().manual_seed(3))
seq = torch.cat([x, y[:, -1:]], dim=1)  # the 128 tokens
bad = []
if tuple(x.shape) != (16, 127) or tuple(y.shape) != (16, 127) or tuple(m.shape) != (16, 127): bad.append("shapes")
if not torch.equal(x[:, 1:], y[:, :-1]): bad.append("targets are the inputs shifted by one")
if int(m.sum()) != 16 * 32: bad.append("32 scored positions a sequence")
for s in seq.tolist():
    k1, v1, k2, v2 = s[0:64:2], s[1:64:2], s[64::2], s[65::2]
    if len(set(k1)) != 32 or max(k1) >= 64: bad.append("32 distinct keys")
    if any(not 64 <= v < 128 for v in v1 + v2): bad.append("values are 64..127")
    if sorted(k1) != sorted(k2) or k1 == k2: bad.append("the same keys in a new order")
    if dict(zip(k1, v1)) != dict(zip(k2, v2)): bad.append("each key keeps its value")
scored = [i for i in range(127) if bool(m[0, i])]
if scored != list(range(64, 127, 2)): bad.append("the mask is the second half's values")
x8, y8, m8 = tr.batch(4, torch.Generator().manual_seed(4), 8)
if tuple(x8.shape) != (4, 31) or m8[0].nonzero().flatten().tolist() != list(range(16, 31, 2)): bad.append("8 pairs")
if set(torch.cat([x, y], 1).flatten().tolist()) - set(range(128)): bad.append("ids in 0..127")
print("BAD: " + ", ".join(sorted(set(bad))) if bad else "GOOD")
"""


def main():
    py = "/usr/bin/python3"
    system_torch.skip_unless_available()
    failures = []
    probe = subprocess.run([py, "-c", PROBE, os.path.join(ROOT, "scripts")], capture_output=True, text=True)
    print(probe.stdout.strip() or probe.stderr.strip())
    if probe.stdout.strip() != "GOOD":
        failures.append("the batches: " + (probe.stdout.strip() or probe.stderr.strip()[-300:]))
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        run = subprocess.run([py, SCRIPT, "--preset", "gdn", "--steps", "2", "--batch", "4", "--threads", "1",
                              "--eval-batches", "2", "--probe-batches", "1", "--json", out],
                             capture_output=True, text=True)
        doc = json.load(open(out)) if run.returncode == 0 and os.path.exists(out) else {}
        evals = doc.get("eval", [])
        if not (len(evals) == 1 and evals[0]["step"] == 2 and 0 <= evals[0]["val_accuracy"] <= 1
                and 3.8 < evals[0]["val_loss"] < 5.8):  # about ln 128 = 4.85 after two updates
            failures.append("a 2-update run's json: %r %s" % (evals, run.stderr[-300:]))
        if sorted(doc.get("accuracy_by_pairs", {})) != ["16", "24", "32", "8"]:
            failures.append("the capacity probe at 8, 16, 24, 32 pairs: %r" % doc.get("accuracy_by_pairs"))
        if doc.get("values") != 64 or doc.get("batch") != 4 or doc.get("dropout") != 0.0:
            failures.append("the json records the recipe (64 values, batch, dropout 0)")
        bad = subprocess.run([py, SCRIPT, "--steps", "0"], capture_output=True, text=True)
        if bad.returncode == 0 or "--steps" not in bad.stderr:
            failures.append("--steps 0 is refused with one line")
    for f in failures:
        print("FAILED: " + f)
    if failures:
        sys.exit(1)
    print("torch_recall passed")


if __name__ == "__main__":
    main()
