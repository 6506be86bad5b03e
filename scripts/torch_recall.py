#!/usr/bin/python3
"""Train the recall task (docs/spec.md §2.2) on torch_reference.py's model in
PyTorch: an independent run of the spec, to tell what lina does from what
the spec's model and schedule do (another implementation, other random
streams). Not part of lina.

    /usr/bin/python3 scripts/torch_recall.py --preset attn --steps 2000 --json out.json
    /usr/bin/python3 scripts/torch_recall.py --preset gdn --stop-at 600 ...   (a 2000-update
                                              schedule, stopped early: where gdn drops)

Batch 64 of 32 pairs of 64 keys (128 tokens, 127 inputs), fresh every step;
loss on the 32 value targets of the second half; AdamW as lina's (lr 1e-3,
weight decay 0.1 on matrices), 100 warm-up updates then a cosine to lr/10,
gradients clipped to norm 1; every 100 updates the loss and accuracy on a
fixed held-out set of 8 batches. Writes the evaluations as json.
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as ref  # noqa: E402  (the model: docs/spec.md §1)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

KEYS, VALUES, PAIRS = 64, 16, 32
VOCAB = KEYS + VALUES  # keys 0..63, values 64..79


def batch(B, gen):
    """(inputs [B, 127], targets [B, 127], mask [B, 127]): 32 distinct keys each followed by its
    value, then the same keys in a new order, each followed by its value; the loss only where
    the target is a value of the second half. The inputs are returned as all 128 tokens: the
    model is causal, so the first 127 outputs are those of the 127 inputs, and 128 tokens are a
    whole number of the chunked scan's chunks of 16."""
    keys = torch.argsort(torch.rand(B, KEYS, generator=gen), dim=1)[:, :PAIRS]
    vals = torch.randint(0, VALUES, (B, PAIRS), generator=gen) + KEYS
    order = torch.argsort(torch.rand(B, PAIRS, generator=gen), dim=1)
    first = torch.stack([keys, vals], dim=2).reshape(B, 2 * PAIRS)
    second = torch.stack([keys.gather(1, order), vals.gather(1, order)], dim=2).reshape(B, 2 * PAIRS)
    seq = torch.cat([first, second], dim=1)  # [B, 128]
    mask = torch.zeros(B, 4 * PAIRS - 1, dtype=torch.bool)
    mask[:, 2 * PAIRS::2] = True  # targets at sequence positions 65, 67, …, 127: the second half's values
    return seq, seq[:, 1:], mask


def logits(model, seq):
    """The logits [B, 127, vocab] at the first 127 positions of seq [B, 128]."""
    x = model.tok_emb(seq)
    for layer in model.layers:
        x = layer(x)
    return model.head(model.norm_f(x))[:, :-1]


def lr_at(step, steps, peak, warmup=100):
    """lina's schedule: linear warm-up to the peak, then a cosine to peak/10 at the last update."""
    if step <= warmup:
        return peak * step / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return peak / 10 + 0.5 * (peak - peak / 10) * (1 + math.cos(math.pi * t))


def update(model, opt, loss, lr):
    """One AdamW update as lina's: the learning rate of this step, backward, clip to norm 1."""
    for g in opt.param_groups:
        g["lr"] = lr
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="attn", choices=sorted(ref.MIXERS))
    ap.add_argument("--steps", type=int, default=2000, help="updates of the schedule")
    ap.add_argument("--stop-at", type=int, help="stop after this many updates (the schedule stays --steps long)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.steps < 1 or a.batch < 1 or not a.lr > 0 or (a.stop_at is not None and a.stop_at < 1):
        sys.exit("torch_recall.py: --steps, --stop-at and --batch must be positive, --lr above 0")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    ref.VOCAB = VOCAB  # the model's embedding and head take the recall vocabulary
    model = ref.Model(a.preset)
    opt = ref.optimizer(model)
    train_gen = torch.Generator().manual_seed(a.seed)
    held_out = [batch(a.batch, torch.Generator().manual_seed(a.seed + 1000 + i)) for i in range(8)]
    evals, t0 = [], time.time()
    last = min(a.steps, a.stop_at or a.steps)
    for step in range(1, last + 1):
        x, y, m = batch(a.batch, train_gen)
        loss = F.cross_entropy(logits(model, x)[m], y[m])
        update(model, opt, loss, lr_at(step, a.steps, a.lr))
        if step % 100 == 0 or step == last:
            with torch.no_grad():
                losses, right, n = [], 0, 0
                for hx, hy, hm in held_out:
                    out = logits(model, hx)[hm]
                    losses.append(float(F.cross_entropy(out, hy[hm])))
                    right += int((out.argmax(-1) == hy[hm]).sum())
                    n += int(hm.sum())
            evals.append({"step": step, "train_loss": float(loss), "val_loss": sum(losses) / len(losses),
                          "val_accuracy": right / n})
            print(f"step {step}: train loss {float(loss):.4f}, held-out loss {evals[-1]['val_loss']:.4f}, "
                  f"accuracy {evals[-1]['val_accuracy']:.3f} ({time.time() - t0:.0f} s)", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"implementation": "PyTorch " + torch.__version__ + " (scripts/torch_recall.py)",
                       "preset": a.preset, "task": "recall", "steps": a.steps, "batch": a.batch,
                       "steps_done": last, "lr": a.lr, "seed": a.seed, "pairs": PAIRS, "keys": KEYS,
                       "wall_time_s": time.time() - t0, "eval": evals}, f, indent=1)


if __name__ == "__main__":
    main()
