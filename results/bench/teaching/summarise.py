#!/usr/bin/env python3
"""The before/after tables of results/bench/teaching/ from run.sh's jsons:
one table per tag (the rounds of `run.sh ... ROUNDS TAG`)."""
import glob
import json
import os
import re

here = os.path.dirname(os.path.abspath(__file__))
runs = {}  # tag -> which -> [json]
for path in sorted(glob.glob(os.path.join(here, "*-*.json"))):
    m = re.match(r"(before|after)-([a-z]*)(\d+)\.json$", os.path.basename(path))
    if m:
        runs.setdefault(m.group(2), {}).setdefault(m.group(1), []).append(json.load(open(path)))
for tag, by in sorted(runs.items()):
    print(f"\n### {tag or 'main'} rounds ({len(by['before'])} of each, interleaved)\n")
    print("| preset | shape | before ms/step | after ms/step | after / before (best of each) | allocs/step before, after |")
    print("|---|---|---|---|---|---|")
    for preset, shape in [(r["preset"], r["shape"]) for r in by["before"][0]["train"]]:
        def pick(which):
            return [r for j in by[which] for r in j["train"] if r["preset"] == preset and r["shape"] == shape]
        b, a = pick("before"), pick("after")
        bm, am = [r["ms_per_step"] for r in b], [r["ms_per_step"] for r in a]
        print(f"| {preset} | {shape} | {', '.join('%.0f' % x for x in bm)} | {', '.join('%.0f' % x for x in am)} "
              f"| {min(am) / min(bm):.3f} | {b[0]['allocs_per_step']:.0f}, {a[0]['allocs_per_step']:.0f} |")
    print()
    for which in ("before", "after"):
        print(f"- {which}: load average before/after each run: " +
              "; ".join(f"{j['load_average']['before']:.2f}/{j['load_average']['after']:.2f}" for j in by[which]))
