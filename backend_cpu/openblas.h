// OpenBLAS's single-precision GEMM as the CPU backend's float products, when
// the machine has it (Debian's libopenblas0). It is found at run time with
// dlopen, so lina builds and runs without it; Eigen's GEMM is then used, as
// it always is for double.
//
// On this project's 2-core AVX-512 machine, OpenBLAS's AVX-512 kernels made
// the whole training step 2–9 % faster than Eigen's products did
// (results/bench/openblas/ at e88f518), mostly on the weight gradients' long inner
// dimension. Debian 12's OpenBLAS (0.3.21) does not recognise every newer
// CPU and then falls back to its oldest x86-64 kernels (Prescott: 63 GFLOP/s
// here against about 280 with its AVX-512 ones), so before loading it lina
// names the kernel family from the CPU's own features (OPENBLAS_CORETYPE),
// unless the environment already does.
//
// lina calls it from its own threads, one block of C per thread
// (backend_cpu/matmul.cpp), so OpenBLAS is told to use one thread itself.
#pragma once
#include <string>

namespace lina::cpu {

// cblas_sgemm(order, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);
constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112;

struct OpenBlas {
  CblasSgemm sgemm = nullptr;
  void (*set_num_threads)(int) = nullptr;
  std::string core;  // the kernels it runs (openblas_get_corename), e.g. "SkylakeX"
};

// The library, loaded on first use; null when libopenblas.so.0 is not there.
const OpenBlas* openblas();

// Which GEMM the float products use: OpenBLAS when it is installed, unless
// the environment says LINA_GEMM=eigen; set_cpu_gemm switches (tests, the
// bench) and returns false when asked for OpenBLAS that is not installed.
enum class CpuGemm { Eigen, OpenBlas };
CpuGemm cpu_gemm();
bool set_cpu_gemm(CpuGemm gemm);
std::string cpu_gemm_name();  // "Eigen" or "OpenBLAS (SkylakeX kernels)"

}  // namespace lina::cpu
