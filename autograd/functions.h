// The differentiable functions models are written with. Each records one
// Node (see autograd/ops/<family>.cpp, where the forward and the
// hand-written backward of each op sit side by side).
#pragma once
#include <vector>

#include "autograd/var.h"
#include "core/kernel_args.h"

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
// plain matrix shared by the batch (see dispatch/layout.h).
Var matmul(const Var& a, const Var& b, bool ta = false, bool tb = false);

// ---- reductions — ops/reduce.cpp ----
Var sum(const Var& x, int axis, bool keepdim = false);
Var mean(const Var& x, int axis, bool keepdim = false);
Var sum_all(const Var& x);
Var mean_all(const Var& x);

// ---- shape — ops/shape.cpp ----
Var reshape(const Var& x, const Shape& shape);
// `out` recorded as the second output of the op that made `first` (an op of
// two outputs, see Node::second_output_grad); a plain Var where `first` has
// no op.
Var second_output(Tensor out, const Var& first);
Var permute(const Var& x, const std::vector<int>& perm);
Var transpose(const Var& x, int axis0, int axis1);  // a permute
Var expand(const Var& x, const Shape& shape);       // broadcast, copying
Var slice(const Var& x, int axis, int64_t start, int64_t length);
Var concat(const std::vector<Var>& parts, int axis);
std::vector<Var> split(const Var& x, int axis, const std::vector<int64_t>& sizes);  // slices
// concat(parts, 0), except where the parts are leaves stored one after
// another and so are their gradients (the parameters of a ParameterStore,
// registered in a row): then one leaf viewing both runs, [Σ rows, ...].
// No copy forward; a gradient added into its .grad lands in the parts'.
Var stacked_rows(const std::vector<Var>& parts);


// ---- softmax, log-softmax, cross-entropy, embedding ----
// Softmax over the last axis. causal: x is [..., Tq, Tk] and entry (i, j) is
// masked out (weight 0) when j > i + (Tk − Tq), so the last query row sees
// every key (Tk ≥ Tq; Tk > Tq when a KV cache holds earlier keys).
Var softmax(const Var& x, bool causal = false);
Var log_softmax(const Var& x);  // over the last axis
// Causal attention in one op: q [B, Tq, H, d], k and v [B, Tk, Hkv, d] (H a
// multiple of Hkv, Tk >= Tq) -> [B, Tq, H, d], softmax(scale · q kᵀ) v per head
// with query i seeing keys j <= i + Tk − Tq. The same as the composition
// permute / expand / matmul / softmax / matmul (models/attention.cpp), fused.
// With dropout (p > 0), the probabilities are dropped before the product
// with v: the same masks as dropout() on the composed weights [B, H, Tq, Tk].
Var causal_attention(const Var& q, const Var& k, const Var& v, double scale,
                     const DropoutKey& dropout = {});
// Inverted dropout: x ⊙ M, M = 0 with probability p, else 1 / (1 − p), drawn
// per element from the counter-based generator (core/philox.h), so the CPU
// and CUDA draw the same mask and the backward regenerates it. p = 0: x.
Var dropout(const Var& x, const DropoutKey& key);
// residual + dropout(x, key) in one kernel: a residual connection's sum with
// its dropped-out branch (residual and x of one shape). p = 0: add.
Var residual_dropout(const Var& residual, const Var& x, const DropoutKey& key);
// silu(gate) ⊙ up in one op (SwiGLU), gate and up of one shape.
Var swiglu(const Var& gate, const Var& up);
// The same of the two halves of z's last axis: z [..., 2F] = [gate | up] →
// [..., F], read in place (the output of one product with [W_gate; W_up]).
Var swiglu(const Var& z);
// The recurrent mixers' β and log α from one product z = x [W_b; W_a]ᵀ, in one op:
// z [B, T, N], bias [N], the first n_beta columns are β's, the rest log α's
// (0 ≤ n_beta ≤ N). Returns one flat buffer [B·T·N] holding two planes,
// each contiguous (a view of each: Tensor::view_of(out, offset, shape)):
//   β      [B, T, n_beta]      = σ(z + b)       at offset 0
//   log α  [B, T, N − n_beta]  = log σ(z + b)   at offset B·T·n_beta,
//          computed as −softplus(−(z + b)), never log(σ(z + b)).
// Saves only the output for its backward.
Var beta_log_alpha(const Var& z, const Var& bias, int64_t n_beta);  // z's last bias.dim(0) columns
// Mean over the positions where mask != 0 of −log softmax(logits)[target].
// logits [..., V] float; targets [...] int32 in [0, V); mask [...] of the
// logits' dtype (1 keep, 0 drop) or undefined (keep all). Returns a scalar.
// mask_count: one element holding Σ mask (an update plan's), so the kernel
// need not sum the mask; undefined: it does.
Var cross_entropy(const Var& logits, const Tensor& targets, const Tensor& mask = Tensor(),
                  const Tensor& mask_count = Tensor());
// out[..., :] = weight[ids[...], :]; weight [V, C], ids [...] int32 in [0, V).
Var embedding(const Var& weight, const Tensor& ids);

// ---- rms_norm, l2_norm, causal conv1d, rope ----
// y = w ⊙ x / sqrt(mean(x²) + eps) over the last axis; weight [n], x [..., n].
Var rms_norm(const Var& x, const Var& weight, double eps = 1e-5);
// The gated norm: silu(gate) ⊙ rms_norm(x, weight), in one pass each way
// (the recurrent mixers' output gate). gate has x's shape, or is a wider
// product read in place: for x [B, T, H, d], gate [B, T, ld] whose columns
// [gate_column, gate_column + H·d) are the gate (head h of token (b, t)
// gated by gate[b, t, gate_column + h·d + j]); its gradient is 0 in the
// other columns.
Var rms_norm_gated(const Var& x, const Var& weight, const Var& gate, double eps = 1e-5, int64_t gate_column = 0);
// A residual connection's sum and the RMSNorm after it, one op with two
// outputs: sum = x + dropout(h, key) (residual_dropout's), normed =
// rms_norm(sum, weight, eps); x, h [..., n], weight [n]. One kernel each way
// on CUDA instead of two; the same bits as the two ops. With keep_sum false
// the sum is no output (undefined): a last sum that only its norm reads.
struct ResidualNormed {
  Var sum;
  Var normed;
};
ResidualNormed residual_rms_norm(const Var& x, const Var& h, const DropoutKey& key, const Var& weight,
                                 double eps = 1e-5, bool keep_sum = true);
// y = scale · x / max(‖x‖, eps) over the last axis (PyTorch's F.normalize
// at scale 1; the recurrent mixers fold q's 1/√d into scale).
Var l2_norm(const Var& x, double eps = 1e-12, double scale = 1.0);
// Causal depthwise conv1d: x [B, T, C], weight [C, K] (tap K−1 = current
// token), y_t[c] = Σ_j weight[c, j] · x_{t−K+1+j}[c], zero padding on the left.
Var causal_conv1d(const Var& x, const Var& weight);
// silu(causal_conv1d(x, weight)) as one op: the conv's output is not kept
// for the backward, which recomputes it from x and weight.
Var causal_conv1d_silu(const Var& x, const Var& weight);
// l2_norm(causal_conv1d_silu(x, weight), eps, scale) for each head of `head`
// channels (x [B, T, C], C a multiple of head), in one pass.
Var causal_conv1d_silu_l2_norm(const Var& x, const Var& weight, int64_t head, double scale = 1.0,
                       double eps = 1e-12);
// The same over `planes` planes of C/planes channels ([q | k | v]: 3), only
// the first `normed` normalised, the output laid out plane by plane:
// [planes, B, T, C/planes], each plane a contiguous [B, T, C/planes]. x may
// be a wider product [B, T, ld ≥ C] whose first C = weight.dim(0) columns
// the conv reads (its gradient 0 in the others).
Var causal_conv1d_silu_l2_norm_planes(const Var& x, const Var& weight, int64_t head, int64_t planes,
                                      int64_t normed, double scale = 1.0, double eps = 1e-12);
// Rotary position embedding, interleaved pairs (the course's): x [B, T, H, D],
// dimension 2j paired with 2j + 1, angle (pos0 + t) · base^(−2j/D).
Var rope(const Var& x, int64_t pos0 = 0, double base = 10000.0);

// ---- scan: the recurrences of the recurrent mixers ----
// The recurrence of the recurrent mixers (docs/recurrence.md, docs/recurrence-gated.md):
//   S_t = S_{t−1} diag(α_t) + u_t k_tᵀ,  o_t = S_t q_t,  per (batch, head), S is d×d
//   linear: α = 1, u = v;  delta: α = 1, u = β(v − S k);  gated delta: u = β(v − α S k);
//   retention: α = α_h fixed;  gated linear: α_t per head;  channel-gated linear: α_t per key channel
// ScanRule and its properties: core/kernel_args.h
// ScanOptions (rule, form, chunk): core/kernel_args.h
// q, k, v [B, T, H, d]; beta and log_alpha (log α) [B, T, H] (log_alpha
// [B, T, H, d] for the channel-gated rule), undefined when the rule does not
// use them. initial_state [B, H, d, d] (value × key)
// or undefined for zeros (no gradient flows to it). If final_state is not
// null it receives S_T. Returns o [B, T, H, d].
Var scan(const ScanOptions& options, const Var& q, const Var& k, const Var& v, const Var& beta,
         const Var& log_alpha, const Tensor& initial_state = Tensor(),
         Tensor* final_state = nullptr);
// The same scan, its inputs packed: qkv [3, B, T, H, d] holds q, k and v
// one after another (causal_conv1d_silu_l2_norm_planes' output),
// beta_and_log_alpha holds β [B, T, H] then log α (decay_shape) one after
// another (beta_log_alpha's output), or only what the rule reads; undefined
// for a rule that reads neither. The backward writes dqkv and
// dbeta_and_log_alpha whole.
Var scan_packed(const ScanOptions& options, const Var& qkv, const Var& beta_and_log_alpha, const Shape& decay_shape,
                const Tensor& initial_state = Tensor(), Tensor* final_state = nullptr);

}  // namespace lina
