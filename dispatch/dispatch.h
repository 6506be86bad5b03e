// The backend entry points: everything an op's forward or backward asks of a
// device, on whole Tensors. Each is implemented once in dispatch/
// (tensor_ops.cpp, nn.cpp, attention.cpp, scan.cpp, optim.cpp), which checks the
// arguments and calls the CPU kernel (backend_cpu/) or the CUDA kernel
// (backend_cuda/) for the tensors' device and dtype. Autograd
// code calls only these, so adding a CUDA kernel touches no autograd code.
// (Tensor's own allocation, copies and fills do not come here: core/ reaches
// the devices through core/device_memory.h, which the backends fill.)
//
// Rule for every function here: outputs are freshly allocated on the inputs'
// device unless the name says `_inplace` / the argument is a `Tensor&` out.
#pragma once
#include <array>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/elementwise_math.h"
#include "core/kernel_args.h"
#include "core/tensor.h"

namespace lina::cuda {
struct Graph;  // backend_cuda/graph.cu
}  // namespace lina::cuda

namespace lina::dispatch {

// ---- the devices ----------------------------------------------------------------
bool cuda_available();    // compiled with CUDA and a GPU is present
// What runs --device cuda: "cuda" (a GPU), "sim" (lina's CUDA runtime on the
// CPU, the cuda-sim build) or "none" (built without CUDA).
const char* cuda_runtime();
// The CPU's matrix products: "Eigen", or "OpenBLAS (SkylakeX kernels)" with the kernel set
// OpenBLAS runs (backend_cpu/openblas.h).
std::string cpu_gemm();
// CUDA: kernel launches (counted as the host queues them: a replayed graph
// is one graph launch and no kernel launch), allocation calls, device→host
// copies and graph launches so far, and the bytes the memory pool holds
// (zeros without CUDA). A replayed training update allocates nothing and
// reads nothing back (experiments/update_plan.h).
struct DeviceCounters {
  int64_t launches = 0, allocations = 0, device_to_host_copies = 0, pool_reserved_bytes = 0;
  int64_t graph_launches = 0;
};
DeviceCounters cuda_counters();
// CUDA matrix products in TF32 (operands rounded to a 10-bit mantissa on the
// tensor cores: faster, about 1e-3 relative) or float32 (the default, which
// agrees with the CPU to about 1e-6).
void set_cuda_tf32(bool on);

// The GPU time of each kernel `work` launches eagerly, by kernel name (an
// event after every launch on the one stream; not for a graph's replay).
struct KernelTime {
  std::string kernel;
  int64_t launches = 0;
  double ms = 0;  // summed over its launches
};
std::vector<KernelTime> cuda_kernel_times(const std::function<void()>& work);

// CUDA work recorded once and replayed: a CUDA graph (backend_cuda/graph.cu).
// rehearse() runs the work as usual, its allocations taken from memory kept
// for the graph; capture() records the same work (which must allocate what
// the rehearsal did, and may not wait for the device or copy from it: a
// one-line error names the call) without running it; replay() queues it
// again. Everything the work touches besides its own allocations must stay
// allocated while the graph lives.
class CudaGraph {
 public:
  CudaGraph() = default;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph();
  void rehearse(const std::function<void()>& work);
  void capture(const std::function<void()>& work);
  void replay();
  bool captured() const { return graph_ != nullptr; }
  int64_t kernels() const;  // the kernels one replay runs

 private:
  cuda::Graph* graph_ = nullptr;
};
// Calls so far, through the entry points below, of each entry of
// core/op_list.h on CUDA, by name, in the list's order (what the op ×
// device table checks it has covered).
std::vector<std::pair<std::string, int64_t>> cuda_kernel_calls();

// ---- fill & elementwise -------------------------------------------------------
void fill(Tensor& t, double value);
Tensor unary(UnaryFn f, const Tensor& x, double p = 0.0);
// x ⊙ M, M the dropout factors of `key` (core/philox.h), element i of x
// (contiguous) getting factor i. Its own backward: dx = dropout(dy, key).
// With a residual (x's shape): residual + x ⊙ M, in the same kernel.
Tensor dropout(const Tensor& x, const DropoutKey& key, const Tensor& residual = Tensor());
// dx = dy * f'(x); y = f(x) is passed because several derivatives use it.
Tensor unary_backward(UnaryFn f, const Tensor& x, const Tensor& y, const Tensor& dy, double p = 0.0);
// NumPy broadcasting; out has the broadcast shape.
Tensor binary(BinaryFn f, const Tensor& a, const Tensor& b);
// dst += alpha * src (same shape): gradient accumulation.
void add_inplace(Tensor& dst, const Tensor& src, double alpha = 1.0);

// ---- layout: one strided copy serves permute, expand, slice, concat, sum_to ----
struct StridedView {
  int64_t offset = 0;            // in elements, from the tensor's first element
  std::vector<int64_t> strides;  // one per dimension of `extent`, in elements
};
// For every index i of `extent`: dst[dv(i)] = src[sv(i)]  (or += when accumulate).
// With accumulate, zero strides in dv sum over those dimensions.
void copy_strided(const Tensor& src, const StridedView& sv, Tensor& dst, const StridedView& dv,
                  const Shape& extent, bool accumulate);

// ---- reductions ---------------------------------------------------------------
// x viewed as [outer, n, inner]: out[o, i] = Σ_j x[o, j, i].
void sum_middle(const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out, bool accumulate = false);
double sum_squares(const Tensor& x);  // Σ x², accumulated in double (read back)
// Σ x² as a float64 scalar tensor on x's device (nothing read back).
Tensor sum_squares_on_device(const Tensor& x);

// ---- matrix products ----------------------------------------------------------
// c[i] = op(a[i]) · op(b[i]) for i over `batch`, op = transpose when ta/tb.
// Raw form: a, b, c are row-major stacks of matrices; a stride of 0 reuses one
// matrix for every batch entry. c = alpha·(…) + beta·c.
struct GemmShape {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  bool ta = false, tb = false;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batch entries
};
void gemm(const GemmShape& g, const Tensor& a, const Tensor& b, Tensor& c, double alpha = 1.0,
          double beta = 0.0);


// ---- causal attention, fused (core/kernel_args.h AttentionShape) ----
// q [B, Tq, H, d], k and v [B, Tk, Hkv, d] with H a multiple of Hkv and
// Tk >= Tq: out [B, Tq, H, d] = softmax(scale · q kᵀ, causal) v per head, query
// head h reading KV head h / (H / Hkv). lse_out [B, H, Tq], each query row's
// log Σ_j e^{scale · q·k_j} over the keys it sees, is what the backward keeps
// of the softmax (it recomputes the probabilities, never stored). With
// dropout (p > 0), out = (P ⊙ M) v, M regenerated from the key by the
// backward (core/kernel_args.h AttentionShape).
Tensor attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                         Tensor& lse_out, const DropoutKey& dropout = {});
struct AttentionGrads {
  Tensor dq, dk, dv;
};
AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& lse, const Tensor& dout, double scale,
                                  const DropoutKey& dropout = {});

// ---- softmax, log-softmax, cross-entropy, embedding ----
// All over the last axis. causal: x is [..., Tq, Tk] (Tk ≥ Tq) and entry
// (i, j) gets weight 0 when j > i + (Tk − Tq).
Tensor softmax_forward(const Tensor& x, bool causal);
Tensor softmax_backward(const Tensor& y, const Tensor& dy);  // y: the forward's output
Tensor log_softmax_forward(const Tensor& x);
Tensor log_softmax_backward(const Tensor& y, const Tensor& dy);  // y: the forward's output
// logits [..., V]; targets [...] int32 in [0, V); mask [...] of the logits'
// dtype, or undefined to keep every position. Returns the scalar (shape {})
// loss Σ mask·(−log softmax(logits)[target]) / max(Σ mask, 1) and writes
// its gradient mask · (softmax(logits) − onehot(targets)) / max(Σ mask, 1)
// [..., V] to dlogits_out (for dloss = 1: the backward scales it by dloss).
// mask_count (one element, with a mask): Σ mask worked out beforehand, read
// in place of summing the mask (an update plan's, experiments/update_plan.h).
Tensor cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& mask,
                             Tensor& dlogits_out, const Tensor& mask_count = Tensor());
// weight [V, C], ids [...] int32 in [0, V) -> [..., C]
Tensor embedding_forward(const Tensor& weight, const Tensor& ids);
// dy [..., C] -> dweight [vocab, C], the rows of dy summed per id.
Tensor embedding_backward(const Tensor& dy, const Tensor& ids, int64_t vocab);
// dweight += the embedding's gradient (dweight [vocab, C]), no tensor of its own.
void embedding_backward_add(const Tensor& dy, const Tensor& ids, Tensor& dweight);
// x [..., N] -> int32 [...]: index of the largest entry of each row (first on ties).
Tensor argmax_last(const Tensor& x);

// ---- rms_norm, l2_norm, causal conv1d, rope ----
// The Tensor& arguments below are outputs, assigned freshly allocated tensors.
// x [..., n], weight [n]: y = weight ⊙ ρx with ρ = (mean(x²) + eps)^(−1/2) per
// row; rstd_out receives ρ, [rows] (rows = numel / n).
// With a gate (undefined: none), the gated norm y = silu(gate) ⊙ weight ⊙
// ρx, rms_norm then swiglu in one pass. The gate has x's shape, or is a
// wider product whose leading dims are x's first ones and whose columns
// [gate_column, gate_column + cols) are the gate, cols the numel of x's
// remaining dims (the recurrent mixers' z [B, T, ld] for x [B, T, H, d]:
// cols = H·d).
Tensor rms_norm_forward(const Tensor& x, const Tensor& weight, double eps, Tensor& rstd_out,
                        const Tensor& gate = Tensor(), int64_t gate_column = 0);
// dx [..., n]; dweight [n] summed over every row; with a gate, dgate of the
// gate's shape too (a fresh one: 0 outside the gate's columns, written by
// the same kernel). Each of dx, dweight and dgate that is defined on entry
// (its shape, x's dtype and device) has the gradient added into it (+=;
// dgate's gate columns only) instead of a fresh tensor.
void rms_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& dy,
                       Tensor& dx, Tensor& dweight, const Tensor& gate = Tensor(), Tensor* dgate = nullptr,
                       int64_t gate_column = 0);
// A residual sum and the norm after it, one pass: sum_out = x + h ⊙ M (M
// the dropout factors of `key`, 1 where key.p = 0), y = weight ⊙ ρ·sum_out;
// x, h [..., n]. rstd_out receives ρ, [rows].
Tensor residual_rms_norm_forward(const Tensor& x, const Tensor& h, const Tensor& weight, double eps,
                                 const DropoutKey& key, Tensor& sum_out, Tensor& rstd_out);
// Its backward, given dy and dsum, the sum's own gradient (undefined: none):
// dx = dsum + the norm's dx, written into dsum itself where it is defined
// (it must be a buffer no other tensor shares), else into a fresh tensor,
// and assigned to dsum; dh = dx ⊙ M, a fresh tensor (dx itself where
// key.p = 0); dweight += (where defined) or = Σ_rows dy ⊙ x̂.
void residual_rms_norm_backward(const Tensor& sum, const Tensor& weight, const Tensor& rstd, const Tensor& dy,
                                const DropoutKey& key, Tensor& dsum, Tensor& dh, Tensor& dweight);
// x [..., n]: y = scale · x / max(‖x‖, eps) per row; norm_out receives ‖x‖
// (unscaled), [rows].
Tensor l2_norm_forward(const Tensor& x, double eps, double scale, Tensor& norm_out);
Tensor l2_norm_backward(const Tensor& x, const Tensor& norm, const Tensor& dy, double eps,
                        double scale);
// x [B, T, C], weight [C, K]: y_t[c] = Σ_j weight[c, j] x_{t−K+1+j}[c], zero left padding.
// The three conv backwards below assign dx a fresh tensor; a dweight defined
// on entry (weight's shape, x's dtype and device) has the gradient added
// into it (+=), else it is assigned a fresh one.
Tensor causal_conv1d_forward(const Tensor& x, const Tensor& weight);
void causal_conv1d_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, Tensor& dx,
                            Tensor& dweight);
// y = silu(causal_conv1d(x, weight)) in one pass: the conv's output z is not
// kept. The backward recomputes z from x and weight, forms dz = dy ⊙ silu'(z)
// and returns the conv's dx and dweight of dz.
Tensor causal_conv1d_silu_forward(const Tensor& x, const Tensor& weight);
void causal_conv1d_silu_backward(const Tensor& x, const Tensor& weight, const Tensor& dy,
                                 Tensor& dx, Tensor& dweight);
// How causal_conv1d_silu_l2_norm lays out and normalises its C channels:
// `count` planes of C/count channels, the first `normed` of them
// normalised in heads of `head` channels.
struct ConvPlanes {
  int64_t head = 1, count = 1, normed = 1;
};
// q = scale · y / max(‖y‖, eps) for each group of `head` channels of y =
// silu(causal_conv1d(x, weight)), in one pass. The C channels form
// planes.count planes (q's, k's, v's); the first planes.normed are
// normalised, the rest pass as they are; the output is laid out plane by
// plane, [planes, B, T, C/planes] ([B, T, C] for one plane), so each plane
// is a contiguous view. norm_out receives ‖y‖ per normalised group,
// [B, T, normed·(C/planes)/head]. The backward recomputes y. x is [B, T, C],
// or [B, T, ld] with ld > C, a wider product whose first C = weight.dim(0)
// columns the conv reads: dx is then x's shape, 0 in the other columns. A dx
// defined on entry (x's shape, dtype and device) has the gradient added
// into its first C columns (+=), the others as they were.
Tensor causal_conv1d_silu_l2_norm_forward(const Tensor& x, const Tensor& weight, const ConvPlanes& planes,
                                     double eps, double scale, Tensor& norm_out);
void causal_conv1d_silu_l2_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& norm,
                                    const Tensor& dq, const ConvPlanes& planes, double eps,
                                    double scale, Tensor& dx, Tensor& dweight);
// x [B, T, H, D], D even: interleaved RoPE (pairs 2j, 2j + 1) at positions pos0 + t; `inverse`
// rotates back (the backward).
Tensor rope_apply(const Tensor& x, int64_t pos0, double base, bool inverse);

// ---- the recurrent mixers' gates ----
// z [B, T, N] (any [..., N]: rows = its numel / N), bias [N], 0 ≤ n_beta ≤ N;
// or z [B, T, ld], ld > N, whose last N columns are the gates (one product
// made them with what another op reads: the backward then writes, or adds,
// only those columns of dz, a fresh dz holding 0 in the others).
// Returns out [B·T·N], two planes, each contiguous (Tensor::view_of):
//   β [B, T, n_beta] = σ(z + b) (columns < n_beta), at offset 0;
//   log α [B, T, N − n_beta] = log σ(z + b) = −softplus(−(z + b)) (columns ≥
//   n_beta), at offset B·T·n_beta.
// One kernel each way. The backward reads the output only (z's shape aside):
// dz (z_shape) = dβ β (1 − β) | dlogα · (−expm1(log α)), and dbias [N] = dz
// summed over the rows; each of dz and dbias defined on entry (its shape,
// out's dtype and device) has its gradient added into it (+=), else it is
// assigned a fresh tensor.
Tensor beta_log_alpha_forward(const Tensor& z, const Tensor& bias, int64_t n_beta);
void beta_log_alpha_backward(const Tensor& out, const Tensor& dout, const Shape& z_shape, int64_t N,
                             int64_t n_beta, Tensor& dz, Tensor& dbias);

// ---- optimiser (AdamW step) ----
// One AdamW update in place, PyTorch semantics; `step` counts from 1 and sets
// the bias corrections 1 − β^step. param, grad, m (first moment), v (second
// moment): same shape, dtype and device. weight_decay 0 turns decay off.
// weight_decay_mask: like param, 1 where weight decay applies, 0 where not;
// undefined: everywhere. One launch over the whole buffer.
// (It uploads the update's numbers, adamw_scalars, and launches the kernel;
// a training run keeps them in an update plan instead: models/optim.h.)
void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, double lr, double beta1,
                double beta2, double eps, double weight_decay, int64_t step,
                const Tensor& weight_decay_mask = Tensor());
// The three numbers of update `step` the AdamW kernel reads (core/op_list.h):
// {1 − lr·weight_decay, lr / bias_correction1, √bias_correction2}, each
// computed in `dtype` as the kernel would (so a table of them gives the
// same bits as computing them on the spot).
std::array<double, 3> adamw_scalars(double lr, double beta1, double beta2, double weight_decay,
                                    int64_t step, DType dtype);
void scale_inplace(Tensor& x, double factor);  // x *= factor
// x *= min(1, max_norm / (√sum_of_squares + 1e-6)), the factor computed on
// x's device from the float64 scalar sum_of_squares (sum_squares_on_device).
void clip_to_norm(Tensor& x, const Tensor& sum_of_squares, double max_norm);

// ---- scan: the recurrences of the recurrent mixers ----
// Per (batch, head), docs/recurrence.md §1 and docs/recurrence-gated.md:
// S_t = S_{t−1} diag(a_t) + u_t k_tᵀ, o_t = S_t q_t, S value × key (d×d);
// a_t = exp(log decay) per the rule's DecayKind (core/kernel_args.h);
// u_t = β_t (v_t − S_{t−1} diag(a_t) k_t) for the delta rules, else v_t.
// ScanOptions (rule, form, chunk): core/kernel_args.h.
// q, k, v [B, T, H, d]; beta [B, T, H], log_alpha [B, T, H] or [B, T, H, d]
// for a per-channel gate (undefined when the rule does not use them); initial_state [B, H, d, d] or undefined (zeros).
// Returns o [B, T, H, d] and writes S_T [B, H, d, d] to final_state. When
// saved is not null it receives what scan_backward needs (ScanSaved).
struct ScanSaved {
  // S_0 … S_{T−1} [B, H, T, d, d] (sequential), or the state entering each
  // chunk [B, H, ⌈T/C⌉, d, d] (chunked)
  Tensor states;
  // chunked, where scan_keeps_solve (core/kernel_args.h): F2's solution Y, W
  // and the write vectors U (row t is u_t), [B, T, H, d] each
  // (docs/recurrence.md §3.3); undefined otherwise
  Tensor Y, W, U;
};
Tensor scan_forward(const ScanOptions& config, const Tensor& q, const Tensor& k, const Tensor& v,
                    const Tensor& beta, const Tensor& log_alpha, const Tensor& initial_state,
                    Tensor& final_state, ScanSaved* saved = nullptr);
// Gradients of the scan; dbeta / dlog_alpha are undefined when the rule does
// not use them. dinitial_state is dL/dS_0.
struct ScanGrads {
  Tensor dq, dk, dv, dbeta, dlog_alpha, dinitial_state;
};
// dout [B, T, H, d]; dfinal_state [B, H, d, d] or undefined (S_T unused);
// saved from scan_forward with the same config and inputs. `into`:
// buffers (views of larger ones, say) the gradients are written to where
// defined; the others are allocated.
ScanGrads scan_backward(const ScanOptions& config, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& beta, const Tensor& log_alpha,
                        const ScanSaved& saved, const Tensor& dout,
                        const Tensor& dfinal_state, const ScanGrads& into = ScanGrads());

}  // namespace lina::dispatch
