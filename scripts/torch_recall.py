#!/usr/bin/python3
"""Train the recall task (docs/spec.md §2.2) on the course's model in PyTorch
(scripts/course_model.py, with torch_reference.py's chunked scan): an
independent run of the spec, to tell what lina does from what the spec's
model and recipe do (another implementation, other random streams). Not
part of lina.

    /usr/bin/python3 scripts/torch_recall.py --preset attn --json out.json
    /usr/bin/python3 scripts/torch_recall.py --preset gdn --steps 600 ...

64 keys (ids 0..63) and 64 values (ids 64..127); a sequence is 32 distinct
keys each followed by its value, then the same keys in a new order, each
followed by its value (128 tokens, 127 inputs); the loss only where the
target is a value of the second half. Batch 128, fresh every step, 6000
updates, dropout 0; AdamW as PyTorch's defaults (lr 1e-3 constant, betas
0.9/0.999, weight decay 0.01 on every parameter), no clipping. Every 500
updates and at the end: loss and accuracy on a fixed held-out set. After
training, the capacity probe: accuracy at 8, 16, 24 and 32 pairs. Writes
the evaluations as json.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as tr  # noqa: E402  (the course's model on the chunked scan)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

KEYS, VALUES, PAIRS = 64, 64, 32
VOCAB = KEYS + VALUES  # keys 0..63, values 64..127
PROBE_PAIRS = (8, 16, 24, 32)


def batch(B, gen, pairs=PAIRS):
    """(inputs [B, 4N−1], targets [B, 4N−1], mask [B, 4N−1]) for N = pairs: N distinct
    keys each followed by its value, then the same keys in a new order, each followed
    by its value; the mask is true where the target is a value of the second half."""
    keys = torch.argsort(torch.rand(B, KEYS, generator=gen), dim=1)[:, :pairs]
    vals = torch.randint(0, VALUES, (B, pairs), generator=gen) + KEYS
    order = torch.argsort(torch.rand(B, pairs, generator=gen), dim=1)
    first = torch.stack([keys, vals], dim=2).reshape(B, 2 * pairs)
    second = torch.stack([keys.gather(1, order), vals.gather(1, order)], dim=2).reshape(B, 2 * pairs)
    seq = torch.cat([first, second], dim=1)  # [B, 4N]
    mask = torch.zeros(B, 4 * pairs - 1, dtype=torch.bool)
    mask[:, 2 * pairs::2] = True  # targets at sequence positions 2N+1, 2N+3, …: the second half's values
    return seq[:, :-1], seq[:, 1:], mask


def score(model, batches):
    """(mean loss, accuracy) over the masked positions of (x, y, mask) batches, dropout off."""
    model.eval()
    losses, right, n = [], 0, 0
    with torch.no_grad():
        for x, y, m in batches:
            out = model(x)[m]
            losses.append(float(F.cross_entropy(out, y[m])))
            right += int((out.argmax(-1) == y[m]).sum())
            n += int(m.sum())
    model.train()
    return sum(losses) / len(losses), right / n


def probe(model, batch_size, batches, seed):
    """The course's capacity probe: accuracy at each number of pairs, fresh sequences."""
    gen = torch.Generator().manual_seed(seed + 2000)
    return {str(n): score(model, [batch(batch_size, gen, n) for _ in range(batches)])[1] for n in PROBE_PAIRS}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="attn", choices=sorted(tr.MIXERS))
    ap.add_argument("--steps", type=int, default=6000, help="updates")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--eval-batches", type=int, default=8, help="batches in the fixed held-out set")
    ap.add_argument("--probe-batches", type=int, default=20, help="batches per size in the capacity probe")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json")
    a = ap.parse_args()
    if min(a.steps, a.batch, a.eval_every, a.eval_batches, a.probe_batches) < 1 or not a.lr > 0 \
            or a.weight_decay < 0 or not 0 <= a.dropout < 1:
        sys.exit("torch_recall.py: --steps, --batch, --eval-every, --eval-batches and --probe-batches "
                 "must be positive, --lr above 0, --weight-decay not negative, --dropout in [0, 1)")
    return a


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = tr.make_model(a.preset, VOCAB, a.dropout).train()
    opt = tr.optimizer(model, a.lr, a.weight_decay)
    train_gen = torch.Generator().manual_seed(a.seed)
    held_out = [batch(a.batch, torch.Generator().manual_seed(a.seed + 1000 + i)) for i in range(a.eval_batches)]
    evals, t0 = [], time.time()
    for step in range(1, a.steps + 1):
        x, y, m = batch(a.batch, train_gen)
        loss = F.cross_entropy(model(x)[m], y[m])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % a.eval_every == 0 or step == a.steps:
            val_loss, accuracy = score(model, held_out)
            evals.append({"step": step, "train_loss": float(loss), "val_loss": val_loss, "val_accuracy": accuracy})
            print(f"step {step}: train loss {float(loss):.4f}, held-out loss {val_loss:.4f}, "
                  f"accuracy {accuracy:.3f} ({time.time() - t0:.0f} s)", flush=True)
    capacity = probe(model, a.batch, a.probe_batches, a.seed)
    print("accuracy by pairs: " + ", ".join(f"{n}: {acc:.3f}" for n, acc in capacity.items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"implementation": "PyTorch " + torch.__version__ + " (scripts/torch_recall.py)",
                       "preset": a.preset, "task": "recall", "steps": a.steps, "batch": a.batch,
                       "lr": a.lr, "weight_decay": a.weight_decay, "dropout": a.dropout, "seed": a.seed,
                       "pairs": PAIRS, "keys": KEYS, "values": VALUES, "wall_time_s": time.time() - t0,
                       "eval": evals, "accuracy_by_pairs": capacity}, f, indent=1)


if __name__ == "__main__":
    main()
