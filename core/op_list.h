// The op list: every differentiable op lina records on the tape, and every
// compute kernel of a backend, written once, family by family. An op's
// family block names the files that hold it: its CPU kernels
// (backend_cpu/<family>.cpp), its CUDA kernels (backend_cuda/<family>.cu)
// and its autograd node (autograd/ops/<family>.cpp). Each block is
//   LINA_<FAMILY>_LIST(OP, KERNEL, T)
//     OP(Name, op_name)                 OpKind::Name, named "op_name" (core/ops.h)
//     KERNEL(return type, name, (params with element type T))
// and everything mechanical is generated from it:
//   core/ops.h                    OpKind and the op names
//   backend_cpu/cpu_kernels.h     template <class T> ret name(params);
//   backend_cpu/<family>.cpp      its float and double instantiations (one
//                                 LINA_INSTANTIATE_CPU_KERNELS line)
//   backend_cuda/cuda_kernels.h   ret name(params with T = float);
//   backend_cuda/stub.cpp         the same, each throwing "built without CUDA"
//   dispatch/launch.h             dispatch::launch::name({tensors and numbers}):
//                                 the kernel on the first tensor's device and
//                                 dtype, each tensor passed as its data pointer
// A kernel the list names but a backend does not define is a link error.
//
// Kernels work on raw pointers (device pointers for CUDA) with named
// dimensions; a kernel writes (=) its outputs unless a comment says it
// accumulates (+=). The shapes, for each group:
//
// elementwise: x, y, dy, dx [n]; binary: out[i] = a[i·a_strides] ∘ b[i·b_strides]
//   over `shape` (ndim dims), strides 0 along broadcast dimensions; add_inplace:
//   dst += alpha·src.
// copy_strided: dst[Σ i_k dst_strides[k]] (= or += with accumulate)
//   src[Σ i_k src_strides[k]] for i in shape; zero destination strides with
//   accumulate sum several source elements into one (sum_to).
// sum_middle: x [outer, n, inner] -> out[o, i] = Σ_j x[o, j, i] (+= with accumulate).
// sum_squares: *out = Σ x², accumulated in double, in a fixed order; out is
//   one double in the backend's memory (on the GPU for CUDA: no read back).
// gemm: for i < batch, C_i = alpha·op(A_i)·op(B_i) + beta·C_i, row-major,
//   op(A_i) M×K, op(B_i) K×N, C_i M×N, op = transpose when ta / tb; a
//   stride of 0 reuses one matrix for every batch entry.
// softmax family, over rows of the last axis, R = rows: x, y, dy, dx [R, N];
//   causal: rows form [Tq, N] matrices, row i sees keys j <= i + (N − Tq),
//   the others get y = 0. log_softmax_backward takes y = log-probabilities.
// attention (core/kernel_args.h AttentionShape): forward writes out and lse
//   [B, H, Tq], each query row's log Σ_j e^{scale · q·k_j} over the keys it
//   sees (all the backward keeps of the softmax: it recomputes P from it, or
//   as the forward did); backward writes dscores [B, H, Tq, Tk] (scratch),
//   dq, dk and dv (each KV head's gradient sums over the query heads that
//   read it).
// cross_entropy: logits, dlogits [R, V]; targets [R] in [0, V); mask [R] or
//   null (keep all); mask_count: one element, Σ mask worked out beforehand
//   (an update plan's, in the backend's memory), or null: the kernel sums
//   the mask itself; loss: one element (device memory on CUDA): loss =
//   Σ mask·(−log p_target) / max(Σ mask, 1), p = softmax(logits). The same
//   pass writes the loss's gradient dlogits = mask · (p − onehot(target)) /
//   max(Σ mask, 1) (dloss = 1; any other dloss scales it).
// embedding: weight, dweight [V, C]; ids [N] in [0, V); out, dy [N, C]; the
//   backward zeroes dweight, then sums dy over repeated ids.
// argmax_last: x [R, N] -> out [R], the first index of the largest entry.
// rms_norm / l2_norm: x, y, dy, dx [rows, n]; w, dw [n] (dw summed over all
//   rows); rstd / norm [rows] (l2_norm's norm is ‖x‖, unscaled: y = scale ·
//   x / max(‖x‖, eps)). rms_norm_backward accumulates (+=) into dx where
//   add_dx, into dw where add_dw, and writes (=) otherwise. A gate (null:
//   none) makes it the gated norm y = w ⊙ ρx ⊙ silu(gate), the gate of
//   x's element e at gate[g.index(e)] (GateColumns, core/kernel_args.h: x's
//   shape, or columns of a wider product); its backward also adds into
//   dgate's gate columns (add_dgate) or writes them, and then 0 in the
//   other columns of dgate's rows, so a fresh dgate is the whole gradient.
// residual_rms_norm: a residual sum and the norm after it, x, h, sum, y
//   [rows, n]: sum = x + h ⊙ M (M: dropout_factor(key, i), below), y = w ⊙
//   ρ·sum. Its backward takes dy and dsum, the sum's own gradient (added
//   into in place where add_dsum, else written): dsum += the norm's dx, then
//   dh = dsum ⊙ M (dh null: not written); dw as rms_norm's.
// causal_conv1d: x, y, dy, dx [B, T, C]; w, dw [C, K], tap K−1 = the current
//   token, zero left padding. causal_conv1d_silu: y = silu(conv), the conv's
//   output z never stored; its backward recomputes z to form dy ⊙ silu'(z).
//   causal_conv1d_silu_l2_norm: the C channels form `planes` planes of C/planes
//   (q's, k's, v's); in the first `normed` planes each group of `head`
//   channels is l2_norm'ed (times scale), the rest pass as they are; y and
//   dy are laid out [planes, B, T, C/planes] (one plane: [B, T, C]); norm
//   [B·T, normed·(C/planes)/head] holds the groups' ‖silu(z)‖; x's and dx's
//   rows are ld ≥ C long (a wider product's), the conv reading the first C
//   columns; its backward adds into dx's first C columns where add_dx, else
//   writes them and zeros in the others. The three backwards accumulate (+=)
//   into dw where add_dw; the other two write dx (=).
// rope_apply: x, y [B, T, H, D], D even; rotates the interleaved pair (2j, 2j + 1) by
//   (pos0 + t)·base^(−2j/D), or by minus that angle when `inverse`.
// adamw_step over n elements (PyTorch's single-tensor form), one call over
//   the whole parameter buffer; weight_decay_mask [n] is 1 where weight decay
//   applies and 0 where not (null: everywhere):
//   p −= lr·weight_decay·p (where the mask is 1);  m = β1 m + (1 − β1) g;  v = β2 v + (1 − β2) g²;
//   p −= (lr / bias_correction1) · m / (√v / √bias_correction2 + eps).
//   The update's numbers are read from the backend's memory, so that a
//   replayed CUDA graph sees each update's own: scalars [3] = {1 −
//   lr·weight_decay, lr / bias_correction1, √bias_correction2}
//   (dispatch::adamw_scalars); control null, or an update plan's [3] (below):
//   no update while control[2] ≠ 0. With max_norm > 0 the update clips on
//   the way: it reads g · min(1, max_norm / (√sum_of_squares + 1e-6))
//   (sum_of_squares: one double in the backend's memory, Σ g²; null and 0:
//   no clipping), the same numbers clip_to_norm then a plain update give.
// An update plan (experiments/update_plan.h) holds a window of updates in
//   the backend's memory; control [3] = {slot in the window, update number
//   (0-based), refused_at (0, or the 1-based update whose loss or gradient
//   was not finite)}. begin_update copies slot s's rows: scalars [3] =
//   scalar_table[s], ids [ids_per_row] = ids_table[s], mask [mask_per_row] =
//   mask_table[s] (mask null: none). end_update sums the gradient's squares
//   (grad [n], as sum_squares) into *sum_of_squares, writes log[s] = {loss,
//   Σ g²} (double [2]), sets refused_at at the first non-finite one, and
//   moves control to the next update.
// scale_inplace: x *= factor.
// dropout_apply: y[i] = x[i] · dropout_factor(key, i) (core/philox.h): 0 with
//   probability p, else 1 / (1 − p). Linear in x, so the backward is the same
//   kernel on dy with the same key. residual: null, or y[i] = residual[i] +
//   x[i] · factor (the residual connection's sum in the same pass).
// swiglu: rows of `width` elements: y = silu(gate) ⊙ up (math::Silu);
//   dgate = dy ⊙ up ⊙ silu'(gate), dup = dy ⊙ silu(gate). y, dy [rows, width];
//   gate, up, dgate, dup: row r starts at r · stride (stride = width: plain
//   [rows, width] tensors; stride = 2·width with up = gate + width: the two
//   halves of one [rows, 2·width] tensor, as one product makes them).
// beta_log_alpha: z, dz [rows, N] (rows = B·T), bias, dbias [N], 0 ≤ n_beta ≤ N;
//   z's and dz's rows are ld ≥ N long, β's and log α's their last N columns (a
//   wider product's: the rest is another op's);
//   out, dout [rows·N] hold two planes, each contiguous: β [rows, n_beta] =
//   σ(z + b) (columns < n_beta), then log α [rows, N − n_beta] = log σ(z + b)
//   = −softplus(−(z + b)) (columns ≥ n_beta). The backward reads the output
//   only: du = dβ β (1 − β), or dlogα · (−expm1(log α)); it writes dz = du
//   and dbias = Σ_rows du, each accumulated (+=) instead where add_dz / add_dbias.
// clip_to_norm: x *= min(1, max_norm / (√sum_of_squares + 1e-6)), the factor
//   computed by the backend from *sum_of_squares (in the backend's memory),
//   so clipping gradients needs no read back before the update.
// scan (core/kernel_args.h): token by token, states null or [B, H, T, d, d]
//   receiving S_0 … S_{T−1}; chunked (chunks of C), what the forward keeps
//   for the backward in ScanChunkedSaved (the state entering each chunk,
//   and for a delta rule the solve's Y, W, U); dout [B, T, H, d];
//   dfinal_state [B, H, d, d] or null (zero).
#pragma once
#include <cstdint>

#include "core/elementwise_math.h"
#include "core/kernel_args.h"

// ---- elementwise: fill, the unary and binary functions, dropout, the fused gates ----
// backend_cpu/elementwise.cpp, backend_cuda/elementwise.cu
#define LINA_ELEMENTWISE_LIST(OP, KERNEL, T) \
  LINA_BINARY_FUNCTIONS(OP) \
  LINA_UNARY_FUNCTIONS(OP) \
  OP(Dropout, dropout) \
  OP(ResidualDropout, residual_dropout) \
  OP(Swiglu, swiglu) \
  OP(BetaLogAlpha, beta_log_alpha) \
  KERNEL(void, fill, (T * x, int64_t n, T value)) \
  KERNEL(void, unary_forward, (UnaryFn f, const T* x, T* y, int64_t n, T p)) \
  KERNEL(void, unary_backward, (UnaryFn f, const T* x, const T* y, const T* dy, T* dx, int64_t n, T p)) \
  KERNEL(void, binary, (BinaryFn f, const T* a, const int64_t* a_strides, const T* b, const int64_t* b_strides, T* out, const int64_t* shape, int ndim)) \
  KERNEL(void, add_inplace, (T * dst, const T* src, int64_t n, T alpha)) \
  KERNEL(void, dropout_apply, (const T* x, const T* residual, T* y, int64_t n, const DropoutKey& key)) \
  KERNEL(void, swiglu_forward, (const T* gate, const T* up, T* y, int64_t rows, int64_t width, int64_t stride)) \
  KERNEL(void, swiglu_backward, (const T* gate, const T* up, const T* dy, T* dgate, T* dup, int64_t rows, int64_t width, int64_t stride)) \
  KERNEL(void, beta_log_alpha_forward, (const T* z, const T* bias, T* out, int64_t rows, int64_t N, int64_t ld, int64_t n_beta)) \
  KERNEL(void, beta_log_alpha_backward, (const T* out, const T* dout, T* dz, T* dbias, int64_t rows, int64_t N, int64_t ld, int64_t n_beta, bool add_dz, bool add_dbias))

// ---- layout: one strided copy serves permute, expand, slice, concat, sum_to ----
// backend_cpu/layout.cpp, backend_cuda/layout.cu (second_output, an op's
// second output, has no kernel: autograd/ops/shape.cpp)
#define LINA_LAYOUT_LIST(OP, KERNEL, T) \
  OP(Reshape, reshape) \
  OP(Permute, permute) \
  OP(Expand, expand) \
  OP(Slice, slice) \
  OP(Concat, concat) \
  OP(SecondOutput, second_output) \
  KERNEL(void, copy_strided, (const T* src, const int64_t* src_strides, T* dst, const int64_t* dst_strides, const int64_t* shape, int ndim, bool accumulate))

// ---- reductions ----
// backend_cpu/reduce.cpp, backend_cuda/layout.cu
#define LINA_REDUCE_LIST(OP, KERNEL, T) \
  OP(Sum, sum) \
  OP(Mean, mean) \
  KERNEL(void, sum_middle, (const T* x, T* out, int64_t outer, int64_t n, int64_t inner, bool accumulate)) \
  KERNEL(void, sum_squares, (const T* x, int64_t n, double* out))

// ---- matrix products ----
// backend_cpu/matmul.cpp, backend_cuda/matmul.cu
#define LINA_MATMUL_LIST(OP, KERNEL, T) \
  OP(Matmul, matmul) \
  KERNEL(void, gemm, (int64_t batch, int64_t M, int64_t N, int64_t K, const T* a, bool ta, int64_t stride_a, const T* b, bool tb, int64_t stride_b, T* c, int64_t stride_c, T alpha, T beta))

// ---- softmax, log-softmax, cross-entropy, embedding, argmax ----
// backend_cpu/softmax_loss.cpp, backend_cuda/softmax_loss.cu
#define LINA_SOFTMAX_LOSS_LIST(OP, KERNEL, T) \
  OP(Softmax, softmax) \
  OP(LogSoftmax, log_softmax) \
  OP(CrossEntropy, cross_entropy) \
  OP(Embedding, embedding) \
  KERNEL(void, softmax_forward, (const T* x, T* y, int64_t R, int64_t N, int64_t Tq, bool causal)) \
  KERNEL(void, softmax_backward, (const T* y, const T* dy, T* dx, int64_t R, int64_t N)) \
  KERNEL(void, log_softmax_forward, (const T* x, T* y, int64_t R, int64_t N)) \
  KERNEL(void, log_softmax_backward, (const T* y, const T* dy, T* dx, int64_t R, int64_t N)) \
  KERNEL(void, cross_entropy_forward, (const T* logits, const int32_t* targets, const T* mask, const T* mask_count, T* dlogits, T* loss, int64_t R, int64_t V)) \
  KERNEL(void, embedding_forward, (const T* weight, const int32_t* ids, T* out, int64_t N, int64_t V, int64_t C)) \
  KERNEL(void, embedding_backward, (const T* dy, const int32_t* ids, T* dweight, int64_t N, int64_t V, int64_t C, bool accumulate)) \
  KERNEL(void, argmax_last, (const T* x, int32_t* out, int64_t R, int64_t N))

// ---- causal attention ----
// backend_cpu/attention.cpp, backend_cuda/attention.cu
#define LINA_ATTENTION_LIST(OP, KERNEL, T) \
  OP(Attention, attention) \
  KERNEL(void, attention_forward, (const AttentionShape& s, const T* q, const T* k, const T* v, T* lse, T* out)) \
  KERNEL(void, attention_backward, (const AttentionShape& s, const T* q, const T* k, const T* v, const T* lse, const T* dout, T* dscores, T* dq, T* dk, T* dv))

// ---- rms_norm, l2_norm, causal conv1d (alone and fused), rope ----
// backend_cpu/norm_conv_rope.cpp, backend_cuda/norm_conv_rope.cu
#define LINA_NORM_CONV_ROPE_LIST(OP, KERNEL, T) \
  OP(RmsNorm, rms_norm) \
  OP(RmsNormGated, rms_norm_gated) \
  OP(ResidualRmsNorm, residual_rms_norm) \
  OP(L2Norm, l2_norm) \
  OP(CausalConv1d, causal_conv1d) \
  OP(CausalConv1dSilu, causal_conv1d_silu) \
  OP(CausalConv1dSiluL2Norm, causal_conv1d_silu_l2_norm) \
  OP(Rope, rope) \
  KERNEL(void, rms_norm_forward, (const T* x, const T* w, const T* gate, const GateColumns& g, T* y, T* rstd, int64_t rows, int64_t n, T eps)) \
  KERNEL(void, rms_norm_backward, (const T* x, const T* w, const T* gate, const GateColumns& g, const T* rstd, const T* dy, T* dx, T* dw, T* dgate, int64_t rows, int64_t n, bool add_dx, bool add_dw, bool add_dgate)) \
  KERNEL(void, residual_rms_norm_forward, (const T* x, const T* h, const T* w, T* sum, T* y, T* rstd, int64_t rows, int64_t n, T eps, const DropoutKey& key)) \
  KERNEL(void, residual_rms_norm_backward, (const T* sum, const T* w, const T* rstd, const T* dy, T* dsum, T* dh, T* dw, int64_t rows, int64_t n, bool add_dsum, bool add_dw, const DropoutKey& key)) \
  KERNEL(void, l2_norm_forward, (const T* x, T* y, T* norm, int64_t rows, int64_t n, T eps, T scale)) \
  KERNEL(void, l2_norm_backward, (const T* x, const T* norm, const T* dy, T* dx, int64_t rows, int64_t n, T eps, T scale)) \
  KERNEL(void, causal_conv1d_forward, (const T* x, const T* w, T* y, int64_t B, int64_t T_len, int64_t C, int64_t K)) \
  KERNEL(void, causal_conv1d_backward, (const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t B, int64_t T_len, int64_t C, int64_t K, bool add_dw)) \
  KERNEL(void, causal_conv1d_silu_forward, (const T* x, const T* w, T* y, int64_t B, int64_t T_len, int64_t C, int64_t K)) \
  KERNEL(void, causal_conv1d_silu_backward, (const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t B, int64_t T_len, int64_t C, int64_t K, bool add_dw)) \
  KERNEL(void, causal_conv1d_silu_l2_norm_forward, (const T* x, const T* w, T* y, T* norm, int64_t B, int64_t T_len, int64_t C, int64_t ld, int64_t K, int64_t head, int64_t planes, int64_t normed, T eps, T scale)) \
  KERNEL(void, causal_conv1d_silu_l2_norm_backward, (const T* x, const T* w, const T* norm, const T* dy, T* dx, T* dw, int64_t B, int64_t T_len, int64_t C, int64_t ld, int64_t K, int64_t head, int64_t planes, int64_t normed, T eps, T scale, bool add_dx, bool add_dw)) \
  KERNEL(void, rope_apply, (const T* x, T* y, int64_t B, int64_t T_len, int64_t H, int64_t D, int64_t pos0, double base, bool inverse))

// ---- the optimiser: AdamW, clipping, scaling, and the update plan's bookkeeping ----
// backend_cpu/optim.cpp, backend_cuda/optim.cu
#define LINA_OPTIM_LIST(OP, KERNEL, T) \
  KERNEL(void, adamw_step, (T * p, const T* g, T* m, T* v, const T* weight_decay_mask, int64_t n, T beta1, T beta2, T eps, const T* scalars, const int32_t* control, const double* sum_of_squares, double max_norm)) \
  KERNEL(void, begin_update, (const T* scalar_table, T* scalars, const int32_t* ids_table, int32_t* ids, int64_t ids_per_row, const T* mask_table, T* mask, int64_t mask_per_row, const int32_t* control)) \
  KERNEL(void, end_update, (const T* loss, const T* grad, int64_t n, double* sum_of_squares, double* log, int32_t* control)) \
  KERNEL(void, scale_inplace, (T * x, int64_t n, T factor)) \
  KERNEL(void, clip_to_norm, (T * x, int64_t n, const double* sum_of_squares, double max_norm))

// ---- the scan token by token, the reference ----
// backend_cpu/scan_sequential.cpp, backend_cuda/scan_sequential.cu
// (the op, scan, runs either form: autograd/ops/scan.cpp)
#define LINA_SCAN_SEQUENTIAL_LIST(OP, KERNEL, T) \
  OP(Scan, scan) \
  KERNEL(void, scan_sequential_forward, (const ScanShape& s, const ScanInputs<T>& in, const T* initial_state, T* o, T* final_state, T* states)) \
  KERNEL(void, scan_sequential_backward, (const ScanShape& s, const ScanInputs<T>& in, const T* states, const T* dout, const T* dfinal_state, const ScanInputGrads<T>& grads))

// ---- the scan chunk by chunk ----
// backend_cpu/scan_chunked.cpp, backend_cuda/scan_chunked.cu
#define LINA_SCAN_CHUNKED_LIST(OP, KERNEL, T) \
  KERNEL(void, scan_chunked_forward, (const ScanShape& s, int64_t C, const ScanInputs<T>& in, const T* initial_state, T* o, T* final_state, const ScanChunkedSaved<T>& saved)) \
  KERNEL(void, scan_chunked_backward, (const ScanShape& s, int64_t C, const ScanInputs<T>& in, const ScanChunkedSaved<const T>& saved, const T* dout, const T* dfinal_state, const ScanInputGrads<T>& grads))

// ---- every family ----
#define LINA_ALL_LISTS(OP, KERNEL, T)                                                \
  LINA_ELEMENTWISE_LIST(OP, KERNEL, T)                                               \
  LINA_LAYOUT_LIST(OP, KERNEL, T)                                                    \
  LINA_REDUCE_LIST(OP, KERNEL, T)                                                    \
  LINA_MATMUL_LIST(OP, KERNEL, T)                                                    \
  LINA_SOFTMAX_LOSS_LIST(OP, KERNEL, T)                                              \
  LINA_ATTENTION_LIST(OP, KERNEL, T)                                                 \
  LINA_NORM_CONV_ROPE_LIST(OP, KERNEL, T)                                            \
  LINA_OPTIM_LIST(OP, KERNEL, T)                                                     \
  LINA_SCAN_SEQUENTIAL_LIST(OP, KERNEL, T)                                           \
  LINA_SCAN_CHUNKED_LIST(OP, KERNEL, T)

#define LINA_IGNORE_OP(Name, op_name)
#define LINA_IGNORE_KERNEL(ret, name, params)
// X(Name, op_name) for every op; the binary functions come first, then the
// unary ones (core/ops.h's op_kind_of counts on it).
#define LINA_OPS(X) LINA_ALL_LISTS(X, LINA_IGNORE_KERNEL, float)
// X(return type, name, (parameters)) for every kernel; T is the element type.
#define LINA_KERNELS(X, T) LINA_ALL_LISTS(LINA_IGNORE_OP, X, T)
// X(return type, name, (parameters)) for one family's kernels.
#define LINA_FAMILY_KERNELS(FAMILY, X, T) LINA_##FAMILY##_LIST(LINA_IGNORE_OP, X, T)
