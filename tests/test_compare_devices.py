#!/usr/bin/env python3
"""scripts/compare_devices.py on made-up run jsons: which runs pair up, the
update at which two trainings part (a NaN or an infinity parts them), the
tail means, ms/step from a device summary, and bad input (one line, exit 2).

    tests/test_compare_devices.py --work DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "compare_devices.py")
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def run_json(folder, name, task, preset, losses, final, finished=True):
    os.makedirs(folder, exist_ok=True)
    j = {"task": task, "preset": preset, "finished": finished, "final": final,
         "loss_curve": [{"step": i + 1, "loss": x} for i, x in enumerate(losses)]}
    json.dump(j, open(os.path.join(folder, name + ".json"), "w"))


def compare(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", required=True)
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    cpu, cuda = os.path.join(a.work, "cpu"), os.path.join(a.work, "cuda")
    same = [4.0, 3.0, 2.0, 1.0]
    run_json(cpu, "lm_gdn", "lm", "gdn", same, {"val_loss": 1.59})
    run_json(cuda, "lm_gdn", "lm", "gdn", [x + 5e-4 for x in same], {"val_loss": 1.5901})
    run_json(cpu, "lm_attn", "lm", "attn", same, {"val_loss": 1.54})
    run_json(cuda, "lm_attn", "lm", "attn", [4.0, 3.0, 2.01, 1.0], {"val_loss": 1.55})
    run_json(cpu, "recall_gdn", "recall", "gdn", same, {"val_loss": 0.01, "val_accuracy": 0.999})
    run_json(cuda, "recall_gdn", "recall", "gdn", same, {"val_loss": 0.01, "val_accuracy": 1.0})
    run_json(cpu, "lm_delta", "lm", "delta", same, {"val_loss": 1.58})           # on one device only
    run_json(cuda, "lm_linear", "lm", "linear", same, {"val_loss": 1.56}, False)  # unfinished
    run_json(cpu, "lm_linear", "lm", "linear", same, {"val_loss": 1.55})
    open(os.path.join(cuda, "recall_gdn.predictions.json"), "w").write("{}")
    summary = os.path.join(a.work, "summary.json")
    json.dump({"presets": {"gdn": {"cuda": {"ms_per_step": 8.4}}, "attn": {"cuda": {"ms_per_step": 6.9}}}},
              open(summary, "w"))

    r = compare(cpu, cuda, "--summary", summary)
    check(r.returncode == 0, f"exits 0 ({r.stderr.strip()})")
    rows = [line for line in r.stdout.splitlines() if line.startswith("| lm_") or line.startswith("| recall_")]
    names = [row.split("|")[1].strip() for row in rows]
    check(names == ["lm_attn", "lm_gdn", "recall_gdn"],
          f"pairs only finished runs in both, in the report's order: {names}")
    cells = {row.split("|")[1].strip(): [c.strip() for c in row.split("|")[2:-1]] for row in rows}
    check(cells["lm_gdn"][2] == "none in 4", "lm_gdn: within 1e-3 throughout")
    check(cells["lm_attn"][2] == "3", "lm_attn: parts at update 3")
    check(cells["lm_attn"][:2] == ["1.5400", "1.5500"], "lm: final val loss on each")
    check(cells["recall_gdn"][:2] == ["0.999", "1.000"], "recall: accuracy on each")
    check(cells["lm_gdn"][3] == "2.5000 / 2.5005", "the mean training loss of the tail on each")
    check(cells["lm_gdn"][4] == "8.4" and cells["recall_gdn"][4] == "—", "ms/step alone from the summary, lm only")

    # a loss that is not finite on one device (or on both) parts the two trainings there:
    # as a number (NaN) or as lina writes it, a string
    cpu_nan, cuda_nan = os.path.join(a.work, "cpu_nan"), os.path.join(a.work, "cuda_nan")
    for name, theirs in (("lm_a", [4.0, float("nan"), 2.0, 1.0]), ("lm_b", [4.0, 3.0, "inf", 1.0]),
                         ("lm_c", [4.0, 3.0, 2.0, "nan"])):
        run_json(cpu_nan, name, "lm", "gdn", same if name != "lm_c" else [4.0, 3.0, 2.0, float("nan")],
                 {"val_loss": 1.5})
        run_json(cuda_nan, name, "lm", "gdn", theirs, {"val_loss": 1.5})
    r = compare(cpu_nan, cuda_nan)
    parted = {row.split("|")[1].strip(): row.split("|")[4].strip() for row in r.stdout.splitlines()
              if row.startswith("| lm_")}
    check(r.returncode == 0 and parted == {"lm_a": "2", "lm_b": "3", "lm_c": "4"},
          f"a NaN or an infinity on either side parts the trainings at its update: {parted} {r.stderr.strip()}")

    out = os.path.join(a.work, "table.md")
    r = compare(cpu, cuda, "--out", out)
    check(r.returncode == 0 and r.stdout == "" and open(out).read().count("\n") == 5, "--out writes the table")

    for args, what in (([cpu, os.path.join(a.work, "none")], "a missing folder"),
                       ([a.work, cuda], "no run in both")):
        r = compare(*args)
        check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1,
              f"{what}: exit 2 with one line, got {r.returncode}: {r.stderr.strip()}")

    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("all compare_devices checks passed")


if __name__ == "__main__":
    main()
