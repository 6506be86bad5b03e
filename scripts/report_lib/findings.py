"""The findings section: generated from the numbers, never written by hand.

Presets are compared through their main runs (groups.py: seed 1337, recall
at 32 pairs of 64 keys). Differences are ranked only when larger than the
noise: for lm, seeds.LmNoise (2·√2·σ from the seeds, else the largest
val-vs-extrap@64 gap; means over seeds where both presets have them); for
recall accuracy, twice the binomial standard error of the difference.
"""
import math

from .groups import by_preset
from .runs import best_val, extrap, f4, final, number, scored_per_eval, train_cfg


def acc_noise(a, b):
    pa, pb = final(a, "val_accuracy"), final(b, "val_accuracy")
    var = pa * (1 - pa) / scored_per_eval(a) + pb * (1 - pb) / scored_per_eval(b)
    return 2 * math.sqrt(max(var, 1e-12))


def drop_step(r, threshold=0.5):
    """First evaluation step with held-out accuracy ≥ threshold (None: never)."""
    for e in r.get("eval") or []:
        if (e.get("val_accuracy") or 0) >= threshold:
            return e["step"]
    return None


def acc_at(r, step):
    for e in r.get("eval") or []:
        if e["step"] == step and "val_accuracy" in e:
            return e["val_accuracy"]
    return None


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
        tag = "no noise estimate" if n is None else ("noise" if d <= n else "above noise")
        parts.append(f"{r['preset']} +{d:.4f} ({tag})")
    nz = f"noise {n:.4f}" if n is not None else "no noise estimate yet"
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
    return "no noise estimate" if diff.noise is None else ("noise" if diff.is_noise() else "above noise")


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
    out = [f"- recall (main runs, 32 pairs of 64 keys): highest held-out accuracy {best['preset']} "
           f"{final(best, 'val_accuracy'):.3f}; " + ("; ".join(parts) if parts else "no other recall run") + "."]
    for r in rec:
        s = drop_step(r)
        out.append(f"- recall {r['preset']}: " + (f"held-out accuracy first ≥ 0.5 at step {s}" if s is not None
                   else f"never reaches accuracy 0.5 in {r.get('steps_done')} steps (final loss {fmt3(final(r, 'val_loss'))})") + ".")
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


def verdict_signed(course_diff, diff, a, b):
    """course_diff and diff.d: loss(a) − loss(b)."""
    if diff is None:
        return "not measured"
    if diff.noise is None:
        return "no noise estimate"
    if diff.is_noise():
        return f"noise in lina (|{diff.d:.4f}| ≤ {diff.noise:.4f}); the course ranks it"
    if (diff.d < 0) == (course_diff < 0):
        return f"agrees (above noise {diff.noise:.4f})"
    return f"DISAGREES: lina has {a} {'lower' if diff.d < 0 else 'higher'} than {b} (noise {diff.noise:.4f})"


def verdict_noise(diff):
    """The course calls the gap noise: does lina?"""
    if diff is None:
        return "not measured"
    if diff.noise is None:
        return "no noise estimate"
    return "agrees (noise)" if diff.is_noise() else f"DISAGREES: {abs(diff.d):.4f} is above lina's noise {diff.noise:.4f}"


def settings_gap(used, steps, batch):
    """'' when every run a row used has the course's length and batch, else a note."""
    got = sorted({(r.get("steps_done"), train_cfg(r).get("batch")) for r in used},
                 key=lambda g: (number(g[0], -1), number(g[1], -1)))
    if not got or all(g == (steps, batch) for g in got):
        return ""
    return (" — runs of " + ", ".join(f"{s} steps at batch {b}" for s, b in got)
            + f", not the course's {steps} at {batch}: indicative only")


def course_table(runs, course, noise):
    """Rows (what, course reported, lina measured, verdict); a row whose runs are not at the course's
    length and batch says 'indicative only'."""
    st = course["settings"]
    length = {"lm": st["lm_steps"], "recall": st["recall_steps"]}
    out = []
    for what, a, b, v, used in course_rows(runs, course, noise):
        task = what.split()[0]
        if task in length and v and v != "not measured":
            v += settings_gap(used, length[task], st["batch"])
        out.append((what, a, b, v))
    return out


def signed(diff):
    return "—" if diff is None else f"{diff.d:+.4f} ({diff.basis})"


def course_rows(runs, course, noise):
    """Rows (what, course reported, lina measured, verdict, runs used) from the main runs."""
    lm, rc, c = by_preset(runs, "lm"), by_preset(runs, "recall"), course["lm"]
    n = noise.single

    def same_value(course_v, lina_v):
        if lina_v is None:
            return "not measured"
        d = lina_v - course_v
        if n is not None and abs(d) <= n:
            return f"agrees ({d:+.4f}, within noise {n:.4f})"
        return f"DISAGREES: lina {'higher' if d > 0 else 'lower'} by {abs(d):.4f}" + (f" (noise {n:.4f})" if n else "")

    h = lm.get("hybrid")
    hv, e64 = (final(h, "val_loss"), extrap(h).get(64)) if h else (None, None)
    rows = [("lm hybrid val loss (200 batches)", f4(c["hybrid_val_loss"]), f4(hv),
             same_value(c["hybrid_val_loss"], hv), [h]),
            ("lm hybrid extrapolation loss at 64 (40 batches)", f4(c["hybrid_extrap_64"]), f4(e64),
             same_value(c["hybrid_extrap_64"], e64), [h]),
            ("lm noise: largest gap val vs extrap@64 over the runs", f4(c["noise"]), f4(noise.spread),
             "" if noise.spread is None else ("lina's is larger" if noise.spread > c["noise"] else "lina's is smaller"), []),
            ("lm noise used for lina's verdicts", f4(c["noise"]), f4(n) + ("" if n is None else f" ({noise.source})"),
             "", [])]
    for a, b, key in (("attn", "linear", "attn_below_linear"), ("attn", "gdn", "attn_below_gdn")):
        d = noise.between(a, b)
        rows.append((f"lm {a} − {b} val loss", f"−{c[key]:.4f}", signed(d),
                     verdict_signed(-c[key], d, a, b), d.runs if d else []))
    for a, b, key in (("gdn", "delta", "gdn_delta_gap_unsigned"), ("attn", "hybrid", "attn_hybrid_gap_unsigned")):
        d = noise.between(a, b)
        rows.append((f"lm gap {a} vs {b} (unsigned) val loss", f"{c[key]:.4f} (noise)",
                     "—" if d is None else f"{abs(d.d):.4f} ({d.basis})", verdict_noise(d), d.runs if d else []))
    t = c["train_seconds"]
    if "attn" in lm and "gdn" in lm and lm["attn"].get("ms_per_step") and lm["gdn"].get("ms_per_step"):
        ratio = lm["gdn"]["ms_per_step"] / lm["attn"]["ms_per_step"]
        commits = (lm["attn"].get("git_commit"), lm["gdn"].get("git_commit"))
        if commits[0] != commits[1]:  # other binaries, likely other machines or loads: not one ratio
            verdict = f"not compared: the runs come from different commits ({commits[0]}, {commits[1]})"
        else:
            verdict = ("lina's chunked scan is faster relative to attn" if ratio < t["gdn"] / t["attn"]
                       else "lina is relatively slower")
        rows.append(("lm training time gdn / attn", f"{t['gdn'] / t['attn']:.2f}× ({t['gdn']} s / {t['attn']} s, Python loop)",
                     f"{ratio:.2f}× (ms/step, {lm['gdn'].get('device')})", verdict, [lm["attn"], lm["gdn"]]))
    g = lm.get("gdn")
    a0 = next((l["mean_alpha"] for l in (g or {}).get("alpha") or [] if l.get("layer") == 0), None)
    lo, hi = c["alpha_layer1_range"]
    rows.append(("lm gdn mean α per head, first layer", f"{lo}–{hi}",
                 "—" if not a0 else f"{min(a0):.3f}–{max(a0):.3f}",
                 "not measured" if not a0 else ("agrees" if min(a0) >= lo - 0.05 and max(a0) <= hi + 0.05 else "DISAGREES"),
                 [g] if g else []))
    return rows + recall_rows(rc, course) + memory_rows(lm, rc, course)


def recall_rows(rc, course):
    """Course rows on recall: linear does not drop, the others do."""
    lin = rc.get("linear")
    if lin and lin.get("eval"):
        ev = lin["eval"]
        s = drop_step(lin)
        rows = [("recall linear: no sudden drop", "loss 2.60 → 2.47, stays",
                 f"loss {ev[0]['val_loss']:.2f} → {ev[-1]['val_loss']:.2f}, " + ("accuracy ≥ 0.5 at step %d" % s if s else "no drop"),
                 "agrees" if s is None else "DISAGREES: linear retrieves", [lin])]
    else:
        rows = [("recall linear: no sudden drop", "loss 2.60 → 2.47, stays", "—", "not measured", [])]
    for p in course["recall"]["drops"]:
        r = rc.get(p)
        s = drop_step(r) if r else None
        rows.append((f"recall {p}: sudden drop", "yes (no step given)",
                     "—" if not r else ("accuracy ≥ 0.5 at step %d" % s if s else f"no drop in {r.get('steps_done')} steps"),
                     "not measured" if not r else ("agrees" if s else "DISAGREES" if r.get("finished") else
                                                   f"DISAGREES so far (unfinished, at step {r.get('steps_done')})"),
                     [r] if r else []))
    return rows


def memory_rows(lm, rc, course):
    """Course rows on the memory fields of the run jsons (independent of the run's length)."""
    m, rows = course["memory"], []
    for p, key, want in (("attn", "kv_per_token", m["attn_kv_per_token"]), ("gdn", "state_const", m["gdn_state_const"]),
                         ("hybrid", "kv_per_token", m["hybrid_kv_per_token"]), ("hybrid", "state_const", m["hybrid_state_const"])):
        r = lm.get(p) or rc.get(p)
        got = r.get(key) if r else None
        rows.append((f"memory {p} {key}", str(want), "—" if got is None else str(got),
                     "not measured" if got is None else ("agrees" if got == want else "DISAGREES"), []))
    return rows


def spec_expectations(runs, course):
    """Lines comparing the spec's "what to expect" with lina's runs (only at matching settings)."""
    e, out = course["spec_expect"], []
    lm, rc = by_preset(runs, "lm"), by_preset(runs, "recall")
    g = rc.get("gdn")
    if g:
        t = train_cfg(g)
        measured = {s: acc_at(g, int(s)) for s in e["recall_gdn_reference_accuracy"]}
        got = ", ".join(f"{s}: {'—' if v is None else f'{v:.2f}'}" for s, v in measured.items())
        same = t.get("steps") == 2000 and t.get("batch") == 64 and t.get("seed") == 1337
        ref = ", ".join(f"{s}: {v}" for s, v in e["recall_gdn_reference_accuracy"].items())
        lina = ", ".join(f"{s}: {v}" for s, v in e["recall_gdn_lina_accuracy"].items())
        out.append(f"- recall gdn held-out accuracy by step — spec reference {ref}; spec's lina {lina}; measured {got}"
                   + ("" if same else f" (this run: {t.get('steps')} steps, batch {t.get('batch')}, seed {t.get('seed')}; the spec's figures are for 2000 steps, batch 64, seed 1337: not comparable)") + ".")
        if same:
            for s, v in measured.items():
                want = e["recall_gdn_lina_accuracy"].get(s)
                if v is not None and want is not None and abs(v - want) > 0.1:
                    out.append(f"- DISAGREES with the spec: gdn accuracy at step {s} is {v:.2f}, the spec's lina figure {want}.")
        first = (g.get("eval") or [{}])[0]
        if "val_loss" in first:
            lo, hi = e["recall_plateau_loss"]
            out.append(f"- recall gdn first evaluation (step {first['step']}): loss {first['val_loss']:.3f} "
                       f"(chance {e['recall_chance_loss']:.2f}, spec's plateau {lo}–{hi}).")
    for p, want in e["lm_500_steps_val_loss"].items():
        r = lm.get(p)
        if r and train_cfg(r).get("steps") == 500 and train_cfg(r).get("batch") == 64:
            v = final(r, "val_loss")
            out.append(f"- lm {p} after a 500-step schedule: spec's reference {want}, lina {f4(v)}"
                       + (" — DISAGREES by more than 0.05" if v is not None and abs(v - want) > 0.05 else "") + ".")
    if not any(r and train_cfg(r).get("steps") == 500 for r in lm.values()):
        out.append("- lm after 500 steps (spec: attn 1.86, gdn 1.72): no lm run with a 500-step schedule here.")
    return out
