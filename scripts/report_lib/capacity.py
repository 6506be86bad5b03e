"""Recall capacity, two ways.

The course's capacity probe (probe_section): a recall run trained at 32
pairs is scored after training at N = 8, 16, 24 and 32 (the run json's
"capacity"); the course measures the same but gives no numbers.

Runs trained at other pair counts (section): held-out accuracy against the
number of pairs (the main keys, each preset's main seed, the course's recipe).

A preset "holds up to N pairs" when N is the largest pair count with final
held-out accuracy ≥ 0.9 and "breaks by M" when M is the smallest with
accuracy < 0.5. Only the numbers present count: a pair count measured for
some preset but not for this one is named as missing; an unfinished run is
shown but not judged.
"""
from . import groups, recipe
from .runs import DEFAULT_PAIRS, final

HOLDS, BREAKS = 0.9, 0.5


def capacity(runs):
    """(sorted pair counts over all presets, {preset: {pairs: run}})."""
    cap = groups.capacity_runs(runs)
    return sorted({p for by_pairs in cap.values() for p in by_pairs}), cap


def has_sweep(sizes, main=DEFAULT_PAIRS):
    """True when the pair counts (capacity()'s first) hold one other than the main run's."""
    return any(p != main for p in sizes)


def judged(by_pairs):
    """{pairs: final accuracy} of the finished runs that have one."""
    return {p: final(r, "val_accuracy") for p, r in by_pairs.items()
            if r.get("finished") and final(r, "val_accuracy") is not None}


def holds_breaks(by_pairs):
    """(largest pairs with accuracy ≥ 0.9 or None, smallest with accuracy < 0.5 or None)."""
    acc = judged(by_pairs)
    held = [p for p, a in acc.items() if a >= HOLDS]
    broke = [p for p, a in acc.items() if a < BREAKS]
    return (max(held) if held else None), (min(broke) if broke else None)


def sentence(preset, by_pairs, sizes):
    """'- gdn: holds up to 16 pairs, breaks by 48; missing: 8.' from the numbers present."""
    acc = judged(by_pairs)
    held, broke = holds_breaks(by_pairs)
    if not acc:
        words = "no finished run with a held-out accuracy"
    else:
        words = (f"holds up to {held} pairs" if held is not None else f"below {HOLDS} at every measured size") + ", " \
                + (f"breaks by {broke}" if broke is not None else f"does not break (accuracy ≥ {BREAKS}) up to {max(acc)}")
    notes = [f"{p} pairs unfinished ({r['_label']} at step {r.get('steps_done')})"
             for p, r in by_pairs.items() if not r.get("finished")]
    missing = [str(p) for p in sizes if p not in by_pairs]
    if missing:
        notes.append("missing: " + ", ".join(missing) + " pairs")
    return f"- {preset}: {words}" + ("; " + "; ".join(notes) if notes else "") + "."


def cell(r):
    a = final(r, "val_accuracy") if r else None
    return "—" if a is None else f"{a:.3f}" + ("" if r.get("finished") else " (unfinished)")


def section(runs):
    """The report's capacity section (markdown lines)."""
    sizes, cap = capacity(runs)
    main_pairs, main_keys = groups.main_size(runs)
    if not has_sweep(sizes, main_pairs):
        return [f"No recall runs trained at another pair count (at {groups.main_size(runs)[1]} keys, the course's "
                "recipe) here."]
    out = [f"Final held-out accuracy against the number of pairs trained at, {main_keys} keys, the course's recipe, "
           f"seed 1337 (or each preset's only seed); {main_pairs} pairs is the main run. A preset holds up to N pairs when N is the largest "
           f"count with accuracy ≥ {HOLDS}, and breaks by M when M is the smallest with accuracy < {BREAKS}.", "",
           "| preset | " + " | ".join(f"{p} pairs" for p in sizes) + " | holds up to | breaks by |",
           "|---|" + "---|" * (len(sizes) + 2)]
    for preset, by_pairs in cap.items():
        held, broke = holds_breaks(by_pairs)
        out.append(f"| {preset} | " + " | ".join(cell(by_pairs.get(p)) for p in sizes)
                   + f" | {'—' if held is None else held} | {'—' if broke is None else broke} |")
    out.append("")
    out += [sentence(p, by_pairs, sizes) for p, by_pairs in cap.items()]
    return out


def probe(r):
    """{pairs: (accuracy, loss)} of a run's capacity probe."""
    return {e["pairs"]: (e.get("accuracy"), e.get("loss")) for e in r.get("capacity") or []
            if isinstance(e, dict) and isinstance(e.get("pairs"), int)}


def probe_section(runs, course):
    """The course's capacity probe beside lina's (markdown lines)."""
    sizes = course["recall"]["capacity_pairs"]
    role = groups.roles(runs)
    rows = [r for r in runs if r["task"] == "recall" and probe(r) and role[id(r)] in ("main", "ablation", "duplicate")]
    out = [f"After training, each recall run is scored at N = {', '.join(map(str, sizes))} pairs (20 batches of 128; "
           "the course's probe of the model trained at 32 pairs). The course runs the same probe, but its text gives "
           "no numbers for it: the course's column is empty, and nothing is judged.", ""]
    if not rows:
        return out + ["No recall run here has a capacity probe (spec 2's run json key \"capacity\")."]
    out += ["| run | role | recipe | trained at | " + " | ".join(f"N = {n}" for n in sizes) + " | the course |",
            "|---|---|---|---|" + "---|" * len(sizes) + "---|"]
    for r in rows:
        got = probe(r)
        cells = ["—" if n not in got or got[n][0] is None else f"{got[n][0]:.3f} (loss {got[n][1]:.3f})"
                 if got[n][1] is not None else f"{got[n][0]:.3f}" for n in sizes]
        out.append(f"| {r['_label']} | {role[id(r)]} | {recipe.short(r)} | {groups.pairs(r)} pairs | "
                   + " | ".join(cells) + " | no numbers |")
    return out
