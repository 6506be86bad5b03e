#include "experiments/machine.h"

#include <fstream>
#include <string>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "dispatch/dispatch.h"

namespace lina {

namespace {

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {  // "model name	: AMD EPYC"
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t first = line.find_first_not_of(" \t", colon + 1);
    if (first != std::string::npos) return line.substr(first);
  }
  return "unknown";
}

constexpr const char* kSimd =
#if defined(__AVX512F__)
    "avx512";
#elif defined(__AVX2__)
    "avx2";
#elif defined(__AVX__)
    "avx";
#elif defined(__SSE2__)
    "sse2";
#else
    "none";
#endif

}  // namespace

nlohmann::json machine_json() {
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  return {{"cpu", cpu_model()}, {"simd", kSimd}, {"threads", threads}, {"gemm", dispatch::cpu_gemm()}};
}

}  // namespace lina
