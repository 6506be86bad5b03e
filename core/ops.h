// OpKind: every differentiable op lina records on the tape, generated from
// the OP(Name, op_name) entries of core/op_list.h (the elementwise functions
// come from the lists in core/elementwise_math.h). The names feed the graph
// dump, error messages and the test that every op has a gradient check
// (tests/test_gradcheck_coverage.cpp). Adding an op: docs/extending.md.
#pragma once
#include "core/op_list.h"

namespace lina {

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
