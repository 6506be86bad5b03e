#!/usr/bin/env python3
"""The layers of lina include, and link, only the layers below them.

    core/          Tensor, shapes, dtypes, the kernel list; reaches a device's
                   memory through core/device_memory.h, which the backends fill   (nothing)
    backend_cpu/   the CPU kernels; the host's DeviceMemory        (core/)
    backend_cuda/  the CUDA kernels; the CUDA DeviceMemory         (core/; cuda_sim/ stands in for the CUDA runtime)
    dispatch/      the entry points of dispatch/dispatch.h and the
                   layout ops on them (dispatch/layout.h)          (core/, both backends: the only folder that sees both)
    autograd/      Var, ops, backward                              (core/, dispatch/)
    models/        layers, presets, optimiser                      (core/, dispatch/, autograd/)
    experiments/   the lina binary's commands                      (all of the above but the backends; its
                                                                    benchmarks bench*.cpp may read the CPU
                                                                    backend's counters and its GEMM)

Includes: every quoted #include "<folder>/..." of every source file is
checked against the table; the test fails with each include that breaks it.

Links: each layer is a static library, lina_<layer>, that links only the
layers below it (LINKS). Given the archives (CMakeLists.txt passes them,
`layer=path`), every symbol a layer leaves undefined (nm) must be defined in
that layer or one below it; the test fails with each symbol (demangled) that
another layer defines, naming that layer. (The build makes the same point on
its own: link_check_<layer> links one layer's whole archive with the layers
below it only.)

The checks must be able to fail: a core file including a backend is caught;
and a call from core/ into dispatch/, compiled and added to a copy of
lina_core's archive, is reported by the symbol check, and refused by the
linker in the command that links the real archive.
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

# ---- includes ----------------------------------------------------------------
ALLOWED = {
    "core": {"core"},
    "backend_cpu": {"core", "backend_cpu"},
    "backend_cuda": {"core", "backend_cuda", "cuda_sim"},
    "dispatch": {"core", "backend_cpu", "backend_cuda", "dispatch"},
    "autograd": {"core", "dispatch", "autograd"},
    "models": {"core", "dispatch", "autograd", "models"},
    "experiments": {"core", "dispatch", "autograd", "models", "experiments"},
    "cuda_sim": {"cuda_sim"},
}
EXCEPTIONS = {("experiments", "backend_cpu"): re.compile(r"^experiments/bench\w*\.cpp$")}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')

# ---- links: the layers each library links directly ----------------------------
LINKS = {
    "core": [],
    "backend_cpu": ["core"],
    "cuda_sim": [],
    "backend_cuda": ["core", "cuda_sim"],
    "dispatch": ["core", "backend_cpu", "backend_cuda"],
    "autograd": ["dispatch"],
    "models": ["autograd"],
    "experiments": ["models"],
}
OPTIONAL = {"cuda_sim"}  # built only for the cuda-sim preset and the simulator's own tests


def below(layer):
    """The layers `layer` may use: itself and everything it links, transitively."""
    seen, todo = set(), [layer]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(LINKS[name])
    return seen


def include_violations(root):
    found = []
    for layer, allowed in ALLOWED.items():
        for dirpath, _, names in os.walk(os.path.join(root, layer)):
            for name in sorted(names):
                if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or m.group(1) in allowed:
                            continue
                        exception = EXCEPTIONS.get((layer, m.group(1)))
                        if exception and exception.match(rel):
                            continue
                        found.append(f"{rel}:{number}: {layer}/ includes {m.group(1)}/ ({line.strip()})")
    return found


# nm's default (BSD) format: "VALUE TYPE NAME", VALUE blank when undefined.
SYMBOL = re.compile(r"^[0-9a-fA-F]*\s+(\S) (.+)$")
GLOBAL_DEFINITION = set("ABCDGIRSTVWiu")  # lower case t/d/b/r are local to their object


def symbols(nm, archive):
    """(defined, undefined) of an archive: {mangled name: demangled name}.
    nm and nm -C list the same symbols in the same order."""
    outputs = []
    for extra in ([], ["-C"]):
        run = subprocess.run([nm, *extra, archive], capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"{nm} {' '.join(extra)} {archive} failed: {run.stderr.strip()}")
        outputs.append(run.stdout.splitlines())
    if len(outputs[0]) != len(outputs[1]):
        raise RuntimeError(f"nm and nm -C list {archive} differently")
    defined, undefined = {}, {}
    for plain, demangled in zip(*outputs):
        m, d = SYMBOL.match(plain), SYMBOL.match(demangled)
        if not m or not d:
            continue  # an object's heading, a blank line
        kind, name = m.group(1), m.group(2)
        if kind == "U":
            undefined[name] = d.group(2)
        elif kind in GLOBAL_DEFINITION:
            defined[name] = d.group(2)
    return defined, undefined


def link_violations(nm, archives):
    """Each undefined symbol of a layer that only layers not below it define."""
    tables = {layer: symbols(nm, path) for layer, path in archives.items()}
    found = []
    for layer, (defined_here, undefined) in sorted(tables.items()):
        allowed = below(layer)
        for name, demangled in sorted(undefined.items(), key=lambda kv: kv[1]):
            if any(name in tables[other][0] for other in allowed if other in tables):
                continue
            definers = sorted(other for other in tables if name in tables[other][0])
            if definers:  # else: a system library's (libc, OpenMP, CUDA, ...)
                found.append(f"{layer}/ uses {demangled}, defined in {', '.join(d + '/' for d in definers)}"
                             f" (not below {layer}/)")
    return found


# ---- the checks can fail -----------------------------------------------------------
PLANTED = """\
// core/ calling an entry point of dispatch/: what the layering refuses.
#include "dispatch/dispatch.h"

namespace lina {
double planted_up_call(const Tensor& x) { return dispatch::sum_squares(x); }
}  // namespace lina
"""
PLANTED_SYMBOL = "lina::dispatch::sum_squares(lina::Tensor const&)"


def include_check_fails():
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "core"))
        with open(os.path.join(tmp, "core", "bad.cpp"), "w") as f:
            f.write('#include "core/tensor.h"\n#include "backend_cpu/cpu_kernels.h"\n')
        caught = include_violations(tmp)
        if len(caught) != 1 or "core/bad.cpp:2" not in caught[0]:
            return [f"the include check missed core/ including backend_cpu/: {caught}"]
    return []


def link_checks_fail(args, archives, real_violations):
    """Plants PLANTED in a copy of lina_core's archive: the symbol check must
    report it (beside real_violations, those of the real archives), and
    linking that archive whole must fail where the real one links."""
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        def run(command):
            return subprocess.run(command, capture_output=True, text=True, cwd=tmp)

        source = os.path.join(tmp, "planted_up_call.cpp")
        with open(source, "w") as f:
            f.write(PLANTED)
        planted_object = os.path.join(tmp, "planted_up_call.o")
        main_object = os.path.join(tmp, "main.o")
        for src, obj in ((source, planted_object), (os.path.join(ROOT, "tests", "link_check", "main.cpp"), main_object)):
            compiled = run([args.cxx, "-std=c++17", "-I", ROOT, "-c", src, "-o", obj])
            if compiled.returncode != 0:
                return [f"could not compile {os.path.basename(src)}: {compiled.stderr.strip()}"]
        planted_core = os.path.join(tmp, "planted_core.a")
        shutil.copyfile(archives["core"], planted_core)
        added = run([args.ar, "rs", planted_core, planted_object])
        if added.returncode != 0:
            return [f"{args.ar} could not add the planted object: {added.stderr.strip()}"]

        # The symbol check.
        caught = [v for v in link_violations(args.nm, {**archives, "core": planted_core})
                  if v not in real_violations]
        if len(caught) != 1 or not caught[0].startswith(f"core/ uses {PLANTED_SYMBOL}, defined in dispatch/"):
            problems.append(f"the symbol check missed core/ calling {PLANTED_SYMBOL}: {caught}")
        else:
            print(f"layering: a planted up-call is caught: {caught[0]}")

        # The linker, as link_check_core links: the whole archive, nothing above.
        def link(archive):
            return run([args.cxx, main_object, "-Wl,--whole-archive", archive, "-Wl,--no-whole-archive",
                        *shlex.split(args.link_flags), "-o", os.path.join(tmp, "link_check")])

        real = link(archives["core"])
        if real.returncode != 0:
            problems.append(f"lina_core's archive alone does not link, so the linker's refusal of "
                            f"a planted call cannot be shown: {real.stderr.strip()}")
        else:
            planted = link(planted_core)
            message = next((line for line in planted.stderr.splitlines() if "sum_squares" in line), "")
            if planted.returncode == 0 or not message:
                problems.append(f"the linker did not refuse the planted call of {PLANTED_SYMBOL} "
                                f"(exit {planted.returncode}): {planted.stderr.strip()}")
            else:
                print(f"layering: the linker refuses it: {message.strip()}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("archives", nargs="*", metavar="LAYER=ARCHIVE",
                        help="each layer's static library (without them only the includes are checked)")
    parser.add_argument("--nm", default="nm")
    parser.add_argument("--ar", default="ar")
    parser.add_argument("--cxx", default="c++")
    parser.add_argument("--link-flags", default="", help="what a program of lina_core links besides it")
    args = parser.parse_args()

    archives = {}
    for item in args.archives:
        layer, sep, path = item.partition("=")
        if not sep or layer not in LINKS:
            parser.error(f"'{item}': expected LAYER=ARCHIVE, LAYER one of {', '.join(LINKS)}")
        archives[layer] = os.path.abspath(path)

    failures = include_check_fails()
    failures += include_violations(ROOT)
    if archives:
        missing = sorted(set(LINKS) - OPTIONAL - set(archives))
        absent = sorted(f"{layer}: {path}" for layer, path in archives.items() if not os.path.isfile(path))
        if missing or absent:
            failures += [f"no archive for {', '.join(missing)}"] if missing else []
            failures += [f"archive not built: {a}" for a in absent]
        else:
            try:
                real_violations = link_violations(args.nm, archives)
                failures += link_checks_fail(args, archives, real_violations)
                failures += real_violations
            except (OSError, RuntimeError) as e:
                failures.append(str(e))
    for failure in failures:
        print("FAIL:", failure)
    if failures:
        return 1
    print(f"layering: every include of {', '.join(ALLOWED)} is allowed")
    if archives:
        print(f"layering: every symbol that {', '.join(sorted(archives))} use is defined in the layer or below it")
    else:
        print("layering: links not checked (no archives given; ctest gives them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
