// The differentiable functions models are written with. Each records one
// Node (see autograd/ops/<family>.cpp, where the forward and the
// hand-written backward of each op sit side by side).
#pragma once
#include <vector>

#include "autograd/var.h"

namespace lina {

// ---- elementwise, binary (NumPy broadcasting) — ops/elementwise.cpp ----
Var add(const Var& a, const Var& b);
Var sub(const Var& a, const Var& b);
Var mul(const Var& a, const Var& b);
Var div(const Var& a, const Var& b);

// ---- elementwise, unary — ops/elementwise.cpp ----
Var neg(const Var& x);
Var add_scalar(const Var& x, double c);  // x + c
Var mul_scalar(const Var& x, double c);  // c x
Var pow_scalar(const Var& x, double p);  // x^p
Var exp(const Var& x);
Var log(const Var& x);
Var sqrt(const Var& x);
Var rsqrt(const Var& x);
Var tanh(const Var& x);
Var sigmoid(const Var& x);
Var log_sigmoid(const Var& x);  // log σ(x) = −softplus(−x), stable
Var silu(const Var& x);
Var gelu(const Var& x);              // tanh form
Var elu(const Var& x, double alpha = 1.0);
Var relu(const Var& x);

inline Var operator+(const Var& a, const Var& b) { return add(a, b); }
inline Var operator-(const Var& a, const Var& b) { return sub(a, b); }
inline Var operator*(const Var& a, const Var& b) { return mul(a, b); }
inline Var operator/(const Var& a, const Var& b) { return div(a, b); }
inline Var operator-(const Var& x) { return neg(x); }

// ---- matrix products — ops/matmul.cpp ----
// op(a) · op(b) over the last two dims; batch dims equal, or either side a
// plain matrix shared by the batch (see core/layout.h).
Var matmul(const Var& a, const Var& b, bool ta = false, bool tb = false);

// ---- reductions — ops/reduce.cpp ----
Var sum(const Var& x, int axis, bool keepdim = false);
Var mean(const Var& x, int axis, bool keepdim = false);
Var sum_all(const Var& x);
Var mean_all(const Var& x);

// ---- shape — ops/shape.cpp ----
Var reshape(const Var& x, const Shape& shape);
Var permute(const Var& x, const std::vector<int>& perm);
Var transpose(const Var& x, int axis0, int axis1);  // a permute
Var expand(const Var& x, const Shape& shape);       // broadcast, copying
Var slice(const Var& x, int axis, int64_t start, int64_t length);
Var concat(const std::vector<Var>& parts, int axis);
std::vector<Var> split(const Var& x, int axis, const std::vector<int64_t>& sizes);  // slices


// ---- softmax, log-softmax, cross-entropy, embedding ----
// [anchor:SOFTMAX-LOSS]

// ---- rms_norm, l2_norm, causal conv1d, rope ----
// [anchor:NORM-CONV-ROPE]

// ---- scan: the linear / delta / gated-delta recurrence ----
// [anchor:SCAN]

}  // namespace lina
