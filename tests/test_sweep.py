#!/usr/bin/env python3
"""scripts/sweep.py, the grid runner: its grid and file names, the SLURM
batch script it writes, local runs with --jobs, skipping what is finished,
resuming what was interrupted, and bad arguments.

    tests/test_sweep.py --lina build/release/lina --work DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWEEP = os.path.join(ROOT, "scripts", "sweep.py")
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def sweep(args, lina):
    env = dict(os.environ, LINA=lina)
    return subprocess.run([sys.executable, SWEEP, *args], capture_output=True, text=True, env=env)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lina", required=True)
    p.add_argument("--work", required=True)
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)

    # the grid: tasks × presets × seeds, recall × pairs × keys, lina's names
    r = sweep(["--presets", "gdn,linear", "--tasks", "lm,recall", "--seeds", "1337,1338",
               "--pairs", "8,32", "--list"], a.lina)
    names = [line.split()[1] for line in r.stdout.splitlines()]
    check(r.returncode == 0, "--list exits 0")
    check(len(names) == 2 * 2 + 2 * 2 * 2, f"--list: 12 elements, got {len(names)}")
    for name in ("lm_gdn", "lm_gdn_s1338", "recall_linear_p8", "recall_gdn_s1338", "recall_gdn_p8_s1338"):
        check(name in names, f"--list names {name}")
    r = sweep(["--presets", "all", "--list"], a.lina)
    check("recall_hybrid" not in r.stdout and "lm_hybrid" in r.stdout,
          "--presets all: hybrid on lm only, as in the nine")

    # --recipe: an ablation, named by lina itself (lina train --dry-run), its flags on every run
    r = sweep(["--presets", "gdn,hybrid", "--tasks", "lm", "--recipe", "--dropout 0 --schedule cosine", "--list"], a.lina)
    check(r.returncode == 0 and [line.split()[1] for line in r.stdout.splitlines()] ==
          ["lm_gdn_drop0_cosine", "lm_hybrid_drop0_cosine"], "--recipe: lina's names, suffixes included: " + r.stdout.strip())
    r = sweep(["--presets", "attn", "--tasks", "recall", "--recipe", "--values 16", "--out", a.work, "--dry-run"], a.lina)
    check(r.returncode == 0 and r.stdout.strip().endswith("--values 16"), "--recipe: the flags end the train command")
    r = sweep(["--presets", "attn", "--tasks", "recall", "--recipe", "--dropout 2", "--list"], a.lina)
    check(r.returncode == 2 and "--dropout: must be in" in r.stderr and r.stderr.count("\n") == 1,
          "--recipe that lina refuses: one line, exit 2")

    # the SLURM array: one element per run, requeued, each element resumable
    r = sweep(["--presets", "gdn,linear", "--tasks", "recall", "--steps", "3", "--out", a.work,
               "--slurm", "--dry-run"], a.lina)
    check(r.returncode == 0, "--slurm --dry-run exits 0")
    check("#SBATCH --array=0-1" in r.stdout, "--slurm --dry-run: an array of 2 elements")
    check("#SBATCH --requeue" in r.stdout, "--slurm --dry-run: requeued on preemption")
    check('--element "$SLURM_ARRAY_TASK_ID"' in r.stdout, "--slurm --dry-run: each element runs one run")
    check(not os.path.exists(os.path.join(a.work, "sweep.sbatch")), "--dry-run writes nothing")

    # local runs, two at a time, then again: nothing left to do
    tiny = ["--presets", "gdn,linear", "--tasks", "recall", "--steps", "3", "--batch", "2",
            "--eval-batches", "1", "--out", a.work]
    r = sweep(tiny + ["--jobs", "2"], a.lina)
    print(r.stdout, r.stderr)
    check(r.returncode == 0, "two runs with --jobs 2 exit 0")
    for name in ("recall_gdn", "recall_linear"):
        path = os.path.join(a.work, "cpu", name + ".json")
        j = json.load(open(path)) if os.path.exists(path) else {}
        check(j.get("finished") is True and j.get("steps_done") == 3, f"{name}.json finished, 3 steps")
        check(os.path.exists(os.path.join(a.work, "cpu", name + ".predictions.json")), f"{name}: predictions")
    r = sweep(tiny, a.lina)
    check(r.stdout.count("already finished") == 2, "run again: both already finished")

    # an interrupted run (stopped at update 2 of 3) is resumed, not restarted
    command = sweep(["--presets", "delta", "--tasks", "recall", "--steps", "3", "--batch", "2",
                     "--eval-batches", "1", "--out", a.work, "--dry-run"], a.lina).stdout.split()
    subprocess.run(command + ["--stop-at", "2", "--checkpoint-every", "1"], capture_output=True)
    j = json.load(open(os.path.join(a.work, "cpu", "recall_delta.json")))
    check(j.get("finished") is False and j.get("steps_done") == 2, "stopped at update 2")
    r = sweep(["--presets", "delta", "--tasks", "recall", "--steps", "3", "--batch", "2",
               "--eval-batches", "1", "--out", a.work], a.lina)
    j = json.load(open(os.path.join(a.work, "cpu", "recall_delta.json")))
    check("resumed from update 2" in r.stdout and j.get("finished") is True and j.get("steps_done") == 3,
          "the sweep resumes it from update 2 to 3")

    # bad arguments: one line, exit 2, nothing run
    for args, needle in ((["--jobs", "0"], "--jobs must be integers >= 1"),
                         (["--presets", "transformer"], "unknown preset 'transformer'"),
                         (["--tasks", "translate"], "unknown task 'translate'"),
                         (["--steps", "-5"], "--steps must be integers >= 1"),
                         (["--pairs", "80", "--tasks", "recall"], "--pairs 80 is more than --keys 64")):
        r = sweep(args + ["--out", a.work, "--list"], a.lina)
        check(r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1,
              f"{' '.join(args)}: one line with '{needle}', exit 2")

    if failures:
        print(f"{len(failures)} checks failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
