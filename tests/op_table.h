// The op table: every op of lina, each on the shapes and parameters that
// matter, one row per op and shape (the rows: tests/op_table.cpp). A row
// names the op as lina's API knows it, says how to draw its inputs and
// calls it. From the one table, one harness (tests/op_check.h) runs:
//   - the float64 gradient check on the CPU of every row of an autograd op
//     (tests/test_op_table.cpp);
//   - the CPU against cuda, float32 on both sides, every row: each output,
//     each tensor the op saved for its backward, each input's gradient
//     (tests/test_op_table.cpp where a CUDA device is present, else it says
//     SKIPPED; tests/test_cuda_backend.cpp, on a GPU and on cuda-sim);
//   - the coverage check: every op has a gradient-checked row
//     (tests/test_gradcheck_coverage.cpp), every kernel a cuda row.
//
// Adding an op: add its rows to tests/op_table.cpp, two shapes at least (one
// non-square or broadcasting, one large enough for several blocks of CUDA
// threads), with a comment where the shape choice matters.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "tests/harness.h"

namespace lina::test {

// One input of a row. It is drawn on the host from the row's own generator
// (the same seed at every run of the row) as float64 or int32, then cast to
// the run's dtype and moved to its device: the float64 gradient check and
// the float32 runs, on the CPU and on cuda, all see the same numbers.
struct Input {
  std::function<Tensor(Rng&)> make;  // float64 or int32, on the CPU; undefined for "no input"
  bool differentiable = true;        // a float input that the gradient check perturbs

  Input constant() const {  // a float input held fixed (a mask, the optimiser's moments)
    Input c = *this;
    c.differentiable = false;
    return c;
  }
};

// The inputs rows are written with.
namespace in {
Input normal(const Shape& shape, double sd = 1.0);
Input uniform(const Shape& shape, double lo, double hi);
// |x| in [lo, hi), every other element negative: for ops with a kink at 0.
Input away_from_zero(const Shape& shape, double lo = 0.2, double hi = 2.0);
Input zeros(const Shape& shape);
Input values(const std::vector<double>& values, const Shape& shape);
Input random_ids(const Shape& shape, int64_t vocab);  // int32, uniform in [0, vocab)
Input ids(const std::vector<int32_t>& values, const Shape& shape);
Input none();  // an undefined tensor: an input the op does not use
}  // namespace in

using Vars = std::vector<Var>;

// How close cuda must come to the CPU (float32 on both sides; summation
// orders and math libraries differ), every result of every row unless the
// row says otherwise (int32: equal):
//   the tensor:    max |cuda − cpu| ≤ 1e-4 · max|cpu| (1e-8 at least)
//   each element:  |cuda − cpu| ≤ 1e-3 · |cpu| + 1e-5 · max|cpu|
// The tensor's bound alone would let a small element be off by far more
// than itself (a 4 % error in exp(−3) beside exp(3)); each element's keeps
// small entries to 0.1 %, with a floor for float32 sums that cancel. On
// cuda-sim the rows under it need at most 1.3e-8 · max|cpu| of that floor.
inline constexpr Bound kCudaBound{1e-4, 1e-4, 1e-3, 1e-5};
// The tensor's bound alone: for whole models (tests/test_cuda_backend.cpp's
// training steps), whose results are the sums of many rows' errors.
inline constexpr Bound kCudaTensorBound{kCudaBound.tolerance, kCudaBound.floor};
// ... tighter, for one float32 function or update per element (the unary
// functions and their backward, AdamW): a few ulps apart on the two devices,
// so that a 0.1 % error in one element fails. The floor covers the
// backward's cancellation where the function is flat (tanh's 1 − y² near
// y = ±1).
inline constexpr Bound kCudaEachFunction{1e-4, 1e-4, 1e-5, 1e-6};
// ... for outputs whose small entries matter (probabilities, saved states,
// dlog α under strong decay), made of sums: 1e-3·|cpu|, and a floor, below the
// tensor's bound, that float32 cancellation in a sum of T·d terms leaves (the
// chunked scan's gradients under strong decay reach 3.3e-5·max|cpu| where
// the CPU's kernels use AVX-512, 5.0e-5 where they use AVX2).
inline constexpr Bound kCudaEachSum{1e-4, 1e-4, 1e-3, 8e-5};

struct OpRow {
  std::string op;             // the op as lina's API names it: "matmul", "softmax", "adamw_step"
  std::string what;           // its shapes and parameters
  std::vector<Input> inputs;
  std::function<Vars(const Vars&)> run;  // the op on the inputs: its outputs
  Bound cuda = kCudaBound;    // CPU against cuda
  bool same_bits = false;     // two cuda runs must also agree bit for bit
  // Empty for a row of an autograd op (core/ops.h), whose outputs that op
  // makes: its gradients are checked. Otherwise why the row has no gradient
  // check: a function of Tensors only (a kernel entry point, layout on int32
  // ids), run forward on both devices.
  std::string no_gradient;

  std::string name() const { return op + " " + what; }
  OpRow within(const Bound& bound) const {
    OpRow r = *this;
    r.cuda = bound;
    return r;
  }
  OpRow bits() const {
    OpRow r = *this;
    r.same_bits = true;
    return r;
  }
};

// Every row (built once).
const std::vector<OpRow>& op_table();

}  // namespace lina::test
