#!/usr/bin/env python3
"""The debugger tests, on the debug build of lina (cmake --preset debug):

  tests/test_gdb.py printers --lina build/debug/lina
      gdb in batch mode stops in ScanOp::backward during one training step
      (sequential scan) and prints a Tensor, the op, a Var and an Eigen
      matrix with scripts/gdb/lina_printers.py; the norms it prints must
      equal those of lina's own trace of the same step.

  tests/test_gdb.py walkthrough --lina build/debug/lina
      runs the gdb session of docs/walkthrough.md as written there (the
      "$ ..." line and its "(gdb) ..." commands, from the repository root)
      and checks that every output line the page shows appears, in order,
      numbers, addresses and the checkout's path aside.

Prints "SKIPPED: ..." (ctest: skipped) without gdb or without the debug build.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRINTERS = os.path.join(ROOT, "scripts", "gdb", "lina_printers.py")
WALKTHROUGH = os.path.join(ROOT, "docs", "walkthrough.md")
TINY_STEP = ["train", "--preset", "gdn", "--task", "recall", "--steps", "1", "--batch", "2",
             "--pairs", "4", "--keys", "8", "--scan-form", "sequential", "--conv", "composed",
             "--eval-batches", "1", "--fresh-batches", "1", "--probe-batches", "1", "--quiet"]


def fail(what):
    sys.exit("FAILED: " + what)


def check(cond, what, output=""):
    if not cond:
        fail(what + ("\n--- gdb output ---\n" + output if output else ""))
    print("ok:", what)


def run_gdb(gdb_args, commands, program, env_extra, cwd):
    """gdb -batch with `commands` (a list) on `program` (a list); its output."""
    with tempfile.NamedTemporaryFile("w", suffix=".gdb", delete=False) as f:
        f.write("\n".join(commands) + "\n")
        script = f.name
    env = dict(os.environ, **env_extra)
    cmd = ["gdb", "-batch", "-nx"] + gdb_args + ["-x", script, "--args"] + program
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
    finally:
        os.unlink(script)
    return p.returncode, p.stdout + p.stderr


# ---- printers ---------------------------------------------------------------------------

def number_after(pattern, text):
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None


def test_printers(lina):
    out_dir = tempfile.mkdtemp(prefix="lina_gdb_")
    commands = [
        "break lina::ScanOp::backward",
        "run",
        "print dout",
        "print *this",
        "up",
        "print *this",  # the Var backward() was called on: the loss
        "down",
        "break lina::cpu::scan_sequential_backward<float>",
        "continue",
        "lina-break scan_sequential.cpp e.noalias() = G * k_t",
        "continue",
        "print G",
        "print k_t",
        "lina-values dout 4",
        "kill",
    ]
    # --trace prints every op's norms just before backward() runs the scan.
    rc, out = run_gdb(["-x", PRINTERS], commands, [lina] + TINY_STEP + ["--trace", "--out", out_dir],
                      {"OMP_NUM_THREADS": "1"}, ROOT)
    shutil.rmtree(out_dir, ignore_errors=True)
    check(rc == 0, "gdb ran the session", out)
    check("Breakpoint 1, lina::ScanOp::backward" in out, "stopped in ScanOp::backward", out)
    tensor = re.search(r"\$1 = lina::Tensor float32\[2, 15, 4, 32\] cpu \|x\| = (\S+) \{(.*)\}", out)
    check(tensor is not None, "print dout: a lina::Tensor with dtype, shape, device, norm, values", out)
    # The same norm in lina's trace: the scan's backward line gives |grad| of its output.
    traced = number_after(r"backward\s+\d+\s+scan\s+blocks\.3\.mix\.o\s+float32\[2, 15, 4, 32\]\s+\|grad\|\s+(\S+)", out)
    check(traced is not None, "the trace shows the scan of layers.3", out)
    printed = float(tensor.group(1))
    check(abs(printed - traced) <= 0.01 * traced, f"the printed norm {printed} is the traced one {traced}", out)
    check('$2 = lina::ScanOp: op Scan making "blocks.3.mix.o"' in out, "print *this: the op and its output's name", out)
    check('"blocks.3.mix.beta" float32[2, 15, 4] cpu, made by Sigmoid' in out, "the op's inputs, named", out)
    check("saved_states = lina::Tensor float32[2, 4, 15, 32, 32] cpu" in out, "the op's saved states", out)
    check(re.search(r'\$3 = lina::Var "loss" float32\[\] cpu \|x\| = \S+ \{\S+\}, made by CrossEntropy', out)
          is not None, "print of a Var: name, value, the op that made it", out)
    check("Breakpoint 2, lina::cpu::scan_sequential_backward<float>" in out, "reached the sequential backward", out)
    check("e.noalias() = G * k_t" in out, "lina-break stopped on the line of e = G k_t", out)
    matrix = re.search(r"\$4 = Eigen matrix 32 x 32 of float\n((?:  \[.*\]\n){8})  \.\.\.", out)
    check(matrix is not None, "print G: an Eigen matrix as rows", out)
    check("$5 = Eigen vector 32 x 1 of float {" in out, "print k_t: an Eigen map as a vector", out)
    check(re.search(r"dout \(const float \*\): \S+ \S+ \S+ \S+\n", out) is not None,
          "lina-values on a kernel's raw pointer", out)


# ---- the walkthrough -------------------------------------------------------------------

def walkthrough_session(path):
    """(the shell command, the gdb commands, the expected output lines) of
    every ```gdb-session block of the page, in order."""
    text = open(path, encoding="utf-8").read()
    blocks = re.findall(r"```gdb-session\n(.*?)```", text, re.S)
    shell, commands, expected = None, [], []
    for block in blocks:
        for line in block.splitlines():
            if line.startswith("$ "):
                shell = line[2:]
            elif line.startswith("(gdb) "):
                commands.append(line[len("(gdb) "):])
            elif line.strip() and line.strip() != "...":
                expected.append(line)
    return shell, commands, expected


def normalise(line, root):
    line = line.replace(root + "/", "")
    line = re.sub(r"0x[0-9a-f]+", "#", line)
    line = re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "#", line)
    return " ".join(line.split())


def test_walkthrough(lina):
    shell, commands, expected = walkthrough_session(WALKTHROUGH)
    check(shell is not None and len(commands) > 10 and len(expected) > 10,
          "docs/walkthrough.md has a gdb session")
    words = shlex.split(shell)
    env = {}
    while words and re.match(r"^\w+=", words[0]):
        k, v = words.pop(0).split("=", 1)
        env[k] = v
    check(words[0] == "gdb" and "--args" in words, "the session starts gdb --args ...")
    at = words.index("--args")
    gdb_args, program = words[1:at], words[at + 1:]
    check(program[0] == "build/debug/lina", "the session runs build/debug/lina")
    program[0] = lina
    rc, out = run_gdb(gdb_args, commands, program, env, ROOT)
    shutil.rmtree(os.path.join(ROOT, "runs", "gdb"), ignore_errors=True)
    check(rc == 0, "gdb ran the walkthrough's commands", out)
    actual = [normalise(l, ROOT) for l in out.splitlines()]
    i = 0
    for line in expected:
        want = normalise(line, ROOT)
        while i < len(actual) and actual[i] != want:
            i += 1
        check(i < len(actual), "the walkthrough's line appears: " + line[:120], out)
        i += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["printers", "walkthrough"])
    ap.add_argument("--lina", required=True, help="lina built with the debug preset")
    a = ap.parse_args()
    if not shutil.which("gdb"):
        print("SKIPPED: gdb is not installed (Debian: apt-get install gdb; scripts/setup.sh)")
        return 0
    if not os.path.exists(a.lina):
        print(f"SKIPPED: no debug build at {a.lina} "
              "(cmake --preset debug && cmake --build --preset debug --target lina; scripts/test.sh does it)")
        return 0
    if a.what == "printers":
        test_printers(os.path.abspath(a.lina))
    else:
        test_walkthrough(os.path.abspath(a.lina))
    return 0


if __name__ == "__main__":
    sys.exit(main())
