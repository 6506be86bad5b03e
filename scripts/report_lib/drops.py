"""When a recall run leaves its plateau: the drop step.

The rule: a recall run's drop step is the first evaluation at which its
held-out accuracy (the fixed held-out set, the eval entries' val_accuracy)
is at least 0.5. The drop happened after the evaluation before it and by
that one, so it is known to the evaluation interval (500 updates in the
course's recipe). A run that never reaches 0.5 has no drop. The plateau
loss is the held-out loss at the last evaluation before the drop (with no
drop: the last evaluation), leaving out step 0, where nothing is learnt yet.
"""
from . import groups, recipe
from .runs import final

THRESHOLD = 0.5
RULE = ("A recall run's **drop step** is the first evaluation at which its held-out accuracy (the fixed "
        f"held-out set) is at least {THRESHOLD}; the drop happened between the evaluation before it and that "
        "one (the bracket). A run that never reaches it has no drop. The **plateau loss** is the held-out loss "
        "at the last evaluation before the drop (no drop: the last evaluation), step 0 left out.")


def evals(r):
    return [e for e in r.get("eval") or [] if isinstance(e, dict) and isinstance(e.get("step"), int)]


def drop(r):
    """(drop step, the evaluation step before it) or (None, None)."""
    prev = None
    for e in evals(r):
        if (e.get("val_accuracy") or 0) >= THRESHOLD:
            return e["step"], prev
        prev = e["step"]
    return None, None


def drop_step(r):
    return drop(r)[0]


def plateau_loss(r):
    """Held-out loss at the last evaluation (after step 0) before the drop, or None."""
    step, _ = drop(r)
    before = [e for e in evals(r) if e["step"] > 0 and (step is None or e["step"] < step)
              and isinstance(e.get("val_loss"), (int, float))]
    return before[-1]["val_loss"] if before else None


def at(r, step, key):
    for e in evals(r):
        if e["step"] == step:
            return e.get(key)
    return None


def f(x, spec):
    return "—" if x is None else format(x, spec)


def table(runs):
    """The drop of every recall run (markdown lines)."""
    rc = [r for r in runs if r["task"] == "recall" and evals(r)]
    if not rc:
        return ["No recall run with evaluations yet."]
    role = groups.roles(runs)
    out = [RULE, "", "| run | role | recipe | evaluations | drop step | bracket | plateau loss | held-out loss at the "
           "drop | final held-out accuracy | final fresh accuracy | final fresh loss |", "|" + "---|" * 11]
    for r in rc:
        step, prev = drop(r)
        ev = evals(r)
        out.append(f"| {r['_label']} | {role[id(r)]} | {recipe.short(r)} | {len(ev)} to step {ev[-1]['step']}"
                   + ("" if r.get("finished") else " (unfinished)") + " | "
                   + ("no drop" if step is None else str(step)) + " | "
                   + ("—" if step is None else f"{prev if prev is not None else '—'}–{step}") + " | "
                   + f"{f(plateau_loss(r), '.3f')} | {f(at(r, step, 'val_loss') if step is not None else None, '.3f')} | "
                   + f"{f(final(r, 'val_accuracy'), '.3f')} | {f(final(r, 'fresh_accuracy'), '.3f')} | "
                   + f"{f(final(r, 'fresh_loss'), '.3f')} |")
    out += ["", "held-out: the fixed held-out set (eval_batches × batch sequences); fresh: 50 fresh batches at each "
            "evaluation, the course's \"val\" estimate."]
    return out
