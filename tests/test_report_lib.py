#!/usr/bin/env python3
"""ctest report_lib: scripts/report.py on synthetic run jsons (no lina binary,
no browser): seeds, best-val steps, recall capacity, main runs only in the
course comparison, "indicative only" per row, what recall answers look like
(frequencies or binding). The runs are copies of one
real lm json and one real recall json from results/ with their numbers
changed; every expected number is computed here, not by the report's code.
Prints "SKIPPED: ..." (ctest: skipped) without matplotlib.

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
LM_TEMPLATE = os.path.join(ROOT, "results", "cpu-full", "cpu", "lm_attn.json")
RECALL_TEMPLATE = os.path.join(ROOT, "results", "cpu-300", "runs", "cpu", "recall_gdn.json")
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
# recall: final held-out accuracy per preset and pairs (64 keys, seed 1337); 32 is the main run
RECALL_ACC = {"gdn": {8: 1.0, 16: 0.98, 32: 0.95, 48: 0.40},
              "linear": {8: 0.93, 16: 0.55, 32: 0.20},
              "attn": {32: 0.99}, "delta": {32: 0.97}}
RECALL_DROP = {"gdn": 600, "attn": 400, "delta": 500, "linear": None}
GDN_S1338_ACC = 0.111           # recall_gdn_s1338: another seed at 32 pairs, must stay out of the findings
GDN_P48_S7_ACC = 0.97           # recall_gdn_p48_s7: 48 pairs at another seed (and longer): not in the capacity


def check(cond, what):
    print(("ok: " if cond else "FAILED: ") + what)
    if not cond:
        FAILURES.append(what)


def has_matplotlib():
    for py in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(py) and subprocess.run([py, "-c", "import matplotlib"], capture_output=True).returncode == 0:
            return True
    return False


def lm_run(template, preset, seed, final, steps=5000, done=None, best=None):
    """An lm run json: evaluations every 500 steps falling to `final` (or with `best` = (loss, step))."""
    r = copy.deepcopy(template)
    done = steps if done is None else done
    evals = [{"step": s, "val_loss": round(final + 0.3 * (1 - s / done) + 0.0001, 6)} for s in range(500, done, 500)]
    evals.append({"step": done, "val_loss": final})
    if best:
        for e in evals:
            if e["step"] == best[1]:
                e["val_loss"] = best[0]
    r.update(preset=preset, steps_done=done, finished=done == steps, eval=evals,
             final={"step": done, "train_loss": final - 0.2, "val_loss": final},
             extrapolation=[{"context": c, "val_loss": final + 0.004 + 0.01 * i}
                            for i, c in enumerate((64, 128, 256, 512))],
             loss_curve=[dict(p, loss=TRAIN_END[preset] if p["step"] > done - 500 else p["loss"])
                         for p in template["loss_curve"] if p["step"] <= done][::100])
    r["config"]["train"].update(seed=seed, steps=steps, preset=preset)
    r["config"]["model"].update(preset=preset, layers=LAYERS[preset])
    r.update(memory_fields(preset))
    if preset in ("gdn", "hybrid"):
        r["alpha"] = [{"layer": 0, "mean_alpha": [0.58, 0.60, 0.62, 0.64]}]
    return r


def recall_run(template, preset, pairs, acc, drop, seed=1337, steps=2000):
    """A finished recall run: accuracy 0.13 until `drop` (None: never), then `acc`."""
    r = copy.deepcopy(template)
    evals = [{"step": s, "val_accuracy": acc if drop and s >= drop else min(acc, 0.13),
              "val_loss": 0.1 if drop and s >= drop else 2.5} for s in range(100, steps + 1, 100)]
    evals[-1]["val_accuracy"] = acc
    r.update(preset=preset, steps_done=steps, finished=True, eval=evals,
             final={"step": steps, "train_loss": evals[-1]["val_loss"], "val_accuracy": acc,
                    "val_loss": evals[-1]["val_loss"]},
             loss_curve=template["loss_curve"][::20])
    r["config"]["train"].update(seed=seed, steps=steps, pairs=pairs, keys=64, preset=preset)
    r["config"]["model"].update(preset=preset, layers=LAYERS[preset])
    r.update(memory_fields(preset))
    r.pop("alpha", None)
    return r


LAYERS = {p: [p] * 4 for p in ("attn", "linear", "delta", "gdn")}
LAYERS["hybrid"] = ["gdn", "gdn", "gdn", "attn"]


def memory_fields(preset):
    """kv_per_token, state_const, conv_cache as spec §1.3 gives them (4 layers, 2 KV heads of 32, 4 heads of 32)."""
    attn = LAYERS[preset].count("attn")
    rec = 4 - attn
    return {"kv_per_token": 2 * 2 * 32 * attn, "state_const": 4 * 32 * 32 * rec, "conv_cache": 3 * 3 * 128 * rec}


def run_name(task, preset, seed=1337, pairs=32):
    """lina's file name (scripts/sweep.py run_name)."""
    return f"{task}_{preset}" + (f"_p{pairs}" if pairs != 32 else "") + (f"_s{seed}" if seed != 1337 else "")


def write_set(folder, short_linear=False):
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
    runs[run_name("recall", "gdn", 7, 48)] = recall_run(rc_t, "gdn", 48, GDN_P48_S7_ACC, 900, seed=7, steps=3000)
    os.makedirs(folder)
    for name, r in runs.items():
        with open(os.path.join(folder, name + ".json"), "w") as f:
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
    """The course-table row that starts with `what`."""
    return next((l for l in md.splitlines() if l.startswith(f"| {what} |")), "")


def check_noise(md):
    noise = section(md, "## Noise")
    sds = {}
    for p in ("attn", "gdn"):
        finals = list(LM_FINAL[p].values())
        bests = [ATTN_BEST[0] if (p, s) == ("attn", 1337) else v for s, v in LM_FINAL[p].items()]
        m, sd = statistics.mean(finals), statistics.stdev(finals)
        bm, bsd = statistics.mean(bests), statistics.stdev(bests)
        sds[p] = sd
        seeds = ", ".join(map(str, sorted(LM_FINAL[p])))
        check(f"| {p} | {seeds} (3) | {m:.4f} ± {sd:.4f} | {bm:.4f} ± {bsd:.4f} | 0.0040 | 0.0069 |" in noise,
              f"noise table row for {p}: final {m:.4f} ± {sd:.4f}, best {bm:.4f} ± {bsd:.4f}, gap 0.0040, course 0.0069")
    sigma = math.sqrt((2 * sds["attn"] ** 2 + 2 * sds["gdn"] ** 2) / 4)
    single = 2 * math.sqrt(2) * sigma
    check(f"Pooled σ = √(Σ(nᵢ−1)sᵢ² / Σ(nᵢ−1)) over attn, gdn = {sigma:.4f}" in noise, f"pooled σ {sigma:.4f}")
    check(f"**Noise = {single:.4f}**, 2·√2·σ" in noise, f"noise 2·√2·σ = {single:.4f} is the one used")
    wide, narrow = sorted(sds, key=sds.get, reverse=True)
    check(f"Widest seed spread: {wide}, sd {sds[wide]:.4f}, {sds[wide] / sds[narrow]:.1f}× the pooled sd of the "
          f"others ({sds[narrow]:.4f}, 2 degrees of freedom)." in noise, f"{wide}'s seed sd against {narrow}'s")
    check("lm_hybrid_s1338 (unfinished at step 2500)" in noise, "the unfinished seed run is named as left out")
    dm = statistics.mean(LM_FINAL["attn"].values()) - statistics.mean(LM_FINAL["gdn"].values())
    dn = 2 * sigma * math.sqrt(1 / 3 + 1 / 3)
    check(f"| attn − gdn | {dm:+.4f} | {dn:.4f} | {'noise' if abs(dm) <= dn else 'above noise'} |" in noise,
          f"means compared: attn − gdn {dm:+.4f} against 2·σ·√(1/na + 1/nb) = {dn:.4f}")
    return single


def check_runs_table(md, single):
    best, step = ATTN_BEST
    check(f"| lm_attn | attn | lm | main | 5000 | {LM_FINAL['attn'][1337]:.4f} | {best:.4f} ({step}) |" in md,
          f"runs table: lm_attn best val {best:.4f} at step {step}")
    check(f"| lm_gdn | gdn | lm | main | 5000 | {LM_FINAL['gdn'][1337]:.4f} | {LM_FINAL['gdn'][1337]:.4f} (5000) |" in md,
          "runs table: lm_gdn best val is its final one")
    check("| lm_attn_s7 | attn | lm | seed 7 |" in md and "| recall_gdn_p16 | gdn | recall | capacity |" in md
          and "| recall_gdn_p48_s7 | gdn | recall | other |" in md, "runs table: roles of seed, capacity and other runs")
    fin = LM_FINAL["attn"][1337]
    line = f"- lm_attn overfits late: best {best:.4f} at step {step}, final {fin:.4f}"
    check(fin - best > single and line in md, f"overfit note for lm_attn (+{fin - best:.4f} above the noise {single:.4f})")
    check("lm_gdn overfits late" not in md, "no overfit note for lm_gdn")
    order = sorted(TRAIN_END, key=TRAIN_END.get)
    fit = ("- Training loss (mean of the last 500 updates), lowest first, and its gap to the final val loss: "
           + ", ".join(f"{p} {TRAIN_END[p]:.4f} (gap {LM_FINAL[p][1337] - TRAIN_END[p]:.4f})" for p in order)
           + ". The runs that overfit late (attn) end with a lower training loss than every run that does not.")
    check(fit in md, "training loss at the end against final val loss, lowest first; attn overfits and fits closest")


def check_capacity(md, out):
    cap = section(md, "### Recall capacity")
    check("- gdn: holds up to 32 pairs, breaks by 48." in cap, "capacity: gdn holds up to 32 pairs, breaks by 48")
    check("- linear: holds up to 8 pairs, breaks by 32; missing: 48 pairs." in cap,
          "capacity: linear holds up to 8, breaks by 32, 48 missing")
    check("- attn: holds up to 32 pairs, does not break" in cap and "missing: 8, 16, 48 pairs." in cap,
          "capacity: attn has only its main run, the other sizes named missing")
    check("| gdn | 1.000 | 0.980 | 0.950 | 0.400 | 32 | 48 |" in cap, "capacity table row for gdn")
    png = os.path.join(out, "capacity.png")
    check(os.path.exists(png) and os.path.getsize(png) > 5000, "capacity.png written")


def check_main_only(md, single):
    a, lin = LM_FINAL["attn"][1337], LM_FINAL["linear"][1337]
    check(f"| {a - lin:+.4f} (single runs) |" in row(md, "lm attn − linear val loss"),
          f"course row attn − linear uses the seed-1337 runs ({a - lin:+.4f}), not attn's mean")
    dm = statistics.mean(LM_FINAL["attn"].values()) - statistics.mean(LM_FINAL["gdn"].values())
    check(f"{dm:+.4f} (means of 3 and 3 seeds)" in row(md, "lm attn − gdn val loss"),
          "course row attn − gdn compares the means over seeds")
    h = row(md, "lm hybrid val loss (200 batches)")
    check(f"| {LM_FINAL['hybrid'][1337]:.4f} |" in h, "course row hybrid val loss: the seed-1337 run")
    course = section(md, "### Course reported / lina measured")
    check(f"{HYBRID_UNFINISHED:.4f}" not in course, "the unfinished hybrid seed is not in the course table")
    findings = section(md, "## Findings")
    check(f"lowest val loss attn {a:.4f};" in findings, "lm findings rank the seed-1337 runs")
    check(f"{GDN_S1338_ACC:.3f}" not in findings + course, "the recall seed run stays out of findings and course rows")
    check(f"highest held-out accuracy attn {RECALL_ACC['attn'][32]:.3f}" in findings, "recall findings: main runs")
    check(f"- recall gdn: held-out accuracy first ≥ 0.5 at step {RECALL_DROP['gdn']}." in findings,
          "recall drop step of the main gdn run, not of its capacity runs")
    check("agrees" in row(md, "recall gdn: sudden drop"), "course row: gdn drops")
    check(f"noise {single:.4f}" in findings, "lm findings judge single runs against 2·√2·σ")


def check_indicative(md_full, md_short):
    check("indicative only" not in md_full, "full-length set: no row says 'indicative only'")
    check("indicative only" in row(md_short, "lm attn − linear val loss"),
          "short lm_linear: the attn − linear row is indicative only")
    check("indicative only" not in row(md_short, "lm attn − gdn val loss"),
          "short lm_linear: the attn − gdn row (full-length runs) is not")


def check_explorer(out):
    html = open(os.path.join(out, "explorer.html")).read()
    check('"role":"seed 1338"' in html and '"role":"capacity"' in html, "explorer data labels seed and capacity runs")
    check('id="all-runs"' in html, "explorer has the all-runs switch")


def check_bad_input(work):
    for args, what in (([os.path.join(work, "nowhere")], "a missing folder"),
                       ([os.path.join(work, "empty")], "a folder without runs")):
        os.makedirs(os.path.join(work, "empty"), exist_ok=True)
        p = subprocess.run([sys.executable, REPORT] + args + ["--out", os.path.join(work, "bad")],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 2 and p.stderr.count("\n") == 1, f"{what}: one line, exit 2")


def check_partial(work, runs):
    """Only a seed run and a capacity run: no main run at the main seed or size; must not crash."""
    folder = os.path.join(work, "partial")
    os.makedirs(folder)
    for name in ("lm_hybrid_s1338", "recall_linear_p8"):
        with open(os.path.join(folder, name + ".json"), "w") as f:
            json.dump(runs[name], f)
    md = report(folder, os.path.join(work, "partial-report"))
    check("- linear: holds up to 8 pairs, does not break" in md and "missing: " not in section(md, "### Recall capacity"),
          "partial set: capacity from one run")
    check("| lm hybrid val loss (200 batches) | 1.5446 | 1.9999 |" in md, "partial set: the only hybrid seed is its main run")


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
    write_set(os.path.join(work, "short"), short_linear=True)
    out = os.path.join(work, "report")
    md = report(os.path.join(work, "full"), out)
    single = check_noise(md)
    check_runs_table(md, single)
    check_capacity(md, out)
    check_main_only(md, single)
    check_indicative(md, report(os.path.join(work, "short"), os.path.join(work, "short-report")))
    check_explorer(out)
    check_bad_input(work)
    check_partial(work, runs)
    check_answer_habits()
    if FAILURES:
        print(f"{len(FAILURES)} FAILED; report in {out}")
        return 1
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    print("report_lib passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
