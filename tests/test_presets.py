#!/usr/bin/env python3
"""scripts/presets.py holds the registry's presets as `lina presets` prints
them: the same names in the same order, each in the same group (course or
survey) with the same layers; and the scripts that list presets take them
from it. A registry row added in C++ alone, or a preset dropped from the
Python list, fails here.

    tests/test_presets.py --lina build/release/lina
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import presets  # noqa: E402

failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def registry(lina):
    """[(name, group, layers)] from `lina presets`."""
    out = subprocess.run([lina, "presets"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        sys.exit(f"test_presets: {lina} presets exited {out.returncode}: {out.stderr.strip()}")
    rows = []
    for line in out.stdout.splitlines():
        name, group, layers = line.split(" ")
        rows.append((name, group, layers.split(",")))
    return rows


def python_rows():
    """The same rows from scripts/presets.py."""
    return [(p, "course" if p in presets.COURSE else "survey", presets.layers_of(p)) for p in presets.ALL]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lina", required=True)
    a = ap.parse_args()

    cpp, py = registry(a.lina), python_rows()
    check([r[0] for r in cpp] == [r[0] for r in py],
          f"the same presets in the same order: lina {[r[0] for r in cpp]}, presets.py {[r[0] for r in py]}")
    for want in cpp:
        got = next((r for r in py if r[0] == want[0]), None)
        check(got == want, f"{want[0]}: lina says {want[1]}, {','.join(want[2])}; presets.py says "
                           + (f"{got[1]}, {','.join(got[2])}" if got else "nothing"))
    check(set(presets.MIXERS) == {m for r in cpp for m in r[2]},
          f"presets.MIXERS {sorted(presets.MIXERS)} are the registry's mixers")
    check(presets.RECURRENT == tuple(m for m in presets.MIXERS if m != "attn"), "presets.RECURRENT: every mixer but attn")

    # The scripts that list presets read them from presets.py.
    import same_bits  # noqa: E402
    import sweep  # noqa: E402
    from report_lib import course, memory, runs  # noqa: E402
    check([c[0] for c in same_bits.DEFAULT_CASES[:len(presets.ALL)]] == list(presets.ALL),
          "same_bits.py's cases start with every preset")
    check(course.LM_PRESETS == presets.COURSE, "report_lib/course.py's LM_PRESETS are the course's")
    check([p for p in runs.PRESET_ORDER if "-" not in p] == list(presets.ALL),
          "report_lib/runs.py orders every preset as the registry does")
    check(memory.PRESET_LAYERS == {p: presets.layers_of(p) for p in presets.ALL},
          "report_lib/memory.py's layers are presets.py's")
    check(sweep.presets is presets, "sweep.py checks --presets against presets.py")

    if failures:
        print(f"{len(failures)} failed")
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
