#!/usr/bin/env python3
"""scripts/results_index.py, the index of results/: the repository's
results/README.md is what the script writes and results/ keeps the layout
(runs/cpu, runs/cuda, bench, device); on a small fake results tree, a json
not in the index, a json that names no commit, a json in no set, a set
README without its Commit line, a folder outside the layout (an earlier
set kept beside the current one) and a stale index each fail --check with
one line, a folder being filled needs no Commit line, a run json's line
names its recipe changes, and writing the index again fixes a stale one.

    tests/test_results_index.py [--work DIR]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INDEX = os.path.join(ROOT, "scripts", "results_index.py")
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def index(*args):
    return subprocess.run([sys.executable, INDEX, *args], capture_output=True, text=True)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def write_json(path, doc):
    write(path, json.dumps(doc, indent=1) + "\n")


def readme(title, paragraph, commit):
    return (f"# {title}\n\n{paragraph}\n\n"
            f"- **Command**: `lina train ...`\n- **Commit**: {commit}\n"
            f"- **Date**: 2026-11-30\n- **Machine**: a test machine\n\nMore text.\n")


def run_doc(commit, task="lm", preset="gdn", **changes):
    """A spec-2 run json: the course's recipe (3 steps at batch 2) with `changes`."""
    recipe = {"lr": 0.001, "schedule": "constant", "warmup": 0, "clip": 0.0, "weight_decay": 0.01, "decay": "all",
              "beta2": 0.999, "dropout": 0.1 if task == "lm" else 0.0, "batch": 2, "steps": 3}
    if task == "recall":
        recipe.update(pairs=32, keys=64, values=64)
    recipe.update(changes)
    doc = {"task": task, "preset": preset, "steps_done": 3, "finished": True, "recipe": recipe,
           "config": {"model": {"preset": preset}, "train": dict(recipe, seed=1337)}}
    if commit is not None:
        doc["git_commit"] = commit
    return doc


def one_line_failure(r, needle, what):
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 1 and len(lines) == 1 and needle in r.stderr,
          f"{what}: exit 1, one line with '{needle}' (got {r.returncode}: {r.stderr.strip()!r})")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", help="folder for the fake results tree (emptied first; default: a temporary one)")
    a = p.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="results_index_test_")
    shutil.rmtree(work, ignore_errors=True)
    results = os.path.join(work, "results")
    fake = ["--results", results]

    # the repository's own results/: up to date, every json listed with a commit
    r = index("--check")
    check(r.returncode == 0, f"--check on the repository's results/ passes ({r.stderr.strip()})")
    top = sorted(n for n in os.listdir(os.path.join(ROOT, "results")) if not n.startswith("."))
    check(set(top) <= {"README.md", "runs", "bench", "device"}, f"results/ holds only runs, bench and device ({top})")

    # a tiny fake tree: runs (own commits, predictions), bench (the README's commit), device (own date)
    write(os.path.join(results, "runs", "cpu", "README.md"),
          readme("Short runs", "Three tiny runs, see [the spec](../../../docs/spec.md).", "each run json's `git_commit`"))
    write_json(os.path.join(results, "runs", "cpu", "lm_gdn.json"), run_doc("abc1234def56"))
    write_json(os.path.join(results, "runs", "cpu", "recall_gdn.json"), run_doc("bcd2345ef012", task="recall"))
    write_json(os.path.join(results, "runs", "cpu", "recall_gdn.predictions.json"),
               {"task": "recall", "preset": "gdn", "step": 3})
    write_json(os.path.join(results, "runs", "cpu", "recall_attn_v16_cosine.json"),
               run_doc("bcd2345ef012", task="recall", preset="attn", values=16, schedule="cosine"))
    write(os.path.join(results, "runs", "cuda", "README.md"), "# GPU runs: being filled\n\nNone yet.\n")
    write(os.path.join(results, "bench", "README.md"), readme("Bench", "One bench run.", "1234567 (a CPU build)"))
    write_json(os.path.join(results, "bench", "bench.json"),
               {"schema": "lina-bench-1", "presets": ["attn", "gdn"], "shapes": ["64x64"], "profile": True})
    write(os.path.join(results, "device", "README.md"), readme("Device", "A device summary.", "each summary's `commit`"))
    write_json(os.path.join(results, "device", "sim", "device-summary.json"),
               {"commit": "6951b2ea0fb4", "date": "2026-12-02T15:12:55Z", "gpu": "none", "status": "ok",
                "runtime": "sim (lina's CUDA runtime on the CPU)"})
    r = index(*fake)
    check(r.returncode == 0, f"writing the fake tree's index exits 0 ({r.stderr.strip()})")
    text = open(os.path.join(results, "README.md"), encoding="utf-8").read() if r.returncode == 0 else ""
    check(index(*fake, "--check").returncode == 0, "--check passes right after writing")
    check("| [runs/cpu/lm_gdn.json](runs/cpu/lm_gdn.json) | run: lm gdn, 3 steps, batch 2, updates 3 | abc1234def56 "
          "| 2026-11-30 |" in text, "a run json: its own git_commit, the README's date, its length against the course's")
    check("| run: recall attn, 3 steps, values 16, schedule cosine, batch 2, updates 3 |" in text,
          "an ablation run json: the recipe flags it changes")
    check("## [runs/cuda/](runs/cuda/README.md): GPU runs: being filled\n\nNone yet.\n\nNo json files" in text,
          "a folder being filled: no Command/Commit/Date/Machine lines needed")
    check("| bcd2345ef012 (its run) |" in text, "a predictions file: the commit of the run beside it")
    check("| `lina bench --profile`: attn,gdn at 64x64 | 1234567 (README) |" in text,
          "a bench json: the commit its set's README names")
    check("| 6951b2ea0fb4 | 2026-12-02 |" in text, "a device summary: its own commit and date")
    check("Three tiny runs, see [the spec](../docs/spec.md)." in text,
          "a set's first paragraph, its links made relative to results/")
    check(text.index("## [bench/]") < text.index("## [device/]") < text.index("## [runs/cpu/]"),
          "one section per set, in order")

    # outside the layout: an earlier set beside the current one, a folder in runs/ that is no device, a stray file
    for extra, what in (("cpu-full", "an earlier set beside the current one"), (os.path.join("runs", "cpu-300"),
                        "a folder in runs/ that is not a device"), ("notes.md", "a stray file at the top")):
        path = os.path.join(results, extra)
        if extra.endswith(".md"):
            write(path, "notes\n")
        else:
            write(os.path.join(path, "README.md"), readme("Old", "An earlier set.", "1234567"))
        one_line_failure(index(*fake, "--check"), "is not part of the layout", what)
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    check(index(*fake, "--check").returncode == 0, "the fake tree passes again once they are gone")

    # (a) a json that is not listed
    extra = os.path.join(results, "runs", "cpu", "lm_attn.json")
    write_json(extra, run_doc("cde3456f0123", preset="attn"))
    one_line_failure(index(*fake, "--check"), "runs/cpu/lm_attn.json is not listed", "an unlisted json")
    check(index(*fake).returncode == 0 and index(*fake, "--check").returncode == 0,
          "listed once the index is written again")

    # (b) a json that names no commit: none of its own, none in its set's README; or "unknown"
    nameless = os.path.join(results, "runs", "cpu", "lm_delta.json")
    before = open(os.path.join(results, "README.md"), encoding="utf-8").read()
    for commit in (None, "unknown"):
        write_json(nameless, run_doc(commit, preset="delta"))
        one_line_failure(index(*fake, "--check"), "lm_delta.json names no commit", f"a json with commit {commit!r}")
        one_line_failure(index(*fake), "lm_delta.json names no commit", f"writing, a json with commit {commit!r}")
    check(open(os.path.join(results, "README.md"), encoding="utf-8").read() == before,
          "a failed write leaves the index as it was")
    os.remove(nameless)

    # a json in no set, and a set README without its Commit line
    cuda_readme = os.path.join(results, "runs", "cuda", "README.md")
    os.remove(cuda_readme)
    stray = os.path.join(results, "runs", "cuda", "lm_gdn.json")
    write_json(stray, run_doc("abc1234def56"))
    one_line_failure(index(*fake, "--check"), "lm_gdn.json is in no set", "a json in no set")
    os.remove(stray)
    write(cuda_readme, "# GPU runs: being filled\n\nNone yet.\n")
    bench_readme = os.path.join(results, "bench", "README.md")
    write(bench_readme, readme("Bench", "One bench run.", "1234567").replace("- **Commit**: 1234567\n", ""))
    one_line_failure(index(*fake, "--check"), "bench/README.md: no '- **Commit**", "a set README without Commit")
    write(bench_readme, readme("Bench", "One bench run.", "1234567 (a CPU build)"))
    check(index(*fake, "--check").returncode == 0, "the fake tree passes again")

    # (c) a stale index: a set's description changed, or the index edited by hand
    write(os.path.join(results, "runs", "cpu", "README.md"),
          readme("Short runs", "Three tiny runs, described anew.", "each run json's `git_commit`"))
    one_line_failure(index(*fake, "--check"), "is not what scripts/results_index.py writes", "a stale index")
    # (d) writing it again fixes it
    r = index(*fake)
    text = open(os.path.join(results, "README.md"), encoding="utf-8").read()
    check(r.returncode == 0 and "Three tiny runs, described anew." in text and index(*fake, "--check").returncode == 0,
          "writing the index again takes the new description and --check passes")
    with open(os.path.join(results, "README.md"), "a", encoding="utf-8") as f:
        f.write("a line added by hand\n")
    one_line_failure(index(*fake, "--check"), "is not what scripts/results_index.py writes", "an index edited by hand")
    os.remove(os.path.join(results, "README.md"))
    one_line_failure(index(*fake, "--check"), "is missing", "no index at all")

    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} checks failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
