#!/usr/bin/python3
"""The course's model ("spec 2", docs/spec.md §1) in PyTorch, and a reader of
lina's checkpoints. Not part of lina: an independent second implementation,
written from the spec, that lina's checkpoints load into unchanged.

The module names and shapes are those of spec §1.4, so that
`model.load_state_dict(tensors, strict=True)` takes a lina checkpoint as it
is. The recurrence is written token by token (the readable reference); a
faster, equivalent form can be plugged in with `model.set_scan(fn)`
(scripts/torch_reference.py has a chunked one).

    import course_model as cm
    tensors, meta = cm.load_lina_checkpoint("runs/cpu/lm_gdn.safetensors")
    model = cm.build(json.loads(meta["config"])["layers"], int(meta["vocab"]), dropout=0.0)
    model.load_state_dict(cm.model_tensors(tensors), strict=True)
    logits = model(ids)                      # ids [B, T] int64 -> [B, T, vocab]

    /usr/bin/python3 scripts/course_model.py   # prints the parameter count of every preset
"""
import json
import math
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import presets

N_EMBD, N_HEAD, HEAD, N_KV_HEAD = 128, 4, 32, 2
HIDDEN = (int(8 * N_EMBD / 3) + 7) // 8 * 8  # SwiGLU width: 344
EPS = 1e-6
RECURRENT = presets.RECURRENT
MIXERS = presets.MIXERS
PRESETS = {name: presets.layers_of(name) for name in presets.ALL}  # preset -> the mixer of each layer
FEATURE_MAPS = ("elu1", "relu", "sigmoid")


def layers_of(preset):
    """The mixer of each layer for a preset name or a pattern such as "gla,gla,gla,attn"."""
    if preset in PRESETS:
        return list(PRESETS[preset])
    layers = preset.split(",")
    if len(layers) < 2 or any(m not in MIXERS for m in layers):
        raise ValueError(f"unknown preset '{preset}' (one of {', '.join(PRESETS)}, "
                         f"or a comma-separated list of {', '.join(MIXERS)})")
    return layers


class RMSNorm(nn.Module):
    """x / sqrt(mean(x²) + eps) · w over the last dimension."""

    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * self.weight


def rope(x):
    """Rotary positions on x [B, H, T, d], interleaved: dimensions (2j, 2j+1) of
    each head turn together by the angle t · 10000^(−2j/d), t counted from 0."""
    T, d = x.shape[2], x.shape[3]
    f64 = {"dtype": torch.float64, "device": x.device}
    freq = 10000.0 ** (-torch.arange(0, d, 2, **f64) / d)          # [d/2]
    angle = torch.arange(T, **f64)[:, None] * freq[None, :]          # [T, d/2]
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    turned = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
    return turned.flatten(-2)                                        # back to (2j, 2j+1) pairs


class Attention(nn.Module):
    """Causal softmax attention with RoPE, 4 query heads and 2 KV heads (spec §1.1)."""

    def __init__(self, dropout):
        super().__init__()
        kv = N_KV_HEAD * HEAD
        self.q_proj = nn.Linear(N_EMBD, N_HEAD * HEAD, bias=False)
        self.k_proj = nn.Linear(N_EMBD, kv, bias=False)
        self.v_proj = nn.Linear(N_EMBD, kv, bias=False)
        self.o_proj = nn.Linear(N_HEAD * HEAD, N_EMBD, bias=False)
        self.p = dropout

    def forward(self, x):
        B, T, _ = x.shape
        q = rope(self.q_proj(x).view(B, T, N_HEAD, HEAD).transpose(1, 2))     # [B, 4, T, 32]
        k = rope(self.k_proj(x).view(B, T, N_KV_HEAD, HEAD).transpose(1, 2))  # [B, 2, T, 32]
        v = self.v_proj(x).view(B, T, N_KV_HEAD, HEAD).transpose(1, 2)
        group = N_HEAD // N_KV_HEAD  # query head h reads KV head h // group
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(HEAD)
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        probs = F.dropout(probs, self.p, self.training)
        o = (probs @ v).transpose(1, 2).reshape(B, T, N_HEAD * HEAD)
        return F.dropout(self.o_proj(o), self.p, self.training)


def recurrent_scan(q, k, v, beta=None, log_alpha=None):
    """The recurrence token by token (spec §1.2 step 6, §1.2b). q, k, v [B, H, T, d];
    beta [B, H, T] or None (no delta correction); log_alpha None (no decay),
    [B, H, T] (one decay per head) or [B, H, T, d] (one per key channel).
    The state S [B, H, d, d] is value × key and starts at 0:
        S ← S · decay                (a number, or diag(a) on the key side)
        S ← S − β (S k − v) kᵀ       (delta rules)   or   S ← S + v kᵀ
        o = S q                      (read after the write)"""
    B, H, T, d = q.shape
    S = q.new_zeros(B, H, d, d)
    out = []
    for t in range(T):
        if log_alpha is not None:
            a = log_alpha[:, :, t].exp()
            S = S * (a[..., None, None] if a.dim() == 2 else a[..., None, :])
        k_t = k[:, :, t]
        if beta is not None:
            error = (S @ k_t[..., None])[..., 0] - v[:, :, t]          # what S returns for k, minus v
            S = S - (beta[:, :, t, None] * error)[..., None] * k_t[..., None, :]
        else:
            S = S + v[:, :, t, :, None] * k_t[..., None, :]
        out.append((S @ q[:, :, t, :, None])[..., 0])
    return torch.stack(out, dim=2)


def feature(x, kind):
    """The linear rule's feature maps (spec §1.2b)."""
    if kind == "elu1":
        return F.elu(x) + 1.0
    if kind == "relu":
        return F.relu(x) + 1e-5
    if kind == "sigmoid":
        return torch.sigmoid(x) + 1e-5
    raise ValueError(f"unknown feature map '{kind}' (one of {', '.join(FEATURE_MAPS)})")


def retnet_log_alpha(dtype, device):
    """log α_h for RetNet's fixed decays α_h = 1 − 2^(−5−h) (RetNet's γ), h = 0..3."""
    return torch.log1p(-torch.tensor([2.0 ** (-5 - h) for h in range(N_HEAD)], dtype=torch.float64,
                                     device=device)).to(dtype)


class RecurrentMixer(nn.Module):
    """A fixed-size memory per head in place of attention (spec §1.2, §1.2b):
    projections, one causal depthwise conv + SiLU over [q | k | v], a feature
    map, the write rule, a per-head RMSNorm, the output gate and o_proj."""

    def __init__(self, rule, dropout, feature_map="elu1"):
        super().__init__()
        if rule not in RECURRENT:
            raise ValueError(f"unknown recurrent rule '{rule}'")
        if feature_map not in FEATURE_MAPS:
            raise ValueError(f"unknown feature map '{feature_map}' (one of {', '.join(FEATURE_MAPS)})")
        self.rule, self.feature_map, self.p = rule, feature_map, dropout
        inner = N_HEAD * HEAD
        self.q_proj = nn.Linear(N_EMBD, inner, bias=False)
        self.k_proj = nn.Linear(N_EMBD, inner, bias=False)
        self.v_proj = nn.Linear(N_EMBD, inner, bias=False)
        # one depthwise filter of 4 taps per channel of [q | k | v]; tap 3 is the current token
        self.conv = nn.Conv1d(3 * inner, 3 * inner, kernel_size=4, groups=3 * inner, bias=False)
        if rule in ("delta", "gdn"):
            self.b_proj = nn.Linear(N_EMBD, N_HEAD)
        if rule in ("gdn", "mamba2", "gla"):
            self.a_proj = nn.Linear(N_EMBD, inner if rule == "gla" else N_HEAD)
            nn.init.constant_(self.a_proj.bias, 3.0)  # α ≈ 0.95 at the start
        self.g_proj = nn.Linear(N_EMBD, inner, bias=False)
        self.o_norm = RMSNorm(HEAD)
        self.o_proj = nn.Linear(inner, N_EMBD, bias=False)
        self.scan = recurrent_scan

    def qkv(self, x):
        """q, k, v [B, H, T, d] after the conv, SiLU and the feature map."""
        B, T, _ = x.shape
        y = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1).transpose(1, 2)
        y = F.conv1d(F.pad(y, (3, 0)), self.conv.weight, groups=y.shape[1])  # causal: 3 zeros on the left
        q, k, v = F.silu(y).view(B, 3, N_HEAD, HEAD, T).permute(1, 0, 2, 4, 3)
        if self.rule == "linear":
            return feature(q, self.feature_map), feature(k, self.feature_map), v
        return F.normalize(q, dim=-1, eps=1e-12), F.normalize(k, dim=-1, eps=1e-12), v

    def gates(self, x):
        """(β [B, H, T] or None, log decay [B, H, T] / [B, H, T, d] or None) from x."""
        B, T, _ = x.shape
        beta = torch.sigmoid(self.b_proj(x)).transpose(1, 2) if hasattr(self, "b_proj") else None
        if self.rule == "retnet":
            return beta, retnet_log_alpha(x.dtype, x.device)[None, :, None].expand(B, N_HEAD, T)
        if not hasattr(self, "a_proj"):
            return beta, None
        log_a = -F.softplus(-self.a_proj(x))  # log sigmoid(z), computed stably
        if self.rule == "gla":
            return beta, log_a.view(B, T, N_HEAD, HEAD).transpose(1, 2)
        return beta, log_a.transpose(1, 2)

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(x)
        o = self.scan(q, k, v, *self.gates(x))                        # [B, H, T, d]
        o = self.o_norm(o.transpose(1, 2)).reshape(B, T, N_HEAD * HEAD)
        o = o * F.silu(self.g_proj(x))
        return F.dropout(self.o_proj(o), self.p, self.training)


class SwiGLU(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.gate = nn.Linear(N_EMBD, HIDDEN, bias=False)
        self.up = nn.Linear(N_EMBD, HIDDEN, bias=False)
        self.down = nn.Linear(HIDDEN, N_EMBD, bias=False)
        self.p = dropout

    def forward(self, x):
        return F.dropout(self.down(F.silu(self.gate(x)) * self.up(x)), self.p, self.training)


class Block(nn.Module):
    def __init__(self, mixer, dropout, feature_map):
        super().__init__()
        self.kind = mixer
        self.n1, self.n2 = RMSNorm(N_EMBD), RMSNorm(N_EMBD)
        self.mix = Attention(dropout) if mixer == "attn" else RecurrentMixer(mixer, dropout, feature_map)
        self.ffn = SwiGLU(dropout)

    def forward(self, x):
        x = x + self.mix(self.n1(x))
        return x + self.ffn(self.n2(x))


class Model(nn.Module):
    """Embedding, blocks, final RMSNorm, untied head with bias: ids [B, T] -> logits [B, T, vocab]."""

    def __init__(self, layers, vocab, dropout, feature_map="elu1"):
        super().__init__()
        self.layers = list(layers)
        self.tok = nn.Embedding(vocab, N_EMBD)
        self.blocks = nn.ModuleList(Block(m, dropout, feature_map) for m in self.layers)
        self.norm_f = RMSNorm(N_EMBD)
        self.lm_head = nn.Linear(N_EMBD, vocab)

    def forward(self, idx):
        x = self.tok(idx)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.norm_f(x))

    def set_scan(self, fn):
        """Use fn(q, k, v, beta, log_alpha) for every recurrent layer (see recurrent_scan)."""
        for block in self.blocks:
            if isinstance(block.mix, RecurrentMixer):
                block.mix.scan = fn
        return self


def build(layers, vocab, dropout, feature_map="elu1"):
    """The model for a list of mixer names (or a preset name / pattern string)."""
    if isinstance(layers, str):
        layers = layers_of(layers)
    for m in layers:
        if m not in MIXERS:
            raise ValueError(f"unknown mixer '{m}' (one of {', '.join(MIXERS)})")
    return Model(layers, vocab, dropout, feature_map)


def loss_of(logits, targets, mask=None):
    """Mean cross-entropy over all positions, or over those where mask is 1."""
    logits, targets = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    if mask is None:
        return F.cross_entropy(logits, targets)
    keep = mask.reshape(-1) > 0.5
    return F.cross_entropy(logits[keep], targets[keep])


SAFETENSORS_DTYPES = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32, "I64": torch.int64}


def load_lina_checkpoint(path):
    """(tensors, metadata) of a safetensors file, read by hand: an 8-byte
    little-endian header length, a JSON header (name -> dtype, shape and
    [begin, end) byte offsets into the data that follows; "__metadata__" ->
    string values), then the raw little-endian tensors."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = memoryview(blob)[8 + n:]
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, entry in header.items():
        dtype = SAFETENSORS_DTYPES.get(entry["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} has dtype {entry['dtype']}, not one of {list(SAFETENSORS_DTYPES)}")
        begin, end = entry["data_offsets"]
        shape = list(entry["shape"])
        size = math.prod(shape) * torch.tensor([], dtype=dtype).element_size()
        if not 0 <= begin <= end <= len(data) or end - begin != size:
            raise ValueError(f"{path}: tensor {name}: offsets {begin}..{end} do not hold shape {shape}")
        raw = bytearray(data[begin:end])
        t = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        if sys.byteorder == "big":  # the file is little-endian
            t = torch.from_numpy(t.numpy().byteswap())
        tensors[name] = t.reshape(shape)
    return tensors, metadata


def model_tensors(tensors):
    """The model's weights: every tensor but AdamW's moments ("optim.m.<name>", "optim.v.<name>")."""
    return {name: t for name, t in tensors.items() if not name.startswith("optim.")}


def model_from_checkpoint(path, dropout=0.0, dtype=torch.float32):
    """(model with the checkpoint's weights, tensors, metadata); strict loading."""
    tensors, meta = load_lina_checkpoint(path)
    layers = json.loads(meta["config"])["layers"]
    options = json.loads(meta.get("options", "{}"))
    model = build(layers, int(meta["vocab"]), dropout, options.get("feature_map", "elu1")).to(dtype)
    model.load_state_dict(model_tensors(tensors), strict=True)
    return model, tensors, meta


SPEC_PARAMS = {  # spec §1.4: (preset, vocab) -> parameter count
    ("attn", 65): 742849, ("linear", 65): 880193, ("delta", 65): 882257, ("gdn", 65): 884321,
    ("hybrid", 65): 848953, ("retnet", 65): 880193, ("mamba2", 65): 882257, ("gla", 65): 946241,
    ("attn", 128): 759040, ("linear", 128): 896384, ("delta", 128): 898448, ("gdn", 128): 900512,
    ("hybrid", 128): 865144,
}


def main():
    bad = 0
    for (preset, vocab), want in SPEC_PARAMS.items():
        n = sum(p.numel() for p in build(preset, vocab, 0.0).parameters())
        bad += n != want
        print(f"{preset:7s} vocab {vocab:3d}: {n:8,d} parameters {'ok' if n == want else f'(spec: {want:,d})'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
