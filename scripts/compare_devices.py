#!/usr/bin/env python3
"""The same runs on two devices, side by side: for every run file name found
in both folders (lm_gdn.json in results/runs/cpu and results/runs/cuda,
say), its final val loss (lm) or held-out accuracy (recall) on each, the
first update at which their training losses differ by more than 1e-3 (or
one is not finite), the mean training loss of the last 250 updates on each.

    scripts/compare_devices.py A_DIR B_DIR [--summary DEVICE_SUMMARY] [--out FILE]

Both runs of a pair start from the same seed, data order and schedule, so
up to the first differing update they are one training; after it, the
float order of the two devices has been amplified by training, and they
compare as two runs of one model. --summary (scripts/device-check.sh's
device-summary.json) adds each preset's ms/step on B's device, timed alone
on lm.
Python 3 standard library only; bad input ends with one line, exit 2.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_lib.findings import train_tail  # noqa: E402  the report's mean of the last updates
from report_lib.runs import final, order  # noqa: E402

TOLERANCE = 1e-3  # |Δ training loss| that counts as two trainings having parted
TAIL = 250        # updates in the mean at the end


def die(message):
    print(f"compare_devices.py: {message}", file=sys.stderr)
    sys.exit(2)


def runs_in(folder):
    """{file name: run json} of the finished runs in folder (not predictions)."""
    if not os.path.isdir(folder):
        die(f"{folder}: not a folder")
    out = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json") or name.endswith(".predictions.json"):
            continue
        try:
            j = json.load(open(os.path.join(folder, name)))
        except (OSError, ValueError) as e:
            die(f"{os.path.join(folder, name)}: not readable json ({str(e)[:60]})")
        if isinstance(j, dict) and j.get("finished") and isinstance(j.get("loss_curve"), list):
            out[name[:-5]] = j
    return out


def loss_at(point):
    """A loss_curve entry's loss as a float: lina writes one that is not finite as a
    string ("nan", "inf"); anything unreadable is a NaN."""
    try:
        return float(point["loss"])
    except (KeyError, TypeError, ValueError):
        return math.nan


def parted_at(a, b):
    """The first update whose training losses differ by more than TOLERANCE, or None.
    A NaN or an infinity on either side parts them: `abs(nan) > TOLERANCE` is False,
    so a NaN must fail `<=` instead of passing `>`."""
    for x, y in zip(a["loss_curve"], b["loss_curve"]):
        difference = abs(loss_at(x) - loss_at(y))
        if not (math.isfinite(difference) and difference <= TOLERANCE):
            return x["step"]
    return None


def result(run):
    """Held-out accuracy (recall) or final val loss (lm)."""
    accuracy, loss = final(run, "val_accuracy"), final(run, "val_loss")
    if run.get("task") == "recall" and accuracy is not None:
        return f"{accuracy:.3f}"
    return "—" if loss is None else f"{loss:.4f}"


def tail(run):
    numeric = dict(run, loss_curve=[dict(point, loss=loss_at(point)) for point in run["loss_curve"]])
    t = train_tail(numeric, TAIL)  # "nan" where a loss in the tail is not finite
    return "—" if t is None else f"{t:.4f}"


def table(a_runs, b_runs, a_name, b_name, alone):
    both = [n for n in a_runs if n in b_runs]
    if not both:
        die("no finished run is in both folders")
    lines = [f"| run | {a_name} | {b_name} | first update with \\|Δ train loss\\| > {TOLERANCE:g} or not finite | "
             f"train loss, last {TAIL}: {a_name} / {b_name} |" + (" ms/step alone |" if alone else ""),
             "|---|---|---|---|---|" + ("---|" if alone else "")]
    for name in sorted(both, key=lambda n: (a_runs[n].get("task", ""), order(a_runs[n].get("preset", "")), n)):
        a, b = a_runs[name], b_runs[name]
        parted = parted_at(a, b)
        steps = min(len(a["loss_curve"]), len(b["loss_curve"]))
        row = (f"| {name} | {result(a)} | {result(b)} | {parted if parted else f'none in {steps}'} | "
               f"{tail(a)} / {tail(b)} |")
        if alone:
            ms = alone.get(a.get("preset")) if a.get("task") == "lm" else None
            row += f" {ms if ms is not None else '—'} |"
        lines.append(row)
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--summary", help="device-summary.json: ms/step of each preset timed alone")
    p.add_argument("--out", help="write the table here (default: print it)")
    args = p.parse_args()
    alone = {}
    if args.summary:
        try:
            presets = json.load(open(args.summary)).get("presets", {})
        except (OSError, ValueError) as e:
            die(f"{args.summary}: not readable json ({str(e)[:60]})")
        alone = {k: v["cuda"]["ms_per_step"] for k, v in presets.items() if "ms_per_step" in v.get("cuda", {})}
    name = lambda folder: os.path.basename(os.path.normpath(folder))
    text = table(runs_in(args.a), runs_in(args.b), name(args.a), name(args.b), alone)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
