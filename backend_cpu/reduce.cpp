// Reductions.
#include <algorithm>
#include <vector>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/parallel.h"

namespace lina::cpu {

// x viewed as [outer, n, inner] -> out [outer, inner], summing the middle
// axis; out += the sum with accumulate (the sum taken first, then added).
template <class T>
void sum_middle(const T* x, T* out, int64_t outer, int64_t n, int64_t inner, bool accumulate) {
  if (accumulate) {  // out += the sum: the sum on its own first, then one add per element
    std::vector<T> sum(size_t(outer * inner));  // [outer, inner]
    sum_middle(x, sum.data(), outer, n, inner, false);
    for (int64_t i = 0; i < outer * inner; ++i) out[i] += sum[size_t(i)];
    return;
  }
  LINA_PARALLEL_FOR_IF(outer * n * inner > kParallelMin && outer > 1)
  for (int64_t o = 0; o < outer; ++o) {
    T* dst = out + o * inner;
    for (int64_t i = 0; i < inner; ++i) dst[i] = T(0);
    for (int64_t j = 0; j < n; ++j) {
      const T* row = x + (o * n + j) * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] += row[i];
    }
  }
}

// Σ x² in double. Fixed blocks summed in a fixed order, so the result does
// not depend on the number of threads or their timing (a resumed run must
// clip its gradients exactly as an uninterrupted one).
template <class T>
void sum_squares(const T* x, int64_t n, double* out) {
  constexpr int64_t kBlock = 1 << 14;
  int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(size_t(blocks), 0.0);
  LINA_PARALLEL_FOR_IF(n > kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    double s = 0.0;
    for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) s += double(x[i]) * double(x[i]);
    partial[size_t(b)] = s;
  }
  double total = 0.0;
  for (double p : partial) total += p;
  *out = total;
}


LINA_INSTANTIATE_CPU_KERNELS(REDUCE)  // float and double, from core/op_list.h

}  // namespace lina::cpu
