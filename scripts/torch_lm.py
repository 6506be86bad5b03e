#!/usr/bin/python3
"""Train the lm task (docs/spec.md §2.1) on the course's model in PyTorch
(scripts/course_model.py, with torch_reference.py's chunked scan): an
independent run of the spec, to tell what lina does from what the spec's
model and recipe do (another implementation, other random streams). Not
part of lina.

    /usr/bin/python3 scripts/torch_lm.py --preset hybrid --json out.json
    /usr/bin/python3 scripts/torch_lm.py --preset gdn --steps 3000 --dropout 0 ...

Tiny shakespeare by character (the sorted set of its characters), the first
90 % to train on, the last 10 % held out; batch 64 of 64 characters at random
offsets, fresh every step; dropout 0.1; AdamW as PyTorch's defaults (lr 1e-3
constant, betas 0.9/0.999, weight decay 0.01 on every parameter), no
clipping; 5000 updates. At update 0, every 500 updates and after the last:
train and val loss on 200 random batches each, dropout off. After training,
the val loss at contexts 64, 128, 256 and 512 (40 batches each, batch
max(4, 64·64 / context)). Writes the evaluations as json.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as tr  # noqa: E402  (the course's model on the chunked scan)
import course_model as cm  # noqa: E402
import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXTRAP_CONTEXTS = (64, 128, 256, 512)


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


def mean_loss(model, data, B, T, batches, gen):
    """The mean loss of `batches` random batches, dropout off."""
    model.eval()
    with torch.no_grad():
        total = sum(float(cm.loss_of(model(x), y)) for x, y in (batch(data, B, T, gen) for _ in range(batches)))
    model.train()
    return total / batches


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="hybrid", choices=sorted(tr.MIXERS))
    ap.add_argument("--steps", type=int, default=5000, help="updates")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--eval-batches", type=int, default=200)
    ap.add_argument("--extrap-batches", type=int, default=40, help="batches per context after training (0: none)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "tinyshakespeare.txt"))
    ap.add_argument("--json")
    a = ap.parse_args()
    if min(a.steps, a.batch, a.context, a.eval_every, a.eval_batches) < 1 or a.extrap_batches < 0 \
            or not a.lr > 0 or a.weight_decay < 0 or not 0 <= a.dropout < 1:
        sys.exit("torch_lm.py: --steps, --batch, --context, --eval-every and --eval-batches must be positive, "
                 "--extrap-batches and --weight-decay not negative, --lr above 0, --dropout in [0, 1)")
    if not os.path.isfile(a.data):
        sys.exit(f"torch_lm.py: no text at {a.data} (--data PATH)")
    return a


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    train, val, vocab = load(a.data)
    model = tr.make_model(a.preset, vocab, a.dropout).train()
    opt = tr.optimizer(model, a.lr, a.weight_decay)
    train_gen = torch.Generator().manual_seed(a.seed)
    eval_gen = torch.Generator().manual_seed(a.seed + 1000)
    evals, t0 = [], time.time()
    for step in range(0, a.steps + 1):
        if step > 0:
            x, y = batch(train, a.batch, a.context, train_gen)
            loss = cm.loss_of(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if step % a.eval_every == 0 or step == a.steps:
            losses = {name: mean_loss(model, data, a.batch, a.context, a.eval_batches, eval_gen)
                      for name, data in (("train_loss", train), ("val_loss", val))}
            evals.append({"step": step, **losses})
            print(f"step {step}: train loss {losses['train_loss']:.4f}, val loss {losses['val_loss']:.4f} "
                  f"({time.time() - t0:.0f} s)", flush=True)
    extrap = {str(T): mean_loss(model, val, max(4, a.batch * a.context // T), T, a.extrap_batches, eval_gen)
              for T in EXTRAP_CONTEXTS if a.extrap_batches and T < len(val)}
    if extrap:
        print("val loss by context: " + ", ".join(f"{T}: {v:.4f}" for T, v in extrap.items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"implementation": "PyTorch " + torch.__version__ + " (scripts/torch_lm.py)",
                       "preset": a.preset, "task": "lm", "steps": a.steps, "batch": a.batch,
                       "context": a.context, "lr": a.lr, "weight_decay": a.weight_decay,
                       "dropout": a.dropout, "seed": a.seed, "eval_batches": a.eval_batches,
                       "wall_time_s": time.time() - t0, "eval": evals, "val_loss_by_context": extrap},
                      f, indent=1)


if __name__ == "__main__":
    main()
