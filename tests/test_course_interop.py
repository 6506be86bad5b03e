#!/usr/bin/env python3
"""ctest course_interop: lina's checkpoints load into the course's PyTorch
model (scripts/course_model.py, docs/spec.md §1.4) with strict names and
shapes, and give the same numbers.

Without lina: the PyTorch model's parameter counts are spec §1.4's, the
hand-written safetensors reader reads a file written here, every preset's
state_dict survives a write and a strict load, RoPE turns the pairs
(2j, 2j+1), and one step of each write rule is the spec's formula.

With lina, for each preset, on the first 20,000 characters of tiny shakespeare:
a checkpoint at update 0, then one update from it (lina train --resume
--save-batches), both loaded with load_state_dict(strict=True); `lina eval`'s
loss against the same windows scored in float64 PyTorch (relative 1e-5);
then the update: lina's gradient (its first moment / 0.1) against PyTorch's
float64 gradient on the saved batch (1e-4 of the tensor's largest, and each
element within 1e-3 of PyTorch's or 6e-8, the small ones included), lina's
new weights against AdamW's formula on lina's own moments (1e-6), and
against PyTorch's AdamW step (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight
decay 0.01) from the update-0 weights (every element: 1e-6, plus where the
gradient is small what that step makes of the gradient's bound; see
check_adamw). One recall run
(hybrid) likewise, without the eval: its parameter count is spec §1.4's,
its saved batch is §2.2's and the update's loss is only where the mask is 1.

    tests/test_course_interop.py --lina build/release/lina --work /tmp/interop [--presets gdn,attn]

Needs Debian's python3-torch (run under /usr/bin/python3); prints
"SKIPPED: ..." without it.
"""
import argparse
import glob
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import system_torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import presets  # noqa: E402

PY = "/usr/bin/python3"
PRESETS = ",".join(presets.ALL)
TEXT_CHARS, TRAIN_CONTEXT, EVAL_CONTEXT = 20000, 32, 64
LOSS_RTOL, PARAM_ATOL, GRAD_RTOL = 1e-5, 1e-6, 1e-4
LR, BETAS, ADAM_EPS, WEIGHT_DECAY = 1e-3, (0.9, 0.999), 1e-8, 0.01  # AdamW as PyTorch's defaults
# Each element of lina's gradient: within GRAD_EACH_RTOL of PyTorch's, or GRAD_ATOL absolute
# (lina's float32 sums leave gradients off by up to 2.9e-8 absolute: hybrid's q_proj).
GRAD_EACH_RTOL, GRAD_ATOL = 1e-3, 6e-8
SMALL_GRAD = 1e-6  # below this, AdamW's first step amplifies the gradient's error past PARAM_ATOL
failures = []
PLANTED = False  # True while a planted defect is checked (planted_failures)


def check(condition, what):
    if PLANTED:  # a check on a planted defect: its failure is expected, and counted by planted_failures
        print(("  planted, passes: " if condition else "  planted, caught: ") + what, flush=True)
    else:
        print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what)
    return condition


def finite_or_inf(x):
    """x as a size to compare: a NaN counts as +inf, larger than any tolerance (in Python a
    NaN compares False with everything, so max() and `worst < tol` would let it pass)."""
    return math.inf if math.isnan(x) else x


def nan_max(a, b):
    """The larger of a and b, and NaN when either is one (max(0.0, nan) is 0.0)."""
    return math.nan if math.isnan(a) or math.isnan(b) else max(a, b)


def worst_of(diffs):
    """(name, value) of the largest value in a dict; a NaN is the largest of all."""
    name = max(diffs, key=lambda n: finite_or_inf(diffs[n]))
    return name, diffs[name]


def within(value, tolerance):
    """value <= tolerance for a number; never for a NaN or an infinity."""
    return math.isfinite(value) and value <= tolerance


def planted_failures(run):
    """The checks that fail while run() runs, kept apart from the real ones and printed
    as 'planted, caught': a planted defect must make checks fail."""
    global failures, PLANTED
    real, failures, PLANTED = failures, [], True
    try:
        run()
    finally:
        found, failures, PLANTED = failures, real, False
    return found


def check_nan_helpers():
    """The comparisons above, on planted NaNs and infinities: the first, a middle and the
    last entry of a dict (the old max(..., key=) kept a NaN only when it came first)."""
    for bad in (math.nan, math.inf):
        for at in range(3):
            diffs = {name: 1e-9 for name in "abc"}
            diffs["abc"[at]] = bad
            name, worst = worst_of(diffs)
            check(name == "abc"[at] and not within(worst, 1e-6),
                  f"worst_of finds a planted {bad} at entry {at} and it is not within a tolerance")
    check(math.isnan(nan_max(0.0, math.nan)) and math.isnan(nan_max(math.nan, 0.0)) and nan_max(1.0, 2.0) == 2.0,
          "nan_max keeps a NaN on either side")
    check(not within(math.nan, 1.0) and not within(math.inf, math.inf) and within(0.5, 1.0),
          "within: a NaN or an infinity is never within a tolerance")


def reexec_under_system_python():
    """ctest runs this with whatever python3 it found; the torch is /usr/bin/python3's."""
    if os.path.realpath(sys.executable) == os.path.realpath(PY) or os.environ.get("LINA_INTEROP_CHILD"):
        return
    system_torch.skip_unless_available()
    env = dict(os.environ, LINA_INTEROP_CHILD="1")
    sys.exit(subprocess.run([PY, os.path.abspath(__file__)] + sys.argv[1:], env=env).returncode)


# ---- without lina ------------------------------------------------------------------------

def write_safetensors(path, tensors, metadata):
    """A safetensors file written by hand (float32 and float64 tensors), to test the reader."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()
        kind = {torch.float32: "F32", torch.float64: "F64"}[t.dtype]
        header[name] = {"dtype": kind, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def check_loader(work):
    path = os.path.join(work, "synthetic.safetensors")
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3) - 2.5
    b = torch.tensor([1e-30, -3.25, math.pi], dtype=torch.float64)
    meta = {"preset": "gdn", "vocab": "65", "vocab_chars": "[10, 32, 97]"}
    write_safetensors(path, {"w": a, "optim.m.w": a * 2, "b": b}, meta)
    tensors, got = cm.load_lina_checkpoint(path)
    check(set(tensors) == {"w", "optim.m.w", "b"} and torch.equal(tensors["w"], a)
          and torch.equal(tensors["b"], b) and tensors["w"].dtype == torch.float32,
          "the safetensors reader: names, shapes, dtypes and values of a file written here")
    check(got == meta and json.loads(got["vocab_chars"]) == [10, 32, 97], "the reader returns the metadata")
    check(set(cm.model_tensors(tensors)) == {"w", "b"}, "model_tensors leaves out optim.*")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 4)
    try:
        cm.load_lina_checkpoint(path)
        check(False, "a truncated file is refused")
    except ValueError as e:
        check("offsets" in str(e), f"a truncated file is refused ({e})")


def check_round_trip(work):
    """Every preset's state_dict, written and read back, loads strictly into a fresh model."""
    ok = True
    for preset in cm.PRESETS:
        torch.manual_seed(0)
        a, b = cm.build(preset, 65, 0.0), cm.build(preset, 65, 0.0)
        path = os.path.join(work, f"round_trip_{preset}.safetensors")
        write_safetensors(path, a.state_dict(), {"preset": preset})
        b.load_state_dict(cm.model_tensors(cm.load_lina_checkpoint(path)[0]), strict=True)
        idx = torch.randint(0, 65, (1, 9))
        ok &= bool(torch.equal(a.eval()(idx), b.eval()(idx)))
    check(ok, "every preset's state_dict survives a write and a strict load (same logits)")


def check_rope():
    """A unit vector on dimension 2j at position t turns into (cos, sin)(t · 10000^(−2j/32)) on (2j, 2j+1)."""
    worst = 0.0
    for j in (0, 3, 15):
        x = torch.zeros(1, 1, 7, 32, dtype=torch.float64)
        x[..., 2 * j] = 1.0
        y = cm.rope(x)
        for t in range(7):
            angle = t * 10000.0 ** (-2 * j / 32)
            want = torch.zeros(32, dtype=torch.float64)
            want[2 * j], want[2 * j + 1] = math.cos(angle), math.sin(angle)
            worst = nan_max(worst, float((y[0, 0, t] - want).abs().max()))
    check(within(worst, 1e-12), f"RoPE turns the interleaved pairs (2j, 2j+1) by t·10000^(-2j/32) ({worst:.1e})")


def check_one_step_rules():
    """Two tokens of each rule against the spec's formulas, written out for one head."""
    torch.manual_seed(3)
    q, k, v = (torch.randn(1, 1, 2, 4, dtype=torch.float64) for _ in range(3))
    beta, za = torch.rand(1, 1, 2, dtype=torch.float64), torch.randn(1, 1, 2, dtype=torch.float64)
    alpha = torch.sigmoid(za)
    k0, k1, v0, v1 = k[0, 0, 0], k[0, 0, 1], v[0, 0, 0], v[0, 0, 1]
    b0, b1, a1 = beta[0, 0, 0], beta[0, 0, 1], alpha[0, 0, 1]
    want = {"linear": torch.outer(v0, k0) + torch.outer(v1, k1)}
    S = b0 * torch.outer(v0, k0)
    want["delta"] = S - b1 * torch.outer(S @ k1 - v1, k1)
    S = b0 * torch.outer(v0, k0)
    want["gdn"] = a1 * S - b1 * torch.outer(a1 * S @ k1 - v1, k1)
    gates = {"linear": (None, None), "delta": (beta, None), "gdn": (beta, -F.softplus(-za))}
    worst = 0.0
    for rule, S1 in want.items():
        o = cm.recurrent_scan(q, k, v, *gates[rule])
        worst = nan_max(worst, float((o[0, 0, 1] - S1 @ q[0, 0, 1]).abs().max()))
    check(within(worst, 1e-12), f"linear, delta and gdn: two tokens as spec §1.2's formulas, o = S q ({worst:.1e})")


def offline_checks(work):
    counts = subprocess.run([PY, os.path.join(ROOT, "scripts", "course_model.py")], capture_output=True, text=True)
    print(counts.stdout.rstrip())
    check(counts.returncode == 0, "the PyTorch model's parameter counts are spec §1.4's for every preset")
    check_loader(work)
    check_round_trip(work)
    check_rope()
    check_one_step_rules()
    check_nan_helpers()


# ---- with lina ---------------------------------------------------------------------------

def run_lina(lina, *args):
    """lina's exit code and output (stdout, stderr)."""
    r = subprocess.run([lina, *args], capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout, r.stderr


def one_checkpoint(folder):
    found = sorted(glob.glob(os.path.join(folder, "cpu", "*.safetensors")))
    return found[0] if len(found) == 1 else None


def lina_runs(lina, preset, work, task_args):
    """(update-0 checkpoint, update-1 checkpoint, batches.jsonl) from lina, or None."""
    name = preset + ("_recall" if "recall" in task_args else "")
    out0, out1 = os.path.join(work, name), os.path.join(work, name + "1")
    shutil.rmtree(out0, ignore_errors=True)
    shutil.rmtree(out1, ignore_errors=True)
    batches = os.path.join(out0, "batches.jsonl")
    # the least evaluation each task allows: these runs are read for their weights and batch
    least_eval = ["--fresh-batches", "1", "--probe-batches", "1"] if "recall" in task_args else []
    rc, _, err = run_lina(lina, "train", "--preset", preset, *task_args, "--steps", "1", "--stop-at", "0",
                          "--batch", "4", "--dropout", "0", "--eval-batches", "1", *least_eval, "--out", out0, "--quiet")
    ckpt0 = one_checkpoint(out0)
    if not check(rc == 0 and ckpt0, f"{name}: lina train writes one checkpoint at update 0 {err.strip()[-300:]}"):
        return None
    no_extrapolation = [] if "recall" in task_args else ["--extrap-batches", "0"]  # not kept in a checkpoint
    rc, _, err = run_lina(lina, "train", "--resume", ckpt0, *no_extrapolation, "--out", out1, "--save-batches", batches, "--quiet")
    ckpt1 = one_checkpoint(out1)
    if not check(rc == 0 and ckpt1 and os.path.isfile(batches),
                 f"{name}: lina train --resume makes one update and saves its batch {err.strip()[-300:]}"):
        return None
    return ckpt0, ckpt1, batches


def load_both(preset, ckpt0, ckpt1):
    """The two checkpoints as float64 PyTorch models, loaded strictly: (model0, model1,
    tensors1, metadata1) or None."""
    try:
        model0, _, meta0 = cm.model_from_checkpoint(ckpt0, dtype=torch.float64)
        model1, tensors1, meta1 = cm.model_from_checkpoint(ckpt1, dtype=torch.float64)
    except Exception as e:  # a missing, extra or misshapen name: say which
        check(False, f"{preset}: load_state_dict(strict=True) of lina's checkpoints: {e}")
        return None
    layers = json.loads(meta0["config"])["layers"]
    check(True, f"{preset}: both checkpoints load with load_state_dict(strict=True) (layers {','.join(layers)})")
    return model0, model1, tensors1, meta1


def encode(text_path, meta):
    """Character ids of the text: the rank of each byte in the checkpoint's vocab_chars."""
    rank = {byte: i for i, byte in enumerate(json.loads(meta["vocab_chars"]))}
    with open(text_path, "rb") as f:
        return torch.tensor([rank[b] for b in f.read()], dtype=torch.int64)


def window_loss(model, ids, context):
    """lina eval's number: mean cross-entropy over disjoint windows of context + 1 characters."""
    n = len(ids) // (context + 1)
    rows = ids[:n * (context + 1)].view(n, context + 1)
    total = 0.0
    with torch.no_grad():
        for start in range(0, n, 64):
            x, y = rows[start:start + 64, :-1], rows[start:start + 64, 1:]
            total += float(cm.loss_of(model(x), y)) * len(x)
    return total / n


def check_eval(lina, preset, ckpt1, model1, meta1, text):
    rc, out, err = run_lina(lina, "eval", "--checkpoint", ckpt1, "--text", text, "--context", str(EVAL_CONTEXT))
    try:
        theirs = float(out.strip().split()[-1])
    except (ValueError, IndexError):
        return check(False, f"{preset}: lina eval prints one number (exit {rc}: {out.strip()[-100:]} {err.strip()[-200:]})")
    ours = window_loss(model1.eval(), encode(text, meta1), EVAL_CONTEXT)
    rel = abs(theirs - ours) / abs(ours)
    return check(rc == 0 and within(rel, LOSS_RTOL), f"{preset}: lina eval {theirs:.7f}, PyTorch float64 {ours:.7f} "
                 f"(relative difference {rel:.1e}, at most {LOSS_RTOL:g})")


def saved_batch(path):
    """x, y and mask (or None) of the first update in lina's batches.jsonl."""
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    first = [r for r in rows if r.get("step") == 1] or rows[:1]
    if not first:
        raise ValueError(f"{path} holds no batch")
    r = first[0]
    mask = None if r.get("mask") is None else torch.tensor(r["mask"], dtype=torch.float64)
    return torch.tensor(r["x"], dtype=torch.int64), torch.tensor(r["y"], dtype=torch.int64), mask


def torch_step(model0, batches):
    """PyTorch's AdamW, one step from the update-0 weights on lina's batch, in float64:
    (loss, gradients, updated weights), by name."""
    x, y, mask = saved_batch(batches)
    model0.train()  # dropout is 0: train mode changes nothing but is what lina ran
    opt = torch.optim.AdamW(model0.parameters(), lr=LR, betas=BETAS, eps=ADAM_EPS, weight_decay=WEIGHT_DECAY)
    opt.zero_grad()
    loss = cm.loss_of(model0(x), y, mask)
    loss.backward()
    before = {n: p.detach().clone() for n, p in model0.named_parameters()}
    grads = {n: p.grad.detach().clone() for n, p in model0.named_parameters()}
    opt.step()
    return float(loss), before, grads, {n: p.detach().clone() for n, p in model0.named_parameters()}


def check_adamw(preset, model0, tensors1, batches, plant=False):
    """lina's update against PyTorch's, in three parts: (1) lina's gradient (its first moment
    / (1 − β1)) is PyTorch's; (2) lina's new weights are AdamW's formula applied to lina's own
    moments; (3) lina's new weights are PyTorch's AdamW step, every element. Where |g| is
    near eps (1e-8), the step lr·g/(|g| + eps) moves by up to lr/eps = 1e5 per unit of
    gradient error, so a gradient within its bound (6e-8) may move such a weight by up
    to the whole step: there the bound is 1e-6 plus what the step makes of the gradient's
    bound (adamw_step_error): 1e-6 within 1 % from |g| = 1e-5, and a hundredth of the
    step itself at |g| = 3e-7. With plant, NaNs planted in lina's tensors must then fail these
    checks."""
    step = torch_step(model0, batches)
    if not check(all("optim.m." + n in tensors1 and "optim.v." + n in tensors1 for n in step[2]),
                 f"{preset}: lina's checkpoint holds optim.m.* and optim.v.*"):
        return
    compare_adamw(preset, step, tensors1)
    if plant:
        check_planted_nans(preset, step, tensors1)
        check_planted_small_errors(preset, step, tensors1)


def adamw_step_error(g):
    """How far AdamW's first step, lr·g/(|g| + eps) (m̂ = g, √v̂ = |g|), may move when its
    gradient g is off by up to d = GRAD_EACH_RTOL·|g| + GRAD_ATOL (part 1's bound): d times
    the step's steepest slope over [g − d, g + d], lr·eps/(max(|g| − d, 0) + eps)²."""
    d = GRAD_EACH_RTOL * g.abs() + GRAD_ATOL
    return LR * ADAM_EPS * d / ((g.abs() - d).clamp(min=0) + ADAM_EPS) ** 2


def compare_adamw(preset, step, tensors1):
    """check_adamw's three parts, given PyTorch's step (torch_step) and lina's tensors."""
    loss, before, grads, after = step
    lina_g = {n: tensors1["optim.m." + n].double() / (1 - BETAS[0]) for n in grads}
    rel = {n: float((lina_g[n] - g).abs().max()) / nan_max(float(g.abs().max()), 1e-30) for n, g in grads.items()}
    each = {n: float(((lina_g[n] - g).abs() / (GRAD_EACH_RTOL * g.abs() + GRAD_ATOL)).max()) for n, g in grads.items()}
    name, worst = worst_of(rel)
    each_name, each_worst = worst_of(each)
    check(within(worst, GRAD_RTOL) and within(each_worst, 1.0),
          f"{preset}: lina's gradient (first moment / 0.1) is PyTorch's, loss {loss:.6f} "
          f"(worst {name}: max |difference| {worst:.1e} of max |gradient|, at most {GRAD_RTOL:g}; each element "
          f"within {GRAD_EACH_RTOL:g}·|gradient| + {GRAD_ATOL:g}: worst {each_name} at {each_worst:.2f} of that)")
    own = {}
    for n, p0 in before.items():
        v_hat = tensors1["optim.v." + n].double() / (1 - BETAS[1])
        want = p0 * (1 - LR * WEIGHT_DECAY) - LR * lina_g[n] / (v_hat.sqrt() + ADAM_EPS)
        own[n] = float((want - tensors1[n].double()).abs().max())
    name, worst = worst_of(own)
    check(within(worst, PARAM_ATOL), f"{preset}: lina's new weights are AdamW's formula on lina's own moments "
          f"(worst {name}: {worst:.1e}, at most {PARAM_ATOL:g})")
    full, small, small_worst = {}, 0, 0.0
    for n, p1 in after.items():
        diff = (p1 - tensors1[n].double()).abs()
        full[n] = float((diff / (PARAM_ATOL + adamw_step_error(grads[n]))).max())
        tiny = (grads[n].abs() < SMALL_GRAD) & (grads[n] != 0)
        small += int(tiny.sum())
        small_worst = nan_max(small_worst, float(diff[tiny].max()) if bool(tiny.any()) else 0.0)
    name, worst = worst_of(full)
    check(within(worst, 1.0), f"{preset}: PyTorch's AdamW step gives lina's new weights, every element within "
          f"{PARAM_ATOL:g} plus what the step makes of the gradient's bound (worst {name} at {worst:.2f} of that; "
          f"the {small} elements with 0 < |gradient| < {SMALL_GRAD:g} differ by up to {small_worst:.1e})")


def check_planted_nans(preset, step, tensors1):
    """One NaN planted in lina's first moment, second moment or new weights, of a middle
    parameter and of the last (not the first: max(..., key=) kept a NaN only there), must
    make compare_adamw fail: the checks themselves are tested on the real update."""
    names = list(step[2])
    for name in (names[len(names) // 2], names[-1]):
        for key in ("optim.m." + name, "optim.v." + name, name):
            planted = dict(tensors1)
            planted[key] = tensors1[key].clone()
            planted[key].view(-1)[planted[key].numel() // 2] = math.nan
            failed = planted_failures(lambda: compare_adamw(f"{preset} with a NaN in {key}", step, planted))
            check(len(failed) > 0, f"{preset}: a NaN planted in lina's {key} fails {len(failed)} of the 3 "
                  "AdamW checks")


def check_planted_small_errors(preset, step, tensors1):
    """Errors in one element: the smallest non-zero gradient of all off by 5 times its
    bound (GRAD_EACH_RTOL·|g| + GRAD_ATOL), and the new weight where that parameter's
    gradient is largest off by 5e-6, must each fail."""
    grads = step[2]
    smallest = {n: float(torch.where(g != 0, g.abs(), math.inf).min()) for n, g in grads.items()}
    name = min(smallest, key=smallest.get)
    g = grads[name].view(-1)
    at = int(torch.where(g != 0, g.abs(), math.inf).argmin())
    error = 5 * (GRAD_EACH_RTOL * abs(float(g[at])) + GRAD_ATOL)
    for key, where, by, what in (("optim.m." + name, at, (1 - BETAS[0]) * error,
                                  f"its smallest gradient ({float(g[at]):.1e}) off by {error:.1e}"),
                                 (name, int(g.abs().argmax()), 5e-6, "a new weight off by 5e-6")):
        planted = dict(tensors1)
        planted[key] = tensors1[key].clone()
        planted[key].view(-1)[where] += by
        failed = planted_failures(lambda: compare_adamw(f"{preset} with {key} {what}", step, planted))
        check(len(failed) > 0, f"{preset}: {name} with {what} fails {len(failed)} of the 3 AdamW checks")


def recall_checks(lina, work, preset):
    """A recall run: vocabulary 128, the loss only where the mask is 1 (spec §2.2)."""
    runs = lina_runs(lina, preset, work, ["--task", "recall"])
    loaded = runs and load_both(preset + "_recall", runs[0], runs[1])
    if not loaded:
        return
    model0, _, tensors1, meta1 = loaded
    n = sum(p.numel() for p in model0.parameters())
    want = cm.SPEC_PARAMS.get((preset, 128))
    check(want is None or n == want, f"{preset}_recall: {n:,d} parameters (spec §1.4: {want:,d})")
    x, y, mask = saved_batch(runs[2])
    second_half = [i for i, m in enumerate(mask[0].tolist()) if m]
    check(x.shape == (4, 127) and torch.equal(x[:, 1:], y[:, :-1]) and second_half == list(range(64, 127, 2))
          and bool((y[mask > 0] >= 64).all()), f"{preset}_recall: lina's saved batch is 4 sequences of 127 "
          "inputs, the mask on the second half's values")
    check_adamw(preset + "_recall", model0, tensors1, runs[2], plant=True)


def lina_checks(lina, work, presets, recall_preset):
    if not check(os.path.isfile(lina) and os.access(lina, os.X_OK), f"lina is at {lina}"):
        return
    _, out, err = run_lina(lina, "train", "--help")
    if not check("--save-batches" in out + err, "lina train --help lists --save-batches"):
        return
    source = os.path.join(ROOT, "data", "tinyshakespeare.txt")
    text = os.path.join(work, "text.txt")
    with open(source, "rb") as f, open(text, "wb") as g:
        g.write(f.read(TEXT_CHARS))
    lm_args = ["--task", "lm", "--data", text, "--context", str(TRAIN_CONTEXT), "--extrap-batches", "0"]
    for preset in presets:
        runs = lina_runs(lina, preset, work, lm_args)
        loaded = runs and load_both(preset, runs[0], runs[1])
        if not loaded:
            continue
        model0, model1, tensors1, meta1 = loaded
        check_eval(lina, preset, runs[1], model1, meta1, text)
        check_adamw(preset, model0, tensors1, runs[2], plant=preset == presets[0])
    if recall_preset:
        recall_checks(lina, work, recall_preset)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lina", help="the lina binary (without it: only the checks that need no lina)")
    ap.add_argument("--work", help="a folder for the runs (default: a temporary one)")
    ap.add_argument("--presets", default=PRESETS, help="lm runs, comma-separated")
    ap.add_argument("--recall-preset", default="hybrid", help="one recall run ('' for none)")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="course_interop_")
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(1)  # small ops: more threads only contend (2 cores here)
    offline_checks(work)
    if a.lina:
        lina_checks(os.path.abspath(a.lina), work, [p for p in a.presets.split(",") if p], a.recall_preset)
    else:
        print("note: no --lina, so only the checks without lina ran")
    print("course_interop: " + ("FAILED: " + "; ".join(failures) if failures else "all checks passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    reexec_under_system_python()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:  # under /usr/bin/python3 itself, which reexec_under_system_python did not check
        system_torch.unavailable(f"{sys.executable} cannot import torch ({e})")
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import course_model as cm
    sys.exit(main())
