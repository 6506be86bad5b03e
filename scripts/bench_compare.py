#!/usr/bin/env python3
"""Summary of scripts/bench_compare.sh's runs: per preset and shape the best
(lowest) ms per training step of each binary over the rounds, their ratio,
the after binary's model-FLOP rate as a fraction of its GEMM rate, peak
memory, each run's step times over attn's (ratios inside one run only), and
the speed targets (docs/benchmarks.md) checked one by one, and where gdn's
step spends its time beyond attn's (the after binary's profile, by op and by
product shape).
    scripts/bench_compare.py OUT_DIR ROUNDS > OUT_DIR/summary.md
"""
import json
import sys
from pathlib import Path


def load(out, which, rounds):
    runs = []
    for r in range(1, rounds + 1):
        p = out / f"{which}-{r}.json"
        if p.exists():
            runs.append(json.loads(p.read_text()))
    if not runs:
        sys.exit(f"bench_compare.py: no {which}-N.json in {out}")
    return runs


def best_train(runs):
    """(preset, shape) -> the round's entry with the lowest ms per step."""
    best = {}
    for run in runs:
        for t in run["train"]:
            key = (t["preset"], t["shape"])
            if key not in best or t["ms_per_step"] < best[key]["ms_per_step"]:
                best[key] = dict(t, gemm=run["gemm"]["lina_gflops"])
    return best


def within_run_ratios(run):
    """preset -> its ms per step over attn's at 64x64, both from the one run."""
    ms = {t["preset"]: t["ms_per_step"] for t in run["train"] if t["shape"] == "64x64"}
    if "attn" not in ms:
        return {}
    return {p: v / ms["attn"] for p, v in ms.items() if p != "attn"}


def round_ratios(run):
    """preset -> its step time over attn's in each round of a --rounds run
    (the presets of one round run seconds apart), at 64x64."""
    rows = {t["preset"]: t["ms_per_step_rounds"] for t in run["train"] if t["shape"] == "64x64"}
    if "attn" not in rows:
        return {}
    return {p: [v / a for v, a in zip(r, rows["attn"])] for p, r in rows.items() if p != "attn"}


def median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def main():
    out, rounds = Path(sys.argv[1]), int(sys.argv[2])
    before, after = load(out, "before", rounds), load(out, "after", rounds)
    b, a = best_train(before), best_train(after)
    gemm_after = max(r["gemm"]["lina_gflops"] for r in after)
    print("# lina bench: before / after\n")
    print(f"Best of {rounds} rounds per binary, run back to back (`scripts/bench_compare.sh`).")
    print("Load average before each run: " + ", ".join(
        f"{w}{i + 1} {r['load_average']['before']:.2f}" for w, runs in (("before", before), ("after", after))
        for i, r in enumerate(runs)) + ".")
    ob = [r["gemm"] for r in after if r["gemm"].get("openblas_gflops")]
    print(f"\nGEMM 4096x512x2048 float32 through lina's path (after binary, best round): "
          f"{gemm_after:.1f} GFLOP/s" + (
              f"; OpenBLAS {max(g['openblas_gflops'] for g in ob):.1f} GFLOP/s with kernels for "
              f"{ob[0].get('openblas_core') or '?'}" if ob else "; OpenBLAS not installed") + ".\n")
    print("| preset | B×T | before ms/step | after ms/step | after/before | after %GEMM "
          "| before peak RSS MB | after peak RSS MB | before tensors MB | after tensors MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(a, key=lambda k: (k[1], k[0])):
        x, y = b.get(key), a[key]
        ratio = f"{y['ms_per_step'] / x['ms_per_step']:.3f}" if x else "—"
        frac = y["model_gflops"] / gemm_after
        print(f"| {key[0]} | {key[1]} | {x['ms_per_step']:.1f} | " if x else f"| {key[0]} | {key[1]} | — | ",
              end="")
        print(f"{y['ms_per_step']:.1f} | {ratio} | {100 * frac:.1f} % | "
              f"{x['peak_rss_mb'] if x else float('nan'):.0f} | {y['peak_rss_mb']:.0f} | "
              f"{x['host_peak_mb'] if x else float('nan'):.0f} | {y['host_peak_mb']:.0f} |")
    ratios_path = out / "ratios.json"  # the after binary's separate ratio run, when there is one
    ratio_run = json.loads(ratios_path.read_text()) if ratios_path.exists() else None
    checks = []
    if ob:  # the best single-precision GEMM from Debian's packages: OpenBLAS on its own threads
        # lina's path over OpenBLAS's own threads inside each run of the after
        # binary (the two products seconds apart), the ratio run included
        gemms = [r["gemm"] for r in after] + ([ratio_run["gemm"]] if ratio_run else [])
        # newer binaries time the two in alternating pairs and record the
        # median of the pairs' ratios (lina_over_openblas); older ones timed
        # them one after the other, their ratio the two medians'
        per_run = [g.get("lina_over_openblas") or g["lina_gflops"] / g["openblas_gflops"]
                   for g in gemms if g.get("openblas_gflops")]
        checks.append(("lina's GEMM path as fast as OpenBLAS's own threads (2 % slack; median over "
                       "the after binary's runs of the ratio inside each run)",
                       median(per_run) >= 0.98,
                       ", ".join(f"{g['lina_gflops']:.0f} vs {g['openblas_gflops']:.0f}"
                                 for g in gemms if g.get("openblas_gflops")) + " GFLOP/s; ratios " +
                       ", ".join(f"{r:.3f}" for r in per_run)))
    fr = {k: v["model_gflops"] / gemm_after for k, v in a.items() if k[1] == "64x64"}
    checks.append(("every preset's model-FLOP rate >= 65 % of the GEMM rate at 64x64",
                   all(f >= 0.65 for f in fr.values()),
                   ", ".join(f"{k[0]} {100 * f:.0f} %" for k, f in sorted(fr.items()))))
    # Ratios to attn are taken inside each run (one lina bench process
    # tree, minutes apart from the others), never between the best times of
    # different runs; the target reads the median over the rounds.
    per_round = [within_run_ratios(run) for run in after]
    per_round = [r for r in per_round if r]
    if ratio_run:  # the separate ratio run: many short rounds, judged on their median
        by_preset = round_ratios(ratio_run)
        rounds_n = max(len(v) for v in by_preset.values())
        per_round = [{p: v[i] for p, v in by_preset.items() if i < len(v)} for i in range(rounds_n)]
        print("\n## Step time over attn's, at 64x64, in each round of `ratios.json` "
              "(the after binary, presets seconds apart)\n")
    elif per_round:
        print("\n## Step time over attn's, at 64x64, within each run of the after binary\n")
    if per_round:
        presets = sorted({p for r in per_round for p in r})
        print("| round | " + " | ".join(presets) + " |")
        print("|---|" + "---|" * len(presets))
        for i, r in enumerate(per_round):
            print(f"| {i + 1} | " + " | ".join(f"{r[p]:.2f}" if p in r else "—" for p in presets) + " |")
        med = {p: median([r[p] for r in per_round if p in r]) for p in presets}
        print("| median | " + " | ".join(f"{med[p]:.2f}" for p in presets) + " |")
        paired = [r for r in (ratio_run or {}).get("paired", []) if r["shape"] == "64x64"]
        how = "median over the rounds"
        if paired:  # steps alternating in one process: judged on these
            print("\n## Step time over attn's, at 64x64, both models in one process, steps "
                  f"alternating (`ratios.json`, --pairs {paired[0]['pairs']})\n")
            print("| preset | median | q1 | q3 |")
            print("|---|---|---|---|")
            for r in sorted(paired, key=lambda r: r["preset"]):
                print(f"| {r['preset']} | {r['ratio_median']:.3f} | {r['ratio_q1']:.3f} | {r['ratio_q3']:.3f} |")
            med = {r["preset"]: r["ratio_median"] for r in paired}
            how = "median over the pairs of alternating steps"
        if "gdn" in med:
            checks.append((f"gdn/attn <= 1.15 at 64x64 ({how})", med["gdn"] <= 1.15, f"{med['gdn']:.3f}"))
        checks.append(("every recurrent preset <= 1.2x attn at 64x64 (the same medians)",
                       all(r <= 1.2 for r in med.values()),
                       ", ".join(f"{p} {r:.3f}" for p, r in sorted(med.items()))))
    slower = [f"{k[0]} {a[k]['ms_per_step'] / b[k]['ms_per_step']:.2f}" for k in a
              if k[1] == "16x256" and k in b and a[k]["ms_per_step"] > b[k]["ms_per_step"]]
    checks.append(("no preset slower than before at 16x256", not slower, ", ".join(slower) or "none slower"))
    higher = [f"{k[0]} {k[1]} {b[k]['peak_rss_mb']:.0f}->{a[k]['peak_rss_mb']:.0f} MB" for k in a
              if k in b and a[k]["peak_rss_mb"] > b[k]["peak_rss_mb"] * 1.02]
    checks.append(("peak resident memory not above before's (2 % slack; compare builds of the "
                   "same kind: the CUDA libraries alone add resident memory)", not higher,
                   ", ".join(higher) or "none above"))
    print("\n## Targets (after binary)\n")
    for what, ok, detail in checks:
        print(f"- {'holds' if ok else 'DOES NOT HOLD'}: {what} ({detail})")
    profile = out / "profile-after.json"
    if profile.exists():
        print_gap(json.loads(profile.read_text()), "gdn", "attn")


def profile_ms(run, preset, by_detail):
    """(op[, detail]) -> ms per step in `preset`'s 64x64 profile, phases summed."""
    for t in run["train"]:
        if t["preset"] == preset and t["shape"] == "64x64" and "profile" in t:
            steps, out = t["profile"]["steps"], {}
            for e in t["profile"]["entries"]:
                key = e["op"] + (" " + e["detail"] if by_detail and e.get("detail") else "")
                out[key] = out.get(key, 0.0) + e["ms"] / steps
            return out
    return None


def print_gap(run, preset, base):
    """Where `preset`'s step spends its time beyond `base`'s: the profile run's
    ms per step by op, then the products by shape (the profiler's timings,
    with its hook on)."""
    for by_detail, title in ((False, "by op"), (True, "by op and product shape")):
        p, q = profile_ms(run, preset, by_detail), profile_ms(run, base, by_detail)
        if p is None or q is None:
            return
        if by_detail:
            p = {k: v for k, v in p.items() if k.startswith("matmul")}
            q = {k: v for k, v in q.items() if k.startswith("matmul")}
        keys = sorted(set(p) | set(q), key=lambda k: -abs(p.get(k, 0.0) - q.get(k, 0.0)))
        print(f"\n## {preset} against {base}, {title} (profile-after, ms per step, phases summed)\n")
        print(f"| op | {base} | {preset} | {preset} − {base} |")
        print("|---|---|---|---|")
        for k in keys:
            x, y = q.get(k, 0.0), p.get(k, 0.0)
            if max(x, y) >= 0.05:
                print(f"| {k} | {x:.2f} | {y:.2f} | {y - x:+.2f} |")
        print(f"| total | {sum(q.values()):.2f} | {sum(p.values()):.2f} | "
              f"{sum(p.values()) - sum(q.values()):+.2f} |")


if __name__ == "__main__":
    main()
