#!/usr/bin/env python3
"""No function of lina is longer than 80 lines, so that a reader can hold
each one: every function (kernels included) of the tracked C++ and CUDA
sources, third_party/ aside, measured by universal-ctags from the line of
its name to its closing brace. The test fails naming each longer one.

The check must be able to fail: a planted 81-line function is reported and
an 80-line one is not. Prints "SKIPPED: ..." (ctest: skipped) without
universal-ctags (Exuberant Ctags does not give a function's end) or outside
a git checkout.

    tests/test_function_length.py [--max-lines N]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 80
SOURCES = ("*.cpp", "*.h", "*.cu", "*.cuh")
# A kernel declared `__global__ void __launch_bounds__(N) name(...)`: ctags
# names it __launch_bounds__.
LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)\s*(\w+)\s*\(")


def universal_ctags():
    """The ctags program when it is universal-ctags, else None."""
    ctags = shutil.which("ctags")
    if not ctags:
        return None
    version = subprocess.run([ctags, "--version"], capture_output=True, text=True).stdout
    return ctags if version.startswith("Universal Ctags") else None


def tracked_sources():
    listed = subprocess.run(["git", "-C", ROOT, "ls-files", *SOURCES], capture_output=True, text=True, check=True)
    return [p for p in listed.stdout.splitlines() if not p.startswith("third_party/")]


def functions(ctags, paths, cwd):
    """(path, first line, last line, name) of every function in paths."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as listing:
        listing.write("\n".join(paths) + "\n")
    try:
        tags = subprocess.run([ctags, "--c++-kinds=f", "--fields=+ne", "--excmd=number", "--language-force=C++",
                               "-L", listing.name, "-o", "-"], cwd=cwd, capture_output=True, text=True, check=True)
    finally:
        os.unlink(listing.name)
    found = []
    for line in tags.stdout.splitlines():
        name, path, *fields = line.split("\t")
        first = last = None
        for field in fields:
            if field.startswith("line:"):
                first = int(field[5:])
            elif field.startswith("end:"):
                last = int(field[4:])
        if first is not None and last is not None:
            found.append((path, first, last, name))
    return found


def kernel_name(path, first, cwd):
    """The name of the kernel whose __launch_bounds__ is on line `first`."""
    with open(os.path.join(cwd, path), encoding="utf-8") as f:
        lines = f.read().splitlines()[first - 1:first + 3]
    match = LAUNCH_BOUNDS.search(" ".join(lines))
    return match.group(1) if match else "__launch_bounds__"


def too_long(ctags, paths, cwd, max_lines):
    """'path:line name (N lines)' for every function over max_lines."""
    long_ones = []
    for path, first, last, name in functions(ctags, paths, cwd):
        length = last - first + 1
        if length > max_lines:
            if name == "__launch_bounds__":
                name = kernel_name(path, first, cwd)
            long_ones.append(f"{path}:{first} {name} ({length} lines)")
    return sorted(long_ones)


def function_of(name, lines):
    body = "\n".join(f"  total += {i};" for i in range(lines - 3))
    return f"int {name}(int total) {{\n{body}\n  return total;\n}}\n"


def check_can_fail(ctags, max_lines):
    """A planted function one line too long is reported, one at the limit is not."""
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "planted.cpp"), "w", encoding="utf-8") as f:
            f.write(function_of("at_the_limit", max_lines) + function_of("one_line_over", max_lines + 1))
        reported = too_long(ctags, ["planted.cpp"], folder, max_lines)
    want = [f"planted.cpp:{max_lines + 1} one_line_over ({max_lines + 1} lines)"]
    if reported != want:
        print(f"FAIL the check on a planted function: reported {reported}, want {want}")
        return False
    print(f"ok   a planted function of {max_lines + 1} lines is reported, one of {max_lines} is not")
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-lines", type=int, default=MAX_LINES)
    a = parser.parse_args()
    ctags = universal_ctags()
    if not ctags:
        print("SKIPPED: universal-ctags is not installed (Debian: apt-get install universal-ctags; scripts/setup.sh)")
        return 0
    if not os.path.isdir(os.path.join(ROOT, ".git")) and not os.path.isfile(os.path.join(ROOT, ".git")):
        print(f"SKIPPED: {ROOT} is not a git checkout (the sources checked are git's tracked files)")
        return 0
    ok = check_can_fail(ctags, a.max_lines)
    paths = tracked_sources()
    long_ones = too_long(ctags, paths, ROOT, a.max_lines)
    for entry in long_ones:
        print(f"FAIL {entry}: longer than {a.max_lines} lines; split it into functions a reader can hold")
    if not long_ones:
        print(f"ok   no function over {a.max_lines} lines in {len(paths)} C++ and CUDA sources")
    return 0 if ok and not long_ones else 1


if __name__ == "__main__":
    sys.exit(main())
