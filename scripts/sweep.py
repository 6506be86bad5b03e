#!/usr/bin/env python3
"""Runs a grid of lina trainings: presets × tasks × seeds × recall sizes.

    scripts/sweep.py --presets attn,gdn --tasks lm,recall --seeds 1337,1338 \\
                     [--pairs 8,16,32,48] [--keys 64] [--steps N] [--batch N] \\
                     [--device cpu|cuda] [--out DIR] [--jobs N] [--eval-batches N]
                     [--checkpoint-every N] [--recipe "LINA TRAIN FLAGS"]
    scripts/sweep.py --grid FILE ...        the same keys in a small json file
    scripts/sweep.py ... --list             the grid's elements, one per line
    scripts/sweep.py ... --slurm [--dry-run]
                                            one SLURM job array, one run per element

Every run lands in OUT/<device>/ under lina's own file name (lm_gdn.json,
recall_gdn_p16.json, lm_gdn_s1338.json, ...), the folder scripts/report.py
reads. The sweep is resumable: a run whose json says "finished" is skipped,
an interrupted one goes on from its checkpoint (lina train --resume), so
running the same command again finishes what is left. After each recall run
`lina eval --task recall` writes <run>.predictions.json beside it (the
report's explorer shows a few held-out sequences).

--jobs N runs N at a time here, the cores split between them
(OMP_NUM_THREADS). --slurm writes OUT/sweep.sbatch, an array of one element
per run (requeued when preempted: lina stops cleanly on SIGTERM and the
element resumes from its checkpoint), and submits it with sbatch; with
--dry-run it prints the script and submits nothing. Each array element
runs `sweep.py --element I` with the same grid.

Presets: those of scripts/presets.py (`lina presets`), or all; a name
such as linear-relu is preset linear with --feature-map relu. With
--presets all, recall skips hybrid (as the course's nine do).
LINA=path/to/lina overrides build/release/lina.
"""
import argparse
import concurrent.futures
import itertools
import json
import os
import shlex
import subprocess
import sys
import time

import presets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SEED, DEFAULT_PAIRS, DEFAULT_KEYS = 1337, 32, 64  # lina's own defaults


def die(message):
    print(f"sweep: {message}", file=sys.stderr)
    sys.exit(2)


def int_list(text, name, low=1):
    try:
        values = [int(v) for v in str(text).split(",") if v != ""]
    except ValueError:
        die(f"--{name} must be comma-separated integers, got '{text}'")
    if not values or any(v < low for v in values):
        die(f"--{name} must be integers >= {low}, got '{text}'")
    return values


def parse(argv):
    p = argparse.ArgumentParser(prog="sweep.py", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--grid", help="json file with any of: presets, tasks, seeds, pairs, keys, steps, batch")
    p.add_argument("--presets")
    p.add_argument("--tasks")
    p.add_argument("--seeds")
    p.add_argument("--pairs")
    p.add_argument("--keys")
    p.add_argument("--steps")
    p.add_argument("--batch")
    p.add_argument("--eval-batches", help="batches of every evaluation (lm: also the extrapolation's; recall: also the fresh estimate's and the probe's)")
    p.add_argument("--checkpoint-every", type=int, default=0,
                   help="updates between checkpoints (lina's default: every evaluation); a resumed run keeps it")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--out", default="runs")
    p.add_argument("--recipe", default="",
                   help="lina train flags for every run of the grid, e.g. \"--dropout 0\" (an ablation; "
                        "the runs take the names lina gives them, such as lm_gdn_drop0)")
    p.add_argument("--jobs", default="1")
    p.add_argument("--list", action="store_true")
    p.add_argument("--slurm", action="store_true")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--element", type=int, help=argparse.SUPPRESS)  # one array element (SLURM)
    a = p.parse_args(argv)
    grid = {}
    if a.grid:
        try:
            grid = json.load(open(a.grid))
        except (OSError, ValueError) as e:
            die(f"--grid {a.grid}: {e}")
        unknown = set(grid) - {"presets", "tasks", "seeds", "pairs", "keys", "steps", "batch", "eval_batches"}
        if unknown:
            die(f"--grid {a.grid}: unknown keys {sorted(unknown)}")
    def pick(name, default):
        value = getattr(a, name)
        if value is None and name in grid:
            value = grid[name]
            if isinstance(value, list):
                value = ",".join(str(v) for v in value)
        return default if value is None else str(value)
    a.presets = pick("presets", ",".join(presets.COURSE))
    a.tasks = pick("tasks", "lm,recall")
    a.seeds = int_list(pick("seeds", str(DEFAULT_SEED)), "seeds", 0)
    a.pairs = int_list(pick("pairs", str(DEFAULT_PAIRS)), "pairs")
    a.keys = int_list(pick("keys", str(DEFAULT_KEYS)), "keys")
    a.steps = pick("steps", None)
    a.batch = pick("batch", None)
    a.eval_batches = pick("eval_batches", None)
    for name in ("steps", "batch", "eval_batches"):
        value = getattr(a, name)
        if value is not None:
            setattr(a, name, int_list(value, name.replace("_", "-"))[0])
    if a.checkpoint_every < 0:
        die(f"--checkpoint-every must be >= 1 (0: lina's default), got {a.checkpoint_every}")
    a.jobs = int_list(a.jobs, "jobs")[0]
    if a.jobs > 64:
        die(f"--jobs {a.jobs}: at most 64")
    if not a.out:
        die("--out must not be empty")
    all_presets = a.presets == "all"
    a.presets = list(presets.ALL) if all_presets else a.presets.split(",")
    for name in a.presets:
        if name.split("-")[0] not in presets.ALL:
            die(f"--presets: unknown preset '{name}' ({', '.join(presets.ALL)} or all)")
    a.tasks = a.tasks.split(",")
    for task in a.tasks:
        if task not in ("lm", "recall"):
            die(f"--tasks: unknown task '{task}' (lm, recall)")
    a.skip_recall_hybrid = all_presets
    try:
        a.recipe = shlex.split(a.recipe)
    except ValueError as e:
        die(f"--recipe: {e}")
    return a


def elements(a):
    """The grid, in a fixed order: one dict per run."""
    runs = []
    for task, name, seed in itertools.product(a.tasks, a.presets, a.seeds):
        if task == "recall" and name == "hybrid" and a.skip_recall_hybrid:
            continue
        sizes = itertools.product(a.pairs, a.keys) if task == "recall" else [(None, None)]
        for pairs, keys in sizes:
            if pairs is not None and pairs > keys:
                die(f"--pairs {pairs} is more than --keys {keys}")
            runs.append({"task": task, "name": name, "seed": seed, "pairs": pairs, "keys": keys})
    return runs


def run_base(a, run):
    """OUT/<device>/<name>, the run's files without their extension. With --recipe
    lina names the run itself (lina train ... --dry-run), its recipe's suffixes included."""
    if not a.recipe:
        return os.path.join(a.out, a.device, run_name(run))
    done = subprocess.run(train_command(a, run) + ["--dry-run"], capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip().endswith(".json"):
        die(f"--recipe: {(done.stderr.strip().splitlines() or ['lina train --dry-run failed'])[-1]}")
    return done.stdout.strip()[:-len(".json")]


def run_name(run):
    """lina's file name for the run (experiments/train_options.cpp, run_name) without --recipe."""
    name = f"{run['task']}_{run['name']}"
    if run["task"] == "recall" and run["pairs"] != DEFAULT_PAIRS:
        name += f"_p{run['pairs']}"
    if run["task"] == "recall" and run["keys"] != DEFAULT_KEYS:
        name += f"_k{run['keys']}"
    if run["seed"] != DEFAULT_SEED:
        name += f"_s{run['seed']}"
    return name


def lina():
    path = os.environ.get("LINA", os.path.join(ROOT, "build", "release", "lina"))
    if not os.access(path, os.X_OK):
        die(f"{path} not found: build it first (scripts/build.sh)")
    return path


def read_json(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return None


def train_command(a, run):
    preset, _, feature_map = run["name"].partition("-")
    args = [lina(), "train", "--preset", preset, "--task", run["task"], "--device", a.device,
            "--out", a.out, "--seed", str(run["seed"]), "--quiet"]
    if feature_map:
        args += ["--feature-map", feature_map]
    if run["task"] == "recall":
        args += ["--pairs", str(run["pairs"]), "--keys", str(run["keys"])]
    if a.steps:
        every = a.steps // (10 if run["task"] == "lm" else 20)
        args += ["--steps", str(a.steps), "--eval-every", str(max(every, 1))]
    if a.batch:
        args += ["--batch", str(a.batch)]
    if a.checkpoint_every:
        args += ["--checkpoint-every", str(a.checkpoint_every)]
    if a.eval_batches:  # every evaluation's batches: lm's extrapolation, recall's fresh estimate and probe too
        args += ["--eval-batches", str(a.eval_batches)]
        if run["task"] == "lm":
            args += ["--extrap-batches", str(a.eval_batches)]
        else:
            args += ["--fresh-batches", str(a.eval_batches), "--probe-batches", str(a.eval_batches)]
    return args + a.recipe


def run_one(a, run, threads):
    """Trains (or resumes, or skips) one element; returns its one-line summary."""
    base = run["base"]
    json_path, checkpoint = base + ".json", base + ".safetensors"
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    start = time.time()
    j = read_json(json_path)
    if j and j.get("finished") is True:
        what = "already finished"
    else:
        if os.path.exists(checkpoint):
            what = f"resumed from update {j.get('checkpoint_step', '?') if j else '?'}"
            command = [lina(), "train", "--resume", checkpoint, "--quiet"]
        else:
            what = "trained"
            command = train_command(a, run)
        done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
            return False, f"{os.path.basename(base)}: failed (exit {done.returncode}): {last}"
        j = read_json(json_path)
        if not j or j.get("finished") is not True:  # stopped by a signal: its checkpoint resumes it
            return False, f"{os.path.basename(base)}: interrupted at update {j.get('steps_done', '?') if j else '?'}"
    if run["task"] == "recall":
        predictions = base + ".predictions.json"
        if not os.path.exists(predictions) or os.path.getmtime(predictions) < os.path.getmtime(checkpoint):
            subprocess.run([lina(), "eval", "--task", "recall", "--checkpoint", checkpoint,
                            "--predictions", predictions], env=env, stdout=subprocess.DEVNULL, check=False)
    final = j.get("final", {})
    summary = f"{j.get('steps_done')} steps, val loss {final.get('val_loss', float('nan')):.4f}"
    if "val_accuracy" in final:
        summary += f", accuracy {final['val_accuracy']:.3f}"
    return True, f"{os.path.basename(base)}: {what}, {summary} ({time.time() - start:.0f} s) -> {json_path}"


def grid_arguments(a):
    """The command-line arguments that name this grid again (for the array elements)."""
    args = ["--presets", ",".join(a.presets), "--tasks", ",".join(a.tasks),
            "--seeds", ",".join(map(str, a.seeds)), "--pairs", ",".join(map(str, a.pairs)),
            "--keys", ",".join(map(str, a.keys)), "--device", a.device, "--out", os.path.abspath(a.out)]
    for name in ("steps", "batch", "eval_batches", "checkpoint_every"):
        if getattr(a, name):
            args += ["--" + name.replace("_", "-"), str(getattr(a, name))]
    if a.recipe:
        args += ["--recipe", shlex.join(a.recipe)]
    return args


def sbatch_script(a, count):
    cores = os.environ.get("LINA_SLURM_CPUS", "2")
    here = os.path.abspath(__file__)
    lina_path = os.path.abspath(lina())
    log = os.path.join(os.path.abspath(a.out), "slurm", "%A_%a.log")
    element = " ".join(shlex.quote(x) for x in [sys.executable, here, *grid_arguments(a)])
    return f"""#!/bin/bash
#SBATCH --job-name=lina-sweep
#SBATCH --array=0-{count - 1}
#SBATCH --cpus-per-task={cores}
#SBATCH --output={log}
#SBATCH --requeue
#SBATCH --signal=B:TERM@120
# One run of the grid per element. Preempted or past its time, the element
# gets SIGTERM, lina writes its checkpoint and stops, and the requeued
# element resumes it (a finished run is skipped).
export LINA={shlex.quote(lina_path)}
export OMP_NUM_THREADS=${{SLURM_CPUS_PER_TASK:-1}}
exec {element} --element "$SLURM_ARRAY_TASK_ID"
"""


def main(argv):
    a = parse(argv)
    runs = elements(a)
    for run in runs:
        run["base"] = run_base(a, run)
    if a.list:
        for i, run in enumerate(runs):
            print(i, os.path.basename(run["base"]))
        return 0
    if a.element is not None:
        if not 0 <= a.element < len(runs):
            die(f"--element {a.element}: the grid has {len(runs)} elements")
        ok, line = run_one(a, runs[a.element], int(os.environ.get("OMP_NUM_THREADS", "1")))
        print(line, flush=True)
        return 0 if ok else 1
    if a.slurm:
        script = sbatch_script(a, len(runs))
        if a.dry_run:
            print(script, end="")
            return 0
        os.makedirs(os.path.join(a.out, "slurm"), exist_ok=True)
        path = os.path.join(a.out, "sweep.sbatch")
        with open(path, "w") as f:
            f.write(script)
        done = subprocess.run(["sbatch", "--parsable", path], capture_output=True, text=True)
        if done.returncode != 0:
            die(f"sbatch failed: {done.stderr.strip() or done.stdout.strip()}")
        print(f"sweep: submitted job array {done.stdout.strip()} of {len(runs)} runs ({path})")
        return 0
    if a.dry_run:
        for run in runs:
            print(" ".join(shlex.quote(x) for x in train_command(a, run)))
        return 0
    # The cores this process may run on (taskset, cgroups), split between the jobs.
    threads = max(1, len(os.sched_getaffinity(0)) // a.jobs)
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        futures = [pool.submit(run_one, a, run, threads) for run in runs]
        for i, future in enumerate(futures):
            ok, line = future.result()
            failed += not ok
            print(f"[{i + 1}/{len(runs)}] {line}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
