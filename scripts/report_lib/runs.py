"""Reading run jsons (and recall predictions files) from run folders."""
import json
import os

import presets

from . import recipe

PRESET_ORDER = presets.report_order()


class ReportError(Exception):
    """Bad input: printed as one line, non-zero exit."""


def is_run(j):
    return (isinstance(j, dict) and all(k in j for k in ("preset", "task", "loss_curve", "config"))
            and isinstance(j["preset"], str) and isinstance(j["task"], str) and isinstance(j["config"], dict))


def find_json(dirs):
    for d in dirs:
        if not os.path.isdir(d):
            raise ReportError(f"{d}: not a folder")
        for root, _, files in os.walk(d):
            for f in sorted(files):
                if f.endswith(".json"):
                    yield os.path.join(root, f)


def load(dirs, warn):
    """Runs (dicts with '_path', '_label') and predictions keyed by run path."""
    runs, predictions = [], {}
    for path in find_json(dirs):
        try:
            with open(path) as f:
                j = json.load(f)
        except (OSError, ValueError) as e:
            warn(f"skipping {path}: not readable json ({str(e)[:80]})")
            continue
        if path.endswith(".predictions.json") and isinstance(j, dict) and "examples" in j:
            predictions[path[: -len(".predictions.json")] + ".json"] = j
        elif is_run(j):
            j["_path"] = path
            # linear attention with another feature map is its own entry: linear-relu
            fmap = ((j.get("config") or {}).get("model") or {}).get("feature_map", "elu1")
            if fmap != "elu1":
                j["preset"] = f"{j['preset']}-{fmap}"
            runs.append(j)
    if not runs:
        raise ReportError("no run json (with preset, task, loss_curve, config) under " + ", ".join(dirs))
    for r in runs:
        r["_predictions"] = predictions.get(r["_path"])
    label_runs(runs, dirs)
    runs.sort(key=sort_key)
    return runs


def sort_key(r):
    """Task, preset, size, course recipe before variants, seed, label."""
    task, preset, pairs, keys, seed, var = identity(r)
    return task, order(preset), pairs, keys, bool(var), str(var), seed, r["_label"]


def order(preset):
    return PRESET_ORDER.index(preset) if preset in PRESET_ORDER else len(PRESET_ORDER)


def label_runs(runs, dirs):
    """A short unique name: the file's stem, plus the device when two collide on different devices, else the
    folder (relative to the report's input folder; the input folder's own name for runs right in it)."""
    roots = [os.path.abspath(d) for d in dirs]

    def folder(r):
        here = os.path.dirname(os.path.abspath(r["_path"]))
        root = max((d for d in roots if here == d or here.startswith(d + os.sep)), key=len, default=here)
        rel = os.path.relpath(here, root)
        return os.path.basename(root) if rel == "." else rel

    for r in runs:
        r["_label"] = os.path.splitext(os.path.basename(r["_path"]))[0]
    seen = {}
    for r in runs:
        seen.setdefault(r["_label"], []).append(r)
    for group in seen.values():
        if len(group) > 1:
            devices = [r.get("device", "?") for r in group]
            folders = [folder(r) for r in group]
            for r, dev, fol in zip(group, devices, folders):
                if len(set(devices)) == len(group):
                    r["_label"] += f" ({dev})"
                elif len(set(folders)) == len(group):
                    r["_label"] += f" ({fol})"
                else:
                    r["_label"] += f" ({fol}, {dev})"


def final(r, key):
    v = (r.get("final") or {}).get(key)
    return v if isinstance(v, (int, float)) else None


def f4(x):
    return "—" if x is None else f"{x:.4f}"


def extrap(r):
    """{context: val_loss} of an lm run (empty when not measured)."""
    return {e["context"]: e["val_loss"] for e in r.get("extrapolation") or []
            if isinstance(e, dict) and "context" in e and "val_loss" in e}


def train_cfg(r):
    return (r.get("config") or {}).get("train") or {}


# lina's defaults (experiments/train_options.cpp; scripts/sweep.py DEFAULT_*)
DEFAULT_SEED, DEFAULT_PAIRS, DEFAULT_KEYS = 1337, 32, 64


def number(x, default):
    return x if isinstance(x, int) and not isinstance(x, bool) else default


def identity(r):
    """(task, preset, pairs, keys, seed, variant) of a run; pairs and keys are 0 on lm (they do not apply);
    variant: the recipe flags in which the run differs from the course's, () for a course run (recipe.py)."""
    t = train_cfg(r)
    recall = r["task"] == "recall"
    return (r["task"], r["preset"], number(t.get("pairs"), DEFAULT_PAIRS) if recall else 0,
            number(t.get("keys"), DEFAULT_KEYS) if recall else 0, number(t.get("seed"), DEFAULT_SEED),
            recipe.variant(r))


def best_val(r):
    """(lowest val_loss, its step) over the run's evaluations, or (None, None)."""
    ev = [e for e in r.get("eval") or [] if isinstance(e, dict)
          and isinstance(e.get("val_loss"), (int, float)) and "step" in e]
    if not ev:
        return None, None
    best = min(ev, key=lambda e: e["val_loss"])
    return best["val_loss"], best["step"]


def scored_per_eval(r):
    """Scored positions per recall evaluation on the fixed held-out set (eval_batches × batch × pairs)."""
    t = train_cfg(r)
    batch = recipe.of_run(r).get("batch") or t.get("batch", 128)
    return t.get("eval_batches", 8) * batch * t.get("pairs", DEFAULT_PAIRS)


def eval_every(r):
    """Updates between the run's evaluations (the step gap of its first two, else config's eval_every)."""
    steps = [e["step"] for e in r.get("eval") or [] if isinstance(e, dict) and isinstance(e.get("step"), int)]
    if len(steps) >= 2:
        return steps[1] - steps[0]
    return train_cfg(r).get("eval_every")
