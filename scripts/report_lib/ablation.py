"""What changed from spec 1, and why it mattered: the ablation runs.

An ablation run is one whose recipe differs from the course's (groups.py's
role "ablation": a flag such as --values 16, --dropout 0, --schedule
cosine, --clip 1, --weight-decay 0.1, --decay-matrices, --beta2 0.99 or
--lr, or the main run's task, preset and seed at another --batch/--steps).
Each is set beside the run it varies (groups.base_run: the course-recipe run
of the same task, preset, size and seed) with its headline number: lm, the
final val loss (and the best, with its step: late overfitting), judged
against the seed noise 2·√2·σ; recall, the final held-out accuracy, judged
against twice the binomial standard error of the difference, and the drop
step (drops.py).
"""
import math

from . import drops, groups, recipe
from .runs import best_val, f4, final, scored_per_eval


def fmt_acc(x):
    return "—" if x is None else f"{x:.3f}"


def headline(r):
    """The run's headline number in words."""
    if r["task"] == "lm":
        best, step = best_val(r)
        return f"val loss {f4(final(r, 'val_loss'))}" + ("" if best is None else f" (best {best:.4f} at {step})")
    s = drops.drop_step(r)
    return (f"held-out accuracy {fmt_acc(final(r, 'val_accuracy'))}, "
            + (f"drop at {s}" if s is not None else "no drop") + f" ({r.get('steps_done')} steps)")


def judged(r, base, noise):
    """The difference from the base run and whether it is above the noise."""
    if r["task"] == "lm":
        a, b = final(r, "val_loss"), final(base, "val_loss")
        if a is None or b is None:
            return "—"
        d = a - b
        if noise.single is None:
            return f"{d:+.4f} (no seed runs yet)"
        return f"{d:+.4f} ({'within' if abs(d) <= noise.single else 'above'} noise {noise.single:.4f})"
    a, b = final(r, "val_accuracy"), final(base, "val_accuracy")
    if a is None or b is None:
        return "—"
    n = 2 * math.sqrt(max(a * (1 - a) / scored_per_eval(r) + b * (1 - b) / scored_per_eval(base), 1e-12))
    return f"{a - b:+.3f} ({'within' if abs(a - b) <= n else 'above'} noise {n:.3f})"


def spec1_table():
    """The recipe flags of spec 1 against the course's (settings, from recipe.py and course_figures.json)."""
    out = ["| flag | spec 1 | the course (spec 2) |", "|---|---|---|"]
    for flag in recipe.FLAGS:
        s1 = {t: recipe.spec1_value(flag, t) for t in ("lm", "recall")}
        c = {t: recipe.course_recipe(t).get(flag) for t in ("lm", "recall")}
        if flag == "values":
            s1["lm"] = c["lm"] = None
        cell = lambda v: "—" if v["lm"] is None and v["recall"] is None else (
            recipe.number(v["recall"]) if v["lm"] is None or v["lm"] == v["recall"] else
            f"lm {recipe.number(v['lm'])}, recall {recipe.number(v['recall'])}")
        if cell(s1) != cell(c):
            out.append(f"| {recipe.WORDS[flag]} | {cell(s1)} | {cell(c)} |")
    return out


def differences(r, base):
    """The run's recipe changes from the course's that its base run does not share (all of them without one)."""
    if not base:
        return recipe.changes(r)
    theirs = {flag: value for flag, value, _ in recipe.changes(base)}
    return [c for c in recipe.changes(r) if not (c[0] in theirs and recipe.same(theirs[c[0]], c[1]))]


def section(runs, noise):
    """Markdown lines."""
    role = groups.roles(runs)
    abl = [r for r in runs if role[id(r)] == "ablation"]
    out = ["Spec 1 ran another model (GELU MLP, no output gate, N(0, 0.02) init; not flags) and this recipe; "
           "each recipe flag can be put back alone (spec 2 §2.3):", ""] + spec1_table() + [""]
    if not abl:
        return out + ["The ablation runs are not in yet: no run in this folder has a recipe that differs from the "
                      "course's (name suffixes such as _v16, _drop0, _cosine, _clip1, _wd0.1, _decaymat, _b2-0.99, "
                      "or another --batch, --steps or --lr in a folder of its own)."]
    out += ["Each ablation run beside the run it varies (same task, preset, size and seed, the course's recipe); "
            "lm differences against the seed noise, recall accuracy against twice its binomial standard error.", "",
            "| run | flag(s) changed | its number | the run it varies | its number | difference |",
            "|---|---|---|---|---|---|"]
    lines = []
    for r in abl:
        base = groups.base_run(runs, r)
        changed = recipe.describe(r, differences(r, base)) or "—"
        out.append(f"| {r['_label']} | {changed} | {headline(r)} | {base['_label'] if base else '—'} | "
                   f"{headline(base) if base else '—'} | {judged(r, base, noise) if base else 'no course-recipe run here'} |")
        if base:
            lines.append(f"- {r['task']} {r['preset']}, {changed}: {headline(r)}, against {headline(base)} "
                         f"with the course's recipe; difference {judged(r, base, noise)}.")
    unfinished = [r["_label"] for r in abl if not r.get("finished")]
    out += [""] + lines
    if unfinished:
        out.append("Unfinished: " + ", ".join(unfinished) + " (their numbers are as far as they got).")
    return out
