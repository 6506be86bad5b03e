"""Which run stands for a preset.

A run's identity is (task, preset, pairs, keys, seed, variant)
(runs.identity); variant is the recipe flags in which it differs from the
course's (recipe.variant; () for a run of the course's recipe), batch and
steps left out: those are the run's length.

The main run of a preset on a task has the course's recipe, seed 1337
(without one: the lowest seed present) and, on recall, the main size: 32
pairs of 64 keys, or, when no recall run has that size, the size most
recall runs have (the main job's small runs). Of several such runs (another
folder's --batch or --steps, another device) the one at the course's
length, then the finished one, then the one with the most steps, then the
first label. Everything that compares presets with each other or with the
course reads main runs only.

Roles: main; "seed N" (another seed at the main size, course recipe: the
noise estimate, seeds.py); capacity (recall at the main keys, main seed,
course recipe, other pairs: capacity.py); ablation (a recipe that differs
from the course's, or the main run's identity at another length: the
section on what changed from spec 1, ablation.py); duplicate (same identity
and length as a chosen run); other.
"""
from . import recipe
from .runs import DEFAULT_KEYS, DEFAULT_PAIRS, DEFAULT_SEED, identity, number

MAIN_SIZE = (DEFAULT_PAIRS, DEFAULT_KEYS)


def seed(r):
    return identity(r)[4]


def pairs(r):
    return identity(r)[2]


def size(r):
    return identity(r)[2:4]


def at_course_length(r):
    course = recipe.course_recipe(r["task"])
    return all(recipe.same(a, b) for a, b in zip(recipe.length(r), (course["batch"], course["steps"])))


def pick(candidates):
    """One run of several with the same identity: at the course's length, finished, most steps, label."""
    return min(candidates, key=lambda r: (not at_course_length(r), not r.get("finished"),
                                          -number(r.get("steps_done"), 0), r["_label"]))


def main_seed(seeds):
    """1337 when present, else the lowest seed."""
    return DEFAULT_SEED if DEFAULT_SEED in seeds else min(seeds)


def main_size(runs):
    """(pairs, keys) of the main recall runs: 32 of 64 when any course-recipe recall run has it, else the
    size most of them have (ties: the larger)."""
    sizes = [size(r) for r in runs if r["task"] == "recall" and not recipe.variant(r)]
    if not sizes or MAIN_SIZE in sizes:
        return MAIN_SIZE
    return max(set(sizes), key=lambda s: (sizes.count(s), s))


def at_main_size(r, main):
    """lm runs always; recall runs at the main size `main`."""
    return r["task"] != "recall" or size(r) == main


def grouped(runs, where):
    """{(task, preset): [runs]} of the runs that satisfy `where`, in run order."""
    out = {}
    for r in runs:
        if where(r):
            out.setdefault((r["task"], r["preset"]), []).append(r)
    return out


def per_seed(group):
    """{seed: run} of runs of one (task, preset, size, recipe), duplicates resolved by pick."""
    seeds = {}
    for r in group:
        seeds.setdefault(seed(r), []).append(r)
    return {s: pick(rs) for s, rs in sorted(seeds.items())}


def course_runs_at_main_size(runs):
    main = main_size(runs)
    return lambda r: at_main_size(r, main) and not recipe.variant(r)


def main_runs(runs):
    """{(task, preset): main run}."""
    out = {}
    for key, group in grouped(runs, course_runs_at_main_size(runs)).items():
        by_seed = per_seed(group)
        out[key] = by_seed[main_seed(set(by_seed))]
    return out


def by_preset(runs, task):
    """{preset: main run} of one task, in run order."""
    return {p: r for (t, p), r in main_runs(runs).items() if t == task}


def seed_runs(runs, task, preset):
    """{seed: run} of (task, preset) at the main size with the course's recipe, main seed included."""
    group = grouped(runs, course_runs_at_main_size(runs)).get((task, preset), [])
    return per_seed(group)


def capacity_runs(runs):
    """{preset: {pairs: run}}: recall runs of the course's recipe at the main keys and the preset's main
    seed (the main size is the main run)."""
    keys = main_size(runs)[1]
    out = {}
    where = lambda r: r["task"] == "recall" and identity(r)[3] == keys and not recipe.variant(r)
    for (_, preset), group in grouped(runs, where).items():
        s = main_seed({seed(r) for r in group})
        sizes = {}
        for r in group:
            if seed(r) == s:
                sizes.setdefault(pairs(r), []).append(r)
        out[preset] = {p: pick(rs) for p, rs in sorted(sizes.items())}
    return out


def base_run(runs, r):
    """The run an ablation run is compared with: the course-recipe run of its task, preset, size and seed
    (the chosen one), else the main run of its task and preset, else None."""
    task, preset, p, k, s, _ = identity(r)
    same = [o for o in runs if o is not r and identity(o) == (task, preset, p, k, s, ())]
    if same:
        return pick(same)
    return main_runs(runs).get((task, preset))


def roles(runs):
    """{id(run): role}: 'main', 'seed N', 'capacity', 'ablation', 'duplicate' or 'other' (module doc)."""
    mains = main_runs(runs)
    main_ids = {id(r) for r in mains.values()}
    capacity = {id(r) for sizes in capacity_runs(runs).values() for r in sizes.values()}
    seeds = {id(r) for key in mains for r in seed_runs(runs, *key).values()}
    chosen = [r for r in runs if id(r) in main_ids | capacity | seeds]
    main_size_ = main_size(runs)
    out = {}
    for r in runs:
        if id(r) in main_ids:
            out[id(r)] = "main"
        elif id(r) in capacity:
            out[id(r)] = "capacity"
        elif id(r) in seeds:
            out[id(r)] = f"seed {seed(r)}"
        elif any(identity(r) == identity(o) and recipe.length(r) == recipe.length(o) for o in chosen):
            out[id(r)] = "duplicate"
        elif recipe.variant(r) or any(identity(r) == identity(o) for o in chosen):
            out[id(r)] = "ablation" if at_main_size(r, main_size_) else "other"
        else:
            out[id(r)] = "other"
    return out
