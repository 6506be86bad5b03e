#!/usr/bin/python3
"""lina's presets written in PyTorch, to time lina's training step against.

This is a yardstick, not part of lina: the course's model (docs/spec.md §1,
"spec 2", from scripts/course_model.py: four layers of 128, SwiGLU, RMSNorm,
attention with two KV heads and interleaved RoPE, the recurrent mixer with its
conv, β and log α, per-head RMSNorm and output gate) and the course's step (random
lm batches of the 65-character vocabulary, dropout 0.1, forward,
cross-entropy, backward, AdamW with PyTorch's defaults: lr 1e-3 constant,
betas 0.9/0.999, weight decay 0.01 on every parameter, no clipping), in plain
PyTorch on the CPU or a GPU. The recurrent layers train through the chunked
form of the recurrence (docs/recurrence.md §3, docs/recurrence-gated.md;
chunks of 16 tokens, the (I + A)⁻¹ of the delta rules by a triangular solve,
gla's per-channel decay inside a chunk in log space); attention is q kᵀ, a
causal mask, softmax, dropout and a product with v.

Needs Debian's python3-torch (PyTorch 1.13, CPU, on OpenBLAS):
    apt-get install python3-torch
Run with the system python3, which is the one that package installs into:
    /usr/bin/python3 scripts/torch_reference.py --presets attn,gdn --json out.json
    /usr/bin/python3 scripts/torch_reference.py --check   # chunked vs token by token
On a GPU (PyTorch 2 with CUDA; eager, every step synchronised before the clock):
    python3 scripts/torch_reference.py --device cuda --shapes 64x64,16x256 --json out.json
PyTorch at its best on a GPU: --compile MODE runs the model's forward and loss
through torch.compile (mode "default": fused kernels; "reduce-overhead": the
same, replayed as CUDA graphs), and AdamW as its fused kernel. The warm-up
steps then include the compilation (--warmup at least 3, so that CUDA graphs
are recorded before the clock starts); their time is in the json as warmup_s.
--compile capture instead records the whole eager step (forward, backward,
AdamW capturable) once as a CUDA graph and replays it, as lina's update does.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time
import traceback

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    sys.exit("torch_reference.py: PyTorch is not installed (apt-get install python3-torch; "
             "run it with /usr/bin/python3)")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import course_model as cm  # noqa: E402  (the model: docs/spec.md §1)
import presets  # noqa: E402

VOCAB, DROPOUT, CHUNK = 65, 0.1, 16
MIXERS = cm.PRESETS  # preset -> the mixer of each layer


def chunked_scan(q, k, v, beta=None, log_alpha=None, C=CHUNK):
    """The same recurrence as course_model.recurrent_scan (same arguments and
    result), chunk by chunk: T is padded at the end to a whole number of
    chunks (zero keys and values, no decay, β = 0: nothing earlier changes)."""
    B, H, T, d = q.shape
    C = min(C, T)
    pad = -T % C
    if pad:
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        beta = None if beta is None else F.pad(beta, (0, pad))
        if log_alpha is not None:
            log_alpha = F.pad(log_alpha, (0, 0, 0, pad) if log_alpha.dim() == 4 else (0, pad))
    N = (T + pad) // C
    split = lambda x: None if x is None else x.reshape(B, H, N, C, *x.shape[3:])  # noqa: E731
    q, k, v, beta, log_alpha = (split(x) for x in (q, k, v, beta, log_alpha))
    if log_alpha is not None and log_alpha.dim() == 5:
        assert beta is None, "no rule has both a per-channel decay and the delta correction"
        o = chunks_channel_decay(q, k, v, log_alpha)
    else:
        o = chunks_scalar_decay(q, k, v, beta, log_alpha)
    return o.reshape(B, H, N * C, d)[:, :, :T]


def chunks_scalar_decay(q, k, v, beta, log_alpha):
    """o for chunked q, k, v [B, H, N, C, d], β and log α [B, H, N, C] (None
    where the rule has none), S_0 = 0; docs/recurrence.md §3.3 with S value × key
    and λ_r = log α_1 + … + log α_r inside a chunk:
        O  = diag(e^λ) Q Sᵀ + (Q Kᵀ ⊙ Λ) U,      Λ_ri = e^{λ_r − λ_i} (i ≤ r)
        S' = e^{λ_C} S + Uᵀ diag(e^{λ_C − λ}) K
    with U = V (no delta correction) or U = Y − W Sᵀ, (I + A)[Y | W] =
    [diag(β) V | diag(β ⊙ e^λ) K], A = strictly_lower(diag(β)(K Kᵀ ⊙ Λ))."""
    B, H, N, C, d = q.shape
    lower = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    if log_alpha is not None:
        lam = log_alpha.cumsum(-1)                                 # λ_r, restarted every chunk
        seg = (lam[..., :, None] - lam[..., None, :]).masked_fill(~lower, float("-inf"))
        between = seg.exp()                                        # Λ_ri, 0 above the diagonal
        from_start = lam.exp()                                     # e^{λ_r}
        to_end = (lam[..., -1:] - lam).exp()                       # e^{λ_C − λ_i}
    else:
        between = lower.to(q.dtype).expand(B, H, N, C, C)
        from_start = to_end = None
    P = (q @ k.transpose(-1, -2)) * between
    if beta is not None:
        beta = beta[..., None]
        kb = k * beta
        A = ((kb @ k.transpose(-1, -2)) * between).tril(-1)
        eye = torch.eye(C, dtype=q.dtype, device=q.device)
        inv = torch.linalg.solve_triangular(eye + A, eye.expand_as(A).contiguous(), upper=False,
                                            unitriangular=True)   # (I + A)⁻¹, the UT transform
        Y = inv @ (v * beta)
        W = inv @ (kb * from_start[..., None] if from_start is not None else kb)
    S = q.new_zeros(B, H, d, d)
    out = []
    for n in range(N):
        U = Y[:, :, n] - W[:, :, n] @ S.transpose(-1, -2) if beta is not None else v[:, :, n]
        q_start = q[:, :, n] * from_start[:, :, n, :, None] if from_start is not None else q[:, :, n]
        out.append(q_start @ S.transpose(-1, -2) + P[:, :, n] @ U)
        k_end = k[:, :, n] * to_end[:, :, n, :, None] if to_end is not None else k[:, :, n]
        decay = from_start[:, :, n, -1, None, None] if from_start is not None else 1.0
        S = S * decay + U.transpose(-1, -2) @ k_end
    return torch.stack(out, dim=2)


def chunks_channel_decay(q, k, v, log_alpha):
    """o for gla's rule S_t = S_{t-1} diag(α_t) + v_t k_tᵀ, chunked: q, k, v and
    log α [B, H, N, C, d]. With λ_r the running sum of log α inside a chunk,
        o_r = S (q_r ⊙ e^{λ_r}) + Σ_{i≤r} v_i Σ_c q_rc k_ic e^{λ_rc − λ_ic}
        S'  = S diag(e^{λ_C}) + Σ_i v_i (k_i ⊙ e^{λ_C − λ_i})ᵀ
    Every exponent is ≤ 0 (the masked ones are set to −∞ before exp), so
    strong decay underflows to 0 instead of overflowing."""
    B, H, N, C, d = q.shape
    lam = log_alpha.cumsum(3)                                       # λ [B, H, N, C, d]
    lower = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()[..., None]
    between = (lam[..., :, None, :] - lam[..., None, :, :]).masked_fill(~lower, float("-inf")).exp()
    P = (q[..., :, None, :] * k[..., None, :, :] * between).sum(-1)  # [B, H, N, C, C]
    q_start = q * lam.exp()                                          # decay from the chunk's start
    k_end = k * (lam[..., -1:, :] - lam).exp()                       # decay to the chunk's end
    S = q.new_zeros(B, H, d, d)
    out = []
    for n in range(N):
        out.append(q_start[:, :, n] @ S.transpose(-1, -2) + P[:, :, n] @ v[:, :, n])
        S = S * lam[:, :, n, -1, None, :].exp() + v[:, :, n].transpose(-1, -2) @ k_end[:, :, n]
    return torch.stack(out, dim=2)


class StepLoss(nn.Module):
    """The model's mean cross-entropy for (inputs, targets): what a training step differentiates."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, idx, targets):
        return cm.loss_of(self.model(idx), targets)


def make_model(preset, vocab=VOCAB, dropout=DROPOUT, feature_map="elu1"):
    """The course's model for a preset, its recurrent layers on the chunked scan."""
    return cm.build(preset, vocab, dropout, feature_map).set_scan(chunked_scan)


def optimizer(model, lr=1e-3, weight_decay=0.01, fused=False):
    """AdamW as the course's: PyTorch's defaults, every parameter decayed."""
    extra = {"fused": True} if fused else {}  # one kernel for every tensor's update (GPU only)
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8,
                             weight_decay=weight_decay, **extra)


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def captured_step(model, opt, batch, context, warmup):
    """The whole step (forward, backward, AdamW) recorded once as a CUDA graph,
    after `warmup` eager steps on a side stream (PyTorch's recipe for whole-network
    capture): returns step(idx, targets), which copies the batch into the graph's
    static inputs and replays it, and the loss tensor every replay rewrites."""
    static_idx = torch.zeros((batch, context), dtype=torch.long)
    static_targets = torch.zeros((batch, context), dtype=torch.long)
    step_loss = StepLoss(model)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            opt.zero_grad(set_to_none=True)
            step_loss(static_idx, static_targets).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = step_loss(static_idx, static_targets)
        static_loss.backward()
        opt.step()

    def step(idx, targets):
        static_idx.copy_(idx)
        static_targets.copy_(targets)
        graph.replay()
        return static_loss
    return step


def time_steps(preset, batch, context, steps, warmup, device="cpu", compile_mode="none"):
    if compile_mode == "capture":
        return time_captured_steps(preset, batch, context, steps, warmup)
    torch.manual_seed(0)
    model = make_model(preset).train()
    compiled = compile_mode != "none"
    opt = optimizer(model, fused=compiled and device == "cuda")
    step_loss = StepLoss(model)
    step_loss = torch.compile(step_loss, mode=compile_mode) if compiled else step_loss
    ms, warmup_s = [], 0.0
    start = time.perf_counter()
    for i in range(warmup + steps):
        if i == warmup:
            warmup_s = time.perf_counter() - start
        idx = torch.randint(0, VOCAB, (batch, context))
        targets = torch.randint(0, VOCAB, (batch, context))
        synchronize(device)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = step_loss(idx, targets)
        loss.backward()
        opt.step()
        synchronize(device)
        if i >= warmup:
            ms.append(1e3 * (time.perf_counter() - t0))
    params = sum(p.numel() for p in model.parameters())
    return {"preset": preset, "shape": f"{batch}x{context}", "ms_per_step": statistics.median(ms),
            "ms_all": ms, "parameters": params, "loss": float(loss), "compile": compile_mode,
            "warmup_s": round(warmup_s, 3)}


def time_captured_steps(preset, batch, context, steps, warmup):
    """time_steps with the whole step captured (--compile capture, CUDA only):
    eager kernels, AdamW capturable and fused, one graph replay a step."""
    torch.manual_seed(0)
    model = make_model(preset).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01, capturable=True)
    start = time.perf_counter()
    step = captured_step(model, opt, batch, context, warmup)
    synchronize("cuda")
    warmup_s = time.perf_counter() - start
    ms = []
    for _ in range(steps):
        idx = torch.randint(0, VOCAB, (batch, context))
        targets = torch.randint(0, VOCAB, (batch, context))
        synchronize("cuda")
        t0 = time.perf_counter()
        loss = step(idx, targets)
        synchronize("cuda")
        ms.append(1e3 * (time.perf_counter() - t0))
    params = sum(p.numel() for p in model.parameters())
    return {"preset": preset, "shape": f"{batch}x{context}", "ms_per_step": statistics.median(ms),
            "ms_all": ms, "parameters": params, "loss": float(loss), "compile": "capture",
            "warmup_s": round(warmup_s, 3)}


def random_beta_log_alpha(rule, B, H, T, d):
    """β and log α (the decay's log) for a rule, float64, as course_model's mixer would make them."""
    f64 = {"dtype": torch.float64}
    beta = torch.rand(B, H, T, **f64) if rule in ("delta", "gdn") else None
    if rule in ("gdn", "mamba2"):
        return beta, -F.softplus(-torch.randn(B, H, T, **f64) - 2.0)
    if rule == "gla":
        return beta, -F.softplus(-torch.randn(B, H, T, d, **f64) * 2.0)
    if rule == "retnet":
        return beta, cm.retnet_log_alpha(torch.float64, "cpu")[None, :H, None].expand(B, H, T)
    return beta, None


def nan_max(values):
    """The largest of values, and NaN when any is one: Python's max() compares a NaN False
    with everything, so max(0.0, nan) is 0.0 and a NaN difference would vanish."""
    values = list(values)
    return math.nan if any(math.isnan(x) for x in values) else max(values)


def within(value, tolerance):
    """value <= tolerance, never for a NaN or an infinity."""
    return math.isfinite(value) and value <= tolerance


def check_scans():
    """Chunked against token by token, float64, every rule (T = 45: a padded last chunk)."""
    torch.manual_seed(1)
    B, H, T, d = 2, 3, 45, 8
    worst = 0.0
    for rule in cm.RECURRENT:
        q, k, v = (torch.randn(B, H, T, d, dtype=torch.float64) * 0.3 for _ in range(3))
        k = F.normalize(k, dim=-1)
        beta, log_alpha = random_beta_log_alpha(rule, B, H, T, d)
        a, b = chunked_scan(q, k, v, beta, log_alpha), cm.recurrent_scan(q, k, v, beta, log_alpha)
        diff = float((a - b).abs().max())
        print(f"{rule}: chunked vs token by token, max |difference| {diff:.2e}")
        worst = nan_max([worst, diff])
    q, k, v = (torch.randn(1, 2, 64, d, dtype=torch.float64) for _ in range(3))
    strong = torch.full((1, 2, 64, d), -40.0, dtype=torch.float64)  # α ≈ 4e-18 every token
    finite = bool(torch.isfinite(chunked_scan(q, k, v, None, strong)).all())
    print(f"gla: strong decay (log α = -40) stays finite: {finite}")
    return worst if finite else float("inf")


def check_models():
    """A whole model per preset, float64, both scans: logits and every gradient."""
    worst = 0.0
    for preset in [p for p in presets.ALL if p != "attn"]:  # every preset with a recurrent layer
        torch.manual_seed(2)
        model = cm.build(preset, VOCAB, 0.0).double()
        idx = torch.randint(0, VOCAB, (2, 40))
        diffs = []
        results = []
        for scan in (cm.recurrent_scan, chunked_scan):
            model.set_scan(scan).zero_grad()
            logits = model(idx)
            logits.pow(2).mean().backward()
            results.append([logits.detach()] + [p.grad.clone() for p in model.parameters()])
        for a, b in zip(*results):
            diffs.append(float((a - b).abs().max()) / nan_max([1e-30, float(b.abs().max())]))
        print(f"{preset}: model, chunked vs token by token, logits and gradients, "
              f"max relative |difference| {nan_max(diffs):.2e}")
        worst = nan_max([worst] + diffs)
    return worst


def check():
    worst = nan_max([check_scans(), check_models()])
    if not within(worst, 1e-10):  # a NaN or an infinity anywhere fails
        sys.exit("torch_reference.py: the chunked form does not match the token-by-token one")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--presets", default=",".join(presets.COURSE),
                    help=f"comma-separated, of {', '.join(MIXERS)}")
    ap.add_argument("--shapes", default="64x64")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--compile", default="none", choices=["none", "default", "reduce-overhead", "capture"],
                    help="torch.compile the forward and loss, AdamW fused on a GPU (PyTorch 2); "
                         "capture: the whole eager step captured as one CUDA graph (GPU only)")
    ap.add_argument("--json")
    ap.add_argument("--check", action="store_true", help="test the chunked scan against the token-by-token one, then exit")
    a = ap.parse_args()
    if a.check:
        check()
        return
    if a.steps < 1 or a.warmup < 0 or a.threads < 1:
        sys.exit("torch_reference.py: --steps and --threads must be at least 1, --warmup at least 0")
    if a.compile == "capture" and a.device != "cuda":
        sys.exit("torch_reference.py: --compile capture needs --device cuda (CUDA graphs)")
    if a.compile not in ("none", "capture") and not hasattr(torch, "compile"):
        sys.exit(f"torch_reference.py: --compile needs PyTorch 2 (this is {torch.__version__})")
    if a.compile != "none" and a.warmup < 3:
        sys.exit("torch_reference.py: --compile needs --warmup 3 or more (compilation, then CUDA graphs)")
    shapes = []
    for shape in a.shapes.split(","):
        parts = shape.split("x")
        if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
            sys.exit(f"torch_reference.py: bad shape '{shape}' (BATCHxCONTEXT, e.g. 64x64)")
        batch, context = int(parts[0]), int(parts[1])
        shapes.append((shape, batch, context))
    for preset in a.presets.split(","):
        if preset not in MIXERS:
            sys.exit(f"torch_reference.py: unknown preset '{preset}' (one of {', '.join(MIXERS)})")
    torch.set_num_threads(a.threads)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("torch_reference.py: --device cuda, but this PyTorch sees no GPU")
        torch.set_default_device("cuda")  # the model, the batches and every mask and eye
    env = {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                           "OPENBLAS_CORETYPE")}
    doc = {"schema": "lina-torch-reference-1", "torch": torch.__version__, "threads": a.threads,
           "device": torch.cuda.get_device_name() if a.device == "cuda" else "cpu",
           "environment": env, "steps": a.steps, "warmup": a.warmup, "compile": a.compile,
           "train": []}
    failed = 0
    for shape, batch, context in shapes:
        for preset in a.presets.split(","):
            try:
                r = time_steps(preset, batch, context, a.steps, a.warmup, a.device, a.compile)
            except Exception as e:  # a compiler that fails on one model: say so, time the rest
                if a.compile == "none":
                    raise
                traceback.print_exc()
                failed += 1
                first_line = (str(e).strip().splitlines() or [""])[0]
                r = {"preset": preset, "shape": shape, "compile": a.compile,
                     "error": f"{type(e).__name__}: {first_line}"[:300]}
                print(f"{preset:7s} {shape:7s} failed: {r['error']}", flush=True)
            else:
                print(f"{preset:7s} {shape:7s} {r['ms_per_step']:8.1f} ms/step  "
                      f"({r['parameters']} parameters, loss {r['loss']:.3f})", flush=True)
            doc["train"].append(r)
            if a.json:  # after every row, so that a run cut short keeps what it timed
                with open(a.json, "w") as f:
                    json.dump(doc, f, indent=1)
    if failed:
        sys.exit(f"torch_reference.py: {failed} of {len(doc['train'])} runs failed to compile")


if __name__ == "__main__":
    main()
