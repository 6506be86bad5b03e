// Matmul, reductions and shape ops: known values, errors and the strided
// copy (their gradient checks and CPU-against-cuda rows: tests/op_table.cpp).
#include <doctest/doctest.h>

#include "autograd/functions.h"
#include "backend_cpu/cpu_kernels.h"
#include "tests/harness.h"

using namespace lina;
using namespace lina::test;

TEST_CASE("matmul of known matrices, plain and transposed") {
  Var a(Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}));
  Var b(Tensor::from_vector<double>({1, 0, 0, 1, 1, 1}, {3, 2}));
  Var c = matmul(a, b);
  CHECK(c.data().to_vector<double>() == std::vector<double>{4, 5, 10, 11});
  Var ct = matmul(b, a, true, true);  // bᵀ aᵀ = (a b)ᵀ
  CHECK(ct.data().to_vector<double>() == std::vector<double>{4, 10, 5, 11});
}

TEST_CASE("matmul errors name the op and both shapes") {
  Var a(Tensor::zeros({2, 3}, DType::F64));
  Var b(Tensor::zeros({4, 2}, DType::F64));
  CHECK_THROWS_WITH_AS(matmul(a, b), "matmul: inner dimensions differ in [2, 3] · [4, 2]", Error);
}

TEST_CASE("sum, permute, slice and concat values") {
  Var x(Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}));
  CHECK(sum(x, 0).data().to_vector<double>() == std::vector<double>{5, 7, 9});
  CHECK(mean(x, 1).data().to_vector<double>() == std::vector<double>{2, 5});
  CHECK(transpose(x, 0, 1).data().to_vector<double>() == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(slice(x, 1, 1, 2).data().to_vector<double>() == std::vector<double>{2, 3, 5, 6});
  CHECK(concat({x, x}, 0).shape() == Shape{4, 3});
  CHECK_THROWS_WITH_AS(reshape(x, {4, 2}), doctest::Contains("[4, 2]"), Error);
  CHECK_THROWS_AS(slice(x, 1, 2, 2), Error);
}

// cpu::copy_strided steps from row to row without dividing; against each
// element's offsets from its full index, on a permute with rows spread over
// several blocks (the last one partial), a narrow slice, and the
// accumulating form sum_to uses (zero destination strides).
TEST_CASE("copy_strided: permute, narrow slice and accumulation against index arithmetic") {
  struct Case {
    std::vector<int64_t> shape, src_strides, dst_strides;
    int64_t src_offset, src_size, dst_size;
    bool accumulate;
  };
  const std::vector<Case> cases = {
      // [3, 7, 5, 2] read as [3, 5, 7, 2] (permute 0 2 1 3): 105 rows
      {{3, 5, 7, 2}, {70, 2, 10, 1}, {70, 14, 2, 1}, 0, 210, 210, false},
      // [9, 37, 4] out of [9, 37, 8] from column 3: 333 rows, two blocks of 256
      {{9, 37, 4}, {296, 8, 1}, {148, 4, 1}, 3, 9 * 37 * 8, 9 * 37 * 4, false},
      // [300, 6] summed to [6]
      {{300, 6}, {6, 1}, {0, 1}, 0, 1800, 6, true},
  };
  for (const Case& c : cases) {
    std::vector<float> src(size_t(c.src_size)), dst(size_t(c.dst_size), 0.5f);
    for (size_t i = 0; i < src.size(); ++i) src[i] = float(i % 97) - 40.0f;
    std::vector<float> want = dst;
    int64_t n = 1;
    for (int64_t s : c.shape) n *= s;
    for (int64_t e = 0; e < n; ++e) {  // element e's offsets from its index
      int64_t rest = e, os = c.src_offset, od = 0;
      for (int d = int(c.shape.size()) - 1; d >= 0; --d) {
        const int64_t i = rest % c.shape[size_t(d)];
        rest /= c.shape[size_t(d)];
        os += i * c.src_strides[size_t(d)];
        od += i * c.dst_strides[size_t(d)];
      }
      want[size_t(od)] = c.accumulate ? want[size_t(od)] + src[size_t(os)] : src[size_t(os)];
    }
    cpu::copy_strided<float>(src.data() + c.src_offset, c.src_strides.data(), dst.data(),
                             c.dst_strides.data(), c.shape.data(), int(c.shape.size()),
                             c.accumulate);
    CHECK(dst == want);
  }
}
