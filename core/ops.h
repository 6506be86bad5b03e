// The list of every differentiable op lina records on the tape. The names
// feed the graph dump, error messages and the test that every op has a
// gradient check (tests/test_gradcheck_table.cpp). To add an op: add it here
// and to kOpNames (the static_assert keeps them in step), then see README.md
// "Adding an op".
#pragma once

namespace lina {

enum class OpKind {
  // elementwise, binary with broadcasting
  Add, Sub, Mul, Div,
  // elementwise, unary (the order matches UnaryFn in core/elementwise_math.h)
  Neg, AddScalar, MulScalar, PowScalar, Exp, Log, Sqrt, Rsqrt, Tanh,
  Sigmoid, LogSigmoid, Silu, Gelu, Elu, Relu,
  // matrix products
  Matmul,
  // reductions
  Sum, Mean,
  // shape
  Reshape, Permute, Expand, Slice, Concat,
  // attention & normalisation
  Softmax, LogSoftmax, CrossEntropy, Embedding, RmsNorm, L2Norm, CausalConv1d, Rope,
  // the recurrence of the linear / delta / gated-delta mixers
  Scan,
  Count
};

inline constexpr const char* kOpNames[] = {
  "add", "sub", "mul", "div",
  "neg", "add_scalar", "mul_scalar", "pow_scalar", "exp", "log", "sqrt", "rsqrt", "tanh",
  "sigmoid", "log_sigmoid", "silu", "gelu", "elu", "relu",
  "matmul",
  "sum", "mean",
  "reshape", "permute", "expand", "slice", "concat",
  "softmax", "log_softmax", "cross_entropy", "embedding", "rms_norm", "l2_norm",
  "causal_conv1d", "rope",
  "scan",
};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == int(OpKind::Count),
              "every OpKind needs a name in kOpNames");

inline const char* op_name(OpKind k) { return kOpNames[int(k)]; }

}  // namespace lina
