// One op, one type: every OpKind records a Node of its own C++ type, with its
// own backward (so `break lina::<Op>::backward` in gdb stops in that op only).
// For every OpKind this builds a tiny graph that records the op and looks at
// the type of the node it made.
#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <string>
#include <typeindex>
#include <vector>

#include "autograd/functions.h"

using namespace lina;

namespace {

// A float64 leaf that requires grad, filled with values in (0.5, 1.5) so
// log, sqrt, pow and div are all defined.
Var leaf(const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::f64);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = 0.5 + double(i % 7) / 7.0;
  return Var(t, /*requires_grad=*/true);
}
Tensor ids(const std::vector<int32_t>& values, const Shape& shape) {
  return Tensor::from_vector<int32_t>(values, shape);
}

Var x23() { return leaf({2, 3}); }

struct OpCase {
  OpKind kind;
  std::function<Var()> record;  // returns a Var whose grad_fn is that op's node
};

std::vector<OpCase> op_cases() {
  return {
      {OpKind::Add, [] { return add(x23(), x23()); }},
      {OpKind::Sub, [] { return sub(x23(), x23()); }},
      {OpKind::Mul, [] { return mul(x23(), x23()); }},
      {OpKind::Div, [] { return div(x23(), x23()); }},
      {OpKind::Neg, [] { return neg(x23()); }},
      {OpKind::AddScalar, [] { return add_scalar(x23(), 2.0); }},
      {OpKind::MulScalar, [] { return mul_scalar(x23(), 2.0); }},
      {OpKind::PowScalar, [] { return pow_scalar(x23(), 2.0); }},
      {OpKind::Exp, [] { return exp(x23()); }},
      {OpKind::Log, [] { return log(x23()); }},
      {OpKind::Sqrt, [] { return sqrt(x23()); }},
      {OpKind::Rsqrt, [] { return rsqrt(x23()); }},
      {OpKind::Tanh, [] { return tanh(x23()); }},
      {OpKind::Sigmoid, [] { return sigmoid(x23()); }},
      {OpKind::LogSigmoid, [] { return log_sigmoid(x23()); }},
      {OpKind::Silu, [] { return silu(x23()); }},
      {OpKind::Gelu, [] { return gelu(x23()); }},
      {OpKind::Elu, [] { return elu(x23(), 1.0); }},
      {OpKind::Relu, [] { return relu(x23()); }},
      {OpKind::Matmul, [] { return matmul(leaf({2, 3}), leaf({3, 4})); }},
      {OpKind::Sum, [] { return sum(x23(), 1); }},
      {OpKind::Mean, [] { return mean(x23(), 1); }},
      {OpKind::Reshape, [] { return reshape(x23(), {3, 2}); }},
      {OpKind::Permute, [] { return permute(x23(), {1, 0}); }},
      {OpKind::Expand, [] { return expand(leaf({1, 3}), {2, 3}); }},
      {OpKind::Slice, [] { return slice(x23(), 1, 0, 2); }},
      {OpKind::Concat, [] { return concat({x23(), x23()}, 0); }},
      {OpKind::Softmax, [] { return softmax(x23()); }},
      {OpKind::LogSoftmax, [] { return log_softmax(x23()); }},
      {OpKind::Attention, [] { return causal_attention(leaf({1, 2, 2, 4}), leaf({1, 2, 1, 4}), leaf({1, 2, 1, 4}), 0.5); }},
      {OpKind::CrossEntropy, [] { return cross_entropy(x23(), ids({0, 2}, {2})); }},
      {OpKind::Embedding, [] { return embedding(leaf({4, 3}), ids({1, 3}, {2})); }},
      {OpKind::RmsNorm, [] { return rms_norm(leaf({2, 3}), leaf({3})); }},
      {OpKind::L2Norm, [] { return l2_norm(x23()); }},
      {OpKind::CausalConv1d, [] { return causal_conv1d(leaf({1, 4, 3}), leaf({3, 2})); }},
      {OpKind::CausalConv1dSilu, [] { return causal_conv1d_silu(leaf({1, 4, 3}), leaf({3, 2})); }},
      {OpKind::CausalConv1dSiluL2Norm, [] { return causal_conv1d_silu_l2_norm(leaf({1, 4, 4}), leaf({4, 2}), 2); }},
      {OpKind::Rope, [] { return rope(leaf({1, 2, 1, 4})); }},
      {OpKind::Dropout, [] { return dropout(x23(), DropoutKey{0.5, 3, 1, 2}); }},
      {OpKind::Scan, [] {
         ScanOptions linear{ScanRule::Linear, ScanForm::Sequential, 2};
         return scan(linear, leaf({1, 2, 1, 2}), leaf({1, 2, 1, 2}), leaf({1, 2, 1, 2}), Var(),
                     Var());
       }},
  };
}

}  // namespace

TEST_CASE("every op kind records a node of its own type, with its own backward") {
  std::map<int, std::type_index> type_of_kind;  // OpKind -> the node's dynamic type
  for (const OpCase& c : op_cases()) {
    INFO("op '" << op_name(c.kind) << "'");
    Var out = c.record();
    Node* node = out.grad_fn();
    REQUIRE(node != nullptr);
    CHECK(node->kind == c.kind);
    CHECK(type_of_kind.count(int(c.kind)) == 0);  // one row per kind
    type_of_kind.emplace(int(c.kind), std::type_index(typeid(*node)));
  }

  // Every OpKind has a row ...
  for (int k = 0; k < int(OpKind::Count); ++k) {
    INFO("op '" << op_name(OpKind(k)) << "' has no row in op_cases()");
    CHECK(type_of_kind.count(k) == 1);
  }
  // ... and no two kinds share a node type.
  std::map<std::type_index, int> kind_of_type;
  for (const auto& [kind, type] : type_of_kind) {
    auto [it, inserted] = kind_of_type.emplace(type, kind);
    INFO("ops '" << op_name(OpKind(it->second)) << "' and '" << op_name(OpKind(kind))
                 << "' share the node type " << type.name());
    CHECK(inserted);
  }
}

TEST_CASE("the elementwise names come from the one op list") {
  for (int f = 0; f < int(BinaryFn::Count); ++f)
    CHECK(std::string(binary_fn_name(BinaryFn(f))) == op_name(op_kind_of(BinaryFn(f))));
  for (int f = 0; f < int(UnaryFn::Count); ++f)
    CHECK(std::string(unary_fn_name(UnaryFn(f))) == op_name(op_kind_of(UnaryFn(f))));
  // a few spelled out, as checkpoints and messages use them
  CHECK(std::string(binary_fn_name(BinaryFn::Div)) == "div");
  CHECK(std::string(unary_fn_name(UnaryFn::LogSigmoid)) == "log_sigmoid");
  CHECK(std::string(op_name(OpKind::CausalConv1d)) == "causal_conv1d");
  CHECK(std::string(op_name(OpKind::CausalConv1dSilu)) == "causal_conv1d_silu");
  CHECK(std::string(op_name(OpKind::CausalConv1dSiluL2Norm)) == "causal_conv1d_silu_l2_norm");
  CHECK(std::string(op_name(OpKind::Scan)) == "scan");
}
