// The op table (tests/op_table.h says what runs from it): every op of lina,
// one row per op and shape. A row is
//   {op, what, inputs, run}
// and, for the rows that need it, .within(bound) (how close cuda must come
// to the CPU) and .bits() (two cuda runs give the same bits). Inputs are
// drawn by in::normal, in::uniform, in::ids, ... (tests/op_table.h). Rows
// of Tensor-level functions (kernel entry points with no autograd op) say
// why they have no gradient check.
//
// Sizes: the small shapes (at most 64 elements per input) are checked
// element by element by the gradient check; the large ones cross the
// blocks and warps of the CUDA kernels, and the gradient check follows
// them along random directions.
#include "tests/op_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "dispatch/dispatch.h"
#include "dispatch/launch.h"
#include "dispatch/layout.h"

namespace lina::test {

// ---- inputs -----------------------------------------------------------------------------

namespace in {
Input normal(const Shape& shape, double sd) {
  return {[=](Rng& rng) { return Tensor::randn(shape, rng, sd, 0.0, DType::F64); }};
}
Input uniform(const Shape& shape, double lo, double hi) {
  return {[=](Rng& rng) { return Tensor::rand(shape, rng, lo, hi, DType::F64); }};
}
Input away_from_zero(const Shape& shape, double lo, double hi) {
  return {[=](Rng& rng) {
    Tensor t = Tensor::rand(shape, rng, lo, hi, DType::F64);
    double* p = t.data<double>();
    for (int64_t i = 0; i < t.numel(); i += 2) p[i] = -p[i];
    return t;
  }};
}
Input zeros(const Shape& shape) {
  return {[=](Rng&) { return Tensor::zeros(shape, DType::F64); }};
}
Input values(const std::vector<double>& v, const Shape& shape) {
  return {[=](Rng&) { return Tensor::from_vector(v, shape); }};
}
Input random_ids(const Shape& shape, int64_t vocab) {
  return {[=](Rng& rng) {
            std::vector<int32_t> v(size_t(numel(shape)));
            for (int32_t& id : v) id = int32_t(rng.randint(vocab));
            return Tensor::from_vector(v, shape);
          },
          false};
}
Input ids(const std::vector<int32_t>& v, const Shape& shape) {
  return {[=](Rng&) { return Tensor::from_vector(v, shape); }, false};
}
Input none() {
  return {[](Rng&) { return Tensor(); }, false};
}
}  // namespace in

namespace {

using V = const Vars&;
const char* const kTensorLevel = "a Tensor-level function: no autograd op, no gradient";

// A row of a Tensor-level function, run forward only.
OpRow tensor_row(std::string op, std::string what, std::vector<Input> inputs,
                 std::function<Vars(const Vars&)> run) {
  return {std::move(op), std::move(what), std::move(inputs), std::move(run), kCudaBound, false, kTensorLevel};
}
// Tensors returned as outputs.
Vars out(const std::vector<Tensor>& tensors) {
  Vars v;
  for (const Tensor& t : tensors) v.emplace_back(t);
  return v;
}

// 0.7 as "0.7", 1e6 as "1e+06"
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string flags(bool ta, bool tb) {
  return std::string(ta ? " ta" : "") + (tb ? " tb" : "");
}

// ---- elementwise ------------------------------------------------------------------------

// Binary ops over NumPy broadcasting: the same pairs of shapes for all four
// (b in [0.5, 2], away from div's pole).
void add_binary_rows(std::vector<OpRow>& rows) {
  const std::pair<const char*, Var (*)(const Var&, const Var&)> binary[] = {
      {"add", add}, {"sub", sub}, {"mul", mul}, {"div", div}};
  const std::pair<Shape, Shape> broadcasts[] = {
      {{3, 4}, {3, 4}},
      {{2, 3, 4}, {4}},      // over the leading dims
      {{2, 1, 4}, {3, 1}},   // on both sides
      {{5, 1, 1, 2}, {1, 3, 2, 1}},
      {{}, {2, 3}},          // a scalar
      {{7}, {}},
      {{64, 1000}, {1000}},  // many blocks
      {{2, 1, 2, 1, 2, 1, 2, 3}, {1, 2, 1, 2, 1, 2, 1, 3}},  // 8 dims, the most supported
  };
  for (const auto& [op, f] : binary)
    for (const auto& [sa, sb] : broadcasts)
      rows.push_back({op, shape_str(sa) + " " + shape_str(sb), {in::normal(sa), in::uniform(sb, 0.5, 2.0)},
                      [f = f](V v) { return Vars{f(v[0], v[1])}; }});
}

// Unary functions: one float32 function per element on cuda, so each
// element is bounded (kCudaEachFunction). Two small shapes over the
// function's range, checked element by element, and two large ones over
// [−3, 3] ([0.2, 3] where only positive x is allowed): a 100003-element
// vector cuts blocks and SIMD registers unevenly.
void add_unary_rows(std::vector<OpRow>& rows) {
  struct Unary {
    const char* op;
    std::function<Var(const Var&)> f;
    double lo, hi;     // the small shapes' range
    bool positive;     // the large shapes in [0.2, 3] instead of [−3, 3]
  };
  const Unary unary[] = {
      {"neg", neg, -2, 2, false},
      {"exp", [](const Var& x) { return lina::exp(x); }, -2, 2, false},
      {"log", [](const Var& x) { return lina::log(x); }, 0.2, 3, true},
      {"sqrt", [](const Var& x) { return lina::sqrt(x); }, 0.2, 3, true},
      {"rsqrt", rsqrt, 0.2, 3, true},
      {"tanh", [](const Var& x) { return lina::tanh(x); }, -3, 3, false},
      {"sigmoid", sigmoid, -5, 5, false},
      {"log_sigmoid", log_sigmoid, -8, 8, false},
      {"silu", silu, -4, 4, false},
      {"gelu", gelu, -4, 4, false},
  };
  for (const Unary& u : unary) {
    auto run = [f = u.f](V v) { return Vars{f(v[0])}; };
    for (const Shape& s : {Shape{3, 5}, Shape{2, 3, 4}})
      rows.push_back(OpRow{u.op, shape_str(s), {in::uniform(s, u.lo, u.hi)}, run}.within(kCudaEachFunction));
    for (const Shape& s : {Shape{5, 37}, Shape{100003}})
      rows.push_back(OpRow{u.op, shape_str(s), {in::uniform(s, u.positive ? 0.2 : -3.0, 3.0)}, run}
                         .within(kCudaEachFunction));
  }
}

// The unary functions with a parameter: a value of it for each small shape,
// and one for the large shapes.
void add_scalar_parameter_rows(std::vector<OpRow>& rows) {
  struct Scalar {
    const char* op;
    Var (*f)(const Var&, double);
    double p_small, p_other, p_large;  // [4, 3]; [2, 2, 5]; the large shapes
    double lo, hi;
  };
  const Scalar scalar[] = {
      {"add_scalar", add_scalar, 0.7, -2.0, 0.7, -3, 3},
      {"mul_scalar", mul_scalar, -1.5, 0.25, 0.7, -3, 3},
      {"pow_scalar", pow_scalar, 3.0, -0.5, 1.5, 0.3, 2},  // positive x
  };
  for (const Scalar& s : scalar) {
    const std::pair<Shape, double> cases[] = {{{4, 3}, s.p_small}, {{2, 2, 5}, s.p_other},
                                              {{5, 37}, s.p_large}, {{100003}, s.p_large}};
    for (const auto& [shape, p] : cases)
      rows.push_back(OpRow{s.op, shape_str(shape) + " p " + num(p), {in::uniform(shape, s.lo, s.hi)},
                           [f = s.f, p = p](V v) { return Vars{f(v[0], p)}; }}
                         .within(kCudaEachFunction));
  }
}

// elu and relu have a kink at 0: x stays 0.2 away from it.
void add_kinked_rows(std::vector<OpRow>& rows) {
  const std::pair<Shape, double> elu_cases[] = {{{3, 5}, 1.0}, {{2, 3, 4}, 0.5}, {{5, 37}, 0.7}, {{100003}, 0.7}};
  for (const auto& [shape, alpha] : elu_cases)
    rows.push_back(OpRow{"elu", shape_str(shape) + " alpha " + num(alpha),
                         {in::away_from_zero(shape, 0.2, 3.0)},
                         [alpha = alpha](V v) { return Vars{elu(v[0], alpha)}; }}
                       .within(kCudaEachFunction));
  for (const Shape& shape : {Shape{3, 5}, Shape{2, 3, 4}, Shape{5, 37}, Shape{100003}})
    rows.push_back(OpRow{"relu", shape_str(shape), {in::away_from_zero(shape, 0.2, 3.0)},
                         [](V v) { return Vars{relu(v[0])}; }}
                       .within(kCudaEachFunction));
}

// Dropout: the mask fixed by the key, the same Philox masks on both devices,
// bit for bit (0 or x / (1 − p)); the backward is the same kernel.
void add_dropout_rows(std::vector<OpRow>& rows) {
  const std::pair<Shape, DropoutKey> dropouts[] = {
      {{6, 9}, {0.1, 1337, 7, 5}}, {{2, 3, 4}, {0.5, 1, 0, 0}},
      {{100003}, {0.1, 1337, 4999, 14}}, {{100003}, {0.5, 1, 0, 0}}};
  for (const auto& [shape, key] : dropouts)
    rows.push_back(OpRow{"dropout", shape_str(shape) + " p " + num(key.p), {in::normal(shape)},
                         [key = key](V v) { return Vars{dropout(v[0], key)}; }}
                       .bits());
  // the residual connection's sum in the same kernel: residual + x ⊙ M
  for (const auto& [shape, key] : dropouts)
    rows.push_back(OpRow{"residual_dropout", shape_str(shape) + " p " + num(key.p),
                         {in::normal(shape), in::normal(shape)},
                         [key = key](V v) { return Vars{residual_dropout(v[0], v[1], key)}; }}
                       .within(kCudaEachFunction));
}

// swiglu: silu(gate) ⊙ up in one op; the same per-element maths as silu.
void add_swiglu_rows(std::vector<OpRow>& rows) {
  for (const Shape& shape : {Shape{3, 5}, Shape{2, 3, 4}, Shape{5, 37}, Shape{100003}})
    rows.push_back(OpRow{"swiglu", shape_str(shape), {in::normal(shape), in::normal(shape)},
                         [](V v) { return Vars{swiglu(v[0], v[1])}; }}
                       .within(kCudaEachFunction));
  // the halves form: z [..., 2F] = [gate | up], read in place with a row stride of 2F
  for (const Shape& shape : {Shape{3, 10}, Shape{2, 3, 8}, Shape{4, 6, 688}})
    rows.push_back(OpRow{"swiglu", shape_str(shape) + " halves", {in::normal(shape)},
                         [](V v) { return Vars{swiglu(v[0])}; }}
                       .within(kCudaEachFunction));
}

// beta_log_alpha: z [B, T, N] and bias [N] -> β | log α planes. Only decays
// (n_beta = 0) and only β (n_beta = N); N = 70 cuts the backward's column
// tiles of 32 unevenly, 300 rows cross the CPU's chunks of 128 rows; N = 132
// (4 β, 4 heads × 32 per-channel decays) a channel-decaying mixer's β and log α.
// z drawn with sd 2: β and α near 0 and 1 (α ≈ 1 is expm1's case). dbias
// sums over B·T rows (kCudaEachSum; the same bits every cuda run).
void add_beta_log_alpha_rows(std::vector<OpRow>& rows) {
  struct BetaLogAlphaCase {
    Shape z;
    int64_t n_beta;
    bool large;
  };
  for (const BetaLogAlphaCase& g : {BetaLogAlphaCase{{2, 3, 5}, 2, false}, BetaLogAlphaCase{{2, 3, 4}, 0, false}, BetaLogAlphaCase{{1, 4, 3}, 3, false},
                         BetaLogAlphaCase{{4, 37, 8}, 4, true}, BetaLogAlphaCase{{2, 150, 70}, 6, true}, BetaLogAlphaCase{{2, 64, 132}, 4, true},
                         BetaLogAlphaCase{{3, 20, 9}, 0, true}, BetaLogAlphaCase{{3, 20, 9}, 9, true}}) {
    OpRow row = OpRow{"beta_log_alpha", shape_str(g.z) + " n_beta " + std::to_string(g.n_beta),
                      {in::normal(g.z, 2.0), in::normal({g.z[2]})},
                      [n_beta = g.n_beta](V v) { return Vars{beta_log_alpha(v[0], v[1], n_beta)}; }}
                    .within(kCudaEachSum);
    rows.push_back(g.large ? row.bits() : row);
  }
  // β and log α as the last 6 columns of a wider product [2, 9, 11]: the
  // gradient of z is 0 in the 5 columns before them
  rows.push_back(OpRow{"beta_log_alpha", "[2, 9, 11], the last 6 columns, n_beta 2",
                       {in::normal({2, 9, 11}, 2.0), in::normal({6})},
                       [](V v) { return Vars{beta_log_alpha(v[0], v[1], 2)}; }}
                     .within(kCudaEachSum));
}

// Tensor-level: fill (float32, int32, empty, a view at an offset), the
// in-place add and scale.
void add_fill_and_inplace_rows(std::vector<OpRow>& rows) {
  rows.push_back(tensor_row("fill", "[1000, 3], int32 [77], empty [0], elements 5..8 of [3, 5]",
                            {in::zeros({1000, 3}), in::ids(std::vector<int32_t>(77, 0), {77}), in::zeros({0}),
                             in::zeros({3, 5})},
                            [](V v) {
                              Tensor a = v[0].data(), b = v[1].data(), c = v[2].data(), viewed = v[3].data();
                              Tensor part = Tensor::view_of(viewed, 5, {4});
                              dispatch::fill(a, -1.25);
                              dispatch::fill(b, 7);
                              dispatch::fill(c, 1.0);
                              dispatch::fill(part, 2.5);
                              return out({a, b, c, viewed});
                            }));
  rows.push_back(tensor_row("add_inplace", "[300, 7] alpha -0.75", {in::normal({300, 7}), in::normal({300, 7})},
                            [](V v) {
                              Tensor dst = v[0].data();
                              dispatch::add_inplace(dst, v[1].data(), -0.75);
                              return out({dst});
                            }));
  rows.push_back(tensor_row("scale_inplace", "[1001] by 0.37", {in::normal({1001})}, [](V v) {
    Tensor x = v[0].data();
    dispatch::scale_inplace(x, 0.37);
    return out({x});
  }));
}

void add_elementwise_rows(std::vector<OpRow>& rows) {
  add_binary_rows(rows);
  add_unary_rows(rows);
  add_scalar_parameter_rows(rows);
  add_kinked_rows(rows);
  add_dropout_rows(rows);
  add_swiglu_rows(rows);
  add_beta_log_alpha_rows(rows);
  add_fill_and_inplace_rows(rows);
}

// ---- matrix products --------------------------------------------------------------------

void add_matmul_rows(std::vector<OpRow>& rows) {
  // op(a) · op(b), ta / tb transposing a / b
  auto matmul_row = [](const Shape& a, const Shape& b, bool ta, bool tb, const std::string& note = "") {
    return OpRow{"matmul", shape_str(a) + " · " + shape_str(b) + flags(ta, tb) + note,
                 {in::normal(a), in::normal(b)},
                 [ta, tb](V v) { return Vars{matmul(v[0], v[1], ta, tb)}; }};
  };
  rows.push_back(matmul_row({3, 4}, {4, 5}, false, false));
  rows.push_back(matmul_row({4, 3}, {4, 2}, true, false));
  rows.push_back(matmul_row({3, 4}, {5, 4}, false, true));
  rows.push_back(matmul_row({4, 3}, {2, 4}, true, true));
  rows.push_back(matmul_row({2, 3, 4}, {2, 4, 5}, false, false));
  rows.push_back(matmul_row({2, 3, 4}, {5, 4}, false, true, " (a linear layer)"));
  rows.push_back(matmul_row({2, 4, 3}, {4, 2}, true, false));
  rows.push_back(matmul_row({3, 4}, {2, 4, 5}, false, false, " (a shared by the batch)"));
  // M, K, N = 5, 7, 3, every transpose: plain, batched (B = 4), and one
  // matrix shared by every batch entry (batch stride 0) on either side,
  // whose gradient sums over the batch
  const int64_t B = 4, M = 5, K = 7, N = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Shape a = ta ? Shape{K, M} : Shape{M, K}, b = tb ? Shape{N, K} : Shape{K, N};
      const Shape ab = ta ? Shape{B, K, M} : Shape{B, M, K}, bb = tb ? Shape{B, N, K} : Shape{B, K, N};
      rows.push_back(matmul_row(a, b, ta, tb));
      rows.push_back(matmul_row(ab, bb, ta, tb));
      rows.push_back(matmul_row(ab, b, ta, tb, " (b shared)"));
      rows.push_back(matmul_row(a, bb, ta, tb, " (a shared)"));
    }
  rows.push_back(matmul_row({65, 129}, {129, 33}, false, false, " (no dimension a multiple of a tile)"));

  // Tensor-level: the raw GEMM, C_i = alpha·op(A_i)·op(B_i) + beta·C_i, with
  // batch strides 20 / 0 / 30, so a gap of 6 between outputs must stay
  // untouched; and K = 0 (C = beta·C)
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      rows.push_back(tensor_row("gemm", "alpha 0.5 beta 2, 3 of [4, 5] · [5, 6], strides 20/0/30" + flags(ta, tb),
                                {in::normal({60}), in::normal({30}), in::normal({90})}, [ta, tb](V v) {
                                  dispatch::GemmShape g;
                                  g.batch = 3;
                                  g.M = 4;
                                  g.N = 6;
                                  g.K = 5;
                                  g.ta = ta;
                                  g.tb = tb;
                                  g.stride_a = 20;
                                  g.stride_b = 0;
                                  g.stride_c = 30;
                                  Tensor c = v[2].data();
                                  dispatch::gemm(g, v[0].data(), v[1].data(), c, 0.5, 2.0);
                                  return out({c});
                                }));
  rows.push_back(tensor_row("gemm", "K = 0, beta 0 and 0.5", {in::zeros({0}), in::normal({90}), in::normal({90})},
                            [](V v) {
                              dispatch::GemmShape g;
                              g.batch = 3;
                              g.M = 4;
                              g.N = 6;
                              g.K = 0;
                              g.stride_c = 30;
                              Tensor c0 = v[1].data(), c1 = v[2].data();
                              dispatch::gemm(g, v[0].data(), v[0].data(), c0, 1.0, 0.0);
                              dispatch::gemm(g, v[0].data(), v[0].data(), c1, 1.0, 0.5);
                              return out({c0, c1});
                            }));
}

// ---- reductions and shapes ------------------------------------------------------------

// sum over an axis or all of a tensor, mean.
void add_reduction_rows(std::vector<OpRow>& rows) {
  auto sum_row = [](const Shape& s, int axis, bool keepdim, const std::string& note = "") {
    return OpRow{"sum", shape_str(s) + " axis " + std::to_string(axis) + (keepdim ? " keepdim" : "") + note,
                 {in::normal(s)}, [=](V v) { return Vars{sum(v[0], axis, keepdim)}; }};
  };
  rows.push_back(sum_row({3, 4, 2}, 1, false));
  rows.push_back(sum_row({3, 5}, -1, true));
  // one thread per column (inner ≥ 32, or short columns) and one block per
  // column (small inner, long columns)
  rows.push_back(sum_row({37, 300}, 1, false));
  rows.push_back(sum_row({300, 37}, 0, false));
  rows.push_back(sum_row({4, 100, 5}, 1, false));
  rows.push_back(sum_row({6, 10, 3}, 1, false));
  rows.push_back(sum_row({3, 100000}, 1, false, " (long rows)"));
  rows.push_back(sum_row({200000, 3}, 0, false, " (long columns)"));
  // sum_all adds positive numbers, so that the total cannot cancel to near zero
  for (const Shape& s : {Shape{2, 3}, Shape{1}, Shape{1000}, Shape{(1 << 20) + 3}})
    rows.push_back({"sum", "all of " + shape_str(s), {in::uniform(s, 0.5, 1.5)},
                    [](V v) { return Vars{sum_all(v[0])}; }});
  rows.push_back({"mean", "[3, 4] axis 0", {in::normal({3, 4})}, [](V v) { return Vars{mean(v[0], 0)}; }});
  rows.push_back({"mean", "[2, 3, 5] axis 2 keepdim", {in::normal({2, 3, 5})},
                  [](V v) { return Vars{mean(v[0], 2, true)}; }});
  rows.push_back({"mean", "all of [2, 3]", {in::normal({2, 3})}, [](V v) { return Vars{mean_all(v[0])}; }});
}

// reshape, permute, expand, slice and split, concat.
void add_shape_rows(std::vector<OpRow>& rows) {
  rows.push_back({"reshape", "[2, 3, 4] -> [6, 4]", {in::normal({2, 3, 4})},
                  [](V v) { return Vars{reshape(v[0], {6, 4})}; }});
  rows.push_back({"reshape", "[3, 5] -> [3, -1]", {in::normal({3, 5})},
                  [](V v) { return Vars{reshape(v[0], {3, -1})}; }});
  rows.push_back({"permute", "transpose 0 1 of [3, 5]", {in::normal({3, 5})},
                  [](V v) { return Vars{transpose(v[0], 0, 1)}; }});
  rows.push_back({"permute", "transpose 0 2 of [4, 5, 6]", {in::normal({4, 5, 6})},
                  [](V v) { return Vars{transpose(v[0], 0, 2)}; }});
  rows.push_back({"permute", "{0, 2, 1, 3} of [2, 3, 4, 2]", {in::normal({2, 3, 4, 2})},
                  [](V v) { return Vars{permute(v[0], {0, 2, 1, 3})}; }});
  rows.push_back({"permute", "{2, 0, 1} of [4, 5, 6]", {in::normal({4, 5, 6})},
                  [](V v) { return Vars{permute(v[0], {2, 0, 1})}; }});
  rows.push_back({"expand", "[3, 1] -> [2, 3, 4]", {in::normal({3, 1})},
                  [](V v) { return Vars{expand(v[0], {2, 3, 4})}; }});
  rows.push_back({"expand", "[4] -> [3, 4]", {in::normal({4})}, [](V v) { return Vars{expand(v[0], {3, 4})}; }});
  rows.push_back({"expand", "[5, 1] -> [3, 5, 4]", {in::normal({5, 1})},
                  [](V v) { return Vars{expand(v[0], {3, 5, 4})}; }});
  rows.push_back({"slice", "axis 1 from 1, 2 of [3, 5]", {in::normal({3, 5})},
                  [](V v) { return Vars{slice(v[0], 1, 1, 2)}; }});
  rows.push_back({"slice", "axis 1 from 1, 3 of [4, 5, 6]", {in::normal({4, 5, 6})},
                  [](V v) { return Vars{slice(v[0], 1, 1, 3)}; }});
  rows.push_back({"slice", "split [2, 3, 4] into 1 + 3 along the last axis", {in::normal({2, 3, 4})},
                  [](V v) { return split(v[0], -1, {1, 3}); }});
  rows.push_back({"concat", "[2, 3] and [4, 3] along axis 0", {in::normal({2, 3}), in::normal({4, 3})},
                  [](V v) { return Vars{concat({v[0], v[1]}, 0)}; }});
  // the first part twice: its gradient adds two slices (add_inplace)
  rows.push_back({"concat", "[2, 2, 3], [2, 2, 1], [2, 2, 3] along the last axis",
                  {in::normal({2, 2, 3}), in::normal({2, 2, 1})},
                  [](V v) { return Vars{concat({v[0], v[1], v[0]}, -1)}; }});
  rows.push_back({"concat", "[4, 5, 6] and [4, 2, 6] along axis 1", {in::normal({4, 5, 6}), in::normal({4, 2, 6})},
                  [](V v) { return Vars{concat({v[0], v[1]}, 1)}; }});
}

// Tensor-level layout (dispatch/layout.h, copy_strided), layout of int32
// ids, and sum_squares.
void add_tensor_layout_rows(std::vector<OpRow>& rows) {
  rows.push_back(tensor_row("write_slice", "[4, 5, 2] into [4, 5, 6] from 3, written and added",
                            {in::normal({4, 5, 6}), in::normal({4, 5, 2})}, [](V v) {
                              Tensor written = v[0].data().clone(), added = v[0].data().clone();
                              write_slice(written, v[1].data(), 2, 3, false);
                              write_slice(added, v[1].data(), 2, 3, true);
                              return out({written, added});
                            }));
  // token ids are sliced on the device too (step-by-step inference feeds one
  // column of a [B, T] id tensor at a time)
  rows.push_back({"slice, transpose, concat", "int32 ids [3, 17] and [3, 4]",
                  {in::random_ids({3, 17}, 65), in::random_ids({3, 4}, 65)},
                  [](V v) {
                    const Tensor& ids = v[0].data();
                    return out({slice(ids, 1, 5, 1), transpose(ids, 0, 1), concat({ids, v[1].data()}, 1)});
                  },
                  kCudaBound, false, "int32 ids: layout only, no gradient"});
  // copy_strided with accumulate and zero destination strides: many source
  // elements add into one output element (here 2112 of them)
  rows.push_back(tensor_row("sum_to", "[64, 50, 33] -> [1, 50, 1] and [7, 13, 9] -> [7, 1, 9]",
                            {in::normal({64, 50, 33}), in::normal({7, 13, 9})},
                            [](V v) { return out({sum_to(v[0].data(), {1, 50, 1}), sum_to(v[1].data(), {7, 1, 9})}); })
                     .bits());
  rows.push_back(tensor_row("sum_to", "[64, 50, 33] -> [50, 33]", {in::normal({64, 50, 33})},
                            [](V v) { return out({sum_to(v[0].data(), {50, 33})}); }));
  rows.push_back(tensor_row("copy_strided", "accumulate [64, 50] into a non-zero [50]",
                            {in::normal({64, 50}), in::normal({50})},
                            [](V v) {
                              Tensor dst = v[1].data();
                              dispatch::copy_strided(v[0].data(), {0, {50, 1}}, dst, {0, {0, 1}}, {64, 50}, true);
                              return out({dst});
                            })
                     .bits());
  rows.push_back(tensor_row("sum_squares", "[0], [1], [1000], [2^20 + 17] (a double on the host)",
                            {in::zeros({0}), in::normal({1}), in::normal({1000}), in::normal({(1 << 20) + 17})},
                            [](V v) {
                              Vars results;
                              for (const Var& x : v)
                                results.emplace_back(Tensor::full({}, dispatch::sum_squares(x.data()), DType::F64));
                              return results;
                            })
                     .bits());
}

void add_reduction_shape_rows(std::vector<OpRow>& rows) {
  add_reduction_rows(rows);
  add_shape_rows(rows);
  add_tensor_layout_rows(rows);
}

// ---- softmax, log-softmax, cross-entropy, embedding, argmax ---------------------------

// Targets are random ids; in a mask every n-th position is 0 (n = 1: all).
Input every_nth_masked(const Shape& positions, int n) {
  std::vector<double> m(size_t(numel(positions)));
  for (size_t i = 0; i < m.size(); ++i) m[i] = i % size_t(n) == 0 ? 0.0 : 1.0;
  return in::values(m, positions).constant();
}

// Probabilities: each element bounded on cuda (kCudaEachSum).
void add_softmax_rows(std::vector<OpRow>& rows) {
  auto softmax_row = [](const Shape& s, bool causal, const std::string& note = "", double sd = 1.0) {
    return OpRow{"softmax", std::string(causal ? "causal " : "") + shape_str(s) + note, {in::normal(s, sd)},
                 [causal](V v) { return Vars{softmax(v[0], causal)}; }}
        .within(kCudaEachSum);
  };
  rows.push_back(softmax_row({3, 5}, false));
  rows.push_back(softmax_row({2, 3, 4}, false));
  rows.push_back(softmax_row({3, 7, 13}, false, "", 2.0));
  rows.push_back(softmax_row({4, 3001}, false, " (long rows)", 2.0));
  // causal: query i sees keys j <= i + (Tk − Tq)
  rows.push_back(softmax_row({2, 4, 4}, true, " Tq == Tk"));
  rows.push_back(softmax_row({2, 3, 5}, true, " Tq < Tk"));
  rows.push_back(softmax_row({1, 2, 1, 3}, true, " Tq = 1"));
  rows.push_back(softmax_row({2, 5, 9}, true, " Tq < Tk", 2.0));
  rows.push_back(softmax_row({2, 3, 8, 8}, true, " Tq == Tk", 2.0));
  rows.push_back(softmax_row({3, 1, 6}, true, " Tq = 1", 2.0));
  for (const auto& [s, sd] : {std::pair<Shape, double>{{3, 5}, 1.0}, {{2, 3, 4}, 1.0}, {{3, 7, 13}, 2.0},
                              {{4, 3001}, 2.0}})
    rows.push_back(OpRow{"log_softmax", shape_str(s), {in::normal(s, sd)},
                         [](V v) { return Vars{log_softmax(v[0])}; }}
                       .within(kCudaEachSum));
}

// cross_entropy(logits, targets[, mask]): the loss, the probabilities it
// saved, dlogits.
void add_cross_entropy_rows(std::vector<OpRow>& rows) {
  auto cross_entropy_row = [](const std::string& what, const Shape& logits, Input targets, double sd = 1.0) {
    return OpRow{"cross_entropy", what, {in::normal(logits, sd), std::move(targets)},
                 [](V v) { return Vars{cross_entropy(v[0], v[1].data())}; }}
        .within(kCudaEachSum);
  };
  auto masked_row = [](const std::string& what, const Shape& logits, Input targets, Input mask, double sd = 1.0) {
    return OpRow{"cross_entropy", what, {in::normal(logits, sd), std::move(targets), std::move(mask)},
                 [](V v) { return Vars{cross_entropy(v[0], v[1].data(), v[2].data())}; }}
        .within(kCudaEachSum);
  };
  rows.push_back(cross_entropy_row("[4, 5]", {4, 5}, in::ids({0, 4, 2, 2}, {4})));
  rows.push_back(cross_entropy_row("[2, 3, 7]", {2, 3, 7}, in::ids({6, 0, 3, 1, 1, 5}, {2, 3})));
  rows.push_back(cross_entropy_row("[4, 9, 65]", {4, 9, 65}, in::random_ids({4, 9}, 65), 3.0).bits());
  // a mask of zeros and fractional weights
  rows.push_back(masked_row("[4, 5], mask {1, 0, 1, 1}", {4, 5}, in::ids({3, 1, 0, 4}, {4}),
                            in::values({1, 0, 1, 1}, {4}).constant()));
  rows.push_back(masked_row("[2, 3, 7], mask {0.5, 1, 0, 0, 2, 1}", {2, 3, 7}, in::ids({2, 2, 6, 0, 5, 3}, {2, 3}),
                            in::values({0.5, 1, 0, 0, 2, 1}, {2, 3}).constant()));
  rows.push_back(masked_row("[4, 9, 65], every 3rd position masked", {4, 9, 65}, in::random_ids({4, 9}, 65),
                            every_nth_masked({4, 9}, 3), 3.0)
                     .bits());
  // every position masked: the loss is 0 (the count is clamped to 1)
  rows.push_back(masked_row("[2, 3, 7], every position masked", {2, 3, 7}, in::random_ids({2, 3}, 7),
                            every_nth_masked({2, 3}, 1), 3.0)
                     .bits());
  rows.push_back(masked_row("[2, 3, 5001], long rows, every 2nd masked", {2, 3, 5001}, in::random_ids({2, 3}, 5001),
                            every_nth_masked({2, 3}, 2), 3.0)
                     .bits());
}

// embedding(weight, ids): ids repeat, so the backward sums rows.
void add_embedding_rows(std::vector<OpRow>& rows) {
  auto embedding_row = [](const std::string& what, const Shape& weight, Input ids) {
    return OpRow{"embedding", what, {in::normal(weight), std::move(ids)},
                 [](V v) { return Vars{embedding(v[0], v[1].data())}; }};
  };
  rows.push_back(embedding_row("[5, 3], ids [2, 4]", {5, 3}, in::ids({1, 4, 1, 0, 4, 4, 2, 1}, {2, 4})));
  rows.push_back(embedding_row("[7, 4], ids [6]", {7, 4}, in::ids({6, 6, 0, 3, 6, 2}, {6})));
  // every third id is 7, the others drawn from 65
  std::vector<int32_t> repeated(4 * 33);
  Rng id_rng(5);
  for (size_t i = 0; i < repeated.size(); ++i) repeated[i] = i % 3 == 0 ? 7 : int32_t(id_rng.randint(65));
  rows.push_back(embedding_row("[65, 24], ids [4, 33], every third 7", {65, 24}, in::ids(repeated, {4, 33})).bits());
  rows.push_back(embedding_row("[10, 130], one id everywhere [3, 100]", {10, 130},
                               in::ids(std::vector<int32_t>(300, 2), {3, 100}))
                     .bits());
}

// Tensor-level: argmax over the last axis, the first index on ties (the
// entries of the first input are drawn from {0, 1, 2, 3}, so most rows hold
// their maximum more than once).
void add_argmax_rows(std::vector<OpRow>& rows) {
  Input ties{[](Rng& rng) {
    std::vector<double> v(7 * 33);
    for (double& x : v) x = double(rng.randint(4));
    return Tensor::from_vector(v, {7, 33});
  }};
  rows.push_back(tensor_row("argmax_last", "ties [7, 33] and long rows [3, 5000]", {ties, in::normal({3, 5000})},
                            [](V v) { return out({dispatch::argmax_last(v[0].data()), dispatch::argmax_last(v[1].data())}); }));
}

void add_softmax_loss_rows(std::vector<OpRow>& rows) {
  add_softmax_rows(rows);
  add_cross_entropy_rows(rows);
  add_embedding_rows(rows);
  add_argmax_rows(rows);
}

// ---- fused causal attention -------------------------------------------------------------

// causal_attention(q [B, Tq, H, d], k and v [B, Tk, Hkv, d]): grouped heads
// (H a multiple of Hkv), fewer queries than keys (a decode step sees the
// whole cache), a head size that is not a power of two, more query rows
// than one tile of 64, and dropout on the probabilities (the same masks on
// both devices). Outputs: out, the probabilities it saved, dq, dk, dv.
void add_attention_rows(std::vector<OpRow>& rows) {
  struct Case {
    int64_t B, Tq, Tk, H, Hkv, d;
    double scale;  // 0: 1/√d
    DropoutKey dropout;
    bool large;    // a cuda-sized case (the same bits every run)
  };
  const Case cases[] = {
      {2, 3, 3, 2, 1, 4, 0.5, {}, false},              // two query heads per KV head
      {1, 2, 5, 2, 2, 3, 1.0, {}, false},              // cached keys
      {1, 4, 4, 4, 1, 2, 0.7, {}, false},
      {1, 4, 6, 2, 1, 4, 0.5, {0.25, 7, 3, 0}, false},  // dropout
      {2, 9, 9, 4, 2, 8, 0, {}, true},
      {1, 3, 11, 4, 1, 16, 0, {}, true},
      {1, 1, 20, 2, 2, 32, 0, {}, true},               // one new token over a cache
      {2, 70, 70, 4, 2, 12, 0, {}, true},              // two tiles of query rows
      {2, 33, 33, 4, 2, 32, 0, {0.1, 1337, 12, 3}, true},
  };
  for (const Case& c : cases) {
    const double scale = c.scale > 0 ? c.scale : 1.0 / std::sqrt(double(c.d));
    OpRow row{"attention",
              "causal_attention q " + shape_str({c.B, c.Tq, c.H, c.d}) + " k, v " + shape_str({c.B, c.Tk, c.Hkv, c.d}) + " scale " +
                  num(scale) + (c.dropout.p > 0 ? " dropout " + num(c.dropout.p) : ""),
              {in::normal({c.B, c.Tq, c.H, c.d}), in::normal({c.B, c.Tk, c.Hkv, c.d}),
               in::normal({c.B, c.Tk, c.Hkv, c.d})},
              [scale, key = c.dropout](V v) { return Vars{causal_attention(v[0], v[1], v[2], scale, key)}; }};
    row = row.within(kCudaEachSum);
    rows.push_back(c.large ? row.bits() : row);
  }
}

// ---- rms_norm, l2_norm, causal conv1d, rope ---------------------------------------------

// rms_norm(x [..., n], weight [n]): y, the rstd it saved, dx, dweight
// (summed over every row: the same bits every run).
void add_rms_norm_rows(std::vector<OpRow>& rows) {
  const std::pair<Shape, bool> rms[] = {{{3, 5}, false}, {{2, 3, 4, 8}, false},  // one weight for every head
                                        {{3, 7, 37}, true}, {{5, 1024}, true}};
  for (const auto& [s, large] : rms) {
    OpRow row{"rms_norm", shape_str(s), {in::normal(s), in::uniform({s.back()}, 0.5, 1.5)},
              [](V v) { return Vars{rms_norm(v[0], v[1])}; }};
    rows.push_back(large ? row.bits() : row);
  }
  // the gated norm silu(gate) ⊙ rms_norm(x): y, rstd, dx, dweight, dgate
  for (const auto& [s, large] : rms) {
    OpRow row{"rms_norm_gated", shape_str(s), {in::normal(s), in::uniform({s.back()}, 0.5, 1.5), in::normal(s)},
              [](V v) { return Vars{rms_norm_gated(v[0], v[1], v[2])}; }};
    rows.push_back(large ? row.bits() : row);
  }
  // the gate read in place from a wider product, as the recurrent mixers
  // do: x [2, 9, 3, 4] (C = 12) gated by the columns [24, 36) of z [2, 9,
  // 41]; z's gradient is 0 in the 29 others (what other ops read)
  rows.push_back(OpRow{"rms_norm_gated", "[2, 9, 3, 4], the gate columns [24, 36) of a [2, 9, 41] product",
                       {in::normal({2, 9, 3, 4}), in::uniform({4}, 0.5, 1.5), in::normal({2, 9, 41})},
                       [](V v) { return Vars{rms_norm_gated(v[0], v[1], v[2], 1e-5, 24)}; }}
                     .bits());
  // a residual sum and its norm, one op of two outputs: y, sum = x + h ⊙ M;
  // rstd, dx, dh, dweight
  const DropoutKey keys[] = {{0.0, 0, 0, 0}, {0.5, 1, 0, 0}, {0.1, 1337, 7, 5}, {0.0, 0, 0, 0}};
  for (size_t i = 0; i < 4; ++i) {
    const auto& [s, large] = rms[i];
    OpRow row{"residual_rms_norm", shape_str(s) + " p " + num(keys[i].p),
              {in::normal(s), in::normal(s), in::uniform({s.back()}, 0.5, 1.5)}, [key = keys[i]](V v) {
                ResidualNormed out = residual_rms_norm(v[0], v[1], key, v[2]);
                return Vars{out.normed, out.sum};
              }};
    rows.push_back(large ? row.bits() : row);
  }
  // its second output alone (the norm unused, so its weight a constant):
  // the op's backward runs on the sum's gradient only
  for (const DropoutKey& key : {keys[0], keys[2]})
    rows.push_back(OpRow{"second_output", "residual_rms_norm's sum [3, 7, 37] p " + num(key.p),
                         {in::normal({3, 7, 37}), in::normal({3, 7, 37})}, [key](V v) {
                           Var w(Tensor::full({37}, 1.25, v[0].dtype(), v[0].device()));
                           return Vars{residual_rms_norm(v[0], v[1], key, w).sum};
                         }});
}

// l2_norm(x, eps, scale): y, the norm it saved, dx.
void add_l2_norm_rows(std::vector<OpRow>& rows) {
  auto l2_row = [](const Shape& s, double scale) {
    return OpRow{"l2_norm", shape_str(s) + " scale " + num(scale), {in::normal(s)},
                 [scale](V v) { return Vars{l2_norm(v[0], 1e-12, scale)}; }};
  };
  rows.push_back(l2_row({4, 6}, 1.0));
  rows.push_back(l2_row({2, 3, 2, 8}, 1.0));
  rows.push_back(l2_row({2, 3, 2, 8}, 1.0 / std::sqrt(8.0)));
  rows.push_back(l2_row({3, 7, 37}, 1.0));
  rows.push_back(l2_row({3, 7, 32}, 1.0 / std::sqrt(32.0)));
  // a row below eps takes the linear branch y = scale · x / eps: eps 1e-2
  // against a row of norm ~1e-3
  Input small_row{[](Rng& rng) {
    Tensor x = Tensor::randn({3, 4}, rng, 1.0, 0.0, DType::F64);
    for (int64_t i = 0; i < 4; ++i) x.data<double>()[4 + i] *= 2e-4;
    return x;
  }};
  rows.push_back({"l2_norm", "[3, 4] eps 1e-2 scale 2.5, row 1 below eps", {small_row},
                  [](V v) { return Vars{l2_norm(v[0], 1e-2, 2.5)}; }});
  // an all-zero row, eps 1e-6: its dx = dy / eps is large, so the zero row
  // is an input of its own and its gradient is compared apart from the others'
  rows.push_back({"l2_norm", "[4, 19] eps 1e-6, row 0 all zeros", {in::zeros({1, 19}), in::normal({3, 19})},
                  [](V v) { return Vars{l2_norm(concat({v[0], v[1]}, 0), 1e-6)}; }});
}

// The causal convs, x [B, T, C], weight [C, K]: y (and the norms the fused
// l2_norm saved), dx, dweight (summed over B·T: the same bits every run).
// T < K and T > K; 130 channels is no multiple of a SIMD width.
void add_causal_conv_rows(std::vector<OpRow>& rows) {
  struct Conv {
    Shape x;
    int64_t K;
    bool large;
  };
  const Conv convs[] = {{{2, 3, 3}, 4, false}, {{2, 7, 3}, 4, false}, {{2, 1, 4}, 2, false}, {{1, 6, 5}, 2, false},
                        {{2, 13, 5}, 4, true}, {{2, 37, 130}, 4, true}, {{1, 9, 3}, 1, true}};
  for (const Conv& c : convs) {
    for (bool fused : {false, true}) {
      OpRow row{fused ? "causal_conv1d_silu" : "causal_conv1d",
                shape_str(c.x) + " K " + std::to_string(c.K),
                {in::normal(c.x), in::normal({c.x[2], c.K}, c.large ? 0.5 : 1.0)},
                [fused](V v) { return Vars{fused ? causal_conv1d_silu(v[0], v[1]) : causal_conv1d(v[0], v[1])}; }};
      rows.push_back(c.large ? row.bits() : row);
    }
  }
  rows.push_back(OpRow{"causal_conv1d", "[3, 2, 7] K 4", {in::normal({3, 2, 7}), in::normal({7, 4}, 0.5)},
                       [](V v) { return Vars{causal_conv1d(v[0], v[1])}; }}
                     .bits());
  // causal_conv1d_silu_l2_norm: heads of 3 and 8, scale 1 and 1/√8; heads of
  // 32 at 1/√32 (the model's q and k) and of 5
  struct ConvL2 {
    Shape x;
    int64_t K, head;
    double scale;
    bool large;
  };
  for (const ConvL2& c : {ConvL2{{2, 7, 6}, 4, 3, 1.0, false}, ConvL2{{1, 3, 16}, 2, 8, 1.0 / std::sqrt(8.0), false},
                          ConvL2{{2, 37, 128}, 4, 32, 1.0 / std::sqrt(32.0), true},
                          ConvL2{{1, 9, 10}, 4, 5, 1.0, true}}) {
    OpRow row{"causal_conv1d_silu_l2_norm",
              shape_str(c.x) + " K " + std::to_string(c.K) + " heads of " + std::to_string(c.head) + " scale " +
                  num(c.scale),
              {in::normal(c.x), in::normal({c.x[2], c.K}, c.large ? 0.5 : 1.0)},
              [c](V v) { return Vars{causal_conv1d_silu_l2_norm(v[0], v[1], c.head, c.scale)}; }};
    rows.push_back(c.large ? row.bits() : row);
  }
  // the planes form (q's, k's, v's planes of 8, heads of 4, two normalised)
  // reading the first 24 columns of a wider product [2, 9, 29]: dx is 0 in
  // the other 5 (what another op reads)
  rows.push_back({"causal_conv1d_silu_l2_norm", "planes 3 of [2, 9, 24] in a [2, 9, 29] product, K 4, heads of 4",
                  {in::normal({2, 9, 29}), in::normal({24, 4})},
                  [](V v) { return Vars{causal_conv1d_silu_l2_norm_planes(v[0], v[1], 4, 3, 2)}; }});
}

// rope(x [B, T, H, D], pos0): the backward rotates back.
void add_rope_rows(std::vector<OpRow>& rows) {
  for (const auto& [s, pos0] : {std::pair<Shape, int64_t>{{2, 3, 2, 8}, 0}, {{1, 4, 2, 32}, 5},
                                {{2, 11, 3, 8}, 0}, {{1, 5, 2, 34}, 7}})
    rows.push_back({"rope", shape_str(s) + " from position " + std::to_string(pos0), {in::normal(s)},
                    [pos0 = pos0](V v) { return Vars{rope(v[0], pos0)}; }});
}

void add_norm_conv_rope_rows(std::vector<OpRow>& rows) {
  add_rms_norm_rows(rows);
  add_l2_norm_rows(rows);
  add_causal_conv_rows(rows);
  add_rope_rows(rows);
}

// ---- the optimiser's kernels ------------------------------------------------------------

// The update plan's bookkeeping (experiments/update_plan.h): begin_update
// copies slot 1's rows of a window of 2; end_update sums the gradient's
// squares, logs them with the loss there and moves the counter on, or with
// a NaN loss (or gradient) also refuses update 5.
void add_update_plan_rows(std::vector<OpRow>& rows) {
  auto log_on = [](const Tensor& like) {  // [2, 2] float64 on like's device
    return Tensor::from_vector(std::vector<double>(4, 0.0), {2, 2}).to(like.device());
  };
  auto sum_of_squares_on = [](const Tensor& like) {  // [1] float64 on like's device
    return Tensor::from_vector(std::vector<double>{0.0}, {1}).to(like.device());
  };
  rows.push_back(tensor_row(
      "begin_update, end_update", "slot 1 of 2: its rows copied, the log written, the counter moved on",
      {in::normal({2, 3}), in::random_ids({2, 10}, 50), in::normal({2, 5}), in::ids({1, 7, 0}, {3}),
       in::normal({1}), in::normal({3001})},
      [=](V v) {
        const Tensor& table = v[0].data();
        Tensor scalars = Tensor::zeros({3}, table.dtype(), table.device());
        Tensor ids = Tensor::zeros({10}, DType::I32, table.device());
        Tensor mask = Tensor::zeros({5}, table.dtype(), table.device());
        Tensor control = v[3].data(), log = log_on(table), sum_of_squares = sum_of_squares_on(table);
        const Tensor& grad = v[5].data();
        dispatch::launch::begin_update({table, scalars, v[1].data(), ids, 10, v[2].data(), mask, 5, control});
        dispatch::launch::end_update({v[4].data(), grad, grad.numel(), sum_of_squares, log, control});
        return out({scalars, ids, mask, log, control, sum_of_squares});
      }));
  rows.push_back(tensor_row("end_update", "a NaN loss at update 5 refuses it",
                            {in::values({std::nan("")}, {1}), in::ids({0, 4, 0}, {3}), in::normal({7})}, [=](V v) {
                              Tensor control = v[1].data(), log = log_on(v[0].data());
                              dispatch::launch::end_update({v[0].data(), v[2].data(), 7, sum_of_squares_on(v[0].data()),
                                                            log, control});
                              return out({control});
                            }));
  rows.push_back(tensor_row("end_update", "a NaN gradient at update 5 refuses it",
                            {in::values({1.5}, {1}), in::ids({0, 4, 0}, {3}),
                             in::values({1.0, std::nan(""), 2.0}, {3})},
                            [=](V v) {
                              Tensor control = v[1].data(), log = log_on(v[0].data());
                              dispatch::launch::end_update({v[0].data(), v[2].data(), 3, sum_of_squares_on(v[0].data()),
                                                            log, control});
                              return out({control});
                            }));
}

void add_optimiser_rows(std::vector<OpRow>& rows) {
  // adamw_step(param, grad, m, v): param, m, v after one update; one
  // function per element, each element bounded
  struct Adam {
    Shape shape;
    double weight_decay;
    int64_t step;
  };
  for (const Adam& a : {Adam{{1001}, 0.1, 1}, Adam{{7, 13}, 0.0, 5}}) {
    const bool first = a.step == 1;  // the moments start at zero
    rows.push_back(tensor_row("adamw_step",
                              shape_str(a.shape) + " weight decay " + num(a.weight_decay) + " step " +
                                  std::to_string(a.step),
                              {in::normal(a.shape), in::normal(a.shape, 0.1),
                               first ? in::zeros(a.shape) : in::normal(a.shape, 0.01),
                               first ? in::zeros(a.shape) : in::uniform(a.shape, 0.0, 1e-3)},
                              [a](V v) {
                                Tensor param = v[0].data(), m = v[2].data(), s = v[3].data();
                                dispatch::adamw_step(param, v[1].data(), m, s, 1e-2, 0.9, 0.99, 1e-8,
                                                    a.weight_decay, a.step);
                                return out({param, m, s});
                              })
                       .within(kCudaEachFunction));
  }
  // one launch over a whole buffer, weight decay only where the mask is
  // not 0 (a mask of 0 and values in (0, 0.5))
  Input weight_decay_mask{[](Rng& rng) {
    std::vector<double> m(1001);
    for (double& x : m) x = std::max(0.0, rng.uniform(0.0, 1.0) - 0.5);
    return Tensor::from_vector(m, {1001});
  }};
  rows.push_back(tensor_row("adamw_step", "[1001] with a decay mask, step 3",
                            {in::normal({1001}), in::normal({1001}, 0.1), in::normal({1001}, 0.01),
                             in::uniform({1001}, 0.0, 1e-3), weight_decay_mask},
                            [](V v) {
                              Tensor param = v[0].data(), m = v[2].data(), s = v[3].data();
                              dispatch::adamw_step(param, v[1].data(), m, s, 1e-2, 0.9, 0.99, 1e-8, 0.1, 3,
                                                  v[4].data());
                              return out({param, m, s});
                            })
                     .within(kCudaEachFunction));
  // an update refused by the plan's control (control[2] ≠ 0): nothing moves
  rows.push_back(tensor_row("adamw_step", "[1001] refused (control[2] = 3)",
                            {in::normal({1001}), in::normal({1001}, 0.1), in::normal({1001}, 0.01),
                             in::uniform({1001}, 0.0, 1e-3), in::values({1.0, 0.01, 0.5}, {3}).constant(),
                             in::ids({0, 2, 3}, {3})},
                            [](V v) {
                              Tensor param = v[0].data(), m = v[2].data(), s = v[3].data();
                              dispatch::launch::adamw_step({param, v[1].data(), m, s, Tensor(), param.numel(),
                                                            0.9, 0.99, 1e-8, v[4].data(), v[5].data(), Tensor(), 0.0});
                              return out({param, m, s});
                            }));
  // clipping inside the step, by Σ g² in the backend's memory: above the
  // limit (max_norm 1) and below it (1e6)
  for (double max_norm : {1.0, 1e6})
    rows.push_back(tensor_row("adamw_step", "[1001] clipped to " + num(max_norm) + " on the way",
                              {in::normal({1001}), in::normal({1001}, 0.1), in::normal({1001}, 0.01),
                               in::uniform({1001}, 0.0, 1e-3), in::values({1.0, 0.01, 0.5}, {3}).constant()},
                              [max_norm](V v) {
                                Tensor param = v[0].data(), m = v[2].data(), s = v[3].data();
                                const Tensor& g = v[1].data();
                                dispatch::launch::adamw_step({param, g, m, s, Tensor(), param.numel(), 0.9, 0.99, 1e-8,
                                                              v[4].data(), Tensor(), dispatch::sum_squares_on_device(g),
                                                              max_norm});
                                return out({param, m, s});
                              })
                       .within(kCudaEachFunction));
  add_update_plan_rows(rows);
  // gradient clipping: Σ x² stays on the device, the factor is computed there
  for (double max_norm : {1.0, 1e6})
    rows.push_back(tensor_row("clip_to_norm", "[5000] to " + num(max_norm), {in::normal({5000})},
                              [max_norm](V v) {
                                Tensor x = v[0].data();
                                dispatch::clip_to_norm(x, dispatch::sum_squares_on_device(x), max_norm);
                                return out({x});
                              }));
}

// ---- the scan's kernels -------------------------------------------------------------------

// Every rule × form, forward and backward, with a carried initial state and
// a gradient of the final state, T not a multiple of the chunk, once with a
// strong decay (log α ≈ −5 … −20) to show float32 stays finite. The last
// size has 4 · 40 = 160 (batch, head) blocks, more than an H200's 132 SMs,
// so some SMs run two blocks. (The scan's gradient checks, through the
// autograd op: tests/test_scan.cpp.)
void add_scan_rows(std::vector<OpRow>& rows) {
  struct Size {
    int64_t B, T, H, d, chunk;
    double log_alpha_lo, log_alpha_hi;
  };
  const Size sizes[] = {{2, 13, 2, 8, 4, -1.0, -0.01}, {2, 70, 4, 32, 64, -1.0, -0.01},
                        {1, 40, 2, 32, 16, -20.0, -5.0}, {4, 6, 40, 8, 4, -1.0, -0.01}};
  for (ScanRule rule : {ScanRule::Linear, ScanRule::Delta, ScanRule::Gdn, ScanRule::Retnet, ScanRule::Mamba2,
                        ScanRule::Gla})
    for (bool chunked : {false, true})
      for (const Size& z : sizes) {
        if (z.log_alpha_lo < -2 && !learns_decay(rule)) continue;
        const std::string what = std::string(scan_rule_name(rule)) +
                                 (chunked ? ", chunked C=" + std::to_string(z.chunk) : ", token by token") + " " +
                                 shape_str({z.B, z.T, z.H, z.d}) + (z.log_alpha_lo < -2 ? " strong decay" : "");
        const double k_scale = 1.0 / std::sqrt(double(z.d));
        const Shape qkv{z.B, z.T, z.H, z.d}, state{z.B, z.H, z.d, z.d};
        const Shape log_alpha_shape = decays_per_channel(rule) ? qkv : Shape{z.B, z.T, z.H};
        std::vector<Input> inputs = {
            in::normal(qkv, k_scale), in::normal(qkv, k_scale), in::normal(qkv),
            uses_beta(rule) ? in::uniform({z.B, z.T, z.H}, 0.1, 0.9) : in::none(),
            learns_decay(rule) ? in::uniform(log_alpha_shape, z.log_alpha_lo, z.log_alpha_hi) : in::none(),
            in::normal(state, 0.1),  // S_0
            in::normal(qkv),         // dout
            in::normal(state, 0.1),  // dS_T
        };
        rows.push_back(OpRow{"scan", what, inputs,
                             [=](V v) {
                               ScanOptions config{rule, chunked ? ScanForm::Chunked : ScanForm::Sequential,
                                                  int(z.chunk)};
                               const Tensor &q = v[0].data(), &k = v[1].data(), &val = v[2].data();
                               const Tensor &beta = v[3].data(), &g = v[4].data();
                               Tensor final_state;
                               dispatch::ScanSaved saved;
                               Tensor o = dispatch::scan_forward(config, q, k, val, beta, g, v[5].data(), final_state,
                                                                &saved);
                               dispatch::ScanGrads gr = dispatch::scan_backward(config, q, k, val, beta, g, saved,
                                                                              v[6].data(), v[7].data());
                               return out({o, final_state, saved.states, saved.Y, saved.W, saved.U, gr.dq, gr.dk,
                                           gr.dv, gr.dbeta, gr.dlog_alpha, gr.dinitial_state});
                             },
                             kCudaEachSum, true,
                             "the scan's kernels, forward and backward by hand; its gradient checks are "
                             "tests/test_scan.cpp's"});
      }
}

}  // namespace

const std::vector<OpRow>& op_table() {
  static const std::vector<OpRow> rows = [] {
    std::vector<OpRow> r;
    add_elementwise_rows(r);
    add_matmul_rows(r);
    add_reduction_shape_rows(r);
    add_softmax_loss_rows(r);
    add_attention_rows(r);
    add_norm_conv_rope_rows(r);
    add_optimiser_rows(r);
    add_scan_rows(r);
    return r;
  }();
  return rows;
}

}  // namespace lina::test
