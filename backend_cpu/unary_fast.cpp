// Vectorised unary functions (see unary_fast.h). The work is cut into blocks
// of kBlock elements, spread over threads; inside a block Eigen evaluates the
// array expression a SIMD register at a time, with its own vectorised tanh,
// exp and logistic (σ). Each block is computed the same way whatever thread
// takes it, so the result does not depend on the number of threads.
#include "backend_cpu/unary_fast.h"

#include <Eigen/Core>
#include <algorithm>

#include "backend_cpu/parallel.h"

namespace lina::cpu {

namespace {

using Array = Eigen::Array<float, Eigen::Dynamic, 1>;
using In = Eigen::Map<const Array>;
using Out = Eigen::Map<Array>;

constexpr int64_t kBlock = 1 << 14;
constexpr float kGeluC = float(math::Gelu::kC);  // √(2/π)
constexpr float kGeluA = float(math::Gelu::kA);

// Calls body(offset, length) for every block of [0, n), in parallel when n
// is large enough to pay for the threads.
template <class Body>
void for_blocks(int64_t n, Body body) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  LINA_PARALLEL_FOR_IF(n > kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) body(b * kBlock, std::min(kBlock, n - b * kBlock));
}

// SiLU (and GELU's backward) in stretches this long, σ(x) (tanh u) held in
// a fixed-size array on the stack: on the short rows the fused conv calls
// it with (128 floats), x σ(x) as one dynamic-size Eigen expression ran 2.6×
// slower per element than on long ones.
constexpr int64_t kStretch = 256;
using Stretch = Eigen::Array<float, Eigen::Dynamic, 1, Eigen::ColMajor, kStretch, 1>;

// Calls body(offset, length) for every stretch of [0, n), on this thread.
template <class Body>
void for_stretches(int64_t n, Body body) {
  for (int64_t o = 0; o < n; o += kStretch) body(o, std::min(kStretch, n - o));
}

// SiLU's derivative times dy, from x and s = σ(x): dy σ(x)(1 + x(1 − σ(x))).
template <class S>
auto silu_grad(const In& X, const S& s, const In& dY) {
  return dY * s * (1.0f + X * (1.0f - s));
}

}  // namespace

void silu_forward_serial(const float* x, float* y, int64_t n) {  // x σ(x)
  for_stretches(n, [&](int64_t o, int64_t m) {
    In X(x + o, m);
    Stretch s = X.logistic();
    Out(y + o, m) = X * s;
  });
}

void silu_backward_serial(const float* x, const float* dy, float* dx, int64_t n) {
  for_stretches(n, [&](int64_t o, int64_t m) {
    In X(x + o, m), dY(dy + o, m);
    Stretch s = X.logistic();
    Out(dx + o, m) = silu_grad(X, s, dY);
  });
}

void silu_forward_keep_logistic_serial(const float* x, float* y, float* s, int64_t n) {
  for_stretches(n, [&](int64_t o, int64_t m) {
    In X(x + o, m);
    Out S(s + o, m);
    S = X.logistic();
    Out(y + o, m) = X * S;
  });
}

void silu_backward_from_logistic_serial(const float* x, const float* s, const float* dy,
                                        float* dx, int64_t n) {
  for_stretches(n, [&](int64_t o, int64_t m) {
    In X(x + o, m), S(s + o, m), dY(dy + o, m);
    Out(dx + o, m) = silu_grad(X, S, dY);
  });
}

bool unary_forward_fast(UnaryFn f, const float* x, float* y, int64_t n, float p) {
  switch (f) {
    case UnaryFn::Gelu:  // ½x(1 + tanh(√(2/π)(x + 0.044715x³)))
      for_blocks(n, [&](int64_t o, int64_t m) {
        In X(x + o, m);
        Out(y + o, m) = 0.5f * X * (1.0f + (kGeluC * (X + kGeluA * X.cube())).tanh());
      });
      return true;
    case UnaryFn::Silu:
      for_blocks(n, [&](int64_t o, int64_t m) { silu_forward_serial(x + o, y + o, m); });
      return true;
    case UnaryFn::Sigmoid:
      for_blocks(n, [&](int64_t o, int64_t m) { Out(y + o, m) = In(x + o, m).logistic(); });
      return true;
    case UnaryFn::Exp:
      for_blocks(n, [&](int64_t o, int64_t m) { Out(y + o, m) = In(x + o, m).exp(); });
      return true;
    case UnaryFn::Tanh:
      for_blocks(n, [&](int64_t o, int64_t m) { Out(y + o, m) = In(x + o, m).tanh(); });
      return true;
    case UnaryFn::LogSigmoid:  // −(max(−x, 0) + log(1 + e^−|x|)), never log(σ(x))
      for_blocks(n, [&](int64_t o, int64_t m) {
        In X(x + o, m);
        Out(y + o, m) = -((-X).max(0.0f) + (-X.abs()).exp().log1p());
      });
      return true;
    case UnaryFn::Elu:  // x (x > 0), p (eˣ − 1) (x ≤ 0), as max(x, 0) + p (e^min(x, 0) − 1):
      // plain packet arithmetic (Eigen's select would take the exp one scalar at a time)
      for_blocks(n, [&](int64_t o, int64_t m) {
        In X(x + o, m);
        Out(y + o, m) = X.max(0.0f) + p * (X.min(0.0f).exp() - 1.0f);
      });
      return true;
    case UnaryFn::Relu:
      for_blocks(n, [&](int64_t o, int64_t m) { Out(y + o, m) = In(x + o, m).max(0.0f); });
      return true;
    default:
      return false;
  }
}

bool unary_backward_fast(UnaryFn f, const float* x, const float* y, const float* dy, float* dx,
                         int64_t n, float p) {
  switch (f) {
    case UnaryFn::Gelu:  // th = tanh u: ½(1 + th) + ½x(1 − th²)·√(2/π)(1 + 3·0.044715x²)
      // th is used twice, so it is formed first, a stretch at a time on the
      // stack (in L1): as one Array per 16k-element block it cost a heap
      // buffer and a pass through L2, 27–35 % of the time (same bits).
      for_blocks(n, [&](int64_t o, int64_t m) {
        for_stretches(m, [&](int64_t s, int64_t k) {
          In X(x + o + s, k), dY(dy + o + s, k);
          Stretch th = (kGeluC * (X + kGeluA * X.cube())).tanh();
          Out(dx + o + s, k) = dY * (0.5f * (1.0f + th) + 0.5f * X * (1.0f - th.square()) * kGeluC *
                                                               (1.0f + 3.0f * kGeluA * X.square()));
        });
      });
      return true;
    case UnaryFn::Silu:
      for_blocks(n, [&](int64_t o, int64_t m) { silu_backward_serial(x + o, dy + o, dx + o, m); });
      return true;
    case UnaryFn::Sigmoid:  // y(1 − y)
      for_blocks(n, [&](int64_t o, int64_t m) {
        In Y(y + o, m), dY(dy + o, m);
        Out(dx + o, m) = dY * Y * (1.0f - Y);
      });
      return true;
    case UnaryFn::Exp:  // y
      for_blocks(n, [&](int64_t o, int64_t m) { Out(dx + o, m) = In(dy + o, m) * In(y + o, m); });
      return true;
    case UnaryFn::Tanh:  // 1 − y²
      for_blocks(n, [&](int64_t o, int64_t m) {
        In Y(y + o, m);
        Out(dx + o, m) = In(dy + o, m) * (1.0f - Y.square());
      });
      return true;
    case UnaryFn::LogSigmoid:  // σ(−x)
      for_blocks(n, [&](int64_t o, int64_t m) {
        Out(dx + o, m) = In(dy + o, m) * (-In(x + o, m)).logistic();
      });
      return true;
    case UnaryFn::Elu:  // 1 (x > 0), y + p (x ≤ 0)
      for_blocks(n, [&](int64_t o, int64_t m) {
        In X(x + o, m), Y(y + o, m), dY(dy + o, m);
        Out(dx + o, m) = (X > 0.0f).select(dY, dY * (Y + p));
      });
      return true;
    case UnaryFn::Relu:
      for_blocks(n, [&](int64_t o, int64_t m) {
        In X(x + o, m), dY(dy + o, m);
        Out(dx + o, m) = (X > 0.0f).select(dY, 0.0f);
      });
      return true;
    default:
      return false;
  }
}

}  // namespace lina::cpu
