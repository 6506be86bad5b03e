"""The report's PNG plots (matplotlib, Agg backend). Every function returns
the file name it wrote, or None when there was nothing to draw."""
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from . import capacity, drops, groups, memory, recipe  # noqa: E402
from .runs import extrap, final  # noqa: E402

COLORS = {"attn": "tab:blue", "linear": "tab:orange", "delta": "tab:green", "gdn": "tab:red", "hybrid": "tab:purple",
          "retnet": "tab:brown", "mamba2": "tab:pink", "gla": "tab:olive", "linear-relu": "tab:cyan",
          "linear-sigmoid": "gold"}


def color(r):
    return COLORS.get(r["preset"], "tab:gray")


def save(fig, out, name):
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=110)
    plt.close(fig)
    return name


def mains(runs, task):
    """The main runs of a task (groups.py), in run order."""
    return list(groups.by_preset(runs, task).values())


def lm_curves(runs, out):
    """Train loss (faint) and val loss of the main lm runs; the other seeds' val loss dashed."""
    main = [r for r in mains(runs, "lm") if r.get("loss_curve")]
    if not main:
        return None
    role = groups.roles(runs)
    extra = [r for r in runs if r["task"] == "lm" and role[id(r)].startswith("seed ")]
    fig, ax = plt.subplots(figsize=(8, 5))
    for r in main:
        c = r["loss_curve"]
        ax.plot([p["step"] for p in c], [p["loss"] for p in c], color=color(r), alpha=0.35, lw=0.8)
    main_ids = {id(r) for r in main}
    for r in main + extra:
        ev = [e for e in r.get("eval") or [] if "val_loss" in e]
        is_main = id(r) in main_ids
        ax.plot([e["step"] for e in ev], [e["val_loss"] for e in ev], "o-" if is_main else "--", color=color(r),
                lw=1.5 if is_main else 0.8, label=f"{r['_label']} val" if is_main else None)
    ax.plot([], [], color="gray", alpha=0.5, label="train (faint, per step)")
    if extra:
        ax.plot([], [], "--", color="gray", lw=0.8, label="val, other seeds (dashed)")
    ax.set(xlabel="update (step)", ylabel="cross-entropy (nats per character)", title="lm: train and val loss")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, out, "lm_loss.png")


def recall_curves(runs, out):
    """Held-out accuracy (solid; fresh batches dashed) and loss of the main recall runs against the step."""
    rc = [r for r in mains(runs, "recall") if r.get("eval")]
    if not rc:
        return None
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.5))
    for r in rc:
        ev = r["eval"]
        a1.plot([e["step"] for e in ev], [e.get("val_accuracy", 0) for e in ev], "o-", color=color(r), label=r["_label"])
        fresh = [e for e in ev if "fresh_accuracy" in e]
        a1.plot([e["step"] for e in fresh], [e["fresh_accuracy"] for e in fresh], "--", color=color(r), lw=0.8)
        a2.plot([e["step"] for e in ev], [e["val_loss"] for e in ev], "o-", color=color(r), label=r["_label"])
    a1.axhline(drops.THRESHOLD, ls=":", color="gray", lw=0.8, label=f"drop: accuracy ≥ {drops.THRESHOLD}")
    a1.plot([], [], "--", color="gray", lw=0.8, label="fresh batches (dashed)")
    a1.set(xlabel="update (step)", ylabel="held-out accuracy (fraction of scored values)", ylim=(0, 1.02),
           title="recall: held-out accuracy")
    values = sorted({recipe.of_run(r).get("values") for r in rc if recipe.of_run(r).get("values")})
    for v in values:
        a2.axhline(math.log(v), ls="--", color="gray", lw=0.8, label=f"chance ln {v}")
    a2.set(xlabel="update (step)", ylabel="held-out loss (nats per scored value)", title="recall: held-out loss")
    for a in (a1, a2):
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    return save(fig, out, "recall.png")


def probe_plot(runs, out):
    """The course's capacity probe: accuracy at N pairs of every main recall run trained at 32."""
    rows = [(r, capacity.probe(r)) for r in mains(runs, "recall") if capacity.probe(r)]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r, got in rows:
        n = sorted(got)
        ax.plot(n, [got[k][0] for k in n], "o-", color=color(r), label=f"{r['_label']} (trained at {groups.pairs(r)})")
    ax.set_xticks(sorted({k for _, got in rows for k in got}))
    ax.set(xlabel="pairs in the sequence (N)", ylabel="accuracy after training", ylim=(0, 1.02),
           title="recall: the capacity probe (the course gives no numbers)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, out, "capacity_probe.png")


def extrapolation(runs, out):
    """Val loss of the main lm runs at contexts 64 … 512."""
    rows = [(r, extrap(r)) for r in mains(runs, "lm") if extrap(r)]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r, ex in rows:
        ctx = sorted(ex)
        ax.plot(ctx, [ex[c] for c in ctx], "o-", color=color(r), label=r["_label"])
    ax.set_xscale("log", base=2)
    ax.axvline(64, ls=":", color="gray", lw=0.8)
    ax.set(xlabel="context length (tokens; trained at 64, dotted)", ylabel="val loss (nats per character)",
           title="lm: val loss at longer contexts")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, out, "extrapolation.png")


def memory_plot(out):
    ctx = [2 ** i for i in range(4, 18)]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.8))
    for p in ("attn", "hybrid", "gdn"):
        m = memory.lina_memory(memory.PRESET_LAYERS[p])
        a1.plot(ctx, [memory.stored(m, c) for c in ctx], "o-", ms=3, color=COLORS[p],
                label=f"{p}: {m['kv_per_token']}/token + {m['state_const'] + m['conv_cache']}")
    a1.set(xscale="log", yscale="log", xlabel="context length (tokens)",
           ylabel="numbers stored per sequence (KV + state + conv)", title="lina's presets (4 layers)")
    styles = ["-", "--", ":", "-.", (0, (5, 1))]
    for layout, st in zip(memory.real_layouts(), styles):
        a2.plot(ctx, [memory.real_bytes(layout, c) / 2 ** 30 for c in ctx], ls=st, lw=2, label=layout["name"])
    for c in (4096, 32768, 131072):
        a2.axvline(c, color="gray", lw=0.5)
    a2.set(xscale="log", yscale="log", xlabel="context length (tokens)", ylabel="GiB per sequence",
           title="real-scale layouts (conv cache not counted)")
    for a in (a1, a2):
        a.grid(alpha=0.3, which="both")
        a.legend(fontsize=7)
    return save(fig, out, "memory.png")


def alpha_plot(runs, out):
    """Mean α per head of the main runs, and αⁿ against n."""
    rows = [r for r in mains(runs, "lm") + mains(runs, "recall") if r.get("alpha")]
    if not rows:
        return None
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.8))
    x, ticks = 0, []
    for r in rows:
        for layer in r["alpha"]:
            a = layer["mean_alpha"]
            a1.bar([x + i for i in range(len(a))], a, color=color(r), alpha=0.5 + 0.5 * (layer["layer"] % 2))
            ticks.append((x + (len(a) - 1) / 2, f"{r['_label']}\nlayer {layer['layer']}"))
            x += len(a) + 1
    a1.axhline(0.9526, ls="--", color="gray", lw=0.8, label="start: sigmoid(3) ≈ 0.95")
    a1.set_xticks([t[0] for t in ticks], [t[1] for t in ticks], fontsize=6, rotation=90)
    a1.set(ylabel="mean α per head (on evaluation text)", ylim=(0, 1), title="α: one bar per head")
    a1.legend(fontsize=7)
    n = list(range(0, 513, 4))
    for i, r in enumerate(rows):
        for layer in r["alpha"]:
            for h, a in enumerate(layer["mean_alpha"]):
                a2.plot(n, [a ** k for k in n], color=color(r), lw=0.9, alpha=0.7, ls=["-", "--", ":", "-."][i % 4],
                        label=r["_label"] if layer is r["alpha"][0] and h == 0 else None)
    a2.set(yscale="log", ylim=(1e-6, 1.1), xlabel="tokens since the write (n)",
           ylabel="fraction of a memory left, αⁿ (mean α)", title="α decay, every head of every recurrent layer")
    a2.legend(fontsize=7)
    for a in (a1, a2):
        a.grid(alpha=0.3)
    return save(fig, out, "alpha.png")


def capacity_plot(runs, out):
    """Final held-out accuracy against pairs (64 keys, main seed), one line per preset; x: unfinished."""
    sizes, cap = capacity.capacity(runs)
    if not capacity.has_sweep(sizes, groups.main_size(runs)[0]):
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for preset, by_pairs in cap.items():
        pts = [(p, final(r, "val_accuracy"), r.get("finished")) for p, r in by_pairs.items()
               if final(r, "val_accuracy") is not None]
        c = COLORS.get(preset, "tab:gray")
        ax.plot([p for p, _, _ in pts], [a for _, a, _ in pts], "o-", color=c, label=preset)
        ax.plot([p for p, _, f in pts if not f], [a for _, a, f in pts if not f], "x", color="black", ms=9)
    ax.axhline(capacity.HOLDS, ls="--", color="gray", lw=0.8, label=f"holds: ≥ {capacity.HOLDS}")
    ax.axhline(capacity.BREAKS, ls=":", color="gray", lw=0.8, label=f"breaks: < {capacity.BREAKS}")
    ax.plot([], [], "x", color="black", label="unfinished run")
    ax.set_xticks(sizes)
    ax.set(xlabel=f"pairs trained at (of {groups.main_size(runs)[1]} keys)", ylabel="held-out accuracy (final)", ylim=(0, 1.02),
           title="recall capacity")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, out, "capacity.png")


def all_plots(runs, out):
    made = [lm_curves(runs, out), recall_curves(runs, out), extrapolation(runs, out),
            memory_plot(out), alpha_plot(runs, out), probe_plot(runs, out), capacity_plot(runs, out)]
    return [m for m in made if m]
