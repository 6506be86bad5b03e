// One op, one type: every OpKind records a Node of its own C++ type, with its
// own backward (so `break lina::<Op>::backward` in gdb stops in that op only).
// Every row of an autograd op in the op table (tests/op_table.cpp) is run
// once, and the type of the node that made its first output is looked at;
// the scan, whose rows there run its kernels, records its node here.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <typeindex>
#include <vector>

#include "autograd/functions.h"
#include "tests/op_check.h"

using namespace lina;

TEST_CASE("every op kind records a node of its own type, with its own backward") {
  std::map<int, std::type_index> type_of_kind;  // OpKind -> the node's dynamic type
  auto record = [&](OpKind kind, const Var& out) {
    INFO("op '" << op_name(kind) << "'");
    Node* node = out.grad_fn();
    REQUIRE(node != nullptr);
    CHECK(node->kind == kind);
    const std::type_index type(typeid(*node));
    auto [it, inserted] = type_of_kind.emplace(int(kind), type);
    CHECK(it->second == type);  // every row of a kind: the same type
  };
  for (const test::OpRow& row : test::op_table()) {
    if (!row.no_gradient.empty()) continue;
    INFO("row " << row.name());
    const std::optional<OpKind> kind = test::op_kind_named(row.op);
    REQUIRE(kind);
    record(*kind, row.run(test::row_leaves(row, DType::F64, Device::Cpu)).at(0));
  }
  {
    Rng rng(1);
    auto leaf = [&] { return Var(Tensor::randn({1, 2, 1, 2}, rng, 1.0, 0.0, DType::F64), true); };
    ScanOptions linear{ScanRule::Linear, ScanForm::Sequential, 2};
    record(OpKind::Scan, scan(linear, leaf(), leaf(), leaf(), Var(), Var()));
  }

  // Every OpKind has a row ...
  for (int k = 0; k < int(OpKind::Count); ++k) {
    INFO("op '" << op_name(OpKind(k)) << "' has no row in the op table");
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
  CHECK(std::string(op_name(OpKind::BetaLogAlpha)) == "beta_log_alpha");
  CHECK(std::string(op_name(OpKind::Scan)) == "scan");
}
