"""The course, like for like: one row per figure the course publishes
(scripts/course_figures.json, from course-figures.md), lina's number from the
main runs, and whether they agree.

How a row is judged:
- an lm loss against the course's one run: lina's main run (or its mean over
  seeds) minus the course's number, against the seed noise of a difference
  of two single runs, 2·√2·σ (2·σ·√(1/n + 1) for a mean of n seeds);
- a gap the course ranks (attn below linear, below gdn): lina's gap must
  have the course's sign and be above lina's noise (seeds.LmNoise.between);
  its size is set beside the course's against the same noise;
- a gap the course calls noise (gdn vs delta, attn vs hybrid): lina's must
  be within its noise;
- α of gdn's first layer: every head inside the course's range widened by
  twice the seed sd of α (the heads sorted, sd per rank over the seeds,
  pooled);
- recall: whether the run drops (drops.py's rule) as the course says, and
  attention's drop bracket against the script's 2500–3000 updates.
Without seed runs an lm row says "no seed runs yet" (with lina's number).
A row whose runs are not at the course's length and batch adds
"indicative only".
"""
import math

import presets

from . import drops, groups, recipe
from .runs import extrap, f4, final, number

LM_PRESETS = presets.COURSE


def against_course(noise, runs, preset, course_value, value_of):
    """(lina's value, its words, verdict, runs used) of a main-run number against the course's one run."""
    main = noise.main.get(preset)
    if main is None or value_of(main) is None:
        return None, "—", "not measured", []
    if noise.usable(preset) and all(value_of(r) is not None for r in noise.seeds[preset].runs):
        g = noise.seeds[preset]
        vals = [value_of(r) for r in g.runs]
        v, words, used = sum(vals) / len(vals), f"{sum(vals) / len(vals):.4f} (mean of {len(vals)} seeds)", g.runs
        n = 2 * noise.sigma * math.sqrt(1 / len(vals) + 1)
    else:
        v, words, used = value_of(main), f"{value_of(main):.4f}", [main]
        n = noise.single
    d = v - course_value
    if n is None:
        return v, words, f"no seed runs yet (lina − course = {d:+.4f})", used
    if abs(d) <= n:
        return v, words, f"agrees ({d:+.4f}, within noise {n:.4f})", used
    return v, words, f"disagrees (lina {'higher' if d > 0 else 'lower'} by {abs(d):.4f}; noise {n:.4f})", used


def ranked_gap(course_d, diff, a, b):
    """The course ranks a below b by |course_d| (course_d = loss(a) − loss(b) < 0)."""
    if diff is None:
        return "not measured"
    if diff.noise is None:
        return f"no seed runs yet (lina {diff.d:+.4f})"
    size = ("size within noise of the course's" if abs(diff.d - course_d) <= diff.noise
            else f"size {abs(diff.d - course_d):.4f} from the course's")
    if diff.is_noise():
        return f"disagrees ({diff.d:+.4f} is within noise {diff.noise:.4f}: lina cannot rank {a} and {b})"
    if (diff.d < 0) == (course_d < 0):
        return f"agrees ({a} below {b}, above noise {diff.noise:.4f}; {size})"
    return f"disagrees (lina has {a} above {b} by {diff.d:.4f}; noise {diff.noise:.4f})"


def noise_gap(diff):
    """The course calls the gap noise: does lina's seed noise?"""
    if diff is None:
        return "not measured"
    if diff.noise is None:
        return f"no seed runs yet (lina {abs(diff.d):.4f})"
    return (f"agrees ({abs(diff.d):.4f} within noise {diff.noise:.4f})" if diff.is_noise()
            else f"disagrees ({abs(diff.d):.4f} above noise {diff.noise:.4f})")


def first_layer_alpha(r):
    return next((l.get("mean_alpha") for l in (r or {}).get("alpha") or [] if l.get("layer") == 0), None)


def alpha_seed_sd(runs, preset="gdn"):
    """(sd, seeds) of gdn's first-layer α over its lm seed runs: heads sorted, sample sd per rank, pooled."""
    heads = [sorted(a) for a in (first_layer_alpha(r) for r in groups.seed_runs(runs, "lm", preset).values()
                                 if r.get("finished")) if a]
    if len(heads) < 2 or len({len(h) for h in heads}) != 1:
        return None, len(heads)
    var = []
    for rank in zip(*heads):
        m = sum(rank) / len(rank)
        var.append(sum((x - m) ** 2 for x in rank) / (len(rank) - 1))
    return math.sqrt(sum(var) / len(var)), len(heads)


def alpha_row(runs, lm, c):
    g = lm.get("gdn")
    a0 = first_layer_alpha(g)
    lo, hi = c["alpha_layer1_range"]
    what = "lm gdn: mean α per head, first layer, on val text"
    if not a0:
        return (what, f"{lo}–{hi}", "—", "not measured", [g] if g else [])
    inside = lo <= min(a0) and max(a0) <= hi
    sd, n = alpha_seed_sd(runs)
    got = f"{min(a0):.3f}–{max(a0):.3f} (mean {sum(a0) / len(a0):.3f})"
    if sd is None:
        verdict = f"no seed runs yet ({'inside' if inside else 'outside'} the course's range)"
    else:
        ok = lo - 2 * sd <= min(a0) and max(a0) <= hi + 2 * sd
        verdict = (("agrees" if ok else "disagrees") + f" (range widened by 2 × seed sd {sd:.3f}, {n} seeds)")
    return (what, f"{lo}–{hi} (4 heads; α starts at 0.95)", got, verdict, [g])


def lm_rows(runs, course, noise):
    lm, c = groups.by_preset(runs, "lm"), course["lm"]
    rows = []
    for p in LM_PRESETS:
        if p == "hybrid":
            v, words, verdict, used = against_course(noise, runs, p, c["hybrid_val_loss"], lambda r: final(r, "val_loss"))
            rows.append(("lm hybrid: final val loss (200 batches)", f4(c["hybrid_val_loss"]), words, verdict, used))
        else:
            r = lm.get(p)
            rows.append((f"lm {p}: final val loss", "no number (only the gaps below)",
                         f4(final(r, "val_loss")) if r else "—",
                         "nothing to compare" if r else "not measured", [r] if r else []))
    v, words, verdict, used = against_course(noise, runs, "hybrid", c["hybrid_extrap_64"], lambda r: extrap(r).get(64))
    rows.append(("lm hybrid: extrapolation loss at context 64 (40 batches)", f4(c["hybrid_extrap_64"]), words, verdict, used))
    rows.append(("lm noise: largest gap of val loss and extrapolation at 64 over the five",
                 f"{c['noise']:.4f} (called sampling noise)", f4(noise.spread),
                 "lina's seed noise: " + ("no seed runs yet" if noise.single is None else f"{noise.single:.4f} ({noise.source})"),
                 []))
    for a, b, key in (("attn", "linear", "attn_below_linear"), ("attn", "gdn", "attn_below_gdn")):
        d = noise.between(a, b)
        rows.append((f"lm {a} − {b}: val loss", f"−{c[key]:.4f}", "—" if d is None else f"{d.d:+.4f} ({d.basis})",
                     ranked_gap(-c[key], d, a, b), d.runs if d else []))
    for a, b, key in (("gdn", "delta", "gdn_delta_gap_unsigned"), ("attn", "hybrid", "attn_hybrid_gap_unsigned")):
        d = noise.between(a, b)
        rows.append((f"lm {a} vs {b}: val loss gap (unsigned)", f"{c[key]:.4f}, called noise",
                     "—" if d is None else f"{abs(d.d):.4f} ({d.basis})", noise_gap(d), d.runs if d else []))
    rows.append(alpha_row(runs, lm, c))
    ex = [f"{p} " + "/".join(f4(extrap(lm[p]).get(x)) for x in c["extrapolation_contexts"])
          for p in LM_PRESETS if p in lm and extrap(lm[p])]
    rows.append(("lm extrapolation at " + ", ".join(map(str, c["extrapolation_contexts"])),
                 "measured; no numbers in the text", "; ".join(ex) or "—",
                 "nothing to compare" if ex else "not measured", []))
    t = c["train_seconds"]
    if "attn" in lm and "gdn" in lm and lm["attn"].get("ms_per_step") and lm["gdn"].get("ms_per_step"):
        ratio = lm["gdn"]["ms_per_step"] / lm["attn"]["ms_per_step"]
        rows.append(("lm training time gdn / attn", f"{t['gdn'] / t['attn']:.2f}× ({t['gdn']} s / {t['attn']} s)",
                     f"{ratio:.2f}× (ms/step, {lm['gdn'].get('device')})",
                     "not like for like (the course's recurrence is a token-by-token Python loop on a shared GPU)", []))
    return rows


def loss_of(e):
    """The course's "val" estimate of an evaluation (fresh batches), else the held-out loss."""
    return e.get("fresh_loss", e.get("val_loss"))


def recall_rows(runs, course):
    rc, c = groups.by_preset(runs, "recall"), course["recall"]
    rows = []
    lin = rc.get("linear")
    a, b = c["linear_loss_from_to"]
    ev = [e for e in drops.evals(lin) if e["step"] > 0 and loss_of(e) is not None] if lin else []
    if ev:
        s, _ = drops.drop(lin)
        got = (f"loss {loss_of(ev[0]):.2f} (step {ev[0]['step']}) → {loss_of(ev[-1]):.2f} (step {ev[-1]['step']}), "
               + (f"drop at step {s}" if s is not None else f"no drop; held-out accuracy {drops.f(final(lin, 'val_accuracy'), '.3f')}"))
        rows.append(("recall linear: no sudden drop", f"loss {a:.2f} → {b:.2f}, stays", got,
                     "agrees" if s is None else f"disagrees (linear drops: held-out accuracy ≥ {drops.THRESHOLD} at step {s})",
                     [lin]))
    else:
        rows.append(("recall linear: no sudden drop", f"loss {a:.2f} → {b:.2f}, stays", "—", "not measured", []))
    for p in c["drops"]:
        r = rc.get(p)
        if not r:
            rows.append((f"recall {p}: a sudden drop", "yes (no step given)", "—", "not measured", []))
            continue
        s, prev = drops.drop(r)
        pl = drops.plateau_loss(r)
        got = ((f"drop at step {s} (after {prev}), plateau loss {f4(pl)}" if s is not None
                else f"no drop in {r.get('steps_done')} steps, held-out loss {f4(pl)}")
               + (f"; final held-out accuracy {final(r, 'val_accuracy'):.3f}" if final(r, "val_accuracy") is not None else ""))
        verdict = ("agrees" if s is not None else "disagrees" if r.get("finished")
                   else f"disagrees so far (unfinished, at step {r.get('steps_done')})")
        rows.append((f"recall {p}: a sudden drop", "yes (no step given)", got, verdict, [r]))
    r = rc.get("attn")
    lo, hi = c["attn_drop_updates"]
    what, said = "recall attn: when the drop comes", f"about {lo}–{hi} updates (the script's comment)"
    if r:
        s, prev = drops.drop(r)
        if s is None:
            rows.append((what, said, f"no drop in {r.get('steps_done')} steps", "disagrees" if r.get("finished")
                         else f"not yet (unfinished, at step {r.get('steps_done')})", [r]))
        else:
            start = prev if prev is not None else 0
            verdict = ("agrees (the bracket meets the course's range)" if start < hi and s >= lo
                       else "disagrees (earlier)" if s < lo else "disagrees (later)")
            rows.append((what, said, f"between step {start} and {s}", verdict, [r]))
    else:
        rows.append((what, said, "—", "not measured", []))
    rows += unstable_rows(runs, c)
    probe = [f"{p} " + "/".join("—" if x is None else f"{x:.2f}" for x in capacity_probe(r, c["capacity_pairs"]))
             for p, r in rc.items() if r.get("capacity")]
    rows.append(("recall capacity probe: accuracy at N = " + ", ".join(map(str, c["capacity_pairs"])),
                 "measured; no numbers in the text", "; ".join(probe) or "—",
                 "nothing to compare" if probe else "not measured", []))
    return rows


def capacity_probe(r, sizes):
    got = {e.get("pairs"): e.get("accuracy") for e in r.get("capacity") or [] if isinstance(e, dict)}
    return [got.get(n) for n in sizes]


def unstable_rows(runs, c):
    """The course: lr 3e-3 is unstable. Rows only for recall runs whose one change is that lr."""
    out = []
    for r in runs:
        if r["task"] == "recall" and recipe.variant(r) == (("lr", c["unstable_lr"]),):
            curve = [p for p in r.get("loss_curve") or [] if isinstance(p.get("grad_norm"), (int, float))]
            top = max(curve, key=lambda p: p["grad_norm"]) if curve else None
            s = drops.drop_step(r)
            got = (f"{r['_label']}: " + (f"drop at step {s}" if s is not None else f"no drop in {r.get('steps_done')} steps")
                   + f", final fresh loss {f4(final(r, 'fresh_loss'))}"
                   + (f", largest gradient norm {top['grad_norm']:.2f} (update {top['step']})" if top else ""))
            out.append((f"recall {r['preset']} at lr {c['unstable_lr']:g}", "unstable (no measure given)", got,
                        "not judged: the course gives no measure of unstable", [r]))
    return out


def memory_rows(runs, course):
    """Rows on the memory fields of the run jsons (independent of the run's length)."""
    lm, rc = groups.by_preset(runs, "lm"), groups.by_preset(runs, "recall")
    m, rows = course["memory"], []
    for p, key, want in (("attn", "kv_per_token", m["attn_kv_per_token"]), ("gdn", "state_const", m["gdn_state_const"]),
                         ("hybrid", "kv_per_token", m["hybrid_kv_per_token"]), ("hybrid", "state_const", m["hybrid_state_const"])):
        r = lm.get(p) or rc.get(p)
        got = r.get(key) if r else None
        rows.append((f"memory {p} {key}", str(want), "—" if got is None else str(got),
                     "not measured" if got is None else ("agrees" if got == want else "disagrees"), []))
    return rows


def settings_gap(used, task):
    """'' when every run a row used ran the course's length and batch for the task, else a note."""
    want = recipe.course_recipe(task)
    got = sorted({(r.get("steps_done"), recipe.length(r)[0]) for r in used},
                 key=lambda g: (number(g[0], -1), number(g[1], -1)))
    if not got or all(g == (want["steps"], want["batch"]) for g in got):
        return ""
    return (" — runs of " + ", ".join(f"{s} steps at batch {b}" for s, b in got)
            + f", not the course's {want['steps']} at {want['batch']}: indicative only")


def table(runs, course, noise):
    """Markdown lines: the like-for-like table."""
    out = ["| course row | the course says | lina measured | agrees / disagrees |", "|---|---|---|---|"]
    for what, said, got, verdict, used in lm_rows(runs, course, noise) + recall_rows(runs, course) + memory_rows(runs, course):
        task = what.split()[0]
        used = [r for r in used if r]
        if task in ("lm", "recall") and not verdict.startswith(("not measured", "nothing to compare", "not like")):
            verdict += settings_gap(used, task)
        out.append(f"| {what} | {said} | {got} | {verdict} |")
    return out
