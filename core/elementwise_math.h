// The per-element maths of every unary and binary elementwise op, forward and
// derivative side by side. Each is a struct with static functions marked
// LINA_HD (__host__ __device__ under nvcc), so the CPU loops in backend_cpu/
// and the CUDA kernels in backend_cuda/ run the very same lines, and tests on
// a machine without a GPU exercise the logic the GPU will run.
//
//   forward(x, p)          -> y          (p: the op's scalar parameter, if any)
//   backward(x, y, dy, p)  -> dx = dy * dy/dx
#pragma once
#include <cmath>

#ifdef __CUDACC__
#define LINA_HD __host__ __device__ __forceinline__
#else
#define LINA_HD inline
#endif

namespace lina {

enum class UnaryFn {
  Neg, AddScalar, MulScalar, PowScalar, Exp, Log, Sqrt, Rsqrt, Tanh,
  Sigmoid, LogSigmoid, Silu, Gelu, Elu, Relu, Count
};
enum class BinaryFn { Add, Sub, Mul, Div, Count };

namespace math {

#ifndef __CUDACC__
// On the host, pick the float overloads of <cmath> (CUDA provides its own).
using std::exp; using std::log; using std::log1p; using std::sqrt; using std::tanh;
using std::pow; using std::fabs;
#endif

struct Neg {
  template <class T> static LINA_HD T forward(T x, T) { return -x; }
  template <class T> static LINA_HD T backward(T, T, T dy, T) { return -dy; }
};
struct AddScalar {  // y = x + p
  template <class T> static LINA_HD T forward(T x, T p) { return x + p; }
  template <class T> static LINA_HD T backward(T, T, T dy, T) { return dy; }
};
struct MulScalar {  // y = p x
  template <class T> static LINA_HD T forward(T x, T p) { return p * x; }
  template <class T> static LINA_HD T backward(T, T, T dy, T p) { return p * dy; }
};
struct PowScalar {  // y = x^p,  dy/dx = p x^(p-1)
  template <class T> static LINA_HD T forward(T x, T p) { return pow(x, p); }
  template <class T> static LINA_HD T backward(T x, T, T dy, T p) { return dy * p * pow(x, p - T(1)); }
};
struct Exp {  // dy/dx = y
  template <class T> static LINA_HD T forward(T x, T) { return exp(x); }
  template <class T> static LINA_HD T backward(T, T y, T dy, T) { return dy * y; }
};
struct Log {
  template <class T> static LINA_HD T forward(T x, T) { return log(x); }
  template <class T> static LINA_HD T backward(T x, T, T dy, T) { return dy / x; }
};
struct Sqrt {  // dy/dx = 1 / (2 y)
  template <class T> static LINA_HD T forward(T x, T) { return sqrt(x); }
  template <class T> static LINA_HD T backward(T, T y, T dy, T) { return dy / (T(2) * y); }
};
struct Rsqrt {  // y = x^(-1/2), dy/dx = -y³/2
  template <class T> static LINA_HD T forward(T x, T) { return T(1) / sqrt(x); }
  template <class T> static LINA_HD T backward(T, T y, T dy, T) { return dy * T(-0.5) * y * y * y; }
};
struct Tanh {  // dy/dx = 1 - y²
  template <class T> static LINA_HD T forward(T x, T) { return tanh(x); }
  template <class T> static LINA_HD T backward(T, T y, T dy, T) { return dy * (T(1) - y * y); }
};
struct Sigmoid {  // dy/dx = y (1 - y)
  template <class T> static LINA_HD T forward(T x, T) {
    // split by sign so exp never overflows
    if (x >= T(0)) return T(1) / (T(1) + exp(-x));
    T e = exp(x);
    return e / (T(1) + e);
  }
  template <class T> static LINA_HD T backward(T, T y, T dy, T) { return dy * y * (T(1) - y); }
};
struct LogSigmoid {  // y = log σ(x) = -softplus(-x), stable; dy/dx = σ(-x) = 1 - σ(x)
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
  template <class T> static LINA_HD T forward(T x, T) { return x * Sigmoid::forward(x, T(0)); }
  template <class T> static LINA_HD T backward(T x, T, T dy, T) {
    T s = Sigmoid::forward(x, T(0));
    return dy * s * (T(1) + x * (T(1) - s));
  }
};
struct Gelu {  // tanh form: y = ½x(1 + tanh u), u = √(2/π)(x + 0.044715x³)
  template <class T> static LINA_HD T forward(T x, T) {
    const T c = T(0.7978845608028654);  // √(2/π)
    return T(0.5) * x * (T(1) + tanh(c * (x + T(0.044715) * x * x * x)));
  }
  template <class T> static LINA_HD T backward(T x, T, T dy, T) {
    const T c = T(0.7978845608028654);
    T th = tanh(c * (x + T(0.044715) * x * x * x));
    T du = c * (T(1) + T(3) * T(0.044715) * x * x);
    return dy * (T(0.5) * (T(1) + th) + T(0.5) * x * (T(1) - th * th) * du);
  }
};
struct Elu {  // y = x (x > 0), p (eˣ - 1) (x ≤ 0); dy/dx = 1 or y + p
  template <class T> static LINA_HD T forward(T x, T p) { return x > T(0) ? x : p * (exp(x) - T(1)); }
  template <class T> static LINA_HD T backward(T x, T y, T dy, T p) { return x > T(0) ? dy : dy * (y + p); }
};
struct Relu {
  template <class T> static LINA_HD T forward(T x, T) { return x > T(0) ? x : T(0); }
  template <class T> static LINA_HD T backward(T x, T, T dy, T) { return x > T(0) ? dy : T(0); }
};

struct Add { template <class T> static LINA_HD T apply(T a, T b) { return a + b; } };
struct Sub { template <class T> static LINA_HD T apply(T a, T b) { return a - b; } };
struct Mul { template <class T> static LINA_HD T apply(T a, T b) { return a * b; } };
struct Div { template <class T> static LINA_HD T apply(T a, T b) { return a / b; } };

// Calls fn(math::X{}) for the runtime kind: the switch happens once per
// kernel launch, the loop inside is compiled per function.
template <class Fn>
LINA_HD void visit_unary(UnaryFn f, Fn&& fn) {
  switch (f) {
    case UnaryFn::Neg: fn(Neg{}); break;
    case UnaryFn::AddScalar: fn(AddScalar{}); break;
    case UnaryFn::MulScalar: fn(MulScalar{}); break;
    case UnaryFn::PowScalar: fn(PowScalar{}); break;
    case UnaryFn::Exp: fn(Exp{}); break;
    case UnaryFn::Log: fn(Log{}); break;
    case UnaryFn::Sqrt: fn(Sqrt{}); break;
    case UnaryFn::Rsqrt: fn(Rsqrt{}); break;
    case UnaryFn::Tanh: fn(Tanh{}); break;
    case UnaryFn::Sigmoid: fn(Sigmoid{}); break;
    case UnaryFn::LogSigmoid: fn(LogSigmoid{}); break;
    case UnaryFn::Silu: fn(Silu{}); break;
    case UnaryFn::Gelu: fn(Gelu{}); break;
    case UnaryFn::Elu: fn(Elu{}); break;
    case UnaryFn::Relu: fn(Relu{}); break;
    case UnaryFn::Count: break;
  }
}
template <class Fn>
LINA_HD void visit_binary(BinaryFn f, Fn&& fn) {
  switch (f) {
    case BinaryFn::Add: fn(Add{}); break;
    case BinaryFn::Sub: fn(Sub{}); break;
    case BinaryFn::Mul: fn(Mul{}); break;
    case BinaryFn::Div: fn(Div{}); break;
    case BinaryFn::Count: break;
  }
}

}  // namespace math
}  // namespace lina
