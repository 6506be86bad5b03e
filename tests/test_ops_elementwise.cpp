// Elementwise ops: known values, the unary functions against their formulas,
// broadcasting and errors (their gradient checks and CPU-against-cuda rows:
// tests/op_table.cpp); β and log α in one op, beta_log_alpha: formulas, the
// composition they replace, adding into gradients handed in, errors, their
// rows' gradient checks and cuda runs, and the shared-memory backward
// against its one-thread-per-column reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "backend_cuda/cuda_kernels.h"
#include "dispatch/dispatch.h"
#include "tests/cuda_half.h"
#include "tests/gradcheck.h"
#include "tests/harness.h"
#include "tests/op_check.h"
#ifdef LINA_CUDA_SIM
#include "cuda_sim/control.h"  // the thread order of lina's CUDA runtime on the CPU
#endif

using namespace lina;
using namespace lina::test;

TEST_CASE("elementwise forward values") {
  Var x(Tensor::from_vector<double>({-1.0, 0.0, 2.0}, {3}));
  CHECK(value(sigmoid(x), 1) == doctest::Approx(0.5));
  CHECK(value(relu(x), 0) == 0.0);
  CHECK(value(elu(x), 0) == doctest::Approx(std::exp(-1.0) - 1.0));
  CHECK(value(silu(x), 2) == doctest::Approx(2.0 / (1.0 + std::exp(-2.0))));
  // GELU tanh form at 1: 0.5 (1 + tanh(√(2/π)·1.044715))
  Var one(Tensor::from_vector<double>({1.0}, {1}));
  CHECK(value(gelu(one), 0) == doctest::Approx(0.8411919906082768).epsilon(1e-12));
  // log σ stays finite where σ underflows
  Var big(Tensor::from_vector<double>({-800.0, 800.0}, {2}));
  CHECK(value(log_sigmoid(big), 0) == doctest::Approx(-800.0));
  CHECK(value(log_sigmoid(big), 1) == doctest::Approx(0.0));
}

// Every unary function of core/elementwise_math.h against its formula written
// out here with <cmath>, in float64: the maths both devices share
// (math::Fn) checked against something other than itself.
TEST_CASE("every unary function equals its formula, in float64") {
  const double p = 0.7;  // the scalar of add/mul/pow/elu
  auto sigma = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  struct Formula {
    UnaryFn fn;
    std::function<double(double)> f;
    bool positive_only;
  };
  const std::vector<Formula> formulas = {
      {UnaryFn::Neg, [](double x) { return -x; }, false},
      {UnaryFn::AddScalar, [&](double x) { return x + p; }, false},
      {UnaryFn::MulScalar, [&](double x) { return p * x; }, false},
      {UnaryFn::PowScalar, [&](double x) { return std::pow(x, p); }, true},
      {UnaryFn::Exp, [](double x) { return std::exp(x); }, false},
      {UnaryFn::Log, [](double x) { return std::log(x); }, true},
      {UnaryFn::Sqrt, [](double x) { return std::sqrt(x); }, true},
      {UnaryFn::Rsqrt, [](double x) { return 1.0 / std::sqrt(x); }, true},
      {UnaryFn::Tanh, [](double x) { return std::tanh(x); }, false},
      {UnaryFn::Sigmoid, sigma, false},
      {UnaryFn::LogSigmoid, [&](double x) { return std::log(sigma(x)); }, false},
      {UnaryFn::Silu, [&](double x) { return x * sigma(x); }, false},
      {UnaryFn::Gelu, [](double x) {  // the tanh form
         return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
       }, false},
      {UnaryFn::Elu, [&](double x) { return x > 0 ? x : p * (std::exp(x) - 1.0); }, false},
      {UnaryFn::Relu, [](double x) { return x > 0 ? x : 0.0; }, false},
  };
  REQUIRE(formulas.size() == size_t(UnaryFn::Count));
  const std::vector<double> all = {-6.0, -2.5, -1.0, -0.3, 0.0, 0.2, 1.0, 2.5, 6.0};
  const std::vector<double> positive = {0.01, 0.2, 0.5, 1.0, 2.5, 9.0};
  for (const Formula& formula : formulas) {
    const std::vector<double>& xs = formula.positive_only ? positive : all;
    const Tensor y = dispatch::unary(formula.fn, Tensor::from_vector<double>(xs, {int64_t(xs.size())}), p);
    std::vector<double> want;
    for (double x : xs) want.push_back(formula.f(x));
    check_each_close(std::string("unary ") + unary_fn_name(formula.fn), y.to_vector<double>(), want, 1e-12, 1e-15);
  }
}

TEST_CASE("broadcasting add: [2,1,3] + [4,1] -> [2,4,3]") {
  Var a(Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 1, 3}));
  Var b(Tensor::from_vector<double>({10, 20, 30, 40}, {4, 1}));
  Var c = a + b;
  REQUIRE(c.shape() == Shape{2, 4, 3});
  CHECK(value(c, 0) == 11);   // a[0,0,0] + b[0]
  CHECK(value(c, 5) == 23);   // a[0,0,2] + b[1]
  CHECK(value(c, 23) == 46);  // a[1,0,2] + b[3]
}

TEST_CASE("elementwise errors name the op and both shapes") {
  Var a(Tensor::zeros({2, 3}, DType::F64));
  Var b(Tensor::zeros({4, 3}, DType::F64));
  CHECK_THROWS_WITH_AS(add(a, b), "add: shapes [2, 3] and [4, 3] do not broadcast", Error);
  Var c(Tensor::zeros({2, 3}, DType::F32));
  CHECK_THROWS_WITH_AS(mul(a, c), doctest::Contains("mul: dtype mismatch"), Error);
}

// ---- beta_log_alpha: the recurrent mixers' β and log α ------------------------------------

namespace {

// The two planes of the op's output as the mixers read them: β [B, T, n_beta]
// at offset 0, log α [B, T, N − n_beta] after it.
std::pair<Tensor, Tensor> gate_planes(const Tensor& out, const Shape& z, int64_t n_beta) {
  const int64_t B = z[0], T = z[1], N = z[2];
  return {Tensor::view_of(out, 0, {B, T, n_beta}), Tensor::view_of(out, B * T * n_beta, {B, T, N - n_beta})};
}

// What the op replaces: a bias add, a split into two copies, σ and log σ,
// the two flattened and joined as the op lays them out.
Var composed_beta_log_alpha(const Var& z, const Var& bias, int64_t n_beta) {
  const Var u = add(z, bias);
  const int64_t N = z.dim(2), rows = z.dim(0) * z.dim(1);
  std::vector<Var> planes;
  if (n_beta > 0) planes.push_back(reshape(sigmoid(slice(u, 2, 0, n_beta)), {rows * n_beta}));
  if (n_beta < N) planes.push_back(reshape(log_sigmoid(slice(u, 2, n_beta, N - n_beta)), {rows * (N - n_beta)}));
  return planes.size() == 1 ? planes[0] : concat(planes, 0);
}

}  // namespace

TEST_CASE("beta_log_alpha: the planes hold σ(z + b) and log σ(z + b), float64, n_beta 0, 2 and N") {
  const Shape zs{2, 3, 5};
  const Tensor z = randn64(zs, 3.0), bias = randn64({5});
  auto sigma = [](double u) { return 1.0 / (1.0 + std::exp(-u)); };
  for (int64_t n_beta : {0, 2, 5}) {
    INFO("n_beta = " << n_beta);
    const Tensor out = beta_log_alpha(Var(z), Var(bias), n_beta).data();
    REQUIRE(out.shape() == Shape{30});
    const std::pair<Tensor, Tensor> planes = gate_planes(out, zs, n_beta);
    std::vector<double> want_beta, want_log_alpha;
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t n = 0; n < 5; ++n) {
        const double u = z.at(r * 5 + n) + bias.at(n);
        // log σ(u) = −log(1 + e^−u): log1p keeps it exact where σ(u) ≈ 1
        (n < n_beta ? want_beta : want_log_alpha).push_back(n < n_beta ? sigma(u) : -std::log1p(std::exp(-u)));
      }
    check_each_close("β", planes.first.to_vector<double>(), want_beta, 1e-14, 0.0);
    check_each_close("log α", planes.second.to_vector<double>(), want_log_alpha, 1e-13, 0.0);
  }
  // −softplus(−u), never log(σ(u)): finite where σ underflows, and exact where α ≈ 1
  const Tensor extreme = f64({-800, -40, 0, 30, 800}, {1, 1, 5});
  const Tensor out = beta_log_alpha(Var(extreme), Var(Tensor::zeros({5}, DType::F64)), 0).data();
  CHECK(out.at(0) == doctest::Approx(-800.0));
  CHECK(out.at(1) == doctest::Approx(-40.0 - std::log1p(std::exp(-40.0))).epsilon(1e-15));
  CHECK(out.at(2) == doctest::Approx(-std::log(2.0)).epsilon(1e-15));
  CHECK(out.at(3) == doctest::Approx(-std::log1p(std::exp(-30.0))).epsilon(1e-14));
  CHECK(out.at(4) == 0.0);
  const Tensor beta = beta_log_alpha(Var(extreme), Var(Tensor::zeros({5}, DType::F64)), 5).data();
  CHECK(beta.at(0) == 0.0);
  CHECK(beta.at(4) == 1.0);
}

// The same maths as the composition: forward, dz and dbias; float64 and
// float32, CPU and cuda (tests/cuda_half.h). 300 rows cross the CPU's chunks of
// 128 rows and give the backward's row lanes several rows each.
TEST_CASE("beta_log_alpha matches add, split, sigmoid and log_sigmoid: forward, dz, dbias, CPU and cuda") {
  std::vector<Device> devices{Device::Cpu};
  if (cuda_half()) devices.push_back(Device::Cuda);
  struct Case {
    Shape z;
    int64_t n_beta;
  };
  for (const Case& c : {Case{{2, 150, 7}, 3}, Case{{3, 4, 6}, 0}, Case{{3, 4, 6}, 6}, Case{{1, 5, 40}, 33}})
    for (Device device : devices)
      for (DType dtype : {DType::F64, DType::F32}) {
        if (device == Device::Cuda && dtype == DType::F64) continue;
        INFO(shape_str(c.z) << " n_beta " << c.n_beta << " on " << std::string(device_name(device)) << ", "
                             << std::string(dtype_name(dtype)));
        const Tensor z = randn64(c.z, 2.0).to(dtype).to(device), bias = randn64({c.z[2]}).to(dtype).to(device);
        const int64_t n = numel(c.z);
        const Tensor r = randn64({n}).to(dtype).to(device);
        Var zf(z, true), bf(bias, true), zc(z.clone(), true), bc(bias.clone(), true);
        const Var fused = beta_log_alpha(zf, bf, c.n_beta), composed = composed_beta_log_alpha(zc, bc, c.n_beta);
        REQUIRE(fused.shape() == Shape{n});
        const double tolerance = dtype == DType::F64 ? 1e-14 : 2e-6;
        check_close("out", fused.data(), composed.data(), tolerance);
        sum_all(mul(fused, Var(r))).backward();
        sum_all(mul(composed, Var(r))).backward();
        check_close("dz", zf.grad(), zc.grad(), tolerance);
        check_close("dbias", bf.grad(), bc.grad(), dtype == DType::F64 ? 1e-13 : 2e-5);  // sums of B·T rows
        // only the output is saved
        REQUIRE(fused.grad_fn()->saved().size() == 1);
        CHECK(std::string(fused.grad_fn()->saved()[0].first) == "out");
      }
}

// Where α ≈ 1 (u ≫ 0) the decay's gradient σ(−u) = 1 − α is tiny: from the
// saved log α as −expm1(log α) it keeps float32's relative precision, where
// 1 − exp(log α) would round to 0.
TEST_CASE("beta_log_alpha: dlog α keeps its precision where α ≈ 1, float32, CPU and cuda") {
  std::vector<Device> devices{Device::Cpu};
  if (cuda_half()) devices.push_back(Device::Cuda);
  const std::vector<double> us = {8, 20, 30, 50};
  for (Device device : devices) {
    INFO(std::string(device_name(device)));
    Var z(Tensor::from_vector(std::vector<float>(us.begin(), us.end()), {1, 1, 4}).to(device), true);
    Var bias(Tensor::zeros({4}, DType::F32, device), true);
    sum_all(beta_log_alpha(z, bias, 0)).backward();
    std::vector<double> want;
    for (double u : us) want.push_back(1.0 / (1.0 + std::exp(u)));  // σ(−u)
    check_each_close("dz", z.grad().to(Device::Cpu).to_vector<float>(), want, 1e-6, 0.0);
    check_each_close("dbias", bias.grad().to(Device::Cpu).to_vector<float>(), want, 1e-6, 0.0);
  }
}

// Run twice: fresh, and handed dz0 and dbias0 to add into; the second must
// give g0 + the first, to the last bits (as tests/test_ops_norm_conv_rope.cpp's
// add-into test). Through autograd, a bias whose .grad exists (a parameter)
// and a z leaf with a .grad get their gradients added in place, into the
// very buffers.
TEST_CASE("beta_log_alpha's backward adds dz and dbias into gradients handed in, CPU and cuda") {
  std::vector<std::pair<Device, DType>> runs{{Device::Cpu, DType::F64}, {Device::Cpu, DType::F32}};
  if (cuda_half()) runs.push_back({Device::Cuda, DType::F32});
  for (const std::pair<Device, DType>& run : runs) {
    const Device device = run.first;
    const DType dtype = run.second;
    INFO(std::string(device_name(device)) << ", " << std::string(dtype_name(dtype)));
    auto on = [&](const Tensor& t) { return t.to(dtype).to(device); };
    const Shape zs{3, 50, 12};
    const Tensor z = on(randn64(zs, 2.0)), bias = on(randn64({12})), dout = on(randn64({numel(zs)}));
    const Tensor dz0 = on(randn64(zs)), dbias0 = on(randn64({12}));
    const double ulp = dtype == DType::F64 ? 2.3e-16 : 1.2e-7;
    auto check_sum = [ulp](const char* what, const Tensor& added, const Tensor& g0, const Tensor& fresh) {
      const Tensor expected = dispatch::binary(BinaryFn::Add, g0, fresh);
      double largest = 1.0;
      for (double v : expected.to(DType::F64).to(Device::Cpu).to_vector<double>()) largest = std::max(largest, std::fabs(v));
      INFO(std::string(what));
      CHECK(max_abs_diff(added, expected) <= 8 * ulp * largest);
    };
    const Tensor out = dispatch::beta_log_alpha_forward(z, bias, 5);
    Tensor dz, dbias, dz_into = dz0.clone(), dbias_into = dbias0.clone();
    dispatch::beta_log_alpha_backward(out, dout, zs, 12, 5, dz, dbias);
    dispatch::beta_log_alpha_backward(out, dout, zs, 12, 5, dz_into, dbias_into);
    check_sum("dz", dz_into, dz0, dz);
    check_sum("dbias", dbias_into, dbias0, dbias);
    // one added into, the other fresh
    Tensor fresh_dz, only_dbias = dbias0.clone();
    dispatch::beta_log_alpha_backward(out, dout, zs, 12, 5, fresh_dz, only_dbias);
    CHECK(max_abs_diff(fresh_dz, dz) == 0.0);
    check_sum("dbias alone", only_dbias, dbias0, dbias);

    Var zv(z, true), bv(bias, true);
    zv.grad() = dz0.clone();
    bv.grad() = dbias0.clone();
    const void* z_grad_buffer = zv.grad().raw();
    const void* bias_grad_buffer = bv.grad().raw();
    sum_all(mul(beta_log_alpha(zv, bv, 5), Var(dout))).backward();
    CHECK(zv.grad().raw() == z_grad_buffer);
    CHECK(bv.grad().raw() == bias_grad_buffer);
    check_sum("z's .grad", zv.grad(), dz0, dz);
    check_sum("the bias's .grad", bv.grad(), dbias0, dbias);
  }
}

TEST_CASE("beta_log_alpha errors name the op and the shapes, in one line") {
  Var z(Tensor::zeros({2, 3, 8}, DType::F64)), bias(Tensor::zeros({8}, DType::F64));
  CHECK_THROWS_WITH_AS(beta_log_alpha(z, Var(Tensor::zeros({9}, DType::F64)), 4),
                       "beta_log_alpha: 9 gates do not fit in the last dim of z [2, 3, 8]", Error);
  CHECK_THROWS_WITH_AS(beta_log_alpha(z, Var(Tensor::zeros({1, 8}, DType::F64)), 4),
                       "beta_log_alpha: bias [1, 8] is not [N]", Error);
  CHECK_THROWS_WITH_AS(beta_log_alpha(z, bias, 9), "beta_log_alpha: n_beta = 9 is out of range [0, 8] for z [2, 3, 8]",
                       Error);
  CHECK_THROWS_WITH_AS(beta_log_alpha(z, bias, -1),
                       "beta_log_alpha: n_beta = -1 is out of range [0, 8] for z [2, 3, 8]", Error);
  CHECK_THROWS_WITH_AS(beta_log_alpha(Var(Tensor::zeros({}, DType::F64)), bias, 0),
                       "beta_log_alpha: expected z [B, T, N], got a scalar", Error);
  CHECK_THROWS_WITH_AS(beta_log_alpha(z, Var(Tensor::zeros({8}, DType::F32)), 4),
                       doctest::Contains("beta_log_alpha: dtype mismatch"), Error);
  CHECK_THROWS_WITH_AS(beta_log_alpha(Var(Tensor::zeros({2, 3, 8}, DType::I32)), Var(Tensor::zeros({8}, DType::I32)), 4),
                       doctest::Contains("beta_log_alpha: expected float32 or float64"), Error);
  // the backward's own checks
  const Tensor out = dispatch::beta_log_alpha_forward(z.data(), bias.data(), 4);
  Tensor dz, dbias;
  CHECK_THROWS_WITH_AS(dispatch::beta_log_alpha_backward(out, out, {2, 3, 7}, 7, 4, dz, dbias),
                       "beta_log_alpha_backward: out [48] is not the forward's [42] for z [2, 3, 7]", Error);
  CHECK_THROWS_WITH_AS(dispatch::beta_log_alpha_backward(out, Tensor::zeros({47}, DType::F64), {2, 3, 8}, 8, 4, dz, dbias),
                       "beta_log_alpha_backward: shape mismatch [48] vs [47]", Error);
  Tensor wrong_dbias = Tensor::zeros({7}, DType::F64);
  CHECK_THROWS_WITH_AS(dispatch::beta_log_alpha_backward(out, out, {2, 3, 8}, 8, 4, dz, wrong_dbias),
                       "beta_log_alpha_backward: dbias: shape mismatch [7] vs [8]", Error);
}

// The float64 gradient check of the op table's beta_log_alpha rows
// (tests/op_table.cpp; tests/test_op_table.cpp runs every row's): the small
// shapes element by element, the large ones along random directions.
TEST_CASE("op table: beta_log_alpha's rows: float64 gradients match central differences") {
  int rows = 0;
  for (const OpRow& row : op_table()) {
    if (row.op != "beta_log_alpha") continue;
    CHECK(row_op_error(row) == "");
    const GradcheckResult r = row_gradient_error(row);
    CHECK_MESSAGE(r.worst <= kGradcheck.tolerance,
                  "gradient check of " << row.name() << ": worst " << r.where << " (error " << r.worst << ")");
    ++rows;
  }
  CHECK(rows >= 8);
}

// The op table's beta_log_alpha rows on cuda against the CPU (outputs, the
// saved output, dz and dbias; the whole table: tests/test_cuda_backend.cpp),
// two cuda runs of the large ones bit for bit; each way is one launch.
TEST_CASE("op table: cuda: beta_log_alpha's rows agree with the CPU, one launch each way") {
  if (!dispatch::cuda_available()) {
    MESSAGE("SKIPPED: no CUDA device (" << std::string(dispatch::cuda_runtime()) << ")");
    return;
  }
  for (const OpRow& row : op_table()) {
    if (row.op != "beta_log_alpha") continue;
    INFO("row " << row.name());
    CHECK(cuda_error(row) == "");
    if (!row.same_bits) continue;
    const std::vector<RowResult> first = run_row(row, Device::Cuda), second = run_row(row, Device::Cuda);
    REQUIRE(first.size() == second.size());
    for (size_t i = 0; i < first.size(); ++i) {
      INFO(first[i].name);
      CHECK(max_abs_diff(first[i].value, second[i].value) == 0.0);
    }
  }
  const Tensor z = randn64({4, 37, 40}).to(DType::F32).to(Device::Cuda);
  const Tensor bias = randn64({40}).to(DType::F32).to(Device::Cuda);
  const int64_t launches = dispatch::cuda_counters().launches;
  const Tensor out = dispatch::beta_log_alpha_forward(z, bias, 8);
  CHECK(dispatch::cuda_counters().launches == launches + 1);
  Tensor dz, dbias;
  dispatch::beta_log_alpha_backward(out, out, z.shape(), 40, 8, dz, dbias);
  CHECK(dispatch::cuda_counters().launches == launches + 2);
  dispatch::beta_log_alpha_backward(out, out, z.shape(), 40, 8, dz, dbias);  // adding into both
  CHECK(dispatch::cuda_counters().launches == launches + 3);
}

// The backward kernel (a block per tile of columns, the rows' sum in shared
// memory) against the reference beside it (a thread per column, rows in
// order): dz the same bits (the same per-element code), dbias within float32
// rounding of the two summation orders; every element written (the outputs
// start as NaN) or added into. On cuda_sim/ the kernel gives the same bits
// under every thread order (a missing __syncthreads() would leave a read to
// the order).
TEST_CASE("cuda: beta_log_alpha's backward kernel equals its one-thread-per-column reference") {
  if (!dispatch::cuda_available()) {
    MESSAGE("SKIPPED: no CUDA device (" << std::string(dispatch::cuda_runtime()) << ")");
    return;
  }
  struct Case {
    int64_t rows, N, n_beta;
  };
  // N of 1, 3, 8 (one tile, most threads row lanes), 33 and 70 (a partial last
  // tile of 32), 132; no rows (dbias = 0); 2000 rows of 3
  const Case cases[] = {{148, 8, 4}, {300, 70, 6}, {128, 132, 4}, {60, 9, 0}, {60, 9, 9},
                        {0, 5, 2},   {1, 1, 1},    {2000, 3, 1},  {7, 33, 20}};
  auto device_f32 = [](const Tensor& t) { return t.to(DType::F32).to(Device::Cuda); };
  for (const Case& c : cases)
    for (bool add : {false, true}) {
      INFO("rows " << c.rows << ", N " << c.N << ", n_beta " << c.n_beta << std::string(add ? ", adding into" : ""));
      const Tensor z = device_f32(randn64({c.rows, c.N}, 2.0)), bias = device_f32(randn64({c.N}));
      const Tensor out = dispatch::beta_log_alpha_forward(z, bias, c.n_beta);
      const Tensor dout = device_f32(randn64({c.rows * c.N}));
      const Tensor dz0 = device_f32(randn64({c.rows, c.N})), dbias0 = device_f32(randn64({c.N}));
      auto run = [&](bool reference) {
        Tensor dz = dz0.clone(), dbias = dbias0.clone();
        if (!add) {
          dispatch::fill(dz, NAN);
          dispatch::fill(dbias, NAN);
        }
        auto kernel = reference ? cuda::beta_log_alpha_backward_reference : cuda::beta_log_alpha_backward;
        kernel(out.data<float>(), dout.data<float>(), dz.data<float>(), dbias.data<float>(), c.rows, c.N, c.N,
               c.n_beta, add, add);
        return std::pair<Tensor, Tensor>{dz.to(Device::Cpu), dbias.to(Device::Cpu)};
      };
      const std::pair<Tensor, Tensor> fast = run(false), reference = run(true);
      CHECK(max_abs_diff(fast.first, reference.first) == 0.0);  // dz; a NaN anywhere: +∞
      check_close("dbias", fast.second, reference.second, 1e-5);
#ifdef LINA_CUDA_SIM
      const cuda_sim::ThreadOrder order_before = cuda_sim::thread_order();
      for (auto order : {cuda_sim::ThreadOrder::Reverse, cuda_sim::ThreadOrder::Shuffle}) {
        cuda_sim::set_thread_order(order, 7);
        const std::pair<Tensor, Tensor> again = run(false);
        CHECK(max_abs_diff(again.first, fast.first) == 0.0);
        CHECK(max_abs_diff(again.second, fast.second) == 0.0);
      }
      cuda_sim::set_thread_order(order_before);
#endif
    }
}
