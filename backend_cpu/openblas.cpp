// Finding OpenBLAS at run time (backend_cpu/openblas.h).
#include "backend_cpu/openblas.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace lina::cpu {

namespace {

// The kernel family for the CPU this runs on, from its features: what
// OpenBLAS's own detection would pick on a CPU it knows.
const char* kernel_family() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return nullptr;  // leave the choice to OpenBLAS
}

const OpenBlas* load() {
  if (!std::getenv("OPENBLAS_CORETYPE"))
    if (const char* family = kernel_family()) setenv("OPENBLAS_CORETYPE", family, 0);
  void* lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return nullptr;
  static OpenBlas blas;  // the library stays loaded for the life of the process
  blas.sgemm = reinterpret_cast<CblasSgemm>(dlsym(lib, "cblas_sgemm"));
  blas.set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(lib, "openblas_set_num_threads"));
  if (!blas.sgemm || !blas.set_num_threads) return nullptr;
  using CoreName = char* (*)();
  if (auto core = reinterpret_cast<CoreName>(dlsym(lib, "openblas_get_corename"))) blas.core = core();
  blas.set_num_threads(1);  // lina's threads each call it on their own block
  return &blas;
}

std::atomic<CpuGemm>& chosen() {
  static std::atomic<CpuGemm> gemm{[] {
    const char* mode = std::getenv("LINA_GEMM");
    if (mode && std::strcmp(mode, "eigen") == 0) return CpuGemm::Eigen;
    return openblas() ? CpuGemm::OpenBlas : CpuGemm::Eigen;
  }()};
  return gemm;
}

}  // namespace

const OpenBlas* openblas() {
  static const OpenBlas* blas = load();
  return blas;
}

CpuGemm cpu_gemm() { return chosen().load(std::memory_order_relaxed); }

bool set_cpu_gemm(CpuGemm gemm) {
  if (gemm == CpuGemm::OpenBlas && !openblas()) return false;
  chosen().store(gemm);
  return true;
}

std::string cpu_gemm_name() {
  if (cpu_gemm() == CpuGemm::Eigen) return "Eigen";
  return "OpenBLAS (" + (openblas()->core.empty() ? std::string("?") : openblas()->core) +
         " kernels)";
}

}  // namespace lina::cpu
