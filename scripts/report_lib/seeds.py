"""Noise on lm val loss, measured from the seed runs.

- seeds: per lm preset with finished runs at two or more seeds (at the main
  run's steps and batch; lm_P_s1338, lm_P_s1339 beside lm_P), the mean and
  sample sd of the final val loss; σ is the sd pooled over those presets,
  √(Σ(nᵢ−1)sᵢ² / Σ(nᵢ−1)). Two single runs differ by noise alone with sd
  √2·σ, so a difference between two presets' single main runs (or between
  one of lina's runs and the course's one run) is called noise below
  2·√2·σ. Where both presets have seeds, their means are compared instead,
  against 2·σ·√(1/na + 1/nb): the pooled σ, not each preset's own sd, which
  from two or three seeds is itself too noisy to judge by.
- Without seed runs nothing is judged: the verdicts say "no seed runs yet".
- val vs extrap@64 (the course's own estimate: a main run's val loss on 200
  batches and its extrapolation loss at context 64 on 40 batches measure
  the same thing) is shown beside the course's 0.0069, not used to judge.
"""
import math
from dataclasses import dataclass, field

from . import groups
from .runs import best_val, extrap, f4, final, train_cfg


def mean_sd(xs):
    """(mean, sample sd with n − 1) of two or more numbers."""
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


@dataclass
class SeedGroup:
    """The lm runs of one preset at its main run's schedule, one per seed."""
    preset: str
    runs: list
    left_out: list  # (label, why)

    @property
    def n(self):
        return len(self.runs)

    def final_mean_sd(self):
        return mean_sd([final(r, "val_loss") for r in self.runs])

    def best_mean_sd(self):
        bests = [best_val(r)[0] for r in self.runs]
        return mean_sd(bests) if None not in bests else (None, None)


def why_left_out(r, main):
    """Why a seed run does not count towards its preset's mean ('' when it counts)."""
    if not r.get("finished"):
        return f"unfinished at step {r.get('steps_done')}"
    if final(r, "val_loss") is None:
        return "no final val loss"
    t, m = train_cfg(r), train_cfg(main)
    if (t.get("steps"), t.get("batch")) != (m.get("steps"), m.get("batch")):
        return f"{t.get('steps')} steps at batch {t.get('batch')}, the main run {m.get('steps')} at {m.get('batch')}"
    return ""


def seed_groups(runs):
    """{preset: SeedGroup} of every lm preset with runs at two or more seeds."""
    out = {}
    for preset, main in groups.by_preset(runs, "lm").items():
        by_seed = groups.seed_runs(runs, "lm", preset)
        if len(by_seed) < 2:
            continue
        why = {s: why_left_out(r, main) for s, r in by_seed.items()}
        out[preset] = SeedGroup(preset, [r for s, r in by_seed.items() if not why[s]],
                                [(r["_label"], why[s]) for s, r in by_seed.items() if why[s]])
    return out


def pooled_sd(seed_groups_):
    """(σ pooled over groups with n ≥ 2, degrees of freedom), or (None, 0)."""
    usable = [g for g in seed_groups_.values() if g.n >= 2]
    dof = sum(g.n - 1 for g in usable)
    if not dof:
        return None, 0
    return math.sqrt(sum((g.n - 1) * g.final_mean_sd()[1] ** 2 for g in usable) / dof), dof


def val_extrap_spreads(runs):
    """[(label, val, ext64, |val − ext64|)] of the main lm runs."""
    rows = []
    for r in groups.by_preset(runs, "lm").values():
        v, e = final(r, "val_loss"), extrap(r).get(64)
        if v is not None and e is not None:
            rows.append((r["_label"], v, e, abs(v - e)))
    return rows


@dataclass
class Diff:
    """loss(a) − loss(b) = va − vb, the noise it is judged against, what was compared, the runs used."""
    va: float
    vb: float
    noise: float
    basis: str
    runs: list = field(default_factory=list)

    @property
    def d(self):
        return self.va - self.vb

    def is_noise(self):
        return self.noise is not None and abs(self.d) <= self.noise


@dataclass
class LmNoise:
    """Everything the report says about lm noise; `single` judges two single main runs."""
    main: dict        # {preset: main lm run}
    seeds: dict       # {preset: SeedGroup}
    sigma: float      # pooled seed sd or None
    dof: int
    spreads: list     # val_extrap_spreads
    spread: float     # the largest spread or None

    @property
    def single(self):
        """2·√2·σ from the seed runs, or None (no seed runs yet)."""
        return 2 * math.sqrt(2) * self.sigma if self.sigma is not None else None

    @property
    def source(self):
        """Which estimate `single` is, in a few words."""
        return f"2·√2·σ, σ = {self.sigma:.4f} the pooled seed sd" if self.sigma is not None else "no seed runs yet"

    def usable(self, p):
        return p in self.seeds and self.seeds[p].n >= 2

    def between(self, a, b):
        """Diff of lm val loss a − b: means over seeds when both presets have them, else the main runs."""
        if self.usable(a) and self.usable(b):
            ga, gb = self.seeds[a], self.seeds[b]
            (ma, _), (mb, _) = ga.final_mean_sd(), gb.final_mean_sd()
            return Diff(ma, mb, 2 * self.sigma * math.sqrt(1 / ga.n + 1 / gb.n),
                        f"means of {ga.n} and {gb.n} seeds", ga.runs + gb.runs)
        ra, rb = self.main.get(a), self.main.get(b)
        va, vb = (final(ra, "val_loss") if ra else None), (final(rb, "val_loss") if rb else None)
        if va is None or vb is None:
            return None
        return Diff(va, vb, self.single, "single runs", [ra, rb])


def lm_noise(runs):
    """The LmNoise of a set of runs."""
    seeds = seed_groups(runs)
    sigma, dof = pooled_sd(seeds)
    spreads = val_extrap_spreads(runs)
    return LmNoise(groups.by_preset(runs, "lm"), seeds, sigma, dof, spreads,
                   max(s[3] for s in spreads) if spreads else None)


def pm(mean, sd):
    return "—" if mean is None else f"{mean:.4f} ± {sd:.4f}"


def section(noise, course_noise):
    """The report's Noise section (markdown lines)."""
    out = seeds_table(noise, course_noise)
    if noise.spreads:
        out += ["", "The course's own noise estimate, for comparison (not used to judge): val loss (the run's "
                "evaluation batches; 200 in the recipe) against the extrapolation loss at context 64 (40 batches) "
                "of the same main run — two estimates of one number:", ""]
        out += [f"- {l}: {v:.4f} vs {e:.4f}, spread {s:.4f}" for l, v, e, s in noise.spreads]
        out += ["", f"Largest spread {noise.spread:.4f} (the course's: {course_noise:.4f})."]
    else:
        out += ["", "No main lm run has both a val loss and an extrapolation loss at 64 yet."]
    out.append("")
    if noise.single is None:
        out.append("**No seed runs yet** (lm_P_s1338, lm_P_s1339 of a course preset): lm differences are not "
                   "judged against noise, and the course rows say so.")
    else:
        out.append(f"**Noise = {noise.single:.4f}**, {noise.source}: a difference between two single runs (two "
                   "presets' seed-1337 runs, or one of lina's runs and the course's) smaller than this is called "
                   "noise (a difference of two single runs has sd √2·σ; twice that).")
    out += means_table(noise)
    out += ["", "Recall accuracies: a difference is noise when below twice its binomial standard error "
            "(held-out positions = eval batches × batch × pairs)."]
    return out


def seeds_table(noise, course_noise):
    """Per lm preset with two or more seeds: mean ± sd of final and best val loss."""
    if not noise.seeds:
        return ["No lm preset has runs at two or more seeds: no seed runs yet."]
    out = ["| preset | seeds (n) | final val loss mean ± sd | best val mean ± sd | val − extrap@64 gap (main run) "
           "| course's estimate |", "|---|---|---|---|---|---|"]
    gaps = {l: s for l, _, _, s in noise.spreads}
    for p, g in noise.seeds.items():
        fin = pm(*g.final_mean_sd()) if g.n >= 2 else "—"
        best = pm(*g.best_mean_sd()) if g.n >= 2 else "—"
        seeds = ", ".join(str(groups.seed(r)) for r in g.runs)
        out.append(f"| {p} | {seeds or '—'} ({g.n}) | {fin} | {best} | {f4(gaps.get(noise.main[p]['_label']))} "
                   f"| {course_noise:.4f} |")
    out += ["", "sd: the sample standard deviation (n − 1)."]
    left = [f"{l} ({why})" for g in noise.seeds.values() for l, why in g.left_out]
    if left:
        out.append("Left out of the means: " + "; ".join(left) + ".")
    if noise.sigma is not None:
        used = [p for p in noise.seeds if noise.usable(p)]
        out.append(f"Pooled σ = √(Σ(nᵢ−1)sᵢ² / Σ(nᵢ−1)) over {', '.join(used)} = {noise.sigma:.4f} "
                   f"({noise.dof} degrees of freedom).")
        out += widest_spread(noise)
    return out


def widest_spread(noise):
    """The preset whose own seed sd is largest, against the pooled sd of the others: pooling assumes
    one sd for every preset, and this says how far the seeds' spreads are from that."""
    usable = {p: g for p, g in noise.seeds.items() if noise.usable(p)}
    if len(usable) < 2:
        return []
    widest = max(usable, key=lambda p: usable[p].final_mean_sd()[1])
    own = usable[widest].final_mean_sd()[1]
    others, dof = pooled_sd({p: g for p, g in usable.items() if p != widest})
    if not others:
        return []
    return [f"Widest seed spread: {widest}, sd {own:.4f}, {own / others:.1f}× the pooled sd of the others "
            f"({others:.4f}, {dof} degrees of freedom). The pooled σ includes it, so differences between "
            "the others are judged against a wider noise than their own seeds show."]


def means_table(noise):
    """Every pair of presets with seeds: difference of means against 2·σ·√(1/na + 1/nb)."""
    ps = [p for p in noise.seeds if noise.usable(p)]
    pairs = [(a, b) for i, a in enumerate(ps) for b in ps[i + 1:]]
    if not pairs:
        return []
    out = ["", "Means over seeds, where both presets have two or more: difference of means a − b against "
           "2·σ·√(1/na + 1/nb), σ the pooled seed sd:", "", "| a − b | difference of means | noise | verdict |", "|---|---|---|---|"]
    for a, b in pairs:
        d = noise.between(a, b)
        out.append(f"| {a} − {b} | {d.d:+.4f} | {d.noise:.4f} | {'noise' if d.is_noise() else 'above noise'} |")
    return out
