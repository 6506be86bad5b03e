#!/usr/bin/env python3
"""ctest torch_reference: scripts/torch_reference.py, the PyTorch yardstick
that lina's training step is timed against, on the CPU: its chunked scan
matches the token-by-token one for every write rule and for whole models
(--check), a one-step run writes a json row per preset with its compile
mode, warm-up time and the course model's parameter count (docs/spec.md
§1.4), and bad arguments
(--compile with too few warm-up steps, or on a PyTorch without
torch.compile; a bad shape) end with one line and a non-zero exit, and
--check fails on a NaN planted in the token-by-token scan. Needs
Debian's python3-torch (run under /usr/bin/python3); prints "SKIPPED: ..."
without it."""
import json
import os
import subprocess
import sys
import tempfile

import system_torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "torch_reference.py")
PY = "/usr/bin/python3"
failures = []
# --check with one NaN planted in the token-by-token scan's output (where the scan
# comparisons and the whole models read it; the strong-decay check does not): the scans'
# and the models' worst differences must not be finite, and --check must exit non-zero.
PLANT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
sys.argv = ["torch_reference.py", "--check"]
import torch_reference as tr
real = tr.cm.recurrent_scan
def planted(*args, **kwargs):
    out = real(*args, **kwargs).clone()
    out.view(-1)[out.numel() // 2] = float("nan")
    return out
tr.cm.recurrent_scan = planted
result = {"scans": repr(tr.check_scans()), "models": repr(tr.check_models())}
try:
    tr.check()
    result["check"] = "passed"
except SystemExit as e:
    result["check"] = str(e.code)
print("RESULT " + json.dumps(result))
"""


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def run(*args):
    return subprocess.run([PY, SCRIPT, *args], capture_output=True, text=True, timeout=300)


def main():
    system_torch.skip_unless_available()
    r = run("--check")
    rules = ("linear", "delta", "gdn", "retnet", "mamba2", "gla")
    check(r.returncode == 0 and all(f"{x}: chunked vs token by token" in r.stdout for x in rules)
          and "hybrid: model, chunked vs token by token" in r.stdout,
          "--check: the chunked scan matches the token-by-token one for every rule and model")
    r = subprocess.run([PY, "-c", PLANT, os.path.join(ROOT, "scripts")], capture_output=True, text=True, timeout=300)
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
    got = json.loads(line[0][7:]) if line else {}
    check(got.get("scans") in ("nan", "inf") and got.get("models") in ("nan", "inf")
          and got.get("check", "passed") != "passed" and "does not match" in got.get("check", ""),
          f"--check with a NaN planted in the token-by-token scan fails ({got or r.stderr.strip()[-300:]})")

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "t.json")
        r = run("--presets", "attn,gdn", "--shapes", "2x16", "--steps", "1", "--warmup", "1",
                "--threads", "1", "--json", out)
        check(r.returncode == 0, f"a one-step run of attn and gdn exits 0 ({r.stderr.strip()[-200:]})")
        doc = json.load(open(out)) if os.path.exists(out) else {"train": []}
        rows = doc["train"]
        check([x["preset"] for x in rows] == ["attn", "gdn"], "one row per preset, in order")
        check(all(x.get("compile") == "none" and x.get("warmup_s", -1) >= 0 and x["ms_per_step"] > 0
                  for x in rows), "each row names its compile mode (none) and a warm-up time")
        check(doc.get("compile") == "none", "the json names the compile mode")
        check([x.get("parameters") for x in rows] == [742849, 884321],
              "the course model's parameter counts (spec §1.4: attn 742,849, gdn 884,321)")

    for args, words in ((["--compile", "default", "--warmup", "2"], "--compile"),
                        (["--compile", "capture"], "needs --device cuda"),
                        (["--shapes", "64by64"], "bad shape")):
        r = run("--presets", "gdn", *args)
        line = r.stderr.strip().splitlines()
        check(r.returncode != 0 and len(line) == 1 and words in line[0],
              f"{' '.join(args)}: one line naming {words!r}, non-zero exit ({line[-1:] or ''})")
    print("torch_reference: " + ("FAILED: " + "; ".join(failures) if failures else "all checks passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
