// Which machine a run was trained (or a benchmark timed) on, for its json:
// two CPUs round float32 differently (other SIMD widths sum in other
// orders) and time differently, so a result names where it came from.
#pragma once
#include <nlohmann/json.hpp>

namespace lina {

// e.g. {"cpu": "AMD EPYC", "simd": "avx512", "threads": 2, "gemm": "OpenBLAS (SkylakeX kernels)"}:
//   cpu      /proc/cpuinfo's first "model name" ("unknown" where there is none)
//   simd     the widest vector instructions this binary was compiled for
//            (-march=native in Release): "avx512", "avx2", "avx", "sse2" or "none"
//   threads  OpenMP's thread count for the CPU kernels
//   gemm     the CPU's matrix products: Eigen, or OpenBLAS with its kernels
nlohmann::json machine_json();

}  // namespace lina
