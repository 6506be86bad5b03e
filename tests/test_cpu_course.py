#!/usr/bin/env python3
"""scripts/cpu-course.sh, the course's queue: its state in the run store
outside the work tree ($LINA_RUNS), --status, the queue's order, a tiny
queue started in the background, paused, stopped with SIGTERM, resumed
from its checkpoint to the end, and --collect (jsons, never checkpoints).

    tests/test_cpu_course.py --lina build/release/lina --work DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COURSE = os.path.join(ROOT, "scripts", "cpu-course.sh")
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def course(args, env):
    return subprocess.run([COURSE, *args], capture_output=True, text=True, env=env, timeout=300)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def wait_for(what, timeout=240):
    """Polls what() until it is true; False after timeout seconds."""
    end = time.time() + timeout
    while time.time() < end:
        if what():
            return True
        time.sleep(0.5)
    return False


def queue_running(store):
    try:
        pid = int(open(os.path.join(store, "queue.pid")).read())
        os.kill(pid, 0)
        return True
    except (OSError, ValueError):
        return False


def default_queue(env, store):
    """The real table: its order, lines for runs not begun and for planted runs."""
    r = course(["--status"], env)
    lines = r.stdout.splitlines()
    check(r.returncode == 0 and lines[0].startswith("queue: not running; store " + store),
          "--status with an empty store: the queue is not running, the store is named")
    names = [line.split()[1] for line in lines[1:]]
    check(names[:4] == ["cpu/recall_attn", "cpu/recall_linear", "cpu/recall_gdn", "cpu/recall_delta"],
          f"the queue starts with the course's four recall runs: {names[:4]}")
    check(names[4:7] == ["cpu/recall_retnet", "cpu/recall_mamba2", "cpu/recall_gla"], "then the survey's recall")
    check(names.index("cpu/recall_attn_v16") < names.index("cpu/lm_gdn_s1338") < names.index("cpu/lm_retnet"),
          "ablation recall before the lm seeds, before the survey's lm")
    check("cpu/lm_attn_s1338" not in names, "attention's lm seeds (in results/runs/cpu) are not queued again")
    check(all(line.split()[-1] == "queued" for line in lines[1:]), "every run not begun says queued")

    os.makedirs(os.path.join(store, "cpu"))
    with open(os.path.join(store, "cpu", "recall_attn.json"), "w") as f:
        json.dump({"steps_done": 1200, "ms_per_step": 1000.0, "recipe": {"steps": 6000}, "finished": False}, f)
    with open(os.path.join(store, "cpu", "recall_linear.json"), "w") as f:
        json.dump({"steps_done": 6000, "ms_per_step": 900.0, "recipe": {"steps": 6000}, "finished": True}, f)
    lines = course(["--status", "recall"], env).stdout.splitlines()
    attn = next(line for line in lines if " cpu/recall_attn " in line)
    check("1200/6000" in attn and "1000 ms/upd" in attn and "1.33 h" in attn and "recall_attn.safetensors" in attn,
          "a run under way: updates done of total, ms per update, hours left, its checkpoint: " + attn)
    linear = next(line for line in lines if " cpu/recall_linear " in line)
    check("6000/6000" in linear and "finished" in linear, "a finished run says so: " + linear)
    shutil.rmtree(os.path.join(store, "cpu"))


def tiny_queue(env, store, work):
    """A queue of two tiny recall runs: background start, pause, SIGTERM, resume, collect."""
    grid = os.path.join(work, "grid.txt")
    with open(grid, "w") as f:
        f.write("recall . --presets gdn,linear --tasks recall --pairs 4 --keys 8 --steps 400 --batch 4\n")
    env = dict(env, LINA_COURSE_GRID=grid)
    r = course([], env)
    check(r.returncode == 0 and "runs in the background" in r.stdout, "the queue starts in the background")
    check(os.access(os.path.join(store, "lina"), os.X_OK), "the store keeps its own copy of lina")
    r = course([], env)
    check(r.returncode == 0 and "already running" in r.stdout, "a second start leaves the running queue alone")
    gdn = os.path.join(store, "cpu", "recall_gdn_p4_k8")
    check(wait_for(lambda: (read_json(gdn + ".json") or {}).get("steps_done", 0) >= 50),
          "a run checkpoints within its first 50 updates (its json says so)")
    first_line = lambda: course(["--status"], env).stdout.splitlines()[0]
    r = course(["--pause"], env)  # SIGSTOP is delivered soon after kill returns, not at once
    check(r.returncode == 0 and wait_for(lambda: "paused" in first_line(), 30), "--pause: the queue is paused")
    course(["--continue"], env)
    check(wait_for(lambda: first_line().startswith("queue: running"), 30), "--continue: running again")
    r = course(["--stop"], env)
    check(r.returncode == 0 and wait_for(lambda: not queue_running(store), 60), "--stop: the queue ends")
    j = read_json(gdn + ".json") or {}
    check(j.get("finished") is not True and os.path.exists(gdn + ".safetensors"),
          f"stopped half way: unfinished, its checkpoint kept (update {j.get('steps_done')})")
    stopped_at = j.get("steps_done", 0)

    course([], env)
    check(wait_for(lambda: not queue_running(store), 600), "started again, the queue finishes")
    for name in ("recall_gdn_p4_k8", "recall_linear_p4_k8"):
        j = read_json(os.path.join(store, "cpu", name + ".json")) or {}
        check(j.get("finished") is True and j.get("steps_done") == 400, f"{name} finished all 400 updates")
    j = read_json(gdn + ".json") or {}
    check(len(j.get("loss_curve", [])) == 400 and stopped_at > 0,
          f"gdn resumed from update {stopped_at}: one loss per update, 400 in all")
    log = open(os.path.join(store, "queue.log")).read()
    check("resumed from update" in log, "the queue's log says a run was resumed")

    results = os.path.join(work, "results")
    r = course(["--collect", results], env)
    files = sorted(os.listdir(results)) if os.path.isdir(results) else []
    check(r.returncode == 0 and "recall_gdn_p4_k8.json" in files and "recall_gdn_p4_k8.predictions.json" in files
          and "report.md" in files, f"--collect: the jsons, predictions and report ({r.stderr.strip()[-200:]})")
    check(not any(f.endswith(".safetensors") for f in files), "--collect copies no checkpoint")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lina", required=True)
    p.add_argument("--work", required=True)
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    store = os.path.join(a.work, "store")
    env = dict(os.environ, LINA=os.path.abspath(a.lina), LINA_RUNS=store)
    default_queue(env, store)
    tiny_queue(env, store, a.work)
    if queue_running(store):
        course(["--stop"], env)
    r = course(["--bogus"], env)
    check(r.returncode == 2 and r.stderr.count("\n") == 1 and "unknown option" in r.stderr, "a bad option: one line, exit 2")
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
