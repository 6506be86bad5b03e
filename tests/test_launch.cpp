// dispatch::launch (dispatch/launch.h): a kernel of the op list called on
// Tensors, generated from the list. It must pass each argument as the
// kernel's parameter, and refuse, in one line naming the argument, a wrong
// count, a tensor on another device or of another dtype, and a number or
// struct where the kernel wants something else.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/philox.h"
#include "dispatch/dispatch.h"
#include "dispatch/launch.h"
#include "tests/cuda_half.h"
#include "tests/harness.h"

using namespace lina;

TEST_CASE("launch: swiglu_forward on tensors computes silu(gate) ⊙ up, in float64 and float32") {
  for (DType dtype : {DType::F64, DType::F32}) {
    Tensor gate = Tensor::from_vector<double>({-2.0, -0.5, 0.0, 1.5}, {4}).to(dtype);
    Tensor up = Tensor::from_vector<double>({0.5, 2.0, -3.0, 1.0}, {4}).to(dtype);
    Tensor y = Tensor::empty({4}, dtype, Device::Cpu);
    dispatch::launch::swiglu_forward({gate, up, y, int64_t(1), y.numel(), y.numel()});  // one row
    const std::vector<double> g = gate.to(DType::F64).to_vector<double>();
    const std::vector<double> u = up.to(DType::F64).to_vector<double>();
    const std::vector<double> got = y.to(DType::F64).to_vector<double>();
    for (size_t i = 0; i < g.size(); ++i)
      CHECK(got[i] == doctest::Approx(g[i] / (1 + std::exp(-g[i])) * u[i]).epsilon(1e-6));
  }
}

TEST_CASE("launch: a struct argument reaches the kernel (dropout_apply equals dispatch::dropout)") {
  Tensor x = Tensor::full({1000}, 1.0, DType::F32);
  const DropoutKey key{0.25, 1337, 3, 1};
  Tensor y = Tensor::empty({1000}, DType::F32, Device::Cpu);
  dispatch::launch::dropout_apply({x, Tensor(), y, x.numel(), key});
  CHECK(y.to_vector<float>() == dispatch::dropout(x, key).to_vector<float>());
}

TEST_CASE("launch: bad arguments end in one line naming the kernel and the argument, a cuda tensor among them too") {
  Tensor a = Tensor::zeros({4}, DType::F32), b = Tensor::zeros({4}, DType::F32);
  Tensor y = Tensor::empty({4}, DType::F32, Device::Cpu);
  Tensor wide = Tensor::zeros({4}, DType::F64);
  const std::string wrong_dtype = "swiglu_forward: argument 2: " + wide.describe() + ", expected float32";
  CHECK_THROWS_WITH_AS(dispatch::launch::swiglu_forward({a, b, y}), "swiglu_forward: takes 6 arguments, got 3",
                       Error);
  CHECK_THROWS_WITH_AS(dispatch::launch::swiglu_forward({a, wide, y, int64_t(1), int64_t(4), int64_t(4)}), wrong_dtype.c_str(), Error);
  CHECK_THROWS_WITH_AS(dispatch::launch::swiglu_forward({a, b, 2.5, int64_t(1), int64_t(4), int64_t(4)}),
                       "swiglu_forward: argument 3: a tensor is expected", Error);
  CHECK_THROWS_WITH_AS(dispatch::launch::swiglu_forward({a, b, y, 4.5, int64_t(4), int64_t(4)}),
                       "swiglu_forward: argument 4: an integer is expected", Error);
  CHECK_THROWS_WITH_AS(dispatch::launch::swiglu_forward({Tensor(), 1, 2, 3, 4, 5}),
                       "swiglu_forward: no defined tensor among the arguments", Error);
  if (test::cuda_half()) {  // a tensor on the other device
    Tensor on_cuda = b.to(Device::Cuda);
    const std::string wrong_device = "swiglu_forward: argument 2: " + on_cuda.describe() + ", expected on cpu";
    CHECK_THROWS_WITH_AS(dispatch::launch::swiglu_forward({a, on_cuda, y, int64_t(1), int64_t(4), int64_t(4)}), wrong_device.c_str(), Error);
  }
}
