// The one strided copy behind permute, expand, slice, concat and sum_to.
#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/parallel.h"

namespace lina::cpu {

template <class T>
void copy_strided(const T* src, const int64_t* src_strides, T* dst, const int64_t* dst_strides,
                  const int64_t* shape, int ndim, bool accumulate) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  if (n == 0) return;
  int64_t inner = ndim ? shape[ndim - 1] : 1;
  int64_t ss = ndim ? src_strides[ndim - 1] : 0, ds = ndim ? dst_strides[ndim - 1] : 0;
  int64_t rows = n / inner;
  auto row_offsets = [&](int64_t r, int64_t& os, int64_t& od) {
    os = od = 0;
    for (int d = ndim - 2; d >= 0; --d) {
      int64_t i = r % shape[d];
      r /= shape[d];
      os += i * src_strides[d];
      od += i * dst_strides[d];
    }
  };
  if (accumulate) {
    // Zero destination strides make several source rows land on one
    // destination row: run serially so no two threads add into one place.
    for (int64_t r = 0; r < rows; ++r) {
      int64_t os, od;
      row_offsets(r, os, od);
      for (int64_t j = 0; j < inner; ++j) dst[od + j * ds] += src[os + j * ss];
    }
    return;
  }
  LINA_PARALLEL_FOR_IF(n > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t os, od;
    row_offsets(r, os, od);
    for (int64_t j = 0; j < inner; ++j) dst[od + j * ds] = src[os + j * ss];
  }
}

template void copy_strided<float>(const float*, const int64_t*, float*, const int64_t*,
                                  const int64_t*, int, bool);
template void copy_strided<double>(const double*, const int64_t*, double*, const int64_t*,
                                   const int64_t*, int, bool);
template void copy_strided<int32_t>(const int32_t*, const int64_t*, int32_t*, const int64_t*,
                                    const int64_t*, int, bool);

}  // namespace lina::cpu
