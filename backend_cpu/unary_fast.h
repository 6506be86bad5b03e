// Vectorised float32 versions of the unary functions a training step spends
// its time in (GELU in the MLP, SiLU after the convolutions, σ for β,
// log σ for the decays, elu for linear attention's feature map,
// relu, exp, tanh), on Eigen's packet math: whole SIMD registers at a
// time instead of one scalar libm call per element. The scalar maths of
// core/elementwise_math.h stays the reference: double always uses it, and
// tests/test_unary_fast.cpp compares these with it.
//
// Each function returns false when it has no fast version of f, and the
// caller takes the scalar loop.
#pragma once
#include <cstdint>

#include "core/elementwise_math.h"

namespace lina::cpu {

// y = f(x) over [0, n); p is f's scalar (elu's α), as in elementwise_math.h
bool unary_forward_fast(UnaryFn f, const float* x, float* y, int64_t n, float p = 0.0f);
// dx = dy · f'(x) over [0, n); y = f(x) from the forward
bool unary_backward_fast(UnaryFn f, const float* x, const float* y, const float* dy, float* dx,
                         int64_t n, float p = 0.0f);

// SiLU's forward and backward over [0, n) on the calling thread, without
// starting threads or allocating: what the two functions above run for
// UnaryFn::Silu, for a caller that is already inside a parallel loop (the
// fused conv + SiLU of backend_cpu/norm_conv_rope.cpp). y, dx may be x.
void silu_forward_serial(const float* x, float* y, int64_t n);
void silu_backward_serial(const float* x, const float* dy, float* dx, int64_t n);
// The same two split at σ(x), for a caller that needs y = x σ(x) before it
// has dy (the fused conv + SiLU + L2 norm's backward): the first also keeps
// s = σ(x), which the second reads instead of forming it again. The same
// bits as the two above.
void silu_forward_keep_logistic_serial(const float* x, float* y, float* s, int64_t n);
void silu_backward_from_logistic_serial(const float* x, const float* s, const float* dy,
                                        float* dx, int64_t n);

}  // namespace lina::cpu
