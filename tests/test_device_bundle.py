#!/usr/bin/env python3
"""scripts/device-bundle.sh, what a lent GPU machine is given to run: the
bundle is built (the CPU-only flavour here, the cheapest: one build folder,
build/bundle-cpu, reused between runs) into a temporary folder, copied
elsewhere, and run from there alone with a scrubbed environment (no PATH to
a build, LD_LIBRARY_PATH only the bundle's lib/): `lina --help`, a 2-update
`lina train`, and the runner run.sh; without LD_LIBRARY_PATH lina must
still load lib/'s libraries (its RUNPATH). Every library lina and the bundled
libraries load must resolve into lib/ or glibc (ldd in the same
environment), and the same check must fail on a copy with libgomp taken
out. The build must be -march=x86-64-v3, never native. Skipped only where
it cannot build: no cmake, no C++ compiler, no ldd.

    tests/test_device_bundle.py --work DIR [--build DIR]
"""
import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLE = os.path.join(ROOT, "scripts", "device-bundle.sh")
GLIBC = ("linux-vdso.so", "ld-linux", "libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so")
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what)


def scrubbed(bundle):
    return {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"),
            "LD_LIBRARY_PATH": os.path.join(bundle, "lib")}


def foreign_libraries(bundle):
    """'file: lib => path' for each library a file of the bundle loads from outside lib/ and glibc."""
    lib = os.path.realpath(os.path.join(bundle, "lib"))
    found = []
    for folder in ("bin", "lib"):
        for name in sorted(os.listdir(os.path.join(bundle, folder))):
            r = subprocess.run(["ldd", os.path.join(bundle, folder, name)], capture_output=True, text=True,
                               env=scrubbed(bundle))
            for line in r.stdout.splitlines():
                parts = line.split()
                if "=>" not in parts or parts[0].startswith(GLIBC):
                    continue
                path = parts[parts.index("=>") + 1]
                if path == "not" or os.path.dirname(os.path.realpath(path)) != lib:
                    found.append(f"{name}: {parts[0]} => {path}")
    return found


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", required=True)
    p.add_argument("--build", default=os.path.join(ROOT, "build", "bundle-cpu"))
    a = p.parse_args()
    missing = [tool for tool in ("cmake", "c++", "ldd") if not shutil.which(tool)]
    if missing:
        print(f"SKIPPED: cannot build the bundle here: no {', '.join(missing)}")
        return
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    built = os.path.join(a.work, "built")
    os.makedirs(os.path.dirname(os.path.abspath(a.build)), exist_ok=True)
    with open(os.path.abspath(a.build) + ".lock", "w") as lock:   # one build at a time in the shared folder
        fcntl.flock(lock, fcntl.LOCK_EX)
        r = subprocess.run(["bash", BUNDLE, "--flavour", "cpu", "--build", a.build, built],
                           capture_output=True, text=True)
    print(r.stdout + r.stderr, end="")
    check(r.returncode == 0, f"device-bundle.sh --flavour cpu exits 0 (got {r.returncode})")
    if r.returncode != 0:
        sys.exit("the bundle did not build")
    with open(os.path.join(a.build, "compile_commands.json")) as f:
        commands = f.read()
    check("-march=x86-64-v3" in commands and "march=native" not in commands, "built with -march=x86-64-v3, never native")

    # the bundle alone, somewhere else
    bundle = os.path.join(a.work, "elsewhere")
    shutil.copytree(built, bundle, symlinks=True)
    shutil.rmtree(built)
    libs = sorted(os.listdir(os.path.join(bundle, "lib")))
    check({"libstdc++.so.6", "libgomp.so.1", "libgcc_s.so.1"} <= set(libs), f"lib/ holds the C++ and OpenMP runtimes: {libs}")
    for name in ("sweep.py", "device-course.sh", "device-pack.py", "device-unpack.sh"):
        check(os.path.isfile(os.path.join(bundle, "scripts", name)), f"scripts/{name} is in the bundle")
    manifest = open(os.path.join(bundle, "MANIFEST")).read()
    check("flavour cpu" in manifest and "march x86-64-v3" in manifest, "MANIFEST names the flavour and the march")
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(bundle) for n in ns)
    check(size < 64 << 20, f"the bundle ({size / 2**20:.1f} MiB) fits the run tool's carry (64 MiB)")

    foreign = foreign_libraries(bundle)
    check(not foreign, f"every library resolves into lib/ or glibc: {foreign or 'yes'}")
    lina = os.path.join(bundle, "bin", "lina")
    r = subprocess.run([lina, "--help"], capture_output=True, text=True, env=scrubbed(bundle), cwd=a.work)
    check(r.returncode == 0 and "train" in r.stdout, f"lina --help runs from the bundle alone ({r.stderr.strip()[:200]})")
    r = subprocess.run([lina, "--help"], capture_output=True, text=True, cwd=a.work,
                       env={"PATH": "/usr/bin:/bin", "LD_DEBUG": "libs"})
    inits = [line.split()[-1] for line in r.stderr.splitlines() if "calling init:" in line]
    check(r.returncode == 0 and any(os.path.realpath(i) == os.path.realpath(os.path.join(bundle, "lib", "libstdc++.so.6"))
                                    for i in inits),
          "without LD_LIBRARY_PATH lina loads the bundle's libstdc++ (RUNPATH $ORIGIN/../lib)")
    out = os.path.join(a.work, "runs")
    r = subprocess.run([lina, "train", "--preset", "gdn", "--task", "recall", "--device", "cpu", "--steps", "2",
                        "--batch", "2", "--pairs", "4", "--keys", "8", "--values", "8", "--eval-batches", "1",
                        "--fresh-batches", "1", "--probe-batches", "1", "--quiet", "--out", out],
                       capture_output=True, text=True, env=scrubbed(bundle), cwd=a.work)
    run_json = os.path.join(out, "cpu", "recall_gdn_p4_k8_v8.json")
    check(r.returncode == 0 and os.path.isfile(run_json) and json.load(open(run_json)).get("steps_done") == 2,
          f"a 2-update lina train runs from the bundle alone ({r.stderr.strip()[:300]})")
    r = subprocess.run([os.path.join(bundle, "run.sh"), "lina", "--help"], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin"}, cwd=a.work)
    check(r.returncode == 0 and "train" in r.stdout, "run.sh finds the bundle's lina")

    # a missing library is seen: take libgomp out of a copy
    planted = os.path.join(a.work, "planted")
    shutil.copytree(bundle, planted, symlinks=True)
    os.remove(os.path.join(planted, "lib", "libgomp.so.1"))
    foreign = foreign_libraries(planted)
    check(any("libgomp.so.1" in f for f in foreign), f"the check finds libgomp missing from a planted copy: {foreign}")

    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print(f"all device-bundle checks passed (bundle {size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
