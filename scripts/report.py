#!/usr/bin/env python3
"""lina's report: every run json under the given folders -> report.md, PNG
plots and explorer.html (a self-contained interactive page) in --out.

    scripts/report.py RUN_DIR [RUN_DIR...] [--out DIR]

Needs Python 3 and matplotlib (Debian: python3-matplotlib); no ML
framework. Works on partial sets and short runs: what is not there yet is
left out or marked "—". Bad input ends with one line and exit status 2.
"""
import argparse
import json
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
from report_lib import capacity, explorer, findings, groups, memory, plots, seeds  # noqa: E402
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
    head = ["run", "preset", "task", "role", "steps", "final val loss", "best val (step)", "accuracy",
            "extrap 64", "128", "256", "512",
            "kv_per_token", "state_const", "conv_cache", "params", "ms/step", "tokens/s", "device", "commit"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    role = groups.roles(runs)
    for r in runs:
        ex = extrap(r)
        done = r.get("steps_done", "?")
        steps = f"{done}" + ("" if r.get("finished") else f" of {r['config'].get('train', {}).get('steps', '?')} (unfinished)")
        cells = [r["_label"], r["preset"], r["task"], role[id(r)], steps, fmt(final(r, "val_loss")), best_cell(r),
                 fmt(final(r, "val_accuracy"), ".3f"), *[fmt(ex.get(c)) for c in (64, 128, 256, 512)],
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


def write_report(runs, out, course):
    os.makedirs(out, exist_ok=True)
    pngs = plots.all_plots(runs, out)
    noise = seeds.lm_noise(runs)
    md = ["# lina report", "",
          f"{len(runs)} runs from: " + ", ".join(sorted({os.path.dirname(r['_path']) for r in runs}))
          + ". Interactive page: [explorer.html](explorer.html).", "", "## Runs", "",
          "Role: main — the run that stands for its preset (seed 1337, or the only seed; recall at 32 pairs "
          "of 64 keys); only main runs are compared with each other and with the course. seed N — another "
          "seed (the Noise section); capacity — recall at another pair count (Recall capacity); duplicate — "
          "a second run of the same identity (task, preset, pairs, keys, seed); other — not compared.", ""]
    md += runs_table(runs)
    md += ["", "## Noise", ""] + seeds.section(noise, course["lm"]["noise"])
    md += ["", "## Findings (generated from the numbers)", ""]
    md += findings.lm_findings(runs, noise) + findings.recall_findings(runs) + findings.answer_lines(runs)
    ladder = findings.decay_ladder(runs, noise)
    if ladder:
        md += ["", "### The decay ladder: no decay → fixed → learned → per channel", ""] + ladder
    md += ["", "### Recall capacity", ""] + capacity.section(runs)
    md += ["", "### Course reported / lina measured", "",
           "| what | course reported | lina measured | verdict |", "|---|---|---|---|"]
    md += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in findings.course_table(runs, course, noise)]
    md += ["", "From the main runs only. The course's figures are for 5000 lm steps (2000 recall) at batch 64; "
           "a row whose runs have another length says so and compares only in sign and shape.", "",
           "### The spec's \"what to expect\"", ""]
    md += findings.spec_expectations(runs, course)
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
        with open(os.path.join(HERE, "course_figures.json")) as f:
            course = json.load(f)
        runs = load(a.dirs, lambda m: print("report: " + m, file=sys.stderr))
        pngs = write_report(runs, out, course)
    except (ReportError, OSError) as e:
        print(f"report: error: {e}", file=sys.stderr)
        return 2
    print(f"report: {len(runs)} runs -> {os.path.join(out, 'report.md')}, explorer.html, {len(pngs)} plots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
