"""Reading run jsons (and recall predictions files) from run folders."""
import json
import os

PRESET_ORDER = ["attn", "linear", "linear-relu", "linear-sigmoid", "delta", "gdn", "hybrid",
                "retnet", "mamba2", "gla"]


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
    label_runs(runs)
    runs.sort(key=lambda r: (r["task"], order(r["preset"]), identity(r)[2:], r["_label"]))
    return runs


def order(preset):
    return PRESET_ORDER.index(preset) if preset in PRESET_ORDER else len(PRESET_ORDER)


def label_runs(runs):
    """A short unique name: the file's stem, plus the device or folder when two collide."""
    for r in runs:
        r["_label"] = os.path.splitext(os.path.basename(r["_path"]))[0]
    for extra in (lambda r: r.get("device", "?"), lambda r: os.path.dirname(r["_path"])):
        seen = {}
        for r in runs:
            seen.setdefault(r["_label"], []).append(r)
        for group in seen.values():
            if len(group) > 1:
                for r in group:
                    r["_label"] += f" ({extra(r)})"


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


# lina's defaults (experiments/train.cpp; scripts/sweep.py DEFAULT_*)
DEFAULT_SEED, DEFAULT_PAIRS, DEFAULT_KEYS = 1337, 32, 64


def number(x, default):
    return x if isinstance(x, int) and not isinstance(x, bool) else default


def identity(r):
    """(task, preset, pairs, keys, seed) of a run; pairs and keys are 0 on lm (they do not apply)."""
    t = train_cfg(r)
    recall = r["task"] == "recall"
    return (r["task"], r["preset"], number(t.get("pairs"), DEFAULT_PAIRS) if recall else 0,
            number(t.get("keys"), DEFAULT_KEYS) if recall else 0, number(t.get("seed"), DEFAULT_SEED))


def best_val(r):
    """(lowest val_loss, its step) over the run's evaluations, or (None, None)."""
    ev = [e for e in r.get("eval") or [] if isinstance(e, dict)
          and isinstance(e.get("val_loss"), (int, float)) and "step" in e]
    if not ev:
        return None, None
    best = min(ev, key=lambda e: e["val_loss"])
    return best["val_loss"], best["step"]


def scored_per_eval(r):
    """Scored positions per recall evaluation (eval_batches × batch × pairs)."""
    t = train_cfg(r)
    return t.get("eval_batches", 8) * t.get("batch", 64) * t.get("pairs", 32)
