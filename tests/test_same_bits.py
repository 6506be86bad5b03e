#!/usr/bin/env python3
"""scripts/same_bits.py, the check that a refactor moved no number: the same
lina binary given as before and after is the same bits; a planted defect (an
"after" that trains with a learning rate one part in a thousand off, and one
that samples differently) is caught, named and exits 1.

    tests/test_same_bits.py --lina build/release/lina --work DIR
"""
import argparse
import os
import shutil
import stat
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "same_bits.py")
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def wrapper(path, lina, command, replace):
    """A stand-in binary (the planted defect): lina, with `command`'s arguments
    changed by `replace` ({"0.8": "0.9"}, {"--lr": ...} added when missing)."""
    with open(path, "w") as f:
        f.write(f"""#!{sys.executable}
import os, sys
replace = {replace!r}
args = sys.argv[1:]
if args and args[0] == {command!r}:
    args = [replace.get(a, a) for a in args] + [x for k, v in replace.items() if k.startswith("--") for x in (k, v)]
os.execv({lina!r}, [{lina!r}] + args)
""")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def same_bits(work, before, after):
    return subprocess.run([sys.executable, SCRIPT, "--before", before, "--after", after, "--presets", "gdn",
                           "--steps", "2", "--work", work], capture_output=True, text=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lina", required=True)
    p.add_argument("--work", required=True)
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    lina = os.path.abspath(a.lina)

    r = same_bits(os.path.join(a.work, "same"), lina, lina)
    print(r.stdout + r.stderr)
    check(r.returncode == 0 and "same bits  cpu   gdn" in r.stdout, "one binary twice: the same bits, exit 0")

    off_lr = wrapper(os.path.join(a.work, "lina-lr"), lina, "train", {"--lr": "0.001001"})
    r = same_bits(os.path.join(a.work, "lr"), lina, off_lr)
    print(r.stdout + r.stderr)
    check(r.returncode == 1 and "DIFFERS" in r.stdout and "loss curves differ" in r.stdout,
          "a learning rate 1e-3 relative off: the loss curves differ, exit 1")

    other_sample = wrapper(os.path.join(a.work, "lina-sample"), lina, "sample", {"0.8": "0.9"})
    r = same_bits(os.path.join(a.work, "sample"), lina, other_sample)
    print(r.stdout + r.stderr)
    check(r.returncode == 1 and "samples differ" in r.stdout, "another sampling temperature: the samples differ, exit 1")

    print(f"{3 - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
