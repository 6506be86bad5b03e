#!/usr/bin/env python3
"""lina's report: every run json under the given folders -> report.md, PNG
plots and explorer.html (a self-contained interactive page) in --out.

    scripts/report.py RUN_DIR [RUN_DIR...] [--out DIR]

Needs Python 3 and matplotlib (Debian: python3-matplotlib); no ML
framework. Works on partial sets and short runs: what is not there yet is
left out or marked "—". Bad input ends with one line and exit status 2.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def need_matplotlib():
    """Re-runs under Debian's /usr/bin/python3 when this python lacks matplotlib."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        system = "/usr/bin/python3"
        if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system) \
                and not os.environ.get("LINA_REPORT_REEXEC"):
            os.environ["LINA_REPORT_REEXEC"] = "1"
            os.execv(system, [system] + sys.argv)
        sys.exit("report: error: matplotlib is missing (Debian: apt-get install python3-matplotlib)")


need_matplotlib()
sys.path.insert(0, HERE)
from report_lib import ablation, capacity, course, drops, explorer, findings, groups, memory, plots, recipe, seeds  # noqa: E402
from report_lib.runs import ReportError, best_val, extrap, final, load  # noqa: E402


def fmt(x, spec=".4f"):
    if x is None:
        return "—"
    return format(x, spec) if isinstance(x, float) else str(x)


def best_cell(r):
    """'1.5342 (4500)': the lowest val loss of the run's evaluations and its step."""
    v, step = best_val(r)
    return "—" if v is None else f"{v:.4f} ({step})"


def runs_table(runs):
    head = ["run", "preset", "task", "role", "recipe", "steps", "final val loss", "best val (step)", "train loss",
            "held-out accuracy", "fresh accuracy", "drop step", "extrap 64", "128", "256", "512",
            "kv_per_token", "state_const", "conv_cache", "params", "ms/step", "tokens/s", "device", "commit"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    role = groups.roles(runs)
    for r in runs:
        ex = extrap(r)
        done = r.get("steps_done", "?")
        steps = f"{done}" + ("" if r.get("finished") else f" of {recipe.length(r)[1] or '?'} (unfinished)")
        recall = r["task"] == "recall"
        drop = drops.drop_step(r) if recall else None
        cells = [r["_label"], r["preset"], r["task"], role[id(r)], recipe.short(r), steps, fmt(final(r, "val_loss")),
                 best_cell(r), fmt(final(r, "train_loss")), fmt(final(r, "val_accuracy"), ".3f"),
                 fmt(final(r, "fresh_accuracy"), ".3f"), ("no drop" if drop is None else str(drop)) if recall else "—",
                 *[fmt(ex.get(c)) for c in (64, 128, 256, 512)],
                 fmt(r.get("kv_per_token")), fmt(r.get("state_const")), fmt(r.get("conv_cache")),
                 f"{r.get('params', 0):,}", fmt(r.get("ms_per_step"), ".1f"), fmt(r.get("tokens_per_s"), ",.0f"),
                 r.get("device", "?"), str(r.get("git_commit", "?"))[:10]]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def memory_section(runs):
    out = ["| preset | kv_per_token | state_const | conv_cache | at 64 | at 4,096 | at 131,072 |", "|---|---|---|---|---|---|---|"]
    for p, layers in memory.PRESET_LAYERS.items():
        m = memory.lina_memory(layers)
        out.append(f"| {p} | {m['kv_per_token']} | {m['state_const']:,} | {m['conv_cache']:,} | "
                   + " | ".join(f"{memory.stored(m, c):,}" for c in (64, 4096, 131072)) + " |")
    out += ["", "Real scale (numbers per token, constant numbers, bytes per sequence; conv cache not counted):", "",
            "| layout | per token | constant | 4,096 | 32,768 | 131,072 |", "|---|---|---|---|---|---|"]
    for l in memory.real_layouts():
        out.append(f"| {l['name']} | {l['kv_per_token']:,} | {l['state_const']:,} | "
                   + " | ".join(memory.human_bytes(memory.real_bytes(l, c)) for c in (4096, 32768, 131072)) + " |")
    bad = [(r["_label"], d) for r in runs for d in memory.cross_check(r)]
    out.append("")
    out.append("Cross-check of the run jsons against the formulas: "
               + ("all " + str(len(runs)) + " runs agree." if not bad
                  else "DISAGREE — " + "; ".join(f"{l}: {d}" for l, d in bad)))
    return out


def write_report(runs, out, course_figures):
    os.makedirs(out, exist_ok=True)
    pngs = plots.all_plots(runs, out)
    noise = seeds.lm_noise(runs)
    pairs, keys = groups.main_size(runs)
    md = ["# lina report", "",
          f"{len(runs)} runs from: " + ", ".join(sorted({os.path.dirname(r['_path']) for r in runs}))
          + ". Interactive page: [explorer.html](explorer.html). Every finding below is computed from these run "
          "jsons; the course's figures are scripts/course_figures.json (course-figures.md).", "", "## Runs", "",
          "Role: main — the run that stands for its preset (the course's recipe, seed 1337 or the only seed; "
          f"recall at {pairs} pairs of {keys} keys); only main runs are compared with each other and with the "
          "course. seed N — another seed (the Noise section); capacity — recall trained at another pair count; "
          "ablation — a recipe that differs from the course's (the recipe column; the section on spec 1); "
          "duplicate — a second run of the same identity; other — not compared. Recipe: course, or the flags "
          "that differ from the course's.", ""]
    md += runs_table(runs)
    said = findings.lesson(runs)
    if said:
        md += ["", "## The lesson", "", said]
    md += ["", "## Noise", ""] + seeds.section(noise, course_figures["lm"]["noise"])
    md += ["", "## The course, like for like", "",
           "One row per figure the course publishes, lina's number from the main runs, and whether they agree. "
           "lm rows are judged against the seed noise measured from the seed runs here (lm_P_s1338, lm_P_s1339): "
           "a number against the course's one run within 2·√2·σ agrees; a gap the course ranks must have its sign "
           "and be above the noise; a gap the course calls noise must be within it. Without seed runs a row says "
           "\"no seed runs yet\". Recall rows compare behaviour: a drop or none (the drop rule in the next "
           "section). A row whose runs are not at the course's length and batch says \"indicative only\".", ""]
    md += course.table(runs, course_figures, noise)
    md += ["", "## Recall: when each run drops", ""] + drops.table(runs)
    md += ["", "## Recall capacity", "", "### The course's capacity probe", ""]
    md += capacity.probe_section(runs, course_figures)
    md += ["", "### Trained at other pair counts", ""] + capacity.section(runs)
    md += ["", "## What changed from spec 1, and why it mattered", ""] + ablation.section(runs, noise)
    md += ["", "## Findings (generated from the numbers)", ""]
    md += findings.lm_findings(runs, noise) + findings.recall_findings(runs) + findings.answer_lines(runs)
    ladder = findings.decay_ladder(runs, noise)
    if ladder:
        md += ["", "### The decay ladder: no decay → fixed → learned → per channel", ""] + ladder
    md += ["", "## Memory (spec §1.3)", ""] + memory_section(runs)
    md += ["", "## Plots", ""] + [f"![{p}]({p})" for p in pngs]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    explorer.write(runs, out, os.path.join(HERE, "explorer_template.html"))
    return pngs


def main():
    ap = argparse.ArgumentParser(description="lina report: report.md, PNG plots, explorer.html")
    ap.add_argument("dirs", nargs="+", metavar="RUN_DIR")
    ap.add_argument("--out", help="output folder (default: the first RUN_DIR)")
    a = ap.parse_args()
    out = a.out or a.dirs[0]
    try:
        course_figures = recipe.load_course()
        runs = load(a.dirs, lambda m: print("report: " + m, file=sys.stderr))
        pngs = write_report(runs, out, course_figures)
    except (ReportError, OSError) as e:
        print(f"report: error: {e}", file=sys.stderr)
        return 2
    print(f"report: {len(runs)} runs -> {os.path.join(out, 'report.md')}, explorer.html, {len(pngs)} plots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
