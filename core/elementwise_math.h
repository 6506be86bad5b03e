// The one list of the unary and binary elementwise ops, and the per-element
// maths of each, forward and derivative side by side. Each is a struct with
// static functions marked LINA_HD (__host__ __device__ under nvcc), so the
// CPU loops in backend_cpu/ and the CUDA kernels in backend_cuda/ run the
// very same lines, and tests on a machine without a GPU exercise the logic
// the GPU will run.
//
//   kFn                    its UnaryFn / BinaryFn value
//   forward(x, p)          -> y          (p: the op's scalar parameter, if any)
//   backward(x, y, dy, p)  -> dx = dy * dy/dx
//   apply(a, b)            -> a ∘ b      (binary functions)
#pragma once
#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define LINA_HD __host__ __device__ __forceinline__
#else
#define LINA_HD inline
#endif

namespace lina {

// ---- the lists ---------------------------------------------------------------------------
// Every elementwise function, written once. Each entry is X(Name, op_name):
//   Name     the UnaryFn / BinaryFn value and the math::Name struct below
//   op_name  its name in messages, graph dumps and checkpoints (core/ops.h)
// The enums, visit_unary / visit_binary and the name functions are generated
// from these lists, and core/ops.h builds OpKind from them. To add a
// function: add an entry here and write its math:: struct.
#define LINA_UNARY_FUNCTIONS(X)                                                        \
  X(Neg, neg) X(AddScalar, add_scalar) X(MulScalar, mul_scalar) X(PowScalar, pow_scalar) \
  X(Exp, exp) X(Log, log) X(Sqrt, sqrt) X(Rsqrt, rsqrt) X(Tanh, tanh)                   \
  X(Sigmoid, sigmoid) X(LogSigmoid, log_sigmoid) X(Silu, silu) X(Gelu, gelu)            \
  X(Elu, elu) X(Relu, relu)

#define LINA_BINARY_FUNCTIONS(X) X(Add, add) X(Sub, sub) X(Mul, mul) X(Div, div)

// ---- generated: the enums and the names ------------------------------------------------
#define LINA_ENUM_VALUE(Name, op_name) Name,
enum class UnaryFn { LINA_UNARY_FUNCTIONS(LINA_ENUM_VALUE) Count };
enum class BinaryFn { LINA_BINARY_FUNCTIONS(LINA_ENUM_VALUE) Count };
#undef LINA_ENUM_VALUE

constexpr const char* unary_fn_name(UnaryFn f) {
  switch (f) {
#define LINA_NAME_CASE(Name, op_name) case UnaryFn::Name: return #op_name;
    LINA_UNARY_FUNCTIONS(LINA_NAME_CASE)
#undef LINA_NAME_CASE
    case UnaryFn::Count: break;
  }
  return "?";
}
constexpr const char* binary_fn_name(BinaryFn f) {
  switch (f) {
#define LINA_NAME_CASE(Name, op_name) case BinaryFn::Name: return #op_name;
    LINA_BINARY_FUNCTIONS(LINA_NAME_CASE)
#undef LINA_NAME_CASE
    case BinaryFn::Count: break;
  }
  return "?";
}

namespace math {

#ifndef __CUDACC__
// On the host, pick the float overloads of <cmath> (CUDA provides its own).
using std::exp; using std::expm1; using std::log; using std::log1p; using std::sqrt; using std::tanh;
using std::pow; using std::fabs;
#endif

struct Neg {
  static constexpr UnaryFn kFn = UnaryFn::Neg;
  template <class T> static LINA_HD T forward(T x, T) { return -x; }
  template <class T> static LINA_HD T backward(T, T, T dy, T) { return -dy; }
};
struct AddScalar {  // y = x + p
  static constexpr UnaryFn kFn = UnaryFn::AddScalar;
  template <class T> static LINA_HD T forward(T x, T p) { return x + p; }
  template <class T> static LINA_HD T backward(T, T, T dy, T) { return dy; }
};
struct MulScalar {  // y = p x
  static constexpr UnaryFn kFn = UnaryFn::MulScalar;
  template <class T> static LINA_HD T forward(T x, T p) { return p * x; }
  template <class T> static LINA_HD T backward(T, T, T dy, T p) { return p * dy; }
};
struct PowScalar {  // y = x^p,  dy/dx = p x^(p-1)
  static constexpr UnaryFn kFn = UnaryFn::PowScalar;
  template <class T> static LINA_HD T forward(T x, T p) { return pow(x, p); }
  template <class T> static LINA_HD T backward(T x, T, T dy, T p) { return dy * p * pow(x, p - T(1)); }
};
struct Exp {  // dy/dx = y
  static constexpr UnaryFn kFn = UnaryFn::Exp;
  template <class T> static LINA_HD T forward(T x, T) { return exp(x); }
  template <class T> static LINA_HD T backward(T, T y, T dy, T) { return dy * y; }
};
struct Log {
  static constexpr UnaryFn kFn = UnaryFn::Log;
  template <class T> static LINA_HD T forward(T x, T) { return log(x); }
  template <class T> static LINA_HD T backward(T x, T, T dy, T) { return dy / x; }
};
struct Sqrt {  // dy/dx = 1 / (2 y)
  static constexpr UnaryFn kFn = UnaryFn::Sqrt;
  template <class T> static LINA_HD T forward(T x, T) { return sqrt(x); }
  template <class T> static LINA_HD T backward(T, T y, T dy, T) { return dy / (T(2) * y); }
};
struct Rsqrt {  // y = x^(-1/2), dy/dx = -y³/2
  static constexpr UnaryFn kFn = UnaryFn::Rsqrt;
  template <class T> static LINA_HD T forward(T x, T) { return T(1) / sqrt(x); }
  template <class T> static LINA_HD T backward(T, T y, T dy, T) { return dy * T(-0.5) * y * y * y; }
};
struct Tanh {  // dy/dx = 1 - y²
  static constexpr UnaryFn kFn = UnaryFn::Tanh;
  template <class T> static LINA_HD T forward(T x, T) { return tanh(x); }
  template <class T> static LINA_HD T backward(T, T y, T dy, T) { return dy * (T(1) - y * y); }
};
struct Sigmoid {  // dy/dx = y (1 - y)
  static constexpr UnaryFn kFn = UnaryFn::Sigmoid;
  template <class T> static LINA_HD T forward(T x, T) {
    // split by sign so exp never overflows
    if (x >= T(0)) return T(1) / (T(1) + exp(-x));
    T e = exp(x);
    return e / (T(1) + e);
  }
  template <class T> static LINA_HD T backward(T, T y, T dy, T) { return dy * y * (T(1) - y); }
};
struct LogSigmoid {  // y = log σ(x) = -softplus(-x), stable; dy/dx = σ(-x) = 1 - σ(x)
  static constexpr UnaryFn kFn = UnaryFn::LogSigmoid;
  template <class T> static LINA_HD T forward(T x, T) {
    // -softplus(-x) = -(max(-x, 0) + log1p(exp(-|x|)))
    T m = -x > T(0) ? -x : T(0);
    return -(m + log1p(exp(-fabs(x))));
  }
  template <class T> static LINA_HD T backward(T x, T, T dy, T) {
    return dy * Sigmoid::forward(-x, T(0));
  }
};
struct Silu {  // y = x σ(x), dy/dx = σ(x) (1 + x (1 - σ(x)))
  static constexpr UnaryFn kFn = UnaryFn::Silu;
  template <class T> static LINA_HD T forward(T x, T) { return x * Sigmoid::forward(x, T(0)); }
  template <class T> static LINA_HD T backward(T x, T, T dy, T) {
    T s = Sigmoid::forward(x, T(0));
    return dy * s * (T(1) + x * (T(1) - s));
  }
};
struct Gelu {  // tanh form: y = ½x(1 + tanh u), u = √(2/π)(x + 0.044715x³)
  static constexpr UnaryFn kFn = UnaryFn::Gelu;
  static constexpr double kC = 0.7978845608028654;  // √(2/π)
  static constexpr double kA = 0.044715;
  template <class T> static LINA_HD T forward(T x, T) {
    const T c = T(kC);
    return T(0.5) * x * (T(1) + tanh(c * (x + T(kA) * x * x * x)));
  }
  template <class T> static LINA_HD T backward(T x, T, T dy, T) {
    const T c = T(kC);
    T th = tanh(c * (x + T(kA) * x * x * x));
    T du = c * (T(1) + T(3) * T(kA) * x * x);
    return dy * (T(0.5) * (T(1) + th) + T(0.5) * x * (T(1) - th * th) * du);
  }
};
struct Elu {  // y = x (x > 0), p (eˣ - 1) (x ≤ 0); dy/dx = 1 or y + p
  static constexpr UnaryFn kFn = UnaryFn::Elu;
  template <class T> static LINA_HD T forward(T x, T p) { return x > T(0) ? x : p * (exp(x) - T(1)); }
  template <class T> static LINA_HD T backward(T x, T y, T dy, T p) { return x > T(0) ? dy : dy * (y + p); }
};
struct Relu {
  static constexpr UnaryFn kFn = UnaryFn::Relu;
  template <class T> static LINA_HD T forward(T x, T) { return x > T(0) ? x : T(0); }
  template <class T> static LINA_HD T backward(T x, T, T dy, T) { return x > T(0) ? dy : T(0); }
};

// The fused gates of the recurrent mixers, beta_log_alpha (core/op_list.h):
// u = z + b; β = σ(u) for the first n_beta columns, log α = log σ(u) for the
// rest, each gradient formed from the op's output alone (z is not kept):
//   β:      du = dβ · β (1 − β)
//   log α:  du = dlogα · σ(−u) = dlogα · (1 − α) = dlogα · (−expm1(log α))
//           (expm1 keeps 1 − α accurate where α ≈ 1, log α ≈ 0)
// The output holds two planes, each contiguous: β [rows, n_beta], then
// log α [rows, N − n_beta]; out_index is where column n of row r goes.
struct BetaLogAlpha {
  template <class T> static LINA_HD T beta(T u) { return Sigmoid::forward(u, T(0)); }
  template <class T> static LINA_HD T log_alpha(T u) { return LogSigmoid::forward(u, T(0)); }
  template <class T> static LINA_HD T beta_backward(T beta, T dbeta) { return dbeta * beta * (T(1) - beta); }
  template <class T> static LINA_HD T log_alpha_backward(T log_alpha, T dlog_alpha) {
    return -dlog_alpha * expm1(log_alpha);
  }
  static LINA_HD int64_t out_index(int64_t r, int64_t n, int64_t rows, int64_t N, int64_t n_beta) {
    return n < n_beta ? r * n_beta + n : rows * n_beta + r * (N - n_beta) + (n - n_beta);
  }
};

struct Add {
  static constexpr BinaryFn kFn = BinaryFn::Add;
  template <class T> static LINA_HD T apply(T a, T b) { return a + b; }
};
struct Sub {
  static constexpr BinaryFn kFn = BinaryFn::Sub;
  template <class T> static LINA_HD T apply(T a, T b) { return a - b; }
};
struct Mul {
  static constexpr BinaryFn kFn = BinaryFn::Mul;
  template <class T> static LINA_HD T apply(T a, T b) { return a * b; }
};
struct Div {
  static constexpr BinaryFn kFn = BinaryFn::Div;
  template <class T> static LINA_HD T apply(T a, T b) { return a / b; }
};

// Each struct's kFn must name its own list entry (checked here, from the lists).
#define LINA_CHECK_KFN(Name, op_name) \
  static_assert(Name::kFn == UnaryFn::Name, "math::" #Name "::kFn is not UnaryFn::" #Name);
LINA_UNARY_FUNCTIONS(LINA_CHECK_KFN)
#undef LINA_CHECK_KFN
#define LINA_CHECK_KFN(Name, op_name) \
  static_assert(Name::kFn == BinaryFn::Name, "math::" #Name "::kFn is not BinaryFn::" #Name);
LINA_BINARY_FUNCTIONS(LINA_CHECK_KFN)
#undef LINA_CHECK_KFN

// Calls fn(math::X{}) for the runtime kind: the switch happens once per
// kernel launch, the loop inside is compiled per function.
template <class Fn>
LINA_HD void visit_unary(UnaryFn f, Fn&& fn) {
  switch (f) {
#define LINA_VISIT_CASE(Name, op_name) case UnaryFn::Name: fn(Name{}); break;
    LINA_UNARY_FUNCTIONS(LINA_VISIT_CASE)
#undef LINA_VISIT_CASE
    case UnaryFn::Count: break;
  }
}
template <class Fn>
LINA_HD void visit_binary(BinaryFn f, Fn&& fn) {
  switch (f) {
#define LINA_VISIT_CASE(Name, op_name) case BinaryFn::Name: fn(Name{}); break;
    LINA_BINARY_FUNCTIONS(LINA_VISIT_CASE)
#undef LINA_VISIT_CASE
    case BinaryFn::Count: break;
  }
}

// Gradient clipping's factor from Σ g²: min(1, max_norm / (√sum_of_squares
// + 1e-6)); 1 without clipping (max_norm 0) and when Σ g² is not a number
// (the update plan refuses that update anyway).
LINA_HD double clip_factor(double sum_of_squares, double max_norm) {
  if (max_norm <= 0.0) return 1.0;
  const double factor = max_norm / (sqrt(sum_of_squares) + 1e-6);
  return factor < 1.0 ? factor : 1.0;
}

}  // namespace math
}  // namespace lina
