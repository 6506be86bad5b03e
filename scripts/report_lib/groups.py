"""Which run stands for a preset.

A run's identity is (task, preset, pairs, keys, seed) (runs.identity). The
main run of a preset on a task is the one at seed 1337 (without one: the
lowest seed present) and, on recall, at the default 32 pairs of 64 keys.
Everything that compares presets with each other or with the course reads
main runs only. The other seeds at the main size feed the noise estimate
(seeds.py); recall at 64 keys and the main seed but other pair counts feeds
the capacity section (capacity.py). Two runs with one identity (two folders,
two devices): the finished one, then the longer one, then the first label.
"""
from .runs import DEFAULT_KEYS, DEFAULT_PAIRS, DEFAULT_SEED, identity, number


def seed(r):
    return identity(r)[4]


def pairs(r):
    return identity(r)[2]


def pick(candidates):
    """One run of several with the same identity: finished first, then the most steps, then by label."""
    return min(candidates, key=lambda r: (not r.get("finished"), -number(r.get("steps_done"), 0), r["_label"]))


def main_seed(seeds):
    """1337 when present, else the lowest seed."""
    return DEFAULT_SEED if DEFAULT_SEED in seeds else min(seeds)


def at_main_size(r):
    """lm runs always; recall runs at 32 pairs of 64 keys."""
    return r["task"] != "recall" or identity(r)[2:4] == (DEFAULT_PAIRS, DEFAULT_KEYS)


def grouped(runs, where):
    """{(task, preset): [runs]} of the runs that satisfy `where`, in run order."""
    out = {}
    for r in runs:
        if where(r):
            out.setdefault((r["task"], r["preset"]), []).append(r)
    return out


def per_seed(group):
    """{seed: run} of runs of one (task, preset, size), duplicates resolved by pick."""
    seeds = {}
    for r in group:
        seeds.setdefault(seed(r), []).append(r)
    return {s: pick(rs) for s, rs in sorted(seeds.items())}


def main_runs(runs):
    """{(task, preset): main run}."""
    out = {}
    for key, group in grouped(runs, at_main_size).items():
        by_seed = per_seed(group)
        out[key] = by_seed[main_seed(set(by_seed))]
    return out


def by_preset(runs, task):
    """{preset: main run} of one task, in run order."""
    return {p: r for (t, p), r in main_runs(runs).items() if t == task}


def seed_runs(runs, task, preset):
    """{seed: run} of (task, preset) at the main size, main seed included."""
    group = grouped(runs, at_main_size).get((task, preset), [])
    return per_seed(group)


def capacity_runs(runs):
    """{preset: {pairs: run}}: recall runs at 64 keys and the preset's main seed (32 pairs is the main run)."""
    out = {}
    for (_, preset), group in grouped(runs, lambda r: r["task"] == "recall" and identity(r)[3] == DEFAULT_KEYS).items():
        s = main_seed({seed(r) for r in group})
        sizes = {}
        for r in group:
            if seed(r) == s:
                sizes.setdefault(pairs(r), []).append(r)
        out[preset] = {p: pick(rs) for p, rs in sorted(sizes.items())}
    return out


def roles(runs):
    """{id(run): role}: 'main', 'seed N' (another seed at the main size), 'capacity' (recall at
    64 keys, main seed, other pairs), 'duplicate' (same identity as a chosen run) or 'other'."""
    mains = {id(r) for r in main_runs(runs).values()}
    capacity = {id(r) for sizes in capacity_runs(runs).values() for r in sizes.values()}
    seeds = {id(r) for key in grouped(runs, at_main_size) for r in seed_runs(runs, *key).values()}
    out = {}
    for r in runs:
        if id(r) in mains:
            out[id(r)] = "main"
        elif id(r) in capacity:
            out[id(r)] = "capacity"
        elif id(r) in seeds:
            out[id(r)] = f"seed {seed(r)}"
        elif any(identity(r) == identity(o) for o in runs if id(o) in mains | capacity | seeds):
            out[id(r)] = "duplicate"
        else:
            out[id(r)] = "other"
    return out
