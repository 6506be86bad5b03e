"""lina's presets, for the scripts: the names, their order and their layers,
as the registry has them (models/mixer_registry.cpp), which `lina presets`
prints. They are written out here so that the scripts that only read run
files (the report, the sweep's grid) work without a built lina;
tests/test_presets.py checks them against `lina presets`.

    import presets
    presets.ALL                 # every preset, in the registry's order
    presets.layers_of("hybrid") # ["gdn", "gdn", "gdn", "attn"]
"""

COURSE = ("attn", "linear", "delta", "gdn", "hybrid")  # the course's five (docs/spec.md §1)
SURVEY = ("retnet", "mamba2", "gla")                   # the survey's three (docs/spec.md §1.2b)
ALL = COURSE + SURVEY

MIXERS = ("attn", "linear", "delta", "gdn", "retnet", "mamba2", "gla")  # one per registry row
RECURRENT = tuple(m for m in MIXERS if m != "attn")
N_LAYER = 4
# The presets that stand for a pattern of different mixers; every other
# preset is N_LAYER layers of the mixer of its name.
PATTERNS = {"hybrid": ("gdn", "gdn", "gdn", "attn")}

# linear attention's feature maps other than elu + 1 (--feature-map): a
# run with one is reported as its own entry, "linear-relu", "linear-sigmoid".
FEATURE_MAP_VARIANTS = ("relu", "sigmoid")


def layers_of(preset):
    """The mixer of each layer of a preset, as a list."""
    if preset in PATTERNS:
        return list(PATTERNS[preset])
    if preset in MIXERS:
        return [preset] * N_LAYER
    raise ValueError(f"unknown preset '{preset}' (one of {', '.join(ALL)})")


def report_order():
    """Every preset in the registry's order, linear attention followed by its
    feature-map variants: the order of the report's tables."""
    order = []
    for p in ALL:
        order.append(p)
        if p == "linear":
            order += [f"linear-{m}" for m in FEATURE_MAP_VARIANTS]
    return order
