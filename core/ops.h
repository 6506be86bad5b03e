// The list of every differentiable op lina records on the tape. The names
// feed the graph dump, error messages and the test that every op has a
// gradient check (tests/test_gradcheck_coverage.cpp). To add an op: add an
// X(Name, op_name) line to LINA_OPS (elementwise functions go in the lists in
// core/elementwise_math.h instead), then see docs/extending.md.
#pragma once
#include "core/elementwise_math.h"

namespace lina {

// Each entry is X(Name, op_name): OpKind::Name, named "op_name".
#define LINA_OPS(X)                                                         \
  /* elementwise, binary with broadcasting */                               \
  LINA_BINARY_FUNCTIONS(X)                                                  \
  /* elementwise, unary */                                                  \
  LINA_UNARY_FUNCTIONS(X)                                                   \
  /* matrix products */                                                     \
  X(Matmul, matmul)                                                         \
  /* reductions */                                                          \
  X(Sum, sum) X(Mean, mean)                                                 \
  /* shape */                                                               \
  X(Reshape, reshape) X(Permute, permute) X(Expand, expand) X(Slice, slice) \
  X(Concat, concat)                                                         \
  /* attention & normalisation */                                           \
  X(Softmax, softmax) X(LogSoftmax, log_softmax)                            \
  X(Attention, attention)                                                   \
  X(CrossEntropy, cross_entropy) X(Embedding, embedding)                    \
  X(RmsNorm, rms_norm) X(L2Norm, l2_norm) X(CausalConv1d, causal_conv1d)    \
  X(CausalConv1dSilu, causal_conv1d_silu) X(CausalConv1dSiluL2Norm, causal_conv1d_silu_l2_norm)        \
  X(Rope, rope) X(Dropout, dropout)                                         \
  /* the recurrence of the linear / delta / gated-delta mixers */           \
  X(Scan, scan)

// ---- generated from LINA_OPS --------------------------------------------------------------
#define LINA_ENUM_VALUE(Name, op_name) Name,
enum class OpKind { LINA_OPS(LINA_ENUM_VALUE) Count };
#undef LINA_ENUM_VALUE

#define LINA_NAME_STRING(Name, op_name) #op_name,
inline constexpr const char* kOpNames[] = {LINA_OPS(LINA_NAME_STRING)};
#undef LINA_NAME_STRING
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == int(OpKind::Count),
              "every OpKind needs a name in kOpNames");

inline const char* op_name(OpKind k) { return kOpNames[int(k)]; }

// ---- from an elementwise function to its op -------------------------------------------------
// LINA_OPS starts with the binary list, then the unary list, so each function
// is a fixed distance from the first op of its family.
constexpr OpKind op_kind_of(BinaryFn f) { return OpKind(int(OpKind::Add) + int(f)); }
constexpr OpKind op_kind_of(UnaryFn f) { return OpKind(int(OpKind::Neg) + int(f)); }

// The proof, one line per function: op_kind_of(Fn::Name) is OpKind::Name.
#define LINA_CHECK_OP_KIND(Name, op_name)                  \
  static_assert(op_kind_of(BinaryFn::Name) == OpKind::Name, \
                "op_kind_of(BinaryFn::" #Name ") is not OpKind::" #Name);
LINA_BINARY_FUNCTIONS(LINA_CHECK_OP_KIND)
#undef LINA_CHECK_OP_KIND
#define LINA_CHECK_OP_KIND(Name, op_name)                 \
  static_assert(op_kind_of(UnaryFn::Name) == OpKind::Name, \
                "op_kind_of(UnaryFn::" #Name ") is not OpKind::" #Name);
LINA_UNARY_FUNCTIONS(LINA_CHECK_OP_KIND)
#undef LINA_CHECK_OP_KIND

}  // namespace lina
