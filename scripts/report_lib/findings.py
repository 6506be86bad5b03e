"""The findings section: generated from the numbers, never written by hand.

Presets are compared through their main runs (groups.py: seed 1337, recall
at 32 pairs of 64 keys). Differences are ranked only when larger than the
noise: for lm, seeds.LmNoise (2·√2·σ from the seed runs; means over seeds
where both presets have them; without seed runs nothing is ranked); for
recall accuracy, twice the binomial standard error of the difference.
"""
import math

from .capacity import BREAKS, HOLDS
from .drops import THRESHOLD, drop_step
from .groups import by_preset, main_size
from .runs import best_val, extrap, final, number, scored_per_eval


def acc_noise(a, b):
    pa, pb = final(a, "val_accuracy"), final(b, "val_accuracy")
    var = pa * (1 - pa) / scored_per_eval(a) + pb * (1 - pb) / scored_per_eval(b)
    return 2 * math.sqrt(max(var, 1e-12))


def fmt3(x):
    return "—" if x is None else f"{x:.3f}"


def lm_findings(runs, noise):
    """Lines on lm: the main runs ranked by val loss, extrapolation, late overfitting, α."""
    lm = [r for r in by_preset(runs, "lm").values() if final(r, "val_loss") is not None]
    if not lm:
        return ["- lm: no run with a val loss yet."]
    out, n = [], noise.single
    steps = sorted({r.get("steps_done") for r in lm}, key=lambda s: number(s, -1))
    if len(steps) > 1:
        out.append(f"- lm runs differ in length ({', '.join(map(str, steps))} steps): rankings compare unequal runs.")
    lm.sort(key=lambda r: final(r, "val_loss"))
    best = lm[0]
    parts = []
    for r in lm[1:]:
        d = final(r, "val_loss") - final(best, "val_loss")
        tag = "no seed runs yet" if n is None else ("noise" if d <= n else "above noise")
        parts.append(f"{r['preset']} +{d:.4f} ({tag})")
    nz = f"noise {n:.4f}" if n is not None else "no seed runs yet"
    out.append(f"- lm (main runs): lowest val loss {best['preset']} {final(best, 'val_loss'):.4f}; "
               + ("; ".join(parts) if parts else "no other lm run") + f" ({nz}).")
    rises = [(r["preset"], extrap(r)[512] - extrap(r)[64]) for r in lm if 64 in extrap(r) and 512 in extrap(r)]
    if rises:
        rises.sort(key=lambda x: x[1])
        out.append("- Extrapolation (trained at context 64): val loss at 512 minus at 64 — "
                   + ", ".join(f"{p} {d:+.4f}" for p, d in rises)
                   + f"; least change: {rises[0][0]}"
                   + (" (within noise of the next)" if n is not None and len(rises) > 1
                      and rises[1][1] - rises[0][1] <= n else "") + ".")
    out += overfit_lines([r for r in runs if r["task"] == "lm"], n)
    out += fit_lines(lm, n)
    mains = lm + list(by_preset(runs, "recall").values())
    out += alpha_lines(mains)
    return out


def overfits_late(r, noise):
    """Whether the run's final val loss is above its best by more than the noise."""
    best, fin = best_val(r)[0], final(r, "val_loss")
    return noise is not None and best is not None and fin is not None and fin - best > noise


def overfit_lines(lm_runs, noise):
    """'overfits late' for every lm run whose final val loss is above its best by more than the noise."""
    out = []
    for r in lm_runs:
        if overfits_late(r, noise):
            (best, step), fin = best_val(r), final(r, "val_loss")
            out.append(f"- {r['_label']} overfits late: best {best:.4f} at step {step}, final {fin:.4f} "
                       f"(+{fin - best:.4f}, noise {noise:.4f}).")
    return out


def train_tail(r, updates=500):
    """Mean training loss over the run's last `updates` updates (the loss_curve entries there), or None."""
    done = number(r.get("steps_done"), 0)
    tail = [p["loss"] for p in r.get("loss_curve") or [] if number(p.get("step"), 0) > done - updates
            and p.get("loss") is not None]
    return sum(tail) / len(tail) if tail else None


def fit_lines(lm_main, noise):
    """Training loss at the end against final val loss, lowest training loss first, and whether
    the runs that overfit late are the ones that fit the training text most closely."""
    rows = [(r["preset"], train_tail(r), final(r, "val_loss"), overfits_late(r, noise)) for r in lm_main]
    rows = sorted((x for x in rows if x[1] is not None and x[2] is not None), key=lambda x: x[1])
    if not rows:
        return []
    line = ("- Training loss (mean of the last 500 updates), lowest first, and its gap to the final val loss: "
            + ", ".join(f"{p} {t:.4f} (gap {v - t:.4f})" for p, t, v, _ in rows) + ".")
    late = [p for p, _, _, o in rows if o]
    if late and len(late) < len(rows):
        if max(t for _, t, _, o in rows if o) < min(t for _, t, _, o in rows if not o):
            line += (f" The runs that overfit late ({', '.join(late)}) end with a lower training loss "
                     "than every run that does not.")
        else:
            line += (f" The runs that overfit late ({', '.join(late)}) are not simply the ones with the "
                     "lowest training loss.")
    return [line]


def alpha_lines(runs):
    """Mean α per head and the half-life in tokens, every layer of every run that has α."""
    out = []
    for r in runs:
        for layer in r.get("alpha") or []:
            a = layer.get("mean_alpha") or []
            if a:
                half = [math.log(0.5) / math.log(x) if 0 < x < 1 else float("inf") for x in a]
                out.append(f"- α, {r['_label']} layer {layer['layer']}: mean per head {min(a):.3f}–{max(a):.3f}; "
                           f"half of a memory is left after {min(half):.1f}–{max(half):.1f} tokens.")
    return out


# One change at a time (docs/spec.md §1.2b): each step adds one thing to the rule.
LADDER = [("linear", "retnet", "a fixed decay per head"),
          ("retnet", "mamba2", "a learned decay per head and token"),
          ("mamba2", "gla", "a learned decay per key channel"),
          ("mamba2", "gdn", "the delta correction, with a learned decay"),
          ("linear", "delta", "the delta correction, without decay"),
          ("linear", "linear-relu", "relu(x)+1e-5 instead of elu(x)+1"),
          ("linear", "linear-sigmoid", "sigmoid(x)+1e-5 instead of elu(x)+1")]


def noise_tag(diff):
    """'noise' / 'above noise' / 'no noise estimate' of a seeds.Diff."""
    return "no seed runs yet" if diff.noise is None else ("noise" if diff.is_noise() else "above noise")


def decay_ladder(runs, noise):
    """Lines: what each step of the ladder changes on lm and recall, above the noise or not."""
    lm, rc, out = by_preset(runs, "lm"), by_preset(runs, "recall"), []
    for a, b, what in LADDER:
        parts = []
        d = noise.between(b, a)
        if d is not None:
            parts.append(f"lm val loss {d.vb:.4f} → {d.va:.4f} ({d.d:+.4f}, {noise_tag(d)}, {d.basis})")
        if a in rc and b in rc and final(rc[a], "val_accuracy") is not None and final(rc[b], "val_accuracy") is not None:
            dacc = final(rc[b], "val_accuracy") - final(rc[a], "val_accuracy")
            n = acc_noise(rc[a], rc[b])
            parts.append(f"recall accuracy {final(rc[a], 'val_accuracy'):.3f} → {final(rc[b], 'val_accuracy'):.3f} "
                         f"({dacc:+.4f}, {'noise' if abs(dacc) <= n else 'above noise'}, noise {n:.4f})")
        if parts:
            unfinished = sorted({f"{r['_label']} at step {r.get('steps_done')}"
                                 for t in (lm, rc) if a in t and b in t for p in (a, b)
                                 for r in [t[p]] if not r.get("finished")})
            out.append(f"- {a} → {b} ({what}): " + "; ".join(parts)
                       + (f" (unfinished: {', '.join(unfinished)})" if unfinished else "") + ".")
    return out


def recall_findings(runs):
    """Lines on recall: the main runs ranked by held-out accuracy, and the step of each drop."""
    rec = [r for r in by_preset(runs, "recall").values() if final(r, "val_accuracy") is not None]
    if not rec:
        return ["- recall: no run with a held-out accuracy yet."]
    rec.sort(key=lambda r: -final(r, "val_accuracy"))
    best = rec[0]
    parts = []
    for r in rec[1:]:
        d = final(best, "val_accuracy") - final(r, "val_accuracy")
        n = acc_noise(best, r)
        parts.append(f"{r['preset']} −{d:.4f} ({'noise' if d <= n else 'above noise'}, noise {n:.4f})")
    pairs, keys = main_size(runs)
    out = [f"- recall (main runs, {pairs} pairs of {keys} keys): highest held-out accuracy {best['preset']} "
           f"{final(best, 'val_accuracy'):.3f}; " + ("; ".join(parts) if parts else "no other recall run") + "."]
    for r in rec:
        s = drop_step(r)
        out.append(f"- recall {r['preset']}: " + (f"held-out accuracy first ≥ {THRESHOLD} at step {s}" if s is not None
                   else f"never reaches accuracy {THRESHOLD} in {r.get('steps_done')} steps (final loss {fmt3(final(r, 'val_loss'))})") + ".")
    return out


def answer_habits(pred):
    """From a recall predictions file: (positions, share of answers that are a
    most frequent value of their sequence, the same share of the targets,
    distinct answers per sequence), or None. A sequence's values are the tokens after its keys in the first
    half (the pairs as written: key, value, key, value, ...)."""
    examples = (pred or {}).get("examples") or []
    n = frequent = frequent_targets = distinct = 0
    for e in examples:
        half = len(e["tokens"]) // 2
        values = e["tokens"][1:half:2]
        counts = {}
        for v in values:
            counts[v] = counts.get(v, 0) + 1
        if not counts:
            continue
        top = max(counts.values())
        for a, t in zip(e["answers"], e["targets"]):
            n += 1
            frequent += counts.get(a, 0) == top
            frequent_targets += counts.get(t, 0) == top
        distinct += len(set(e["answers"]))
    if not n:
        return None
    return n, frequent / n, frequent_targets / n, distinct / len(examples)


def answer_lines(runs):
    """What each main recall run answers on its predictions file's sequences:
    the binding (many distinct answers) or the values' frequencies (the
    sequence's commonest value, whatever the key)."""
    out = []
    for r in by_preset(runs, "recall").values():
        pred = r.get("_predictions")
        h = answer_habits(pred)
        if h is None:
            continue
        n, frequent, frequent_targets, distinct = h
        out.append(f"- recall {r['preset']}, answers on the {n} scored positions of {len(pred['examples'])} held-out "
                   f"sequences ({r['_label']}.predictions.json): a most frequent value of the sequence {frequent:.0%} "
                   f"of the time (the targets {frequent_targets:.0%}), {distinct:.1f} distinct answers per sequence of {pred.get('pairs')} queries"
                   + (" — the values' frequencies, not the key→value binding" if frequent > max(0.5, 2 * frequent_targets) else "") + ".")
    return out


RETRIEVES, FAILS = HOLDS, BREAKS  # held-out accuracy: retrieves at or above, does not below (capacity.py's)
HEAD_DIM = 32  # spec 2: the key and value width of a head (its memory is HEAD_DIM × HEAD_DIM)


def lesson(runs):
    """The recall lesson in two sentences, from the main recall runs of attn, the delta rules and linear
    attention: who retrieves (held-out accuracy >= 0.9) and who does not (< 0.5), then why. None
    without the runs to say it."""
    rec = by_preset(runs, "recall")
    acc = {p: final(rec[p], "val_accuracy") for p in ("attn", "delta", "gdn", "linear") if p in rec}
    acc = {p: a for p, a in acc.items() if a is not None}
    if "linear" not in acc or len(acc) < 2:
        return None
    pairs, keys = main_size(runs)
    def said(presets):  # "attn 1.00, gdn 0.98 and linear 0.12"
        parts = [f"{p} {acc[p]:.2f}" for p in presets]
        return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]

    good = [p for p in acc if p != "linear" and acc[p] >= RETRIEVES]
    if good and acc["linear"] < FAILS:
        return (f"With {pairs} pairs of {keys} keys, {said(good)} (held-out accuracy) retrieve the value stored "
                f"with each key and linear attention does not ({acc['linear']:.2f}). Linear attention only adds "
                f"each pair to its {HEAD_DIM}×{HEAD_DIM} memory as an outer product of positive (elu + 1) keys, which all "
                "overlap, so a sum of many of them cannot keep the pairs apart; the delta rule first removes what "
                "a key already reads and so overwrites, and attention keeps every token in its KV cache.")
    if acc["linear"] >= RETRIEVES and keys <= HEAD_DIM:
        return (f"With {pairs} pairs of {keys} keys all of them retrieve (held-out accuracy {said(list(acc))}): "
                f"{keys} keys fit in a {HEAD_DIM}-dimensional head as positive features that do not overlap, so "
                "even linear attention's plain sum of outer products keeps the pairs apart. The course's 32 pairs "
                "of 64 keys are more keys than a head has dimensions; there the positive keys must overlap, "
                "linear attention stalls, and the delta rule (which overwrites) and attention (which keeps every "
                "token) retrieve.")
    return (f"With {pairs} pairs of {keys} keys the runs do not show the lesson cleanly: held-out accuracy "
            f"{said(list(acc))}, where the course's has attention and the delta rules retrieving and linear "
            "attention stalling. A sum of outer products of positive keys keeps only a few pairs apart, so the "
            "gap needs enough pairs (and updates) for the others to learn and linear attention to run out.")
