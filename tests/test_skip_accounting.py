#!/usr/bin/env python3
"""ctest skip_accounting: a test that fails is reported failed, never
skipped, whatever it printed; one that skips, in whole or in part, is
reported skipped, and scripts/ctest_summary.py (what scripts/test.sh prints
at its end) lists it with its reason and counts it; over several stages it
numbers and counts what no stage ran (a test skipped in one stage and run,
or failed, in another is not in that list).

Two planted tests are registered beside this one, as every test of their
kind is: a doctest case of lina_tests (tests/test_skip_planted.cpp) and a
Python test (this script with --planted). Both pass while nothing is
planted. This test copies the build's CTestTestfile.cmake into a folder of
its own (so the build's Testing/ logs are left alone) and runs ctest there on
the two, with LINA_PLANTED_OUTCOME set to each outcome in turn:

    pass             passes                                  -> passed
    skip             prints SKIPPED: only                    -> skipped
    partial          checks something, then prints SKIPPED:  -> skipped
    skip-then-fail   prints SKIPPED:, then fails             -> failed
    fail-then-skip   fails, then prints SKIPPED:             -> failed
    skip-then-throw  prints SKIPPED:, then throws            -> failed

    tests/test_skip_accounting.py --ctest CTEST --build BUILD_DIR --work DIR
    tests/test_skip_accounting.py --planted      (the planted Python test)
"""
import argparse
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARY = os.path.join(ROOT, "scripts", "ctest_summary.py")
EXPECTED = {"pass": "passed", "skip": "skipped", "partial": "skipped",
            "skip-then-fail": "failed", "fail-then-skip": "failed", "skip-then-throw": "failed"}
PLANTED = r"^skip.accounting(: the planted test case.*|_planted)$"  # not skip_accounting itself
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what)


def planted_python_test():
    """The planted Python test: what LINA_PLANTED_OUTCOME says (nothing planted: pass)."""
    outcome = os.environ.get("LINA_PLANTED_OUTCOME", "")
    if outcome == "fail-then-skip":
        print("FAIL a planted failure")
    if outcome == "partial":
        print("ok   a part that ran and passed")
    if outcome and outcome != "pass":
        print(f"SKIPPED: planted ({outcome})", flush=True)
    if outcome == "skip-then-throw":
        raise RuntimeError("a planted exception")
    return 1 if outcome in ("skip-then-fail", "fail-then-skip") else 0


def run_planted(ctest, build, folder, outcome):
    """ctest on the planted tests with `outcome` planted, in `folder`: the JUnit file."""
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    shutil.copy(os.path.join(build, "CTestTestfile.cmake"), folder)
    junit = os.path.join(folder, "junit.xml")
    env = dict(os.environ, LINA_PLANTED_OUTCOME=outcome)
    r = subprocess.run([ctest, "--test-dir", folder, "-R", PLANTED, "--output-junit", junit],
                       capture_output=True, text=True, env=env, timeout=240)
    if not os.path.exists(junit):
        check(False, f"{outcome}: ctest wrote no JUnit file (exit {r.returncode}: {r.stdout[-300:]} {r.stderr[-300:]})")
        return None
    return junit


def statuses(junit):
    """{test name: passed | skipped | failed} as ctest counted them."""
    kind = {"run": "passed", "notrun": "skipped", "fail": "failed"}
    return {case.get("name"): kind.get(case.get("status"), case.get("status"))
            for case in ET.parse(junit).getroot().iter("testcase")}


def check_summary(outcome, junit, got):
    """ctest_summary.py lists each skipped test with its reason, and no failed one as skipped."""
    r = subprocess.run([sys.executable, SUMMARY, "planted", junit], capture_output=True, text=True)
    lines = r.stdout.splitlines()
    want = EXPECTED[outcome]
    counts = {k: sum(1 for v in got.values() if v == k) for k in ("passed", "skipped", "failed")}
    head = f"test.sh: planted: {counts['passed']} passed, {counts['skipped']} skipped, {counts['failed']} failed"
    skipped = [line for line in lines if line.startswith("test.sh: planted skipped ")]
    failed = [line for line in lines if line.startswith("test.sh: planted FAILED ")]
    if want == "skipped":
        ok = len(skipped) == 2 and all(line.endswith(f": planted ({outcome})") for line in skipped) and not failed
    elif want == "failed":
        ok = not skipped and len(failed) == 2
    else:
        ok = not skipped and not failed
    check(r.returncode == 0 and lines[:1] == [head] and ok,
          f"{outcome}: ctest_summary.py counts it and lists it as {want} ({lines})")


def not_run_lines(*stages):
    """ctest_summary.py's list of what no stage ran, given (preset, junit) pairs: its lines."""
    args = [x for stage in stages for x in stage]
    r = subprocess.run([sys.executable, SUMMARY, *args], capture_output=True, text=True)
    lines = r.stdout.splitlines()
    head = [i for i, line in enumerate(lines) if line.startswith("test.sh: not run by any stage here: ")]
    return lines[head[0]:] if r.returncode == 0 and len(head) == 1 else None


def check_not_run(junits):
    """The planted tests skipped in two stages are listed once each, numbered, counted,
    with both stages; skipped in one stage and passed or failed in another, not listed."""
    skip, passed, failed = junits.get("skip"), junits.get("pass"), junits.get("skip-then-fail")
    if not (skip and passed and failed):
        check(False, "the skip, pass and skip-then-fail runs wrote their JUnit files")
        return
    both = not_run_lines(("release", skip), ("asan", skip))
    check(both is not None and len(both) == 3 and both[0].endswith(": 2 tests (skipped, in whole or in part, "
                                                                    "wherever registered)")
          and all(line.startswith(f"test.sh:   {i}. ") and "(release, asan): planted (skip)" in line
                  for i, line in zip((1, 2), both[1:])),
          f"skipped in both stages: numbered and counted, both stages named ({both})")
    for other, name in ((passed, "passed"), (failed, "failed")):
        lines = not_run_lines(("release", skip), ("cuda-sim", other))
        check(lines == ["test.sh: not run by any stage here: 0 tests"],
              f"skipped in one stage and {name} in another: not listed as not run ({lines})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--planted", action="store_true", help="be the planted Python test")
    ap.add_argument("--ctest")
    ap.add_argument("--build")
    ap.add_argument("--work")
    a = ap.parse_args()
    if a.planted:
        return planted_python_test()
    if not (a.ctest and a.build and a.work):
        ap.error("--ctest, --build and --work are needed (or --planted)")
    junits = {}
    for outcome, want in EXPECTED.items():
        junit = run_planted(a.ctest, a.build, os.path.join(a.work, outcome), outcome)
        if junit is None:
            continue
        junits[outcome] = junit
        got = statuses(junit)
        check(len(got) == 2 and all(v == want for v in got.values()),
              f"{outcome}: both planted tests (doctest, Python) are reported {want}: {got}")
        check_summary(outcome, junit, got)
    check_not_run(junits)
    print("skip_accounting: " + ("FAILED: " + "; ".join(failures) if failures else "all checks passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
