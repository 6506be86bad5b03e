// CPU kernels: plain functions on raw pointers with named dimensions,
// templated on the float type (float, double) and explicitly instantiated in
// their .cpp files. They know nothing of Tensor or autograd; core/dispatch.cpp
// is their only caller, and a test can call one alone.
//
// Accumulation rule: a kernel writes (=) its outputs unless its name or a
// comment says it accumulates (+=).
#pragma once
#include <cstdint>

#include "core/elementwise_math.h"

namespace lina::cpu {

// ---- elementwise (elementwise.cpp) ----
template <class T> void fill(T* x, int64_t n, T value);
template <class T> void unary_forward(UnaryFn f, const T* x, T* y, int64_t n, T p);
template <class T>
void unary_backward(UnaryFn f, const T* x, const T* y, const T* dy, T* dx, int64_t n, T p);
// out[i] = a[i·a_strides] ∘ b[i·b_strides] over `shape` (ndim dims); strides
// are 0 along broadcast dimensions.
template <class T>
void binary(BinaryFn f, const T* a, const int64_t* a_strides, const T* b, const int64_t* b_strides,
            T* out, const int64_t* shape, int ndim);
template <class T> void axpy(T* dst, const T* src, int64_t n, T alpha);  // dst += alpha·src

// ---- layout (layout.cpp) ----
// dst[Σ i_k dst_strides[k]] (= or +=) src[Σ i_k src_strides[k]] for i in shape.
// Works on any element type (float, double, int32).
template <class T>
void copy_strided(const T* src, const int64_t* src_strides, T* dst, const int64_t* dst_strides,
                  const int64_t* shape, int ndim, bool accumulate);

// ---- reductions (reduce.cpp) ----
template <class T> void sum_middle(const T* x, T* out, int64_t outer, int64_t n, int64_t inner);
template <class T> double sum_squares(const T* x, int64_t n);

// ---- matrix products (matmul.cpp) ----
// For i < batch: C_i = alpha·op(A_i)·op(B_i) + beta·C_i, row-major,
// op(A_i) is M×K, op(B_i) is K×N, C_i is M×N. Eigen's GEMM does the work.
template <class T>
void gemm(int64_t batch, int64_t M, int64_t N, int64_t K, const T* a, bool ta, int64_t stride_a,
          const T* b, bool tb, int64_t stride_b, T* c, int64_t stride_c, T alpha, T beta);


// ---- softmax, log-softmax, cross-entropy, embedding ----
// (softmax_loss.cpp) R = rows (leading dims flattened); N, V, C = the last axis.
// softmax: x, y [R, N]; causal: rows form [Tq, N] matrices, row i of each
// sees keys j <= i + (N − Tq), the others get y = 0.
template <class T>
void softmax_forward(const T* x, T* y, int64_t R, int64_t N, int64_t Tq, bool causal);
template <class T> void softmax_backward(const T* y, const T* dy, T* dx, int64_t R, int64_t N);
template <class T> void log_softmax_forward(const T* x, T* y, int64_t R, int64_t N);
// y is the forward's output (log-probabilities).
template <class T> void log_softmax_backward(const T* y, const T* dy, T* dx, int64_t R, int64_t N);
// logits, probs [R, V]; targets [R] in [0, V); mask [R] or null (keep all);
// loss: one element, Σ mask·(−log p_target) / max(Σ mask, 1).
template <class T>
void cross_entropy_forward(const T* logits, const int32_t* targets, const T* mask, T* probs,
                           T* loss, int64_t R, int64_t V);
// dloss: one element (the loss's gradient); dlogits [R, V].
template <class T>
void cross_entropy_backward(const T* probs, const int32_t* targets, const T* mask, const T* dloss,
                            T* dlogits, int64_t R, int64_t V);
// weight [V, C], ids [N] in [0, V), out [N, C].
template <class T>
void embedding_forward(const T* weight, const int32_t* ids, T* out, int64_t N, int64_t C);
// dy [N, C] -> dweight [V, C] (written: zeroed, then summed over repeated ids).
template <class T>
void embedding_backward(const T* dy, const int32_t* ids, T* dweight, int64_t N, int64_t V,
                        int64_t C);
template <class T> void argmax_rows(const T* x, int32_t* out, int64_t R, int64_t N);  // out [R]

// ---- rms_norm, l2_norm, causal conv1d, rope ----
// (norm_conv_rope.cpp) Rows of length n: x, y, dy, dx [rows, n], w, dw [n],
// rstd / norm [rows]. dw is summed over all rows.
template <class T>
void rms_norm_forward(const T* x, const T* w, T* y, T* rstd, int64_t rows, int64_t n, T eps);
template <class T>
void rms_norm_backward(const T* x, const T* w, const T* rstd, const T* dy, T* dx, T* dw,
                       int64_t rows, int64_t n);
template <class T> void l2_norm_forward(const T* x, T* y, T* norm, int64_t rows, int64_t n, T eps);
template <class T>
void l2_norm_backward(const T* x, const T* norm, const T* dy, T* dx, int64_t rows, int64_t n,
                      T eps);
// x, y, dy, dx [B, T, C]; w, dw [C, K], tap K−1 = the current token.
template <class T>
void causal_conv1d_forward(const T* x, const T* w, T* y, int64_t B, int64_t T_len, int64_t C,
                           int64_t K);
template <class T>
void causal_conv1d_backward(const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t B,
                            int64_t T_len, int64_t C, int64_t K);
// x, y [B, T, H, D], D even; rotates pair (j, j + D/2) by (pos0 + t)·base^(−2j/D),
// or by minus that angle when `inverse`.
template <class T>
void rope_apply(const T* x, T* y, int64_t B, int64_t T_len, int64_t H, int64_t D, int64_t pos0,
                double base, bool inverse);

// ---- optimiser (AdamW step) ----
// ---- optimiser (optim.cpp) ----
// AdamW over n elements (PyTorch's single-tensor form), for each i:
//   p -= lr·weight_decay·p
//   m  = β1 m + (1 − β1) g;   v = β2 v + (1 − β2) g²
//   p -= (lr / bias_correction1) · m / (√v / √bias_correction2 + eps)
// with bias_correction = 1 − β^step. Updates p, m, v in place.
template <class T>
void adamw_step(T* p, const T* g, T* m, T* v, int64_t n, T lr, T beta1, T beta2, T eps,
                T weight_decay, T bias_correction1, T bias_correction2);
template <class T> void scale(T* x, int64_t n, T factor);  // x *= factor

// ---- scan: the linear / delta / gated-delta recurrence ----
// Per (b, h) of q, k, v [B, T, H, d] and beta, g [B, T, H]:
//   S_t = α_t S_{t−1} + u_t k_tᵀ,  o_t = S_t q_t,  states [.., d, d] value × key,
//   α_t = exp(g_t) when gated (else 1), u_t = β_t (v_t − α_t S_{t−1} k_t) when
//   delta (else v_t). beta / g are null when unused, s0 null means S_0 = 0.
struct ScanShape {
  int64_t B = 0, T = 0, H = 0, d = 0;
  bool delta = false, gated = false;
};
template <class T> struct ScanInputs {
  const T *q, *k, *v, *beta, *g;
};
// dbeta / dg null when the rule has no β / α; ds0 [B, H, d, d] always written.
template <class T> struct ScanInputGrads {
  T *dq, *dk, *dv, *dbeta, *dg, *ds0;
};
// Token by token (scan_sequential.cpp). states: null, or [B, H, T, d, d]
// receiving S_0 … S_{T−1} (the state before each write) for the backward.
template <class T>
void scan_sequential_forward(const ScanShape& s, const ScanInputs<T>& in, const T* s0, T* o,
                             T* s_final, T* states);
// dout [B, T, H, d]; ds_final [B, H, d, d] or null (zero).
template <class T>
void scan_sequential_backward(const ScanShape& s, const ScanInputs<T>& in, const T* states,
                              const T* dout, const T* ds_final, const ScanInputGrads<T>& grads);
// Chunkwise-parallel, chunks of C tokens, the last one shorter when C does not
// divide T (scan_chunked.cpp). chunk_states: null, or [B, H, ⌈T/C⌉, d, d]
// receiving the state entering each chunk.
template <class T>
void scan_chunked_forward(const ScanShape& s, int64_t C, const ScanInputs<T>& in, const T* s0,
                          T* o, T* s_final, T* chunk_states);
template <class T>
void scan_chunked_backward(const ScanShape& s, int64_t C, const ScanInputs<T>& in,
                           const T* chunk_states, const T* dout, const T* ds_final,
                           const ScanInputGrads<T>& grads);

}  // namespace lina::cpu
