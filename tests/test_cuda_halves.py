#!/usr/bin/env python3
"""Every CUDA half of a C++ test runs somewhere, and says so where it cannot.
Over every test file (tests/*.cpp): a test case that asks whether a CUDA
device is present (cuda_available(), cuda_half()) has "cuda" in its name,
and that name is one that scripts/test.sh's cuda-sim stage selects
(cuda_sim_tests there), so the stage runs it on lina's CUDA runtime on the
CPU; and no test case guards its CUDA half with a bare
`if (cuda_available())`, which would pass without a word where there is
no device: it calls cuda_half() (tests/cuda_half.h), which says SKIPPED.

The check must be able to fail: planted cases breaking each rule are
reported, and a case keeping both is not.

    tests/test_cuda_halves.py
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASE = re.compile(r'(?m)^TEST_CASE\("((?:[^"\\]|\\.)*)"')
ASKS = re.compile(r"\bcuda_(?:available|half)\(\)")
SILENT = re.compile(r"\bif\s*\(\s*(?:lina::)?(?:dispatch::)?cuda_available\(\)\s*\)")
SELECTION = re.compile(r"^cuda_sim_tests='([^']*)'", re.M)


def cases(source):
    """(name, body) of each TEST_CASE in a C++ source: the body runs to the next case."""
    found = list(CASE.finditer(source))
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(source)
        yield m.group(1), source[m.end():end]


def problems(filename, source, selected):
    """What breaks the rules in one test file: one line each."""
    found = []
    for name, body in cases(source):
        if not ASKS.search(body):
            continue
        if not re.search(selected, name):
            found.append(f"{filename}: '{name}' has a CUDA half, but the cuda-sim stage does not select it "
                         f"(its name lacks 'cuda')")
        if SILENT.search(body):
            found.append(f"{filename}: '{name}' guards its CUDA half with a bare if (cuda_available()): "
                         "use cuda_half(), which says SKIPPED where there is no device")
    return found


def stage_selection():
    """The regular expression scripts/test.sh's cuda-sim stage selects its tests by."""
    with open(os.path.join(ROOT, "scripts", "test.sh"), encoding="utf-8") as f:
        m = SELECTION.search(f.read())
    if not m:
        raise SystemExit("test_cuda_halves.py: scripts/test.sh sets no cuda_sim_tests='...'")
    return m.group(1)


PLANTED = '''
TEST_CASE("softmax matches its composition, CPU and (where present) the GPU") {
  check(Device::Cpu);
  if (cuda_half()) check(Device::Cuda);
}
TEST_CASE("rms_norm adds into its gradient, CPU and cuda") {
  check(Device::Cpu);
  if (dispatch::cuda_available()) check(Device::Cuda);
}
TEST_CASE("gated norm, CPU and cuda") {
  check(Device::Cpu);
  if (cuda_half()) check(Device::Cuda);
}
TEST_CASE("no device asked for") { check(Device::Cpu); }
'''


def planted_check(selected):
    """The rules on PLANTED: the first two cases break one each, the others keep both."""
    found = problems("planted.cpp", PLANTED, selected)
    want = ["'softmax matches its composition, CPU and (where present) the GPU' has a CUDA half, but",
            "'rms_norm adds into its gradient, CPU and cuda' guards its CUDA half"]
    return len(found) == len(want) and all(w in f for w, f in zip(want, found))


def main():
    selected = stage_selection()
    failures = []
    if not planted_check(selected):
        failures.append("the planted cases are not reported as they should be: "
                        + "; ".join(problems("planted.cpp", PLANTED, selected)))
    checked = 0
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "*.cpp"))):
        with open(path, encoding="utf-8") as f:
            source = f.read()
        checked += sum(1 for name, body in cases(source) if ASKS.search(body))
        failures += problems(os.path.relpath(path, ROOT), source, selected)
    for line in failures:
        print("FAIL " + line)
    print(f"{checked} test cases with a CUDA half, each selected by the cuda-sim stage ('{selected}') "
          f"and saying SKIPPED where it cannot run; the planted cases are reported"
          if not failures else f"{len(failures)} problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
