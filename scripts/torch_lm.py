#!/usr/bin/python3
"""Train the lm task (docs/spec.md §2.1) on torch_reference.py's model in
PyTorch: an independent run of the spec, to tell what lina does from what the
spec's model and schedule do (another implementation, other random streams).
Not part of lina.

    /usr/bin/python3 scripts/torch_lm.py --preset hybrid --json out.json
    /usr/bin/python3 scripts/torch_lm.py --preset hybrid --stop-at 3000 ...   (a 5000-update
                                          schedule, stopped early)

Tiny shakespeare by character (the sorted set of its characters), the first
90 % to train on, the last 10 % held out; batch 64 of 64 characters at random
offsets, fresh every step; AdamW as lina's (lr 1e-3, weight decay 0.1 on
matrices), 100 warm-up updates then a cosine to lr/10, gradients clipped to
norm 1. Every 500 updates and at the end: the loss on a fixed set of 200
held-out batches, and the mean training loss of the updates since the last
evaluation. Writes the evaluations as json.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as ref  # noqa: E402  (the model: docs/spec.md §1)
from torch_recall import lr_at, update  # noqa: E402  (lina's schedule and update)
import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(path):
    """(train, val) as int64 tensors of character ids, and the vocabulary size."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    lookup = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([lookup[ch] for ch in text], dtype=torch.int64)
    cut = int(0.9 * len(data))
    return data[:cut], data[cut:], len(chars)


def batch(data, B, T, gen):
    """(inputs [B, T], targets [B, T]): B stretches of T + 1 characters at random offsets."""
    start = torch.randint(0, len(data) - T - 1, (B,), generator=gen)
    rows = torch.stack([data[s:s + T + 1] for s in start.tolist()])
    return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="hybrid", choices=sorted(ref.MIXERS))
    ap.add_argument("--steps", type=int, default=5000, help="updates of the schedule")
    ap.add_argument("--stop-at", type=int, help="stop after this many updates (the schedule stays --steps long)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--eval-batches", type=int, default=200)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "tinyshakespeare.txt"))
    ap.add_argument("--json")
    a = ap.parse_args()
    if min(a.steps, a.batch, a.context, a.eval_every, a.eval_batches) < 1 or not a.lr > 0 or \
            (a.stop_at is not None and a.stop_at < 1):
        sys.exit("torch_lm.py: --steps, --stop-at, --batch, --context, --eval-every and --eval-batches "
                 "must be positive, --lr above 0")
    if not os.path.isfile(a.data):
        sys.exit(f"torch_lm.py: no text at {a.data} (--data PATH)")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    train, val, ref.VOCAB = load(a.data)  # the model's embedding and head take this vocabulary
    model = ref.Model(a.preset)
    opt = ref.optimizer(model)
    train_gen = torch.Generator().manual_seed(a.seed)
    val_gen = torch.Generator().manual_seed(a.seed + 1000)
    held_out = [batch(val, a.batch, a.context, val_gen) for _ in range(a.eval_batches)]
    evals, since, t0 = [], [], time.time()
    last = min(a.steps, a.stop_at or a.steps)
    for step in range(1, last + 1):
        x, y = batch(train, a.batch, a.context, train_gen)
        loss = model(x, y)
        update(model, opt, loss, lr_at(step, a.steps, a.lr))
        since.append(float(loss))
        if step % a.eval_every == 0 or step == last:
            with torch.no_grad():
                val_loss = sum(float(model(hx, hy)) for hx, hy in held_out) / len(held_out)
            evals.append({"step": step, "train_loss_mean": sum(since) / len(since), "val_loss": val_loss})
            since = []
            print(f"step {step}: mean train loss {evals[-1]['train_loss_mean']:.4f}, val loss {val_loss:.4f} "
                  f"({time.time() - t0:.0f} s)", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"implementation": "PyTorch " + torch.__version__ + " (scripts/torch_lm.py)",
                       "preset": a.preset, "task": "lm", "steps": a.steps, "steps_done": last,
                       "batch": a.batch, "context": a.context, "lr": a.lr, "seed": a.seed,
                       "eval_batches": a.eval_batches, "wall_time_s": time.time() - t0, "eval": evals},
                      f, indent=1)


if __name__ == "__main__":
    main()
