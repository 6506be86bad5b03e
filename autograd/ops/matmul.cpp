// Matrix product. With A' = op(A), B' = op(B) and C = A'B':
//   dA' = dC B'ᵀ      dB' = A'ᵀ dC
// and dA = dA' (or dA'ᵀ when A was used transposed), likewise for B.
#include "autograd/functions.h"
#include "core/layout.h"

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

  // dA = dC B'ᵀ (or B' dCᵀ when A was read transposed)
  Tensor grad_a(const Tensor& dc) const {
    Tensor da = ta ? lina::matmul(b, dc, tb, true)     // dA = B' dCᵀ
                   : lina::matmul(dc, b, false, !tb);  // dA = dC B'ᵀ
    return sum_to(da, a.shape());                      // a shared by a batch: sum over it
  }
  // A' and dC as dB's product reads them: where b is one matrix used by
  // every batch entry (a linear layer), the batch folded into the rows, so
  // that dB is one tall product instead of a sum of many.
  std::pair<Tensor, Tensor> grad_b_operands(const Tensor& dc) const {
    if (b.ndim() == 2 && a.ndim() > 2 && !ta)
      return {a.reshape({-1, a.dim(-1)}), dc.reshape({-1, dc.dim(-1)})};
    return {a, dc};
  }
  // dB = A'ᵀ dC (or dCᵀ A' when B was read transposed)
  Tensor grad_b(const Tensor& dc) const {
    auto [a2, dc2] = grad_b_operands(dc);
    Tensor db = tb ? lina::matmul(dc2, a2, true, ta)     // dB = dCᵀ A'
                   : lina::matmul(a2, dc2, !ta, false);  // dB = A'ᵀ dC
    return sum_to(db, b.shape());
  }
  // dB added into `sum` by the GEMM itself, where the product has B's shape
  // (B one matrix, the batch folded into the rows); false where it has not.
  bool add_grad_b_into(const Tensor& dc, Tensor& sum) const {
    auto [a2, dc2] = grad_b_operands(dc);
    if (a2.ndim() != 2 || b.ndim() != 2) return false;
    if (tb) lina::matmul_add(dc2, a2, true, ta, sum);  // dB += dCᵀ A'
    else lina::matmul_add(a2, dc2, !ta, false, sum);   // dB += A'ᵀ dC
    return true;
  }

  std::vector<Tensor> backward(const Tensor& dc) override {
    Tensor da, db;
    if (inputs[0].requires_grad()) da = grad_a(dc);
    if (inputs[1].requires_grad()) db = grad_b(dc);
    return {da, db};
  }

  // Each gradient with somewhere to go already is added there by the GEMM
  // itself (beta = 1): dA into the gradient pending for A (x of a linear
  // layer that feeds more than one product), where dC B'ᵀ has A's shape (A
  // not transposed, not shared by a batch); dB into a weight's .grad (its
  // slice of the parameters' gradient buffer), where the product has B's
  // shape. No product tensor and no separate add for either.
  std::vector<Tensor> backward_into(const Tensor& dc, const std::vector<Tensor*>& sums) override {
    if (!sums[0] && !sums[1]) return backward(dc);
    Tensor da, db;
    if (inputs[0].requires_grad()) {
      if (sums[0] && !ta && a.ndim() >= b.ndim()) lina::matmul_add(dc, b, false, !tb, *sums[0]);  // dA += dC B'ᵀ
      else da = grad_a(dc);
    }
    if (inputs[1].requires_grad() && !(sums[1] && add_grad_b_into(dc, *sums[1]))) db = grad_b(dc);
    return {da, db};
  }
};

Var matmul(const Var& a, const Var& b, bool ta, bool tb) { return MatmulOp::apply(a, b, ta, tb); }

}  // namespace lina
