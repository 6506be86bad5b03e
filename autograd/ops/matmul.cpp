// Matrix product. With A' = op(A), B' = op(B) and C = A'B':
//   dA' = dC B'ᵀ      dB' = A'ᵀ dC
// and dA = dA' (or dA'ᵀ when A was used transposed), likewise for B.
#include "autograd/functions.h"
#include "core/layout.h"

namespace lina {

struct MatmulOp : Node {
  MatmulOp() : Node(OpKind::Matmul) {}
  Tensor a, b;  // saved operands
  SavedTensors saved() const override { return {{"a", a}, {"b", b}}; }
  bool ta = false, tb = false;

  static Var apply(const Var& a, const Var& b, bool ta, bool tb) {
    Tensor c = lina::matmul(a.data(), b.data(), ta, tb);
    if (!needs_grad({a, b})) return Var(c);
    auto node = std::make_shared<MatmulOp>();
    node->a = a.data();
    node->b = b.data();
    node->ta = ta;
    node->tb = tb;
    return record(c, node, {a, b});
  }

  std::vector<Tensor> backward(const Tensor& dc) override {
    Tensor da, db;
    if (inputs[0].requires_grad()) {
      da = ta ? lina::matmul(b, dc, tb, true)     // dA = B' dCᵀ
              : lina::matmul(dc, b, false, !tb);  // dA = dC B'ᵀ
      da = sum_to(da, a.shape());                 // a shared by a batch: sum over it
    }
    if (inputs[1].requires_grad()) {
      Tensor a2 = a, dc2 = dc;
      if (b.ndim() == 2 && a.ndim() > 2 && !ta) {
        // b is one matrix used by every batch entry (a linear layer): fold the
        // batch into the rows so dB is one tall product instead of a sum of many.
        a2 = a.reshape({-1, a.dim(-1)});
        dc2 = dc.reshape({-1, dc.dim(-1)});
      }
      db = tb ? lina::matmul(dc2, a2, true, ta)     // dB = dCᵀ A'
              : lina::matmul(a2, dc2, !ta, false);  // dB = A'ᵀ dC
      db = sum_to(db, b.shape());
    }
    return {da, db};
  }
};

Var matmul(const Var& a, const Var& b, bool ta, bool tb) { return MatmulOp::apply(a, b, ta, tb); }

}  // namespace lina
