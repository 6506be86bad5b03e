#!/usr/bin/env python3
"""scripts/device-course.sh, the course's runs on a lent GPU: it starts one
sweep per task in a session of its own that outlives the call, a second call
waits for the same sweeps instead of starting more, it lists every run when
they end, LINA_COURSE_PACK packs them at the end (unpacked by
scripts/device-unpack.sh), and bad arguments end with one line and exit 2. lina is a stub
here (it writes the run json a finished `lina train --device cuda` would),
so the test needs no GPU.

    tests/test_device_course.py --work DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COURSE = os.path.join(ROOT, "scripts", "device-course.sh")
failures = []

# `lina train ... --out DIR --device D`: after STUB_SLEEP seconds, DIR/D/<task>_<preset>.json
STUB = r'''#!/usr/bin/env python3
import json, os, sys, time
args = sys.argv[1:]
if args[0] == "eval":
    open(args[args.index("--predictions") + 1], "w").write("{}")
    sys.exit(0)
opt = {k: v for k, v in zip(args[1:], args[2:]) if k.startswith("--")}
time.sleep(float(os.environ.get("STUB_SLEEP", "0")))
folder = os.path.join(opt["--out"], opt["--device"])
os.makedirs(folder, exist_ok=True)
name = opt["--task"] + "_" + opt["--preset"]
final = {"val_loss": 1.5} if opt["--task"] == "lm" else {"val_accuracy": 0.9}
json.dump({"finished": True, "final": final, "steps_done": 7, "train_time_s": 1.0, "ms_per_step": 2.0,
           "cuda_step": {"kernels": 300, "graph_launches": 1, "allocations": 0, "ms": 1.5}, "cuda_runtime": "cuda"},
          open(os.path.join(folder, name + ".json"), "w"))
open(os.path.join(folder, name + ".safetensors"), "w").write("checkpoint")
'''


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def course(*args, sleep="0", **extra_env):
    env = dict(os.environ, STUB_SLEEP=sleep, **extra_env)
    return subprocess.run(["bash", COURSE, *args], capture_output=True, text=True, env=env)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", required=True)
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    lina = os.path.join(a.work, "lina")
    with open(lina, "w") as f:
        f.write(STUB)
    os.chmod(lina, 0o755)
    runs = os.path.join(a.work, "runs")

    # first call: both sweeps start, and are still going when it returns
    r = course(lina, runs, "0", "nine", sleep="3")
    check(r.returncode == 0, f"first call exits 0 ({r.stderr.strip()})")
    check(r.stdout.count("device-course: started") == 2, "first call starts two sweeps (lm, recall)")
    check("still running after 0 s" in r.stdout, "first call says the sweeps go on in the background")

    # second call at once: the same sweeps are still running, so none is started; it waits for them
    r = course(lina, runs, "120", "nine")
    check("device-course: started" not in r.stdout, "second call starts no sweep while they run")
    check(r.stdout.count("is still running") == 2, "second call finds both sweeps running")
    lines = [line for line in r.stdout.splitlines() if " finished " in line]
    check(len(lines) == 9, f"the nine are listed finished, got {len(lines)}")
    check(any(line.startswith("recall_gdn ") and "accuracy 0.900" in line for line in lines),
          "recall_gdn's line has its accuracy")
    check(any(line.startswith("lm_hybrid ") and "300 kernels" in line for line in lines),
          "lm_hybrid's line has its kernels per update")
    check(not os.path.exists(os.path.join(runs, "cuda", "recall_hybrid.json")), "recall has no hybrid run")
    check(os.path.exists(os.path.join(runs, "cuda", "recall_gdn.predictions.json")),
          "each recall run is scored (predictions beside it)")

    # third call: nothing left, the sweeps skip every run
    before = os.path.getmtime(os.path.join(runs, "cuda", "lm_attn.json"))
    time.sleep(0.05)
    r = course(lina, runs, "60", "nine")
    check(r.returncode == 0, "third call exits 0")
    check(os.path.getmtime(os.path.join(runs, "cuda", "lm_attn.json")) == before,
          "third call trains nothing again")
    check("already finished" in open(os.path.join(runs, "nine-lm.log")).read(), "the lm sweep skipped its runs")

    # LINA_COURSE_PACK: the runs packed at the end, and unpacked elsewhere (tests/test_device_pack.py: resuming)
    packed = os.path.join(a.work, "out")
    r = course(lina, runs, "60", "nine", LINA_COURSE_PACK=packed)
    check(r.returncode == 0 and os.path.isfile(os.path.join(packed, "runs.tar.00")),
          f"LINA_COURSE_PACK packs the runs into runs.tar.00 ({r.stderr.strip()})")
    fresh = os.path.join(a.work, "unpacked")
    u = subprocess.run(["bash", os.path.join(ROOT, "scripts", "device-unpack.sh"), packed, fresh],
                       capture_output=True, text=True)
    jsons = [n for n in os.listdir(os.path.join(fresh, "cuda")) if n.endswith(".json") and ".predictions" not in n] \
        if u.returncode == 0 else []
    check(len(jsons) == 9 and os.path.isfile(os.path.join(fresh, "nine-lm.log")),
          f"device-unpack.sh restores the nine jsons and the sweeps' logs ({u.stderr.strip()})")

    # the group recall alone: one sweep, the four recall runs
    alone = os.path.join(a.work, "recall-alone")
    r = course(lina, alone, "60", "recall")
    check(r.returncode == 0 and r.stdout.count("device-course: started") == 1 and "nine-recall" in r.stdout,
          "the group recall starts the recall sweep alone")
    check(sorted(n for n in os.listdir(os.path.join(alone, "cuda")) if n.endswith(".json") and ".pred" not in n)
          == ["recall_attn.json", "recall_delta.json", "recall_gdn.json", "recall_linear.json"],
          "the group recall trains the four recall runs")

    # bad arguments: one line, exit 2
    for args, what in (([lina, runs, "60", "ten"], "unknown group"),
                       ([lina, runs, "soon"], "SECONDS"),
                       ([os.path.join(a.work, "nope"), runs, "1"], "no lina")):
        r = course(*args)
        check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1,
              f"bad argument ({what}): exit 2 with one line, got {r.returncode}: {r.stderr.strip()}")

    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("all device-course checks passed")


if __name__ == "__main__":
    main()
