#!/usr/bin/env bash
# Builds, here, what a lent GPU machine runs, so that its minutes go to the GPU
# and not to a build (docs/cuda.md, "The offline GPU check"):
#   scripts/device-bundle.sh [--flavour cuda|sim|cpu] [--tests] [--openblas]
#                            [--build DIR] [OUT]
# then carry OUT (default .device-bin, git-ignored) in the run tool's `carry`.
#   --flavour  cuda: the CUDA backend, arch 90 (the default where nvcc is found);
#              sim: the CUDA backend on lina's CUDA runtime on the CPU (the
#              default without nvcc); cpu: no CUDA backend (the cheapest, for the test)
#   --tests    also lina_cuda_tests (cuda and sim), for scripts/device-check.sh
#   --openblas also libopenblas.so.0 and what it needs (about 40 MB: lina loads
#              it with dlopen for the CPU's float products, backend_cpu/openblas.cpp,
#              and uses Eigen's GEMM without it, so GPU runs do not need it)
#   --build    the build folder (default build/bundle, build/bundle-sim, build/bundle-cpu)
# The build is Release with -march=x86-64-v3 (AVX2, FMA; CMake's LINA_MARCH),
# never -march=native, so the binary runs on any x86-64 from 2015 on. OUT gets
#   bin/lina [bin/lina_cuda_tests]  RUNPATH $ORIGIN/../lib, then the toolkit's lib folder
#   lib/        the shared libraries they load that a bare machine with the CUDA
#               toolkit may lack (libstdc++, libgcc_s, libgomp; not glibc's own
#               libraries, not libcudart/libcublas, which come from the toolkit there)
#   scripts/    sweep.py, device-course.sh, device-pack.py, device-unpack.sh,
#               as built (they need nothing else; device-check.sh runs from the
#               repository, which travels too, with LINA_CHECK_BUILD=OUT/bin)
#   run.sh      the runner: `OUT/run.sh COMMAND ARGS...` runs COMMAND with
#               OUT/bin first on PATH and the toolkit's lib folders on
#               LD_LIBRARY_PATH (lina finds lib/ by its RUNPATH)
#   MANIFEST    flavour, commit, march, files and sizes
# It ends by running OUT/bin/lina --help with LD_LIBRARY_PATH naming lib/ only
# (and the toolkit's lib folder for cuda) and by checking that every library
# lina loads resolves into lib/, glibc or the toolkit. Exit: 0 built; 1 bad
# arguments or a missing library; 2 configure or build failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH="/usr/local/cuda/bin:$PATH"
flavour="" tests=0 openblas=0 build="" out=.device-bin
usage="usage: scripts/device-bundle.sh [--flavour cuda|sim|cpu] [--tests] [--openblas] [--build DIR] [OUT]"
while (($#)); do
  case $1 in
    --flavour) flavour=${2:?$usage}; shift 2 ;;
    --tests) tests=1; shift ;;
    --openblas) openblas=1; shift ;;
    --build) build=${2:?$usage}; shift 2 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    -*) echo "device-bundle.sh: unknown option '$1' ($usage)" >&2; exit 1 ;;
    *) out=$1; shift ;;
  esac
done
if [[ -z $flavour ]]; then
  if command -v nvcc >/dev/null; then flavour=cuda; else flavour=sim; fi
fi
case $flavour in
  cuda) flags=(-DLINA_CUDA=ON -DLINA_CUDA_SIM=OFF -DCMAKE_CUDA_ARCHITECTURES=90) ;;
  sim) flags=(-DLINA_CUDA=OFF -DLINA_CUDA_SIM=ON) ;;
  cpu) flags=(-DLINA_CUDA=OFF -DLINA_CUDA_SIM=OFF); tests=0 ;;
  *) echo "device-bundle.sh: unknown flavour '$flavour' (cuda, sim or cpu)" >&2; exit 1 ;;
esac
build=${build:-build/bundle$([[ $flavour == cuda ]] || echo "-$flavour")}
say() { echo "device-bundle: $*"; }

# ---- build: Release, x86-64-v3, RUNPATH $ORIGIN/../lib ----------------------------
targets=(lina)
((tests)) && targets+=(lina_cuda_tests)
prefix=()
[[ -d $root/.device-deps/usr ]] && prefix=("-DCMAKE_PREFIX_PATH=$root/.device-deps/usr")
say "configure $build ($flavour, -march=x86-64-v3)"
if ! nice -n 5 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O3 -DNDEBUG" \
      -DLINA_MARCH=x86-64-v3 '-DCMAKE_BUILD_RPATH=$ORIGIN/../lib' "${flags[@]}" "${prefix[@]}" >"$build.configure.log" 2>&1; then
  tail -20 "$build.configure.log" >&2
  echo "device-bundle.sh: configure failed (whole log: $build.configure.log)" >&2
  exit 2
fi
jobs=${LINA_BUNDLE_JOBS:-2}
say "build ${targets[*]} with $jobs jobs (nice 5)"
if ! nice -n 5 cmake --build "$build" --parallel "$jobs" --target "${targets[@]}" >"$build.build.log" 2>&1; then
  tail -30 "$build.build.log" >&2
  echo "device-bundle.sh: build failed (whole log: $build.build.log)" >&2
  exit 2
fi
if grep -q 'march=native' "$build/compile_commands.json"; then
  echo "device-bundle.sh: $build compiles with -march=native; reconfigure it (rm $build/CMakeCache.txt)" >&2
  exit 2
fi

# ---- the bundle ---------------------------------------------------------------------
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/scripts"
for t in "${targets[@]}"; do cp "$build/$t" "$out/bin/"; done
cp scripts/sweep.py scripts/device-course.sh scripts/device-pack.py scripts/device-unpack.sh "$out/scripts/"

# A library that a machine with glibc and the CUDA toolkit has: not copied.
provided() {
  case $1 in
    linux-vdso.so.*|ld-linux*|libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*) return 0 ;;
    libcudart.so.*|libcublas.so.*|libcublasLt.so.*|libcuda.so.*) return 0 ;;
  esac
  return 1
}
# copy_needs FILE: every library FILE loads (ldd: the whole tree) that is not provided
copy_needs() {
  local name path
  while read -r name _ path _; do
    [[ $path == /* ]] || continue
    provided "$name" && continue
    [[ -f $out/lib/$name ]] || cp -L "$path" "$out/lib/$name"
  done < <(ldd "$1" | grep '=>')
}
for t in "${targets[@]}"; do copy_needs "$out/bin/$t"; done
if ((openblas)); then
  blas=$(ldconfig -p | awk '/libopenblas\.so\.0 .*x86-64/ {print $NF; exit}')
  if [[ -n $blas ]]; then
    cp -L "$blas" "$out/lib/libopenblas.so.0"
    copy_needs "$out/lib/libopenblas.so.0"
  else
    say "no libopenblas.so.0 here: lina will use Eigen's GEMM there"
  fi
fi

cat >"$out/run.sh" <<'EOF'
#!/usr/bin/env bash
# The bundle's runner (scripts/device-bundle.sh): OUT/run.sh COMMAND ARGS...
# runs COMMAND with the bundle's bin/ first on PATH and the CUDA toolkit's
# lib folders on LD_LIBRARY_PATH; lina finds the bundle's lib/ itself (RUNPATH).
here=$(cd "$(dirname "$0")" && pwd)
export PATH="$here/bin:$here/scripts:/usr/local/cuda/bin:$PATH"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$@"
EOF
chmod +x "$out/run.sh"

# ---- check: lina runs from the bundle, every library it loads is accounted for -----
cuda_lib=""
[[ $flavour == cuda ]] && cuda_lib=":/usr/local/cuda/lib64:/usr/local/cuda/lib"
scrubbed=(env -i "PATH=/usr/bin:/bin" "HOME=${HOME:-/tmp}" "LD_LIBRARY_PATH=$(cd "$out/lib" && pwd)$cuda_lib")
if ! "${scrubbed[@]}" "$out/bin/lina" --help >/dev/null; then
  echo "device-bundle.sh: $out/bin/lina --help fails with LD_LIBRARY_PATH=$out/lib only" >&2
  exit 1
fi
lib_dir=$(cd "$out/lib" && pwd)
for f in "$out"/bin/* "$out"/lib/*; do
  while read -r name _ path _; do
    [[ $path == /* ]] || continue
    provided "$name" && continue
    if [[ $(dirname "$(readlink -f "$path")") != "$lib_dir" ]]; then
      echo "device-bundle.sh: $(basename "$f") loads $name from $path, not from the bundle" >&2
      exit 1
    fi
  done < <("${scrubbed[@]}" ldd "$f" | grep '=>')
done

{
  echo "flavour $flavour"
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with changes)')"
  echo "march x86-64-v3"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on glibc $(ldd --version | head -1 | awk '{print $NF}') (the machine there needs as new a one)"
  (cd "$out" && find bin lib scripts run.sh -type f -printf '%s %p\n' | sort -k2)
} >"$out/MANIFEST"
say "$out holds $(du -sh "$out" | cut -f1) ($(du -sb "$out" | cut -f1) bytes): $(cd "$out" && echo bin/* lib/*)"
