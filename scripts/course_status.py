#!/usr/bin/env python3
"""Where the course's runs stand, for scripts/cpu-course.sh.

    course_status.py --group NAME -- SWEEP-ARGUMENTS
        one line per run of that sweep: updates done of total, ms per update
        since the run last started, hours left at that rate, where its state is
    course_status.py --collect STORE/cpu RESULTS
        copies every finished run's json and predictions (never a checkpoint)
        from the run store to RESULTS
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweep  # noqa: E402  (scripts/sweep.py: the grid and the runs' file names)

TOTAL_UPDATES = {"lm": 5000, "recall": 6000}  # spec 2's recipe (docs/spec.md §2)


def status_line(group, a, run):
    base = run["base"]
    name = os.path.relpath(base, os.environ.get("LINA_RUNS", a.out))
    j = sweep.read_json(base + ".json")
    total = a.steps or TOTAL_UPDATES[run["task"]]
    if j is None:
        return f"{group:16} {name:40} {0:5}/{total:<5}        -             -  queued"
    total = j.get("recipe", {}).get("steps", total)
    done = j.get("steps_done", 0)
    ms = j.get("ms_per_step") or 0.0
    if j.get("finished") is True:
        return f"{group:16} {name:40} {done:5}/{total:<5} {ms:7.0f} ms/upd      0.00 h  finished: {base}.json"
    left = f"{(total - done) * ms / 3.6e6:6.2f} h" if ms > 0 else "     - h"
    return f"{group:16} {name:40} {done:5}/{total:<5} {ms:7.0f} ms/upd  {left}  checkpoint: {base}.safetensors"


def status(group, argv):
    a = sweep.parse(argv)
    for run in sweep.elements(a):
        run["base"] = sweep.run_base(a, run)
        print(status_line(group, a, run))


def collect(store, results):
    if not os.path.isdir(store):
        sys.exit(f"course_status.py: no run store at {store}")
    os.makedirs(results, exist_ok=True)
    copied = 0
    for entry in sorted(os.listdir(store)):
        if not entry.endswith(".json") or entry.endswith(".predictions.json"):
            continue
        j = sweep.read_json(os.path.join(store, entry))
        if not j or j.get("finished") is not True:
            continue
        for name in (entry, entry[:-len(".json")] + ".predictions.json"):
            source = os.path.join(store, name)
            if os.path.exists(source):
                shutil.copyfile(source, os.path.join(results, name))
        copied += 1
    print(f"course_status.py: {copied} finished runs copied from {store} to {results}")


def main(argv):
    if len(argv) >= 3 and argv[0] == "--collect":
        collect(argv[1], argv[2])
    elif len(argv) >= 3 and argv[0] == "--group" and argv[2] == "--":
        status(argv[1], argv[3:])
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
