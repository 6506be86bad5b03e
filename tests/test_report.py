#!/usr/bin/env python3
"""ctest report_explorer: four very short lina runs (spec 2's run json; one
an ablation, lm without dropout as spec 1 had it) -> scripts/report.py ->
report.md, PNG plots and explorer.html, loaded in headless chromium with
#selftest (the page moves its sliders and clicks its buttons and writes
SELFTEST PASS/FAIL into the DOM). Also writes screenshots of the page into
the report folder. Prints "SKIPPED: ..." (ctest: skipped) without chromium
or matplotlib.

    tests/test_report.py --lina build/release/lina --work DIR
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(ROOT, "scripts", "report.py")


def has_matplotlib():
    for py in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(py) and subprocess.run([py, "-c", "import matplotlib"], capture_output=True).returncode == 0:
            return True
    return False


def run(cmd, timeout=120, ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if ok and p.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)} exited {p.returncode}\n{p.stdout}{p.stderr}")
    return p


def check(cond, what):
    if not cond:
        sys.exit("FAILED: " + what)
    print("ok:", what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lina", required=True)
    ap.add_argument("--work", required=True, help="folder for the runs and the report (emptied first)")
    a = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("SKIPPED: chromium is not installed (Debian: apt-get install chromium; scripts/setup.sh)")
        return 0
    if not has_matplotlib():
        print("SKIPPED: matplotlib is not installed (Debian: apt-get install python3-matplotlib; scripts/setup.sh)")
        return 0
    t0 = time.time()
    shutil.rmtree(a.work, ignore_errors=True)
    runs, out = os.path.join(a.work, "runs"), os.path.join(a.work, "report")
    tiny = ["--steps", "4", "--batch", "2", "--eval-every", "2", "--eval-batches", "1", "--quiet", "--out", runs]
    run([a.lina, "train", "--preset", "gdn", "--task", "lm", "--extrap-batches", "1",
         "--data", os.path.join(ROOT, "data", "tinyshakespeare.txt")] + tiny)
    for preset in ("gdn", "linear"):
        run([a.lina, "train", "--preset", preset, "--task", "recall", "--fresh-batches", "1", "--probe-batches", "1"] + tiny)
        base = os.path.join(runs, "cpu", f"recall_{preset}")
        run([a.lina, "eval", "--task", "recall", "--checkpoint", base + ".safetensors",
             "--predictions", base + ".predictions.json"])
    run([a.lina, "train", "--preset", "gdn", "--task", "lm", "--dropout", "0", "--extrap-batches", "0",
         "--data", os.path.join(ROOT, "data", "tinyshakespeare.txt")] + tiny)
    print(f"runs: {time.time() - t0:.1f} s")

    p = run([sys.executable, REPORT, runs, "--out", out])
    check("4 runs" in p.stdout, "report.py read 4 runs: " + p.stdout.strip())
    md = open(os.path.join(out, "report.md")).read()
    for label in ("lm_gdn", "recall_gdn", "recall_linear"):
        check(f"| {label} |" in md, f"report.md has a table row for {label}")
    check("| lm_gdn_drop0 | gdn | lm | ablation | dropout 0, batch 2, updates 4 |" in md,
          "the run without dropout is an ablation, its recipe named")
    check("| lm_gdn_drop0 | dropout 0 (course 0.1; spec 1's) |" in md and "| lm_gdn | val loss" in md,
          "'What changed from spec 1' lists the ablation beside lm_gdn")
    for section in ("## Noise", "## The course, like for like", "| recall gdn: a sudden drop |",
                    "## Recall: when each run drops", "### The course's capacity probe",
                    "## What changed from spec 1, and why it mattered", "## Findings", "## Memory", "18,874,368",
                    "no seed runs yet"):
        check(section in md, f"report.md has '{section}'")
    for png in ("lm_loss.png", "recall.png", "extrapolation.png", "memory.png", "alpha.png", "capacity_probe.png"):
        path = os.path.join(out, png)
        check(os.path.exists(path) and os.path.getsize(path) > 5000, f"{png} written")
    bad = run([sys.executable, REPORT, os.path.join(a.work, "nowhere")], ok=False)
    check(bad.returncode == 2 and bad.stderr.count("\n") == 1 and "error" in bad.stderr, "a missing folder: one line, exit 2")
    os.makedirs(os.path.join(a.work, "empty"), exist_ok=True)
    bad = run([sys.executable, REPORT, os.path.join(a.work, "empty")], ok=False)
    check(bad.returncode == 2 and "no run json" in bad.stderr, "an empty folder: one line, exit 2")

    page = "file://" + os.path.abspath(os.path.join(out, "explorer.html"))
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=5000"]
    dom = run(flags + ["--dump-dom", page + "#selftest"], timeout=60).stdout
    marker = dom.split('id="selftest-result"')[1].split("</div>")[0] if 'id="selftest-result"' in dom else "(no marker)"
    check("SELFTEST PASS (4 runs, 2 with predictions)" in marker, "explorer self-test: " + marker.split(">", 1)[-1])
    for name, size in (("explorer.png", "1200,2600"), ("explorer_top.png", "1200,900")):
        run(flags + [f"--window-size={size}", f"--screenshot={os.path.join(out, name)}", page], timeout=60)
        check(os.path.exists(os.path.join(out, name)), f"screenshot {name}")
    main_job_page(a, flags)
    print(f"report_explorer passed in {time.time() - t0:.1f} s; report in {out}")
    return 0


def main_job_page(a, flags):
    """The page of a main-job-like set (attn, gdn, linear on a small recall task with values = keys, as
    scripts/main_job.sh trains them): its own runs in the runs chart, each run's answers to every key of a
    held-out sequence, and the lesson's sentences."""
    runs, out = os.path.join(a.work, "main_job", "runs"), os.path.join(a.work, "main_job", "report")
    size = ["--pairs", "4", "--keys", "8", "--values", "8"]
    tiny = ["--task", "recall", "--steps", "4", "--batch", "2", "--eval-every", "2", "--eval-batches", "1",
            "--fresh-batches", "1", "--probe-batches", "1", "--quiet", "--out", runs] + size
    labels = []
    for preset in ("attn", "gdn", "linear"):
        run([a.lina, "train", "--preset", preset] + tiny)
        base = os.path.join(runs, "cpu", f"recall_{preset}_p4_k8_v8")
        run([a.lina, "eval", "--task", "recall", "--checkpoint", base + ".safetensors",
             "--predictions", base + ".predictions.json"])
        labels.append(os.path.basename(base))
    run([sys.executable, REPORT, runs, "--out", out])
    md = open(os.path.join(out, "report.md")).read()
    for label in labels:
        check(f"| {label} | {label.split('_')[1]} | recall | main | batch 2, updates 4 |" in md,
              f"main job's {label}: a main run of the course's recipe (values = keys), its length named")
    check("## The lesson" in md, "report.md says the lesson (or that these runs do not show it)")
    dom = run(flags + ["--dump-dom", "file://" + os.path.abspath(os.path.join(out, "explorer.html"))], timeout=60).stdout
    bars = dom.split('id="runs-bars"')[1].split("</svg>")[0] if 'id="runs-bars"' in dom else ""
    check("no run has this metric yet" not in bars and all(l[:24] in bars for l in labels),
          "the runs chart shows the job's three runs")
    answers = dom.split('id="recall-answers"')[1].split("</table>")[0] if 'id="recall-answers"' in dom else ""
    seq = dom.split('id="recall-seq"')[1].split("</div>")[0] if 'id="recall-seq"' in dom else ""
    check("No predictions files" not in seq and all(f"<td>{l}</td>" in answers for l in labels)
          and answers.count('class="answer-row"') == 3,
          "the recall section shows each run's answers to a held-out sequence, without a click")
    lesson = dom.split('id="lesson">')[1].split("</p>")[0] if 'id="lesson">' in dom else ""
    check("linear" in lesson and "4 pairs of 8 keys" in lesson, "the page says the lesson: " + lesson[:80])
    run(flags + ["--window-size=1200,2600", f"--screenshot={os.path.join(out, 'explorer.png')}",
                 "file://" + os.path.abspath(os.path.join(out, "explorer.html"))], timeout=60)


if __name__ == "__main__":
    sys.exit(main())
