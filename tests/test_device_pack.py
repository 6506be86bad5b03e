#!/usr/bin/env python3
"""scripts/device-pack.py and scripts/device-unpack.sh, the way runs come back
from a lent GPU call: a run stopped half way (`lina train --stop-at`) and a
finished one are packed into split parts within a size limit (the unfinished
run's checkpoint in, the finished one's left out when there is no room for
both; lock and pid files never), unpacked into a fresh folder, and the
unfinished run resumed there to its end with `lina train --resume`: its loss
curve must be the bits of the same run trained without a stop. Unpacking the
same parts again over the resumed run keeps the resumed run. On the CPU
device: the mechanism is the device's, not the GPU's.

    tests/test_device_pack.py --lina LINA --work DIR
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACK = os.path.join(ROOT, "scripts", "device-pack.py")
UNPACK = os.path.join(ROOT, "scripts", "device-unpack.sh")
failures = []
SMALL = ["--task", "recall", "--device", "cpu", "--steps", "20", "--batch", "4", "--pairs", "4", "--keys", "8",
         "--values", "8", "--eval-every", "10", "--eval-batches", "1", "--fresh-batches", "1",
         "--probe-batches", "1", "--quiet"]


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what)


def run(*cmd):
    r = subprocess.run(list(cmd), capture_output=True, text=True)
    if r.returncode != 0:
        print(f"$ {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r


def losses(path):
    return [e["loss"] for e in json.load(open(path))["loss_curve"]]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lina", required=True)
    p.add_argument("--work", required=True)
    a = p.parse_args()
    if not os.access(a.lina, os.X_OK):
        print(f"SKIPPED: no lina binary at {a.lina}")
        return
    shutil.rmtree(a.work, ignore_errors=True)
    runs, out, fresh, whole = (os.path.join(a.work, n) for n in ("runs", "out", "fresh", "whole"))

    # a run stopped at update 10 of 20, a finished one, a sweep's log, a pid and a lock file
    check(run(a.lina, "train", "--preset", "gdn", "--out", runs, "--stop-at", "10", *SMALL).returncode == 0,
          "gdn stops at update 10")
    check(run(a.lina, "train", "--preset", "linear", "--out", runs, *SMALL).returncode == 0, "linear trains to the end")
    check(run(a.lina, "train", "--preset", "gdn", "--out", whole, *SMALL).returncode == 0,
          "gdn trains 20 updates without a stop (the reference)")
    stopped = json.load(open(os.path.join(runs, "cpu", "recall_gdn_p4_k8_v8.json")))
    check(not stopped.get("finished") and stopped.get("steps_done") == 10, "the stopped run's json: unfinished at 10")
    for name, text in (("nine-recall.log", "a sweep's log\n"), ("nine-recall.pid", "123\n"),
                       ("cpu/recall_gdn_p4_k8_v8.json.lock", "")):
        open(os.path.join(runs, name), "w").write(text)

    # pack into parts of 2 MiB, with room for one checkpoint but not for both
    ckpt = os.path.getsize(os.path.join(runs, "cpu", "recall_gdn_p4_k8_v8.safetensors"))
    other = os.path.getsize(os.path.join(runs, "cpu", "recall_linear_p4_k8_v8.safetensors"))
    part_mb = 2
    parts = (ckpt + 512 * 1024) // (part_mb << 20) + 1
    check(parts <= 8 and (parts * part_mb << 20) < ckpt + other,
          f"the limit ({parts} parts of {part_mb} MiB) holds one checkpoint but not two ({ckpt}, {other} bytes)")
    r = run(sys.executable, PACK, "pack", out, runs, "--parts", str(parts), "--part-mb", str(part_mb))
    check(r.returncode == 0, "pack exits 0")
    made = sorted(os.listdir(out))
    check(len(made) > 1 and all(n.startswith("runs.tar.") for n in made), f"pack splits the archive: {made}")
    check(len(made) <= parts and all(os.path.getsize(os.path.join(out, n)) <= part_mb << 20 for n in made),
          f"every part within {part_mb} MiB, at most {parts} parts")
    check("in cpu/recall_gdn_p4_k8_v8.safetensors" in r.stdout, "the unfinished run's checkpoint is packed")
    check("left out (no room) cpu/recall_linear_p4_k8_v8.safetensors" in r.stdout,
          "the finished run's checkpoint is left out for lack of room")
    check("in cpu/recall_linear_p4_k8_v8.json" in r.stdout and "in nine-recall.log" in r.stdout,
          "the finished run's json and the sweep's log are packed")
    check(r.stdout.index("in cpu/recall_linear_p4_k8_v8.json") < r.stdout.index("in cpu/recall_gdn_p4_k8_v8.json"),
          "the finished run's json comes before the unfinished run's")
    check(".pid" not in r.stdout and ".lock" not in r.stdout, "no pid or lock file is packed")

    # unpack into a fresh folder (the parts as the run tool's files_at holds them: one folder down)
    files_at = os.path.join(a.work, "files_at")
    shutil.copytree(out, os.path.join(files_at, "out"))
    r = run("bash", UNPACK, files_at, fresh)
    check(r.returncode == 0, "unpack exits 0")
    for name in ("cpu/recall_gdn_p4_k8_v8.json", "cpu/recall_gdn_p4_k8_v8.safetensors", "cpu/recall_linear_p4_k8_v8.json", "nine-recall.log"):
        check(os.path.isfile(os.path.join(fresh, name)), f"unpacked {name}")
    check(not glob.glob(os.path.join(fresh, "**", "*.pid"), recursive=True), "no pid file unpacked")

    # resume the unfinished run from the unpacked checkpoint alone
    shutil.rmtree(runs)
    r = run(a.lina, "train", "--resume", os.path.join(fresh, "cpu", "recall_gdn_p4_k8_v8.safetensors"), "--quiet")
    check(r.returncode == 0, "lina train --resume from the unpacked checkpoint exits 0")
    resumed = json.load(open(os.path.join(fresh, "cpu", "recall_gdn_p4_k8_v8.json")))
    check(resumed.get("finished") and resumed.get("steps_done") == 20, "the resumed run finishes its 20 updates")
    check(losses(os.path.join(fresh, "cpu", "recall_gdn_p4_k8_v8.json")) == losses(os.path.join(whole, "cpu", "recall_gdn_p4_k8_v8.json")),
          "the resumed run's loss curve is the bits of the run trained without a stop")

    # the same parts again: the resumed run is further on and is kept
    r = run("bash", UNPACK, files_at, fresh)
    check(r.returncode == 0 and "kept cpu/recall_gdn_p4_k8_v8.json" in r.stdout, "unpacking again keeps the run that is further on")
    check(json.load(open(os.path.join(fresh, "cpu", "recall_gdn_p4_k8_v8.json"))).get("steps_done") == 20,
          "the resumed json is still at update 20")

    # --as: a device folder's runs under another device's folder (cpu/ -> cuda/ here)
    moved = os.path.join(a.work, "moved")
    r = run("bash", UNPACK, files_at, moved, "--as", "cuda")
    check(r.returncode == 0 and os.path.isfile(os.path.join(moved, "cuda", "recall_gdn_p4_k8_v8.safetensors"))
          and not os.path.exists(os.path.join(moved, "cpu")), "unpack --as cuda puts cpu/'s runs under cuda/")

    # nothing to unpack, nothing to pack: exit 1
    check(run("bash", UNPACK, a.work + "/nowhere", fresh).returncode == 1, "unpack without parts exits 1")
    check(run(sys.executable, PACK, "pack", out, a.work + "/nowhere").returncode == 1, "pack without runs exits 1")

    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("all device-pack checks passed")


if __name__ == "__main__":
    main()
