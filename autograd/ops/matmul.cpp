// Matrix product. With A' = op(A), B' = op(B) and C = A'B':
//   dA' = dC B'ᵀ      dB' = A'ᵀ dC
// and dA = dA' (or dA'ᵀ when A was used transposed), likewise for B.
#include "autograd/functions.h"
#include "dispatch/layout.h"

namespace lina {

struct MatmulOp : Node {
  MatmulOp() : Node(OpKind::Matmul) { adds_into_sums = true; }
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

  // Each gradient comes back as a tensor, or, given `sum` (somewhere it
  // goes already) and a product of its input's shape, is added into *sum by
  // the GEMM itself (beta = 1: no product tensor, no separate add) and an
  // undefined Tensor comes back.

  // dA = dC B'ᵀ (or B' dCᵀ when A was read transposed). Added into `sum`
  // (the gradient pending for x of a linear layer that feeds more than one
  // product) where dC B'ᵀ has A's shape: A not transposed, not shared by a batch.
  Tensor grad_a(const Tensor& dc, Tensor* sum = nullptr) const {
    if (sum && !ta && a.ndim() >= b.ndim()) {
      lina::matmul_add(dc, b, false, !tb, *sum);  // dA += dC B'ᵀ
      return Tensor();
    }
    Tensor da = ta ? lina::matmul(b, dc, tb, true)     // dA = B' dCᵀ
                   : lina::matmul(dc, b, false, !tb);  // dA = dC B'ᵀ
    return sum_to(da, a.shape());                      // a shared by a batch: sum over it
  }
  // dB = A'ᵀ dC (or dCᵀ A' when B was read transposed). Added into `sum` (a
  // weight's .grad, its slice of the parameters' gradient buffer) where the
  // product has B's shape: B one matrix, A' one matrix or a batch folded
  // into its rows.
  Tensor grad_b(const Tensor& dc, Tensor* sum = nullptr) const {
    Tensor a2 = a, dc2 = dc;
    if (b.ndim() == 2 && a.ndim() > 2 && !ta) {
      // b is one matrix used by every batch entry (a linear layer): fold the
      // batch into the rows so dB is one tall product instead of a sum of many.
      a2 = a.reshape({-1, a.dim(-1)});
      dc2 = dc.reshape({-1, dc.dim(-1)});
    }
    if (sum && a2.ndim() == 2 && b.ndim() == 2) {
      if (tb) lina::matmul_add(dc2, a2, true, ta, *sum);  // dB += dCᵀ A'
      else lina::matmul_add(a2, dc2, !ta, false, *sum);   // dB += A'ᵀ dC
      return Tensor();
    }
    Tensor db = tb ? lina::matmul(dc2, a2, true, ta)     // dB = dCᵀ A'
                   : lina::matmul(a2, dc2, !ta, false);  // dB = A'ᵀ dC
    return sum_to(db, b.shape());
  }

  std::vector<Tensor> backward(const Tensor& dc) override { return backward_into(dc, {nullptr, nullptr}); }

  // x feeds q, k and v: two of its three products add dx into the gradient
  // pending for it; every weight's dW goes into its .grad.
  std::vector<Tensor> backward_into(const Tensor& dc, const std::vector<Tensor*>& sums) override {
    Tensor da, db;
    if (inputs[0].requires_grad()) da = grad_a(dc, sums[0]);
    if (inputs[1].requires_grad()) db = grad_b(dc, sums[1]);
    return {da, db};
  }
};

Var matmul(const Var& a, const Var& b, bool ta, bool tb) { return MatmulOp::apply(a, b, ta, tb); }

}  // namespace lina
