// The one strided copy behind permute, expand, slice, concat and sum_to.
#include <algorithm>
#include <vector>

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
  // Rows [r0, r1), each the `inner` elements along the last dimension. The
  // first row's offsets come from its index over the outer dimensions; each
  // next row's by stepping that index like an odometer (last outer
  // dimension fastest), without a division per row: the rows of a narrow
  // slice ([.., 4] out of [.., 8]) are only a few elements long.
  auto copy_rows = [&](int64_t r0, int64_t r1) {
    std::vector<int64_t> index(size_t(std::max(ndim - 1, 0)));
    int64_t os = 0, od = 0, rest = r0;
    for (int d = ndim - 2; d >= 0; --d) {
      index[size_t(d)] = rest % shape[d];
      rest /= shape[d];
      os += index[size_t(d)] * src_strides[d];
      od += index[size_t(d)] * dst_strides[d];
    }
    for (int64_t row = r0; row < r1; ++row) {
      if (accumulate)
        for (int64_t j = 0; j < inner; ++j) dst[od + j * ds] += src[os + j * ss];
      else
        for (int64_t j = 0; j < inner; ++j) dst[od + j * ds] = src[os + j * ss];
      for (int d = ndim - 2; d >= 0; --d) {  // the next row's index and offsets
        os += src_strides[d];
        od += dst_strides[d];
        if (++index[size_t(d)] < shape[d]) break;
        os -= shape[d] * src_strides[d];
        od -= shape[d] * dst_strides[d];
        index[size_t(d)] = 0;
      }
    }
  };
  if (accumulate) {
    // Zero destination strides make several source rows land on one
    // destination row: run serially so no two threads add into one place.
    copy_rows(0, rows);
    return;
  }
  constexpr int64_t kRowsPerBlock = 256;
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  LINA_PARALLEL_FOR_IF(n > kParallelMin)
  for (int64_t b = 0; b < blocks; ++b)
    copy_rows(b * kRowsPerBlock, std::min(rows, (b + 1) * kRowsPerBlock));
}

LINA_INSTANTIATE_CPU_KERNELS(LAYOUT)  // float and double, from core/op_list.h
template void copy_strided<int32_t>(const int32_t*, const int64_t*, int32_t*, const int64_t*,
                                    const int64_t*, int, bool);

}  // namespace lina::cpu
