#!/usr/bin/env python3
"""ctest require_torch: LINA_REQUIRE_TORCH=1 (what CI sets) turns every PyTorch
test's skip into a failure, on every path by which a test can find torch
missing: run by another python3 (the check before re-running under
/usr/bin/python3) and run by /usr/bin/python3 itself (the import). Torch is
hidden by a planted package of that name, first on PYTHONPATH, whose import
fails. Without LINA_REQUIRE_TORCH each test prints "SKIPPED:" and exits 0.

    tests/test_require_torch.py
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = ["test_course_interop.py", "test_torch_reference.py", "test_torch_lm.py", "test_torch_recall.py"]
SYSTEM_PY = "/usr/bin/python3"
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what)


def hidden_torch(folder):
    """A PYTHONPATH on which `import torch` raises ImportError."""
    package = os.path.join(folder, "torch")
    os.makedirs(package, exist_ok=True)
    with open(os.path.join(package, "__init__.py"), "w") as f:
        f.write('raise ImportError("torch hidden by tests/test_require_torch.py")\n')
    return folder


def run(python, test, pythonpath, require):
    env = dict(os.environ, PYTHONPATH=pythonpath)
    env.pop("LINA_INTEROP_CHILD", None)
    env.pop("LINA_REQUIRE_TORCH", None)
    if require:
        env["LINA_REQUIRE_TORCH"] = "1"
    return subprocess.run([python, os.path.join(HERE, test)], capture_output=True, text=True, env=env, timeout=120)


def said(ok, r, out):
    """What a test that went wrong printed (nothing when it went right: a test's own
    "SKIPPED:" line in this test's output would read as this test skipping)."""
    return "" if ok else f" (exit {r.returncode}: {out[-200:]!r})"


def main():
    pythons = [sys.executable] + ([SYSTEM_PY] if os.path.exists(SYSTEM_PY) else [])
    with tempfile.TemporaryDirectory() as d:
        path = hidden_torch(d)
        for python in pythons:
            for test in TESTS:
                r = run(python, test, path, require=True)
                out = (r.stdout + r.stderr).strip()
                ok = r.returncode != 0 and "FAILED: LINA_REQUIRE_TORCH=1" in out and "SKIPPED" not in out
                check(ok, f"{python} {test}, LINA_REQUIRE_TORCH=1, no torch: fails" + said(ok, r, out))
                r = run(python, test, path, require=False)
                out = (r.stdout + r.stderr).strip()
                ok = r.returncode == 0 and out.startswith("SKIPPED: PyTorch is not available")
                check(ok, f"{python} {test}, no torch: skipped" + said(ok, r, out))
    print("require_torch: " + ("FAILED: " + "; ".join(failures) if failures else "all checks passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
