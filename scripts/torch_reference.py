#!/usr/bin/python3
"""lina's five presets written in PyTorch, to time lina's training step against.

This is a yardstick, not part of lina: the same model (docs/spec.md §1: four
layers of 128, four heads of 32, attention with two KV heads and RoPE, the
recurrent mixer's projections, convs, L2 norm, gates, per-head RMSNorm, the
GELU MLP) and the same step as `lina bench` times (random lm batches of the
65-character vocabulary, forward, cross-entropy, backward, gradient clip to
norm 1, AdamW), in plain PyTorch on the CPU or a GPU: autograd through the chunked
form of the recurrence (docs/recurrence.md §3, chunks of 16 tokens, the
(I + A)⁻¹ of the delta rules by a triangular solve), attention as q kᵀ,
a causal mask, softmax and a product with v.

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

VOCAB, N_EMBD, N_HEAD, HEAD, N_KV_HEAD, MLP_HIDDEN, LAYERS = 65, 128, 4, 32, 2, 512, 4
EPS = 1e-5
MIXERS = {"attn": ["attn"] * 4, "linear": ["linear"] * 4, "delta": ["delta"] * 4,
          "gdn": ["gdn"] * 4, "hybrid": ["gdn", "gdn", "gdn", "attn"]}


class RMSNorm(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * self.weight


def linear(n_in, n_out, std=0.02, bias=False):
    layer = nn.Linear(n_in, n_out, bias=bias)
    nn.init.normal_(layer.weight, 0.0, std)
    return layer


def rope(x):
    """x [B, T, H, d]: dimension j rotated with j + d/2 by t · 10000^(−2j/d)."""
    T, d = x.shape[1], x.shape[3]
    f64 = {"dtype": torch.float64, "device": x.device}  # every tensor made here is named its device
    inv_freq = 10000.0 ** (-torch.arange(0, d // 2, **f64) * 2.0 / d)
    theta = torch.arange(T, **f64)[:, None] * inv_freq[None, :]  # [T, d/2]
    cos, sin = theta.cos().to(x.dtype)[None, :, None, :], theta.sin().to(x.dtype)[None, :, None, :]
    a, b = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        kv = N_KV_HEAD * HEAD
        self.wq, self.wk, self.wv = linear(N_EMBD, N_EMBD), linear(N_EMBD, kv), linear(N_EMBD, kv)
        self.wo = linear(N_EMBD, N_EMBD, 0.02 / math.sqrt(2 * LAYERS))

    def forward(self, x):
        B, T, _ = x.shape
        q = rope(self.wq(x).view(B, T, N_HEAD, HEAD)).transpose(1, 2)      # [B, H, T, d]
        k = rope(self.wk(x).view(B, T, N_KV_HEAD, HEAD)).transpose(1, 2)   # [B, Hkv, T, d]
        v = self.wv(x).view(B, T, N_KV_HEAD, HEAD).transpose(1, 2)
        group = N_HEAD // N_KV_HEAD  # each KV head serves `group` query heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(HEAD)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        o = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v
        return self.wo(o.transpose(1, 2).reshape(B, T, N_EMBD))


def chunked_scan(q, k, v, beta, g, C=16):
    """o for q, k, v [B, H, T, d], β and log α [B, H, T] (None where the rule has
    none), S_0 = 0; the chunk formulas of docs/recurrence.md §3.3 with S "value × key":
        O  = diag(γ) Q Sᵀ + (Q Kᵀ ⊙ Γ) U
        S' = γ_C S + Uᵀ diag(δ) K
    with U = V (linear) or U = Y − W Sᵀ, (I + A)[Y | W] = [diag(β) V | diag(β ⊙ γ) K],
    A = strictly_lower(diag(β)(K Kᵀ ⊙ Γ)) (delta rules)."""
    B, H, T, d = q.shape
    C = min(C, T)
    assert T % C == 0, "T must be a whole number of chunks"
    N = T // C
    q, k, v = (x.reshape(B, H, N, C, d) for x in (q, k, v))
    lower = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    if g is not None:
        lam = g.reshape(B, H, N, C).cumsum(-1)                     # λ_r, restarted every chunk
        seg = (lam[..., :, None] - lam[..., None, :]).masked_fill(~lower, float("-inf"))
        Gamma = seg.exp()                                          # Γ_ri, 0 above the diagonal
        gamma = lam.exp()                                          # γ_r
        delta = (lam[..., -1:] - lam).exp()                        # δ_i
    else:
        Gamma = lower.to(q.dtype).expand(B, H, N, C, C)
        gamma = delta = None
    P = (q @ k.transpose(-1, -2)) * Gamma
    if beta is not None:
        beta = beta.reshape(B, H, N, C, 1)
        kb = k * beta
        A = ((kb @ k.transpose(-1, -2)) * Gamma).tril(-1)
        eye = torch.eye(C, dtype=q.dtype, device=q.device)
        inv = torch.linalg.solve_triangular(eye + A, eye.expand_as(A).contiguous(), upper=False,
                                            unitriangular=True)   # (I + A)⁻¹, the UT transform
        Y = inv @ (v * beta)
        W = inv @ (kb * gamma[..., None] if gamma is not None else kb)
    S = q.new_zeros(B, H, d, d)
    out = []
    for n in range(N):
        U = Y[:, :, n] - W[:, :, n] @ S.transpose(-1, -2) if beta is not None else v[:, :, n]
        qg = q[:, :, n] * gamma[:, :, n, :, None] if gamma is not None else q[:, :, n]
        out.append(qg @ S.transpose(-1, -2) + P[:, :, n] @ U)
        kd = k[:, :, n] * delta[:, :, n, :, None] if delta is not None else k[:, :, n]
        decay = gamma[:, :, n, -1, None, None] if gamma is not None else 1.0
        S = S * decay + U.transpose(-1, -2) @ kd
    return torch.stack(out, dim=2).reshape(B, H, T, d)


def sequential_scan(q, k, v, beta, g):
    """The token-by-token form (docs/recurrence.md §1), for --check."""
    B, H, T, d = q.shape
    S = q.new_zeros(B, H, d, d)
    out = []
    for t in range(T):
        a = g[:, :, t].exp()[..., None, None] if g is not None else 1.0
        if beta is not None:
            u = beta[:, :, t, None] * (v[:, :, t] - ((a * S) @ k[:, :, t, :, None])[..., 0])
        else:
            u = v[:, :, t]
        S = a * S + u[..., :, None] * k[:, :, t, None, :]
        out.append((S @ q[:, :, t, :, None])[..., 0])
    return torch.stack(out, dim=2)


class Recurrent(nn.Module):
    def __init__(self, rule):
        super().__init__()
        self.rule = rule
        self.wq, self.wk, self.wv = (linear(N_EMBD, N_EMBD) for _ in range(3))
        self.wo = linear(N_EMBD, N_EMBD, 0.02 / math.sqrt(2 * LAYERS))
        # depthwise conv, kernel 4, tap 3 = the current token
        self.conv = nn.ParameterList([nn.Parameter(torch.empty(N_EMBD, 1, 4).uniform_(-0.5, 0.5))
                                      for _ in range(3)])
        if rule in ("delta", "gdn"):
            self.b_proj = linear(N_EMBD, N_HEAD, bias=True)
            nn.init.zeros_(self.b_proj.bias)
        if rule == "gdn":
            self.a_proj = linear(N_EMBD, N_HEAD, bias=True)
            nn.init.constant_(self.a_proj.bias, 3.0)
        self.o_norm = RMSNorm(HEAD)

    def forward(self, x):
        B, T, _ = x.shape

        def conv_silu(y, w):  # causal: left padding of 3, the first T outputs
            return F.silu(F.conv1d(y.transpose(1, 2), w, padding=3, groups=N_EMBD)[..., :T].transpose(1, 2))

        q, k, v = (conv_silu(p(x), w).view(B, T, N_HEAD, HEAD)
                   for p, w in zip((self.wq, self.wk, self.wv), self.conv))
        if self.rule == "linear":
            q, k = F.elu(q) + 1.0, F.elu(k) + 1.0
        else:
            q, k = F.normalize(q, dim=-1, eps=1e-12), F.normalize(k, dim=-1, eps=1e-12)
        q = q / math.sqrt(HEAD)
        beta = torch.sigmoid(self.b_proj(x)) if self.rule in ("delta", "gdn") else None
        g = -F.softplus(-self.a_proj(x)) if self.rule == "gdn" else None  # log α
        heads = lambda t: t.transpose(1, 2)  # [B, T, H, ...] → [B, H, T, ...]
        o = chunked_scan(heads(q), heads(k), heads(v),
                         None if beta is None else heads(beta), None if g is None else heads(g))
        o = self.o_norm(o.transpose(1, 2))  # per head, weight shared by the heads
        return self.wo(o.reshape(B, T, N_EMBD))


class Block(nn.Module):
    def __init__(self, mixer):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(N_EMBD), RMSNorm(N_EMBD)
        self.mixer = Attention() if mixer == "attn" else Recurrent(mixer)
        self.fc = linear(N_EMBD, MLP_HIDDEN)
        self.proj = linear(MLP_HIDDEN, N_EMBD, 0.02 / math.sqrt(2 * LAYERS))

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        return x + self.proj(F.gelu(self.fc(self.norm2(x)), approximate="tanh"))


class Model(nn.Module):
    def __init__(self, preset):
        super().__init__()
        self.tok_emb = nn.Embedding(VOCAB, N_EMBD)
        nn.init.normal_(self.tok_emb.weight, 0.0, 0.02)
        self.layers = nn.ModuleList(Block(m) for m in MIXERS[preset])
        self.norm_f = RMSNorm(N_EMBD)
        self.head = linear(N_EMBD, VOCAB)

    def forward(self, idx, targets):
        x = self.tok_emb(idx)
        for layer in self.layers:
            x = layer(x)
        logits = self.head(self.norm_f(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def optimizer(model, fused=False):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    extra = {"fused": True} if fused else {}  # one kernel for every tensor's update (GPU only)
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": rest, "weight_decay": 0.0}], lr=1e-3, betas=(0.9, 0.99),
                             eps=1e-8, **extra)  # lina train's AdamW


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def time_steps(preset, batch, context, steps, warmup, device="cpu", compile_mode="none"):
    torch.manual_seed(0)
    model = Model(preset)
    compiled = compile_mode != "none"
    opt = optimizer(model, fused=compiled and device == "cuda")
    step_loss = torch.compile(model, mode=compile_mode) if compiled else model
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
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        synchronize(device)
        if i >= warmup:
            ms.append(1e3 * (time.perf_counter() - t0))
    params = sum(p.numel() for p in model.parameters())
    return {"preset": preset, "shape": f"{batch}x{context}", "ms_per_step": statistics.median(ms),
            "ms_all": ms, "parameters": params, "loss": float(loss), "compile": compile_mode,
            "warmup_s": round(warmup_s, 3)}


def check():
    """Chunked against token by token, float64, every rule: the largest difference."""
    torch.manual_seed(1)
    B, H, T, d = 2, 3, 48, 8
    worst = 0.0
    for rule in ("linear", "delta", "gdn"):
        q, k, v = (torch.randn(B, H, T, d, dtype=torch.float64) * 0.3 for _ in range(3))
        k = F.normalize(k, dim=-1)
        beta = torch.rand(B, H, T, dtype=torch.float64) if rule != "linear" else None
        g = -F.softplus(-torch.randn(B, H, T, dtype=torch.float64) - 2.0) if rule == "gdn" else None
        a, b = chunked_scan(q, k, v, beta, g, C=16), sequential_scan(q, k, v, beta, g)
        diff = float((a - b).abs().max())
        print(f"{rule}: chunked vs token by token, max |difference| {diff:.2e}")
        worst = max(worst, diff)
    if worst > 1e-10:
        sys.exit("torch_reference.py: the chunked form does not match the token-by-token one")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--presets", default="attn,linear,delta,gdn,hybrid")
    ap.add_argument("--shapes", default="64x64")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--compile", default="none", choices=["none", "default", "reduce-overhead"],
                    help="torch.compile the forward and loss, AdamW fused on a GPU (PyTorch 2)")
    ap.add_argument("--json")
    ap.add_argument("--check", action="store_true", help="test the chunked scan, then exit")
    a = ap.parse_args()
    if a.check:
        check()
        return
    if a.steps < 1 or a.warmup < 0 or a.threads < 1:
        sys.exit("torch_reference.py: --steps and --threads must be at least 1, --warmup at least 0")
    if a.compile != "none" and not hasattr(torch, "compile"):
        sys.exit(f"torch_reference.py: --compile needs PyTorch 2 (this is {torch.__version__})")
    if a.compile != "none" and a.warmup < 3:
        sys.exit("torch_reference.py: --compile needs --warmup 3 or more (compilation, then CUDA graphs)")
    shapes = []
    for shape in a.shapes.split(","):
        parts = shape.split("x")
        if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
            sys.exit(f"torch_reference.py: bad shape '{shape}' (BATCHxCONTEXT, e.g. 64x64)")
        batch, context = int(parts[0]), int(parts[1])
        if context % min(16, context):
            sys.exit(f"torch_reference.py: context {context} is not a whole number of 16-token chunks")
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
