// OpenMP helpers for the CPU kernels. Elementwise loops go parallel only
// above kParallelMin elements: below that, starting threads costs more than
// the loop.
#pragma once
#include <cstdint>

namespace lina::cpu {
constexpr int64_t kParallelMin = 1 << 15;
}

#define LINA_PRAGMA(x) _Pragma(#x)
#define LINA_PARALLEL_FOR_IF(cond) LINA_PRAGMA(omp parallel for if (cond))
