"""The PyTorch the comparison tests use: Debian's python3-torch, imported by
Debian's /usr/bin/python3 (the python3 first on PATH may be another one).

    import system_torch
    system_torch.skip_unless_available()   # prints "SKIPPED: why" and exits 0
    system_torch.unavailable(why)          # the same, where a test finds torch missing itself

Where LINA_REQUIRE_TORCH=1 (CI sets it, since scripts/setup.sh installs
python3-torch), a missing PyTorch fails the test instead of skipping it, so a
passing suite there means the comparisons ran.
"""
import os
import subprocess
import sys

PY = "/usr/bin/python3"


def why_unavailable():
    """None when PY imports torch; else one line saying why not."""
    if not os.path.exists(PY):
        return f"{PY} does not exist"
    try:
        p = subprocess.run([PY, "-c", "import torch"], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return f"{PY} -c 'import torch' did not finish in 300 s"
    if p.returncode == 0:
        return None
    lines = [line for line in p.stderr.strip().splitlines() if line.strip()]
    return f"{PY} -c 'import torch' exited {p.returncode}: " + (lines[-1] if lines else "no message")


def unavailable(why):
    """Ends the test for want of PyTorch (`why`, one line): skipped, or failed where
    LINA_REQUIRE_TORCH=1. Every path of a test on which torch is found missing ends here."""
    if os.environ.get("LINA_REQUIRE_TORCH") == "1":
        print(f"FAILED: LINA_REQUIRE_TORCH=1 but PyTorch is not available ({why})")
        sys.exit(1)
    print(f"SKIPPED: PyTorch is not available ({why}); Debian: apt-get install python3-torch")
    sys.exit(0)


def skip_unless_available():
    why = why_unavailable()
    if why:
        unavailable(why)
