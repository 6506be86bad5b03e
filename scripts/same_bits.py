#!/usr/bin/env python3
"""Whether two lina binaries compute the same bits: a change that only moves
code (a refactor) must leave every number where it was.

For every preset (and the composed paths a learner steps through), both
binaries train a few updates of the lm task from the same seed, with
dropout; then each samples from its own checkpoint token by token (the
inference state), and each traces one step of a small model (every op's
name, shape and norm). The checkpoints must hold the same bytes in every
tensor (weights and AdamW's moments), the loss curves must be equal, and the
samples and traces must be the same text.

  scripts/same_bits.py --before /tmp/lina-before --after build/release/lina [--device cuda]

The same binary given twice is the same bits (the runs are deterministic);
a stand-in that trains with a learning rate 1e-3 relative off, or samples
at another temperature, is caught (tests/test_same_bits.py).
Exits 1 naming the first difference of each preset that differs.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import presets

# (name, options): every preset, and the composed paths (op by op) of the
# mixers that have them.
DEFAULT_CASES = [(p, []) for p in presets.ALL] + [
    ("attn", ["--attention", "composed"]),
    ("gdn", ["--conv", "composed"]),
    ("linear", ["--conv", "composed", "--feature-map", "relu"]),
]


def safetensors_tensors(path):
    """{name: bytes} of a safetensors file (the metadata is left out: it names the commit)."""
    with open(path, "rb") as f:
        header_len = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_len))
        data = f.read()
    return {name: data[info["data_offsets"][0]:info["data_offsets"][1]]
            for name, info in header.items() if name != "__metadata__"}


def run(cmd, what):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{proc.stderr.strip()[-2000:]}")
    return proc.stdout


DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "tinyshakespeare.txt")


def train(lina, preset, options, device, steps, out):
    cmd = [lina, "train", "--preset", preset, "--task", "lm", "--data", DATA, "--device", device, "--steps", str(steps),
           "--batch", "4", "--context", "32", "--eval-every", str(steps), "--eval-batches", "2",
           "--extrap-batches", "0", "--seed", "7", "--quiet", "--out", out] + options
    run(cmd, f"train {preset}")
    folder = os.path.join(out, device)  # one run: <task>_<preset>[-variant]_s<seed>.json
    (name,) = [f[:-len(".json")] for f in os.listdir(folder) if f.endswith(".json")]
    with open(os.path.join(folder, name + ".json")) as f:
        run_json = json.load(f)
    return run_json, os.path.join(folder, name + ".safetensors")


def compare_case(before, after, preset, options, device, steps, work):
    """The first difference between the two binaries' runs of one case, or None."""
    results = {}
    for label, lina in (("before", before), ("after", after)):
        out = os.path.join(work, label)
        run_json, checkpoint = train(lina, preset, options, device, steps, out)
        sample = run([lina, "sample", "--checkpoint", checkpoint, "--prompt", "ROMEO:", "--tokens", "40",
                      "--temperature", "0.8", "--seed", "3"], f"sample {preset}")
        trace = run([lina, "trace", "--preset", preset, "--layers", "4" if preset == "hybrid" else "1"],
                    f"trace {preset}") if not options else ""
        results[label] = (run_json["loss_curve"], safetensors_tensors(checkpoint), sample, trace)
    (loss_b, tensors_b, sample_b, trace_b), (loss_a, tensors_a, sample_a, trace_a) = (
        results["before"], results["after"])
    if loss_b != loss_a:
        return f"loss curves differ: {loss_b} vs {loss_a}"
    if sorted(tensors_b) != sorted(tensors_a):
        return f"checkpoints hold different tensors: {sorted(set(tensors_b) ^ set(tensors_a))[:5]}"
    for name in sorted(tensors_b):
        if tensors_b[name] != tensors_a[name]:
            return f"tensor {name} differs"
    if sample_b != sample_a:
        return f"samples differ: {sample_b!r} vs {sample_a!r}"
    if trace_b != trace_a:
        diff = next((b, a) for b, a in zip(trace_b.splitlines(), trace_a.splitlines()) if b != a)
        return f"traces differ: {diff[0]!r} vs {diff[1]!r}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the lina binary before the change")
    ap.add_argument("--after", required=True, help="the lina binary after it")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--steps", type=int, default=3, help="updates per run (default 3)")
    ap.add_argument("--presets", help="comma-separated presets (default: all eight and the composed paths)")
    ap.add_argument("--work", help="folder for the runs (default: a temporary one)")
    args = ap.parse_args()
    cases = DEFAULT_CASES
    if args.presets:
        cases = [(p, []) for p in args.presets.split(",")]
    work = args.work or tempfile.mkdtemp(prefix="lina-same-bits-")
    failures = 0
    for preset, options in cases:
        label = " ".join([preset] + options)
        case_work = os.path.join(work, "_".join([preset] + [o.strip("-") for o in options]))
        try:
            diff = compare_case(args.before, args.after, preset, options, args.device, args.steps, case_work)
        except RuntimeError as e:
            diff = str(e)
        failures += diff is not None
        print(f"{'same bits' if diff is None else 'DIFFERS':9}  {args.device:4}  {label}" +
              ("" if diff is None else f": {diff}"), flush=True)
    print(f"same_bits: {len(cases) - failures} of {len(cases)} cases the same bits on {args.device}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
