"""A run's training recipe against the course's (spec 2 §2) and spec 1's.

The course's recipe comes from scripts/course_figures.json ("recipe"), the
data of course-figures.md. Spec 1's is the recipe lina ran before spec 2
(spec 2's opening paragraph: cosine schedule with warm-up and clipping,
recall with 16 values at batch 64 for 2000 steps; and spec 1 §2.1: AdamW
betas 0.9/0.99, weight decay 0.1 on parameters of two or more dimensions,
100 warm-up updates). The report names a changed flag "spec 1's" when its
value is spec 1's: the ablation runs of issue 40 are spec 1's settings put
back one at a time.

A run json of spec 2 has "recipe"; one of spec 1 has none, and its recipe
is read from config.train (what spec 1 ran).
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# Flags in the order the report lists them. batch and steps are the run's
# length: lina leaves them out of the file name (such runs go in a folder of
# their own), so they are compared but do not make a run another variant.
FLAGS = ["values", "dropout", "schedule", "warmup", "clip", "weight_decay", "decay", "beta2", "lr", "batch", "steps"]
LENGTH = ("batch", "steps")
SPEC1 = {"values": 16, "dropout": 0.0, "schedule": "cosine", "warmup": 100, "clip": 1.0, "weight_decay": 0.1,
         "decay": "matrices", "beta2": 0.99, "lr": 0.001, "batch": 64, "steps": {"lm": 5000, "recall": 2000}}
# How each flag reads in the report ("dropout 0 (course 0.1)").
WORDS = {"values": "values", "dropout": "dropout", "schedule": "schedule", "warmup": "warm-up", "clip": "clip",
         "weight_decay": "weight decay", "decay": "decay on", "beta2": "β2", "lr": "lr", "batch": "batch",
         "steps": "updates"}


def load_course():
    with open(os.path.join(os.path.dirname(HERE), "course_figures.json")) as f:
        return json.load(f)


COURSE = load_course()["recipe"]


def course_recipe(task):
    """The course's recipe of a task: {flag: value} (recall has values)."""
    r = dict(COURSE["common"])
    r.update(COURSE[task])
    return r


def spec1_value(flag, task):
    v = SPEC1.get(flag)
    return v.get(task) if isinstance(v, dict) else v


def of_run(r):
    """{flag: value} of the run: its "recipe" (spec 2), else what spec 1's config.train says."""
    rec = r.get("recipe")
    if isinstance(rec, dict):
        out = {k: rec[k] for k in FLAGS if k in rec}
        if r["task"] != "recall":
            out.pop("values", None)
        return out
    t = (r.get("config") or {}).get("train") or {}
    betas = t.get("betas") or [0.9, 0.99]
    out = {"dropout": 0.0, "schedule": "cosine" if t.get("min_lr", t.get("lr")) != t.get("lr") else "constant",
           "warmup": t.get("warmup", 0), "clip": t.get("clip", 0.0), "weight_decay": t.get("weight_decay", 0.0),
           "decay": "matrices", "beta2": betas[1], "lr": t.get("lr"), "batch": t.get("batch"), "steps": t.get("steps")}
    if r["task"] == "recall":
        out["values"] = 16
    return out


def same(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))
    return a == b


def changes(r, length=True):
    """[(flag, value, course value)] where the run's recipe differs from the course's; length=False leaves
    out batch and steps. warm-up counts only under the cosine schedule (lina refuses it otherwise)."""
    mine, course = of_run(r), course_recipe(r["task"])
    if r["task"] == "recall" and same(mine.get("values"), ((r.get("config") or {}).get("train") or {}).get("keys")):
        # The course draws its values from as many tokens as its keys (64 and 64): a smaller task with
        # values = keys (the main job's) is the course's task scaled down, not another recipe.
        course["values"] = mine["values"]
    out = []
    for flag in FLAGS:
        if flag not in mine or flag not in course or (not length and flag in LENGTH):
            continue
        if flag == "warmup" and mine.get("schedule") != "cosine":
            continue
        if not same(mine[flag], course[flag]):
            out.append((flag, mine[flag], course[flag]))
    return out


def variant(r):
    """The recipe flags (not the length) in which the run differs from the course: () for a course run."""
    return tuple((flag, value) for flag, value, _ in changes(r, length=False))


def length(r):
    """(batch, steps) of the run's recipe."""
    mine = of_run(r)
    return mine.get("batch"), mine.get("steps")


def number(v):
    return f"{v:g}" if isinstance(v, float) else str(v)


def describe(r, flags=None):
    """'dropout 0 (course 0.1; spec 1's), schedule cosine (course constant; spec 1's)': the changed flags."""
    parts = []
    for flag, value, course in changes(r) if flags is None else flags:
        s1 = same(value, spec1_value(flag, r["task"]))
        parts.append(f"{WORDS[flag]} {number(value)} (course {number(course)}" + ("; spec 1's)" if s1 else ")"))
    return ", ".join(parts)


def short(r):
    """'course' or the changed flags without the course's values: 'dropout 0, cosine'."""
    ch = changes(r)
    return "course" if not ch else ", ".join(f"{WORDS[f]} {number(v)}" for f, v, _ in ch)
