"""Numbers a model keeps per sequence (docs/spec.md §1.3), computed from the formulas.

lina's presets: 4 layers, n_head 4, head_size 32, n_kv_head 2, n_embd 128,
conv kernel 4. Real-scale layouts: the course's 12 × (3 GDN + 1 attention)
in bf16 (and 48 layers all attention / all GDN with the same heads), and
the survey's 32-layer, d_model 4096 model (32 heads of 128) in float32.
"""
import presets

LINA = dict(n_head=4, head_size=32, n_kv_head=2, n_embd=128, conv_kernel=4)
PRESET_LAYERS = {p: presets.layers_of(p) for p in presets.ALL}


def lina_memory(layers, c=LINA):
    """kv_per_token, state_const, conv_cache of a lina layer list."""
    attn = sum(1 for l in layers if l == "attn")
    rec = len(layers) - attn
    return {
        "kv_per_token": 2 * c["n_kv_head"] * c["head_size"] * attn,
        "state_const": c["n_head"] * c["head_size"] ** 2 * rec,
        "conv_cache": (c["conv_kernel"] - 1) * 3 * c["n_embd"] * rec,
    }


def stored(mem, context, with_conv=True):
    """Numbers kept for one sequence after `context` tokens."""
    return mem["kv_per_token"] * context + mem["state_const"] + (mem["conv_cache"] if with_conv else 0)


# Real-scale layouts: numbers per token (KV cache), constant numbers (state),
# bytes per number. The conv cache is not counted (as in the course).
def real_layouts():
    course_kv_layer = 2 * 2 * 256          # 2 KV heads of 256, K and V
    course_state_layer = 32 * 128 * 128    # 32 V heads, 128 × 128 state each
    survey_kv_layer = 2 * 32 * 128         # 32 heads of 128, K and V
    survey_state_layer = 32 * 128 * 128
    return [
        {"name": "course 12×(3 GDN+1 attn), bf16", "kv_per_token": 12 * course_kv_layer,
         "state_const": 36 * course_state_layer, "bytes": 2},
        {"name": "course 48 × attention, bf16", "kv_per_token": 48 * course_kv_layer,
         "state_const": 0, "bytes": 2},
        {"name": "course 48 × GDN, bf16", "kv_per_token": 0,
         "state_const": 48 * course_state_layer, "bytes": 2},
        {"name": "survey 32 × attention, f32", "kv_per_token": 32 * survey_kv_layer,
         "state_const": 0, "bytes": 4},
        {"name": "survey 32 × linear attention, f32", "kv_per_token": 0,
         "state_const": 32 * survey_state_layer, "bytes": 4},
    ]


def real_bytes(layout, context):
    return (layout["kv_per_token"] * context + layout["state_const"]) * layout["bytes"]


def human_bytes(n):
    for unit in ["B", "KiB", "MiB", "GiB", "TiB"]:
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024


def cross_check(run):
    """Differences between a run's json memory fields and the formulas."""
    layers = run.get("config", {}).get("model", {}).get("layers") or PRESET_LAYERS.get(run["preset"])
    if not layers:
        return ["no layer list"]
    want = lina_memory(layers)
    return [f"{k}: json {run.get(k)} vs formula {v}" for k, v in want.items() if run.get(k) != v]
