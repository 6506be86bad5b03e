#!/usr/bin/env python3
"""ctest report_lib: scripts/report.py on synthetic spec-2 run jsons (no lina
binary, no browser): the noise from the seed runs, the course table's
agrees / disagrees, each recall run's drop step, the capacity probe beside
the course's, the section on what changed from spec 1 (ablation runs by
recipe flag and by length), main runs only in the comparisons, "no seed
runs yet" and "not in yet" where the runs are missing, the main size of a
folder of small recall runs, and what recall answers look like. The runs
are copies of one real lm json and one real recall json of lina (spec 2,
tests/report_fixtures/) with their numbers changed; every expected number
is computed here, not by the report's code. Prints "SKIPPED: ..." (ctest:
skipped) without matplotlib.

    tests/test_report_lib.py [--work DIR]
"""
import argparse
import copy
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(ROOT, "scripts", "report.py")
LM_TEMPLATE = os.path.join(ROOT, "tests", "report_fixtures", "lm_gdn.json")
RECALL_TEMPLATE = os.path.join(ROOT, "tests", "report_fixtures", "recall_gdn.json")
FAILURES = []

# lm: final val loss per preset and seed (attn and gdn at three seeds, the others at 1337); attn's seed 7
# sorts before 1337: the main run is the seed-1337 one, not the first
LM_FINAL = {"attn": {7: 1.5440, 1337: 1.5390, 1338: 1.5500},
            "gdn": {1337: 1.5680, 1338: 1.5600, 1339: 1.5720},
            "linear": {1337: 1.5553}, "delta": {1337: 1.5874}, "hybrid": {1337: 1.5431}}
ATTN_BEST = (1.5100, 4000)      # lm_attn (seed 1337) had its lowest val loss at step 4000
# lm: training loss over the last 500 updates (the main runs; attn, the one that overfits late, fits closest)
TRAIN_END = {"attn": 1.1500, "gdn": 1.1900, "linear": 1.2800, "delta": 1.2000, "hybrid": 1.1700}
HYBRID_UNFINISHED = 1.9999      # lm_hybrid_s1338: stopped at step 2500, a distinctive number
HYBRID_DROP0 = 1.5312           # lm_hybrid_drop0: the ablation without dropout
GDN_ALPHA = [0.58, 0.60, 0.62, 0.64]  # first layer of lm_gdn; seed s adds 0.01 · (s − 1337)
# recall (the course's recipe: batch 128, 6000 steps, 32 pairs of 64 keys): final held-out accuracy per
# preset and pairs trained at; 32 is the main run
RECALL_ACC = {"gdn": {8: 1.0, 16: 0.98, 32: 0.95, 48: 0.40},
              "linear": {8: 0.93, 16: 0.55, 32: 0.20},
              "attn": {32: 0.99}, "delta": {32: 0.97}}
RECALL_DROP = {"gdn": 1500, "attn": 3000, "delta": 1000, "linear": None}
PROBE = {"attn": [1.0, 0.998, 0.995, 0.99], "gdn": [1.0, 0.99, 0.97, 0.95], "delta": [1.0, 0.99, 0.98, 0.97],
         "linear": [0.61, 0.35, 0.25, 0.20]}
GDN_S1338_ACC = 0.111           # recall_gdn_s1338: another seed at 32 pairs, must stay out of the findings
GDN_P48_S7_ACC = 0.97           # recall_gdn_p48_s7: 48 pairs at another seed (and longer): not in the capacity
ATTN_V16_ACC = 0.243            # recall_attn_v16: spec 1's 16 values, no drop
ATTN_B64_ACC = 0.251            # b64/cpu/recall_attn: spec 1's batch 64 and 2000 updates, no drop
HELD_OUT = 8 * 128 * 32         # scored positions of a recall evaluation (8 batches of 128, 32 pairs)


def check(cond, what):
    print(("ok: " if cond else "FAILED: ") + what)
    if not cond:
        FAILURES.append(what)


def has_matplotlib():
    for py in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(py) and subprocess.run([py, "-c", "import matplotlib"], capture_output=True).returncode == 0:
            return True
    return False


LAYERS = {p: [p] * 4 for p in ("attn", "linear", "delta", "gdn")}
LAYERS["hybrid"] = ["gdn", "gdn", "gdn", "attn"]


def memory_fields(preset):
    """kv_per_token, state_const, conv_cache as spec §1.3 gives them (4 layers, 2 KV heads of 32, 4 heads of 32)."""
    attn = LAYERS[preset].count("attn")
    rec = 4 - attn
    return {"kv_per_token": 2 * 2 * 32 * attn, "state_const": 4 * 32 * 32 * rec, "conv_cache": 3 * 3 * 128 * rec}


def set_recipe(r, **flags):
    """Sets recipe flags in the run's "recipe" and config.train as lina writes them."""
    t = r["config"]["train"]
    for k, v in flags.items():
        r["recipe"][k] = v
        if k == "decay":
            t["decay_matrices"] = v == "matrices"
        elif k == "beta2":
            t["beta2"], t["betas"] = v, [0.9, v]
        else:
            t[k] = v


def base_run(template, task, preset, seed, steps, batch):
    r = copy.deepcopy(template)
    r.update(preset=preset, task=task)
    r["config"]["train"].update(seed=seed, preset=preset, eval_every=500, eval_batches=8 if task == "recall" else 200)
    r["config"]["model"].update(preset=preset, layers=LAYERS[preset])
    set_recipe(r, steps=steps, batch=batch)
    r.update(memory_fields(preset))
    return r


def lm_run(template, preset, seed, final, steps=5000, done=None, best=None):
    """An lm run json: evaluations every 500 steps falling to `final` (or with `best` = (loss, step))."""
    r = base_run(template, "lm", preset, seed, steps, 64)
    done = steps if done is None else done
    evals = [{"step": s, "train_loss": round(final - 0.2 + 0.3 * (1 - s / done), 6),
              "val_loss": round(final + 0.3 * (1 - s / done) + 0.0001, 6), "rss_mb": 400.0} for s in range(0, done, 500)]
    evals.append({"step": done, "train_loss": final - 0.2, "val_loss": final, "rss_mb": 400.0})
    if best:
        for e in evals:
            if e["step"] == best[1]:
                e["val_loss"] = best[0]
    r.update(steps_done=done, finished=done == steps, eval=evals,
             final={"step": done, "train_loss": final - 0.2, "val_loss": final, "last_update_loss": final - 0.1},
             extrapolation=[{"context": c, "batch": max(4, 64 * 64 // c), "val_loss": final + 0.004 + 0.01 * i}
                            for i, c in enumerate((64, 128, 256, 512))],
             loss_curve=[{"step": s, "loss": TRAIN_END[preset] if s > done - 500 else 2.0, "lr": 0.001, "grad_norm": 0.5}
                         for s in range(50, done + 1, 50)])
    if preset in ("gdn", "hybrid"):
        r["alpha"] = [{"layer": 0, "mean_alpha": [a + 0.01 * (seed - 1337) for a in GDN_ALPHA]}]
    else:
        r.pop("alpha", None)
    return r


def recall_run(template, preset, pairs, acc, drop, seed=1337, steps=6000, batch=128):
    """A finished recall run: held-out accuracy 0.03 until `drop` (None: never), then `acc`."""
    r = base_run(template, "recall", preset, seed, steps, batch)
    r["config"]["train"].update(pairs=pairs, keys=64)
    r["recipe"].update(pairs=pairs, keys=64)
    up = lambda s: drop is not None and s >= drop
    evals = [{"step": s, "val_accuracy": acc if up(s) else min(acc, 0.03), "val_loss": 0.1 if up(s) else 3.3,
              "fresh_accuracy": acc if up(s) else min(acc, 0.03), "fresh_loss": 0.1 if up(s) else 3.3, "rss_mb": 200.0}
             for s in range(0, steps + 1, 500)]
    evals[-1]["val_accuracy"] = acc
    r.update(steps_done=steps, finished=True, eval=evals,
             final={"step": steps, "val_accuracy": acc, "val_loss": evals[-1]["val_loss"], "fresh_accuracy": acc,
                    "fresh_loss": evals[-1]["fresh_loss"], "last_update_loss": evals[-1]["val_loss"]},
             loss_curve=[{"step": s, "loss": 3.3, "lr": 0.001, "grad_norm": 0.5} for s in range(100, steps + 1, 100)])
    r["capacity"] = ([{"pairs": n, "accuracy": a, "loss": 0.05} for n, a in zip((8, 16, 24, 32), PROBE[preset])]
                     if pairs == 32 and preset in PROBE else [])
    r.pop("alpha", None)
    return r


def run_name(task, preset, seed=1337, pairs=32, suffix=""):
    """lina's file name (experiments/train_options.cpp run_name)."""
    return f"{task}_{preset}" + (f"_p{pairs}" if pairs != 32 else "") + (f"_s{seed}" if seed != 1337 else "") + suffix


def write_set(folder, short_linear=False, ablations=True):
    """The synthetic run folder; short_linear: lm_linear is a 2500-step schedule instead of 5000."""
    lm_t, rc_t = json.load(open(LM_TEMPLATE)), json.load(open(RECALL_TEMPLATE))
    runs = {}
    for preset, seeds in LM_FINAL.items():
        for seed, final in seeds.items():
            best = ATTN_BEST if (preset, seed) == ("attn", 1337) else None
            steps = 2500 if short_linear and preset == "linear" else 5000
            runs[run_name("lm", preset, seed)] = lm_run(lm_t, preset, seed, final, steps=steps, best=best)
    runs[run_name("lm", "hybrid", 1338)] = lm_run(lm_t, "hybrid", 1338, HYBRID_UNFINISHED, done=2500)
    for preset, sizes in RECALL_ACC.items():
        for pairs, acc in sizes.items():
            drop = RECALL_DROP[preset] if acc >= 0.5 else None
            runs[run_name("recall", preset, pairs=pairs)] = recall_run(rc_t, preset, pairs, acc, drop)
    runs[run_name("recall", "gdn", 1338)] = recall_run(rc_t, "gdn", 32, GDN_S1338_ACC, None, seed=1338)
    runs[run_name("recall", "gdn", 7, 48)] = recall_run(rc_t, "gdn", 48, GDN_P48_S7_ACC, 900, seed=7, steps=7000)
    if ablations:
        r = lm_run(lm_t, "hybrid", 1337, HYBRID_DROP0)
        set_recipe(r, dropout=0.0)
        runs[run_name("lm", "hybrid", suffix="_drop0")] = r
        r = recall_run(rc_t, "attn", 32, ATTN_V16_ACC, None)
        set_recipe(r, values=16)
        runs[run_name("recall", "attn", suffix="_v16")] = r
        runs[os.path.join("b64", "cpu", "recall_attn")] = recall_run(rc_t, "attn", 32, ATTN_B64_ACC, None,
                                                                   steps=2000, batch=64)
    for name, r in runs.items():
        path = os.path.join(folder, name + ".json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(r, f)
    return runs


def report(runs_dir, out):
    p = subprocess.run([sys.executable, REPORT, runs_dir, "--out", out], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        sys.exit(f"FAILED: report.py exited {p.returncode}\n{p.stdout}{p.stderr}")
    return open(os.path.join(out, "report.md")).read()


def section(md, title):
    """The text of the markdown section that starts with `title` up to the next heading."""
    start = md.index(title)
    rest = md[start + len(title):]
    ends = [i for i in (rest.find("\n## "), rest.find("\n### ")) if i >= 0]
    return rest[:min(ends)] if ends else rest


def row(md, what):
    """The table row that starts with `what`."""
    return next((l for l in md.splitlines() if l.startswith(f"| {what} |")), "")


def sigma():
    """The pooled seed sd of the final lm val loss (attn and gdn, three seeds each)."""
    sds = {p: statistics.stdev(LM_FINAL[p].values()) for p in ("attn", "gdn")}
    return math.sqrt((2 * sds["attn"] ** 2 + 2 * sds["gdn"] ** 2) / 4), sds


def check_noise(md):
    noise = section(md, "## Noise")
    s, sds = sigma()
    for p in ("attn", "gdn"):
        finals = list(LM_FINAL[p].values())
        bests = [ATTN_BEST[0] if (p, sd) == ("attn", 1337) else v for sd, v in LM_FINAL[p].items()]
        m, sd = statistics.mean(finals), statistics.stdev(finals)
        bm, bsd = statistics.mean(bests), statistics.stdev(bests)
        seeds = ", ".join(map(str, sorted(LM_FINAL[p])))
        check(f"| {p} | {seeds} (3) | {m:.4f} ± {sd:.4f} | {bm:.4f} ± {bsd:.4f} | 0.0040 | 0.0069 |" in noise,
              f"noise table row for {p}: final {m:.4f} ± {sd:.4f}, best {bm:.4f} ± {bsd:.4f}, gap 0.0040, course 0.0069")
    single = 2 * math.sqrt(2) * s
    check(f"Pooled σ = √(Σ(nᵢ−1)sᵢ² / Σ(nᵢ−1)) over attn, gdn = {s:.4f}" in noise, f"pooled σ {s:.4f}")
    check(f"**Noise = {single:.4f}**, 2·√2·σ" in noise, f"noise 2·√2·σ = {single:.4f} is the one used")
    wide, narrow = sorted(sds, key=sds.get, reverse=True)
    check(f"Widest seed spread: {wide}, sd {sds[wide]:.4f}, {sds[wide] / sds[narrow]:.1f}× the pooled sd of the "
          f"others ({sds[narrow]:.4f}, 2 degrees of freedom)." in noise, f"{wide}'s seed sd against {narrow}'s")
    check("lm_hybrid_s1338 (unfinished at step 2500)" in noise, "the unfinished seed run is named as left out")
    dm = statistics.mean(LM_FINAL["attn"].values()) - statistics.mean(LM_FINAL["gdn"].values())
    dn = 2 * s * math.sqrt(1 / 3 + 1 / 3)
    check(f"| attn − gdn | {dm:+.4f} | {dn:.4f} | {'noise' if abs(dm) <= dn else 'above noise'} |" in noise,
          f"means compared: attn − gdn {dm:+.4f} against 2·σ·√(1/na + 1/nb) = {dn:.4f}")
    return single


def check_runs_table(md, single):
    best, step = ATTN_BEST
    check(row(md, "lm_attn").startswith(f"| lm_attn | attn | lm | main | course | 5000 | {LM_FINAL['attn'][1337]:.4f} | "
                                        f"{best:.4f} ({step}) |"),
          f"runs table: lm_attn, course recipe, best val {best:.4f} at step {step}")
    check(f"| lm_gdn | gdn | lm | main | course | 5000 | {LM_FINAL['gdn'][1337]:.4f} | {LM_FINAL['gdn'][1337]:.4f} (5000) |"
          in md, "runs table: lm_gdn best val is its final one")
    check("| lm_attn_s7 | attn | lm | seed 7 |" in md and "| recall_gdn_p16 | gdn | recall | capacity |" in md
          and "| recall_gdn_p48_s7 | gdn | recall | other |" in md, "runs table: roles of seed, capacity and other runs")
    check("| recall_attn_v16 | attn | recall | ablation | values 16 |" in md, "runs table: the values ablation, its recipe")
    drop = RECALL_DROP["gdn"]
    check(f"| {RECALL_ACC['gdn'][32]:.3f} | {RECALL_ACC['gdn'][32]:.3f} | {drop} |" in row(md, "recall_gdn"),
          f"runs table: recall_gdn's held-out and fresh accuracy and drop step {drop}")
    fin = LM_FINAL["attn"][1337]
    line = f"- lm_attn overfits late: best {best:.4f} at step {step}, final {fin:.4f}"
    check(fin - best > single and line in md, f"overfit note for lm_attn (+{fin - best:.4f} above the noise {single:.4f})")
    check("lm_gdn overfits late" not in md, "no overfit note for lm_gdn")
    order = sorted(TRAIN_END, key=TRAIN_END.get)
    fit = ("- Training loss (mean of the last 500 updates), lowest first, and its gap to the final val loss: "
           + ", ".join(f"{p} {TRAIN_END[p]:.4f} (gap {LM_FINAL[p][1337] - TRAIN_END[p]:.4f})" for p in order)
           + ". The runs that overfit late (attn) end with a lower training loss than every run that does not.")
    check(fit in md, "training loss at the end against final val loss, lowest first; attn overfits and fits closest")


def check_course(md, single):
    """The like-for-like table: every verdict from numbers computed here."""
    s, _ = sigma()
    d = LM_FINAL["hybrid"][1337] - 1.5446
    check(f"| {LM_FINAL['hybrid'][1337]:.4f} | agrees ({d:+.4f}, within noise {single:.4f}) |"
          in row(md, "lm hybrid: final val loss (200 batches)"), f"hybrid val loss {d:+.4f} from the course's, agrees")
    e64 = LM_FINAL["hybrid"][1337] + 0.004
    d = e64 - 1.5515
    check(f"| {e64:.4f} | agrees ({d:+.4f}, within noise {single:.4f}) |"
          in row(md, "lm hybrid: extrapolation loss at context 64 (40 batches)"), f"hybrid extrap@64 {d:+.4f}, agrees")
    a, lin = LM_FINAL["attn"][1337], LM_FINAL["linear"][1337]
    d = a - lin
    verdict = "disagrees" if abs(d) <= single else "agrees"
    check(f"| {d:+.4f} (single runs) | {verdict} (" in row(md, "lm attn − linear: val loss"),
          f"attn − linear from the seed-1337 runs ({d:+.4f} against noise {single:.4f}): {verdict}")
    dm = statistics.mean(LM_FINAL["attn"].values()) - statistics.mean(LM_FINAL["gdn"].values())
    dn = 2 * s * math.sqrt(1 / 3 + 1 / 3)
    verdict = "disagrees" if abs(dm) <= dn else ("agrees" if dm < 0 else "disagrees")
    check(f"| {dm:+.4f} (means of 3 and 3 seeds) | {verdict} (" in row(md, "lm attn − gdn: val loss"),
          f"attn − gdn compares the means over seeds ({dm:+.4f}, noise {dn:.4f}): {verdict}")
    d = abs(LM_FINAL["gdn"][1337] - LM_FINAL["delta"][1337])
    verdict = "agrees" if d <= single else "disagrees"
    check(f"| {d:.4f} (single runs) | {verdict} (" in row(md, "lm gdn vs delta: val loss gap (unsigned)"),
          f"gdn vs delta, called noise by the course: |{d:.4f}| against {single:.4f}: {verdict}")
    sd = statistics.stdev([0.0, 0.01, 0.02])  # every head's α over the three gdn seeds
    check(f"| {min(GDN_ALPHA):.3f}–{max(GDN_ALPHA):.3f} (mean {statistics.mean(GDN_ALPHA):.3f}) | agrees (range widened "
          f"by 2 × seed sd {sd:.3f}, 3 seeds) |" in row(md, "lm gdn: mean α per head, first layer, on val text"),
          f"α of gdn's first layer inside 0.55–0.66 ± 2 × {sd:.3f}")
    check("| agrees |" in row(md, "recall linear: no sudden drop"), "recall linear: no drop, agrees")
    for p in ("attn", "delta", "gdn"):
        check(f"drop at step {RECALL_DROP[p]} (after {RECALL_DROP[p] - 500})" in row(md, f"recall {p}: a sudden drop")
              and "| agrees |" in row(md, f"recall {p}: a sudden drop"), f"recall {p}: drop at {RECALL_DROP[p]}, agrees")
    check("| between step 2500 and 3000 | agrees" in row(md, "recall attn: when the drop comes"),
          "attn's drop bracket 2500–3000 meets the script's 2500–3000")
    course = section(md, "## The course, like for like")
    check("indicative only" not in "\n".join(l for l in course.splitlines() if l.startswith("|")), "full-length set: no row says 'indicative only'")
    check(f"{HYBRID_UNFINISHED:.4f}" not in course and f"{HYBRID_DROP0:.4f}" not in course,
          "the unfinished hybrid seed and the ablation stay out of the course table")
    check(f"{GDN_S1338_ACC:.3f}" not in course and f"{ATTN_V16_ACC:.3f}" not in course,
          "the recall seed and ablation runs stay out of the course table")


def check_drops(md):
    drops = section(md, "## Recall: when each run drops")
    check("first evaluation at which its held-out accuracy" in drops and "at least 0.5" in drops, "the drop rule is stated")
    g = RECALL_DROP["gdn"]
    check(f"| recall_gdn | main | course | 13 to step 6000 | {g} | {g - 500}–{g} | 3.300 | 0.100 |" in drops,
          f"recall_gdn drops at {g}, bracket {g - 500}–{g}, plateau loss 3.300")
    check(row(drops, "recall_linear").startswith("| recall_linear | main | course | 13 to step 6000 | no drop | — |"),
          "recall_linear: no drop")


def check_capacity(md, out):
    probe = section(md, "### The course's capacity probe")
    check("gives no numbers" in probe, "the capacity probe says the course gives no numbers")
    cells = " | ".join(f"{a:.3f} (loss 0.050)" for a in PROBE["gdn"])
    check(f"| recall_gdn | main | course | 32 pairs | {cells} | no numbers |" in probe, "capacity probe row of recall_gdn")
    check("| recall_attn_v16 | ablation |" in probe, "the ablation's probe is shown too")
    cap = section(md, "### Trained at other pair counts")
    check("- gdn: holds up to 32 pairs, breaks by 48." in cap, "capacity: gdn holds up to 32 pairs, breaks by 48")
    check("- linear: holds up to 8 pairs, breaks by 32; missing: 48 pairs." in cap,
          "capacity: linear holds up to 8, breaks by 32, 48 missing")
    check("- attn: holds up to 32 pairs, does not break" in cap and "missing: 8, 16, 48 pairs." in cap,
          "capacity: attn has only its main run, the other sizes named missing")
    check("| gdn | 1.000 | 0.980 | 0.950 | 0.400 | 32 | 48 |" in cap, "capacity table row for gdn")
    for png in ("capacity.png", "capacity_probe.png"):
        path = os.path.join(out, png)
        check(os.path.exists(path) and os.path.getsize(path) > 5000, f"{png} written")


def check_ablation(md, single):
    ab = section(md, "## What changed from spec 1, and why it mattered")
    n = 2 * math.sqrt(ATTN_V16_ACC * (1 - ATTN_V16_ACC) / HELD_OUT + 0.99 * 0.01 / HELD_OUT)
    check(f"| recall_attn_v16 | values 16 (course 64; spec 1's) | held-out accuracy {ATTN_V16_ACC:.3f}, no drop (6000 "
          f"steps) | recall_attn (full) | held-out accuracy 0.990, drop at 3000 (6000 steps) | {ATTN_V16_ACC - 0.99:+.3f} "
          f"(above noise {n:.3f}) |" in ab, f"values ablation: {ATTN_V16_ACC} against 0.990, noise {n:.3f}")
    d = HYBRID_DROP0 - LM_FINAL["hybrid"][1337]
    check(f"| lm_hybrid_drop0 | dropout 0 (course 0.1; spec 1's) | val loss {HYBRID_DROP0:.4f}" in ab
          and f"| {d:+.4f} ({'within' if abs(d) <= single else 'above'} noise {single:.4f}) |" in row(ab, "lm_hybrid_drop0"),
          f"dropout ablation: {d:+.4f} against the seed noise {single:.4f}")
    b64 = row(ab, "recall_attn (b64/cpu)")
    check("batch 64 (course 128; spec 1's), updates 2000 (course 6000; spec 1's)" in b64
          and f"held-out accuracy {ATTN_B64_ACC:.3f}" in b64, "the length ablation (another folder): batch and updates")
    check("| batch | 64 | lm 64, recall 128 |" in ab, "spec 1's recipe against the course's")


def check_main_only(md, single):
    findings = section(md, "## Findings")
    a = LM_FINAL["attn"][1337]
    check(f"lowest val loss attn {a:.4f};" in findings, "lm findings rank the seed-1337 runs")
    check(f"{GDN_S1338_ACC:.3f}" not in findings, "the recall seed run stays out of the findings")
    check(f"highest held-out accuracy attn {RECALL_ACC['attn'][32]:.3f}" in findings, "recall findings: main runs")
    check(f"- recall gdn: held-out accuracy first ≥ 0.5 at step {RECALL_DROP['gdn']}." in findings,
          "recall drop step of the main gdn run, not of its capacity runs")
    check(f"noise {single:.4f}" in findings, "lm findings judge single runs against 2·√2·σ")


def check_indicative(md_short):
    check("indicative only" in row(md_short, "lm attn − linear: val loss"),
          "short lm_linear: the attn − linear row is indicative only")
    check("indicative only" not in row(md_short, "lm attn − gdn: val loss"),
          "short lm_linear: the attn − gdn row (full-length runs) is not")


def check_explorer(out):
    html = open(os.path.join(out, "explorer.html")).read()
    check('"role":"seed 1338"' in html and '"role":"capacity"' in html and '"role":"ablation"' in html,
          "explorer data labels seed, capacity and ablation runs")
    check('"recipe":"values 16"' in html and '"drop_step":1500' in html, "explorer data has the recipe and drop step")
    check('id="all-runs"' in html, "explorer has the all-runs switch")


def check_bad_input(work):
    for args, what in (([os.path.join(work, "nowhere")], "a missing folder"),
                       ([os.path.join(work, "empty")], "a folder without runs")):
        os.makedirs(os.path.join(work, "empty"), exist_ok=True)
        p = subprocess.run([sys.executable, REPORT] + args + ["--out", os.path.join(work, "bad")],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 2 and p.stderr.count("\n") == 1, f"{what}: one line, exit 2")


def check_partial(work, runs):
    """Only a seed run, a capacity run and a main lm run: no seed noise, no ablation; must not crash."""
    folder = os.path.join(work, "partial")
    os.makedirs(folder)
    for name in ("lm_hybrid_s1338", "recall_linear_p8", "lm_attn", "lm_linear"):
        with open(os.path.join(folder, name + ".json"), "w") as f:
            json.dump(runs[name], f)
    md = report(folder, os.path.join(work, "partial-report"))
    check("| recall_linear_p8 | linear | recall | main |" in md and "recall (main runs, 8 pairs of 64 keys)" in md,
          "partial set: the only recall run (8 pairs) is the folder's main recall run")
    check("| lm hybrid: final val loss (200 batches) | 1.5446 | 1.9999 | no seed runs yet (" in md,
          "partial set: the only hybrid seed is its main run, no seed runs to judge by")
    d = LM_FINAL["attn"][1337] - LM_FINAL["linear"][1337]
    check(f"| no seed runs yet (lina {d:+.4f}) |" in row(md, "lm attn − linear: val loss"), "partial set: no seed runs yet")
    check("The ablation runs are not in yet" in section(md, "## What changed from spec 1"), "partial set: no ablation runs yet")
    check("**No seed runs yet**" in section(md, "## Noise"), "partial set: the noise section says no seed runs yet")


def check_small_recall(work, rc_t):
    """A folder of the main job's small runs (16 pairs of 32 keys, batch 32, 600 steps): they are its main runs."""
    folder = os.path.join(work, "small", "cpu")
    os.makedirs(folder)
    for preset, acc, drop in (("gdn", 0.99, 300), ("linear", 0.3, None)):
        r = recall_run(rc_t, preset, 16, acc, drop, steps=600, batch=32)
        r["config"]["train"]["keys"] = r["recipe"]["keys"] = 32
        with open(os.path.join(folder, f"recall_{preset}_p16_k32.json"), "w") as f:
            json.dump(r, f)
    md = report(os.path.join(work, "small"), os.path.join(work, "small-report"))
    check("| recall_gdn_p16_k32 | gdn | recall | main | batch 32, updates 600 |" in md
          and "| recall_linear_p16_k32 | linear | recall | main |" in md, "small recall runs are the folder's main runs")
    check("recall (main runs, 16 pairs of 32 keys): highest held-out accuracy gdn 0.990" in md,
          "recall findings name the folder's main size")
    check("indicative only" in row(md, "recall gdn: a sudden drop"), "small runs: the course rows are indicative only")
    html = open(os.path.join(work, "small-report", "explorer.html")).read()
    check(html.count('"role":"main"') == 2, "the explorer's runs chart shows both (main runs)")


def check_answer_habits():
    """findings.answer_habits on two hand-made sequences of 4 pairs: the values
    are 70, 70, 71, 72 (70 the most frequent), then 4 queries."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from report_lib import findings
    pairs = [1, 70, 2, 70, 3, 71, 4, 72]
    queries = [3, 71, 1, 70, 4, 72, 2, 70]
    frequency = {"tokens": pairs + queries, "targets": [71, 70, 72, 70], "answers": [70, 70, 70, 70]}
    binding = {"tokens": pairs + queries, "targets": [71, 70, 72, 70], "answers": [71, 70, 72, 70]}
    n, frequent, frequent_targets, distinct = findings.answer_habits({"examples": [frequency, binding]})
    check((n, frequent, frequent_targets, distinct) == (8, 6 / 8, 4 / 8, 2.0),
          f"answer_habits: 8 positions, 6/8 answers a most frequent value, 4/8 targets, 2 distinct per sequence (1 and 3) "
          f"(got {n}, {frequent}, {frequent_targets}, {distinct})")
    check(findings.answer_habits({"examples": []}) is None, "answer_habits: no examples, no numbers")


def check_course_figures():
    """scripts/course_figures.json holds spec 2's recipe (course-figures.md): lm 64 × 5000, recall 128 × 6000."""
    c = json.load(open(os.path.join(ROOT, "scripts", "course_figures.json")))
    rec = c["recipe"]
    check((rec["lm"]["batch"], rec["lm"]["steps"], rec["lm"]["dropout"]) == (64, 5000, 0.1)
          and (rec["recall"]["batch"], rec["recall"]["steps"], rec["recall"]["values"]) == (128, 6000, 64)
          and (rec["common"]["schedule"], rec["common"]["clip"], rec["common"]["beta2"]) == ("constant", 0.0, 0.999),
          "course_figures.json: spec 2's recipe")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", help="folder for the runs and reports (emptied first; default: a temp folder)")
    a = ap.parse_args()
    if not has_matplotlib():
        print("SKIPPED: matplotlib is not installed (Debian: apt-get install python3-matplotlib; scripts/setup.sh)")
        return 0
    work = a.work or tempfile.mkdtemp(prefix="report_lib_")
    shutil.rmtree(work, ignore_errors=True)
    runs = write_set(os.path.join(work, "full"))
    write_set(os.path.join(work, "short"), short_linear=True, ablations=False)
    out = os.path.join(work, "report")
    md = report(os.path.join(work, "full"), out)
    single = check_noise(md)
    check_runs_table(md, single)
    check_course(md, single)
    check_drops(md)
    check_capacity(md, out)
    check_ablation(md, single)
    check_main_only(md, single)
    check_indicative(report(os.path.join(work, "short"), os.path.join(work, "short-report")))
    check_explorer(out)
    check_bad_input(work)
    check_partial(work, runs)
    check_small_recall(work, json.load(open(RECALL_TEMPLATE)))
    check_answer_habits()
    check_course_figures()
    if FAILURES:
        print(f"{len(FAILURES)} FAILED; report in {out}")
        return 1
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    print("report_lib passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
