"""explorer.html: the template with the run data embedded as JSON."""
import json

from . import capacity, drops, findings, groups, memory, recipe
from .runs import extrap


def thin(points, n=300):
    """At most about n points of a curve (every k-th, and the last)."""
    k = max(1, len(points) // n)
    out = points[::k]
    if points and out[-1] is not points[-1]:
        out.append(points[-1])
    return out


def run_data(r, role):
    """What the page needs of one run; role as groups.roles ('main', 'seed 1338', 'capacity', 'ablation', ...)."""
    keep = ("preset", "task", "device", "steps_done", "finished", "params", "kv_per_token", "state_const",
            "conv_cache", "ms_per_step", "tokens_per_s", "final", "alpha", "eval")
    d = {k: r.get(k) for k in keep}
    d["label"] = r["_label"]
    d["role"] = role
    d["pairs"], d["seed"] = groups.pairs(r), groups.seed(r)
    d["commit"] = str(r.get("git_commit", ""))[:10]
    d["loss_curve"] = [[p["step"], p["loss"]] for p in thin(r.get("loss_curve") or [])]
    d["extrapolation"] = extrap(r)
    d["recipe"] = recipe.short(r)
    d["capacity"] = {str(n): a for n, (a, _) in capacity.probe(r).items()}
    if r["task"] == "recall":
        d["drop_step"] = drops.drop_step(r)
    p = r.get("_predictions")
    if p and role == "main":  # the page shows the main runs' answers only
        d["predictions"] = {k: p.get(k) for k in ("pairs", "keys", "values", "accuracy", "step", "examples")}
    return d


def write(runs, out, template_path):
    role = groups.roles(runs)
    data = {"runs": [run_data(r, role[id(r)]) for r in runs], "lesson": findings.lesson(runs),
            "presets": {p: memory.lina_memory(l) for p, l in memory.PRESET_LAYERS.items()},
            "real": memory.real_layouts()}
    blob = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    with open(template_path) as f:
        html = f.read()
    marker = "/*__LINA_DATA__*/null"
    if marker not in html:
        raise OSError(f"{template_path}: no data marker {marker}")
    with open(f"{out}/explorer.html", "w") as f:
        f.write(html.replace(marker, blob))
