// CUDA rms_norm (alone and after a residual sum), l2_norm, causal depthwise conv1d (alone and fused with
// SiLU) and rope (float32), the GPU twins of backend_cpu/norm_conv_rope.cpp. The work of each thread (or,
// for the norms, each phase of a block) is in
// backend_cuda/norm_conv_rope_device.h; this file launches it.
//
//   norms          one warp per row (warp_reduce.cuh): the row's Σ is a
//                  butterfly of shuffles, in double, no atomics
//   conv1d, rope   one thread per output element, grid-stride loops; the
//                  fused conv + SiLU's backward writes dz = dy ⊙ silu'(z)
//                  (z recomputed) to a scratch, then runs the conv's backward
//   weight grads   rms_norm dw and conv dw: pass 1 sums fixed chunks of rows
//                  into a scratch buffer, pass 2 adds the chunks in order,
//                  so every run gives the same bits; both passes and dx run
//                  in one launch: dx and pass 1 on blocks of their own, pass 2
//                  on the last block to finish (last_block.cuh)
#include <string>

#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"
#include "backend_cuda/last_block.cuh"
#include "backend_cuda/norm_conv_rope_device.h"
#include "backend_cuda/scratch.h"
#include "backend_cuda/warp_reduce.cuh"

namespace lina::cuda {

// ---- kernels --------------------------------------------------------------------------

// Row r's norm once its Σx² is known, by the 32 lanes of one warp:
// rstd[r] = ρ = (mean(x²) + ε)^(−1/2), y = w ⊙ ρx; gated (else gate null):
// y = silu(gate) ⊙ (w ⊙ ρx), as swiglu would, x's element e gated by
// gate[g.index(e)] (GateColumns: x's shape, or columns of a wider product).
__device__ void rms_norm_row(int64_t r, const float* xr, double sum_squares, const float* w, const float* gate,
                             const GateColumns& g, float* y, float* rstd, int64_t n, float eps) {
  const float rho = float(1.0 / ::sqrt(sum_squares / double(n) + double(eps)));
  if (lane() == 0) rstd[r] = rho;
  for (int64_t i = lane(); i < n; i += kWarp) {
    const float m = w[i] * (rho * xr[i]);
    y[r * n + i] = gate ? math::Silu::forward(gate[g.index(r * n + i)], 0.0f) * m : m;
  }
}

// rms_norm: x, y [rows, n], w [n], rstd [rows], a warp per row.
__global__ void rms_norm_forward_kernel(const float* x, const float* w, const float* gate, GateColumns g,
                                        float* y, float* rstd, int64_t rows, int64_t n, float eps) {
  for (int64_t r = first_row(); r < rows; r += row_stride()) {
    const float* xr = x + r * n;
    double sum_squares = 0.0;
    for (int64_t i = lane(); i < n; i += kWarp) sum_squares += double(xr[i]) * double(xr[i]);
    rms_norm_row(r, xr, warp_sum(sum_squares), w, gate, g, y, rstd, n, eps);
  }
}

// residual_rms_norm: sum = x + h ⊙ M, then y = w ⊙ ρ·sum, a warp per row;
// each lane reads back only the sums it wrote. The sum rounds as
// dropout_kernel's (the product, then the add), so the bits are those of
// residual_dropout, then rms_norm.
__global__ void residual_rms_norm_forward_kernel(const float* x, const float* h, const float* w, float* sum,
                                                 float* y, float* rstd, int64_t rows, int64_t n, float eps,
                                                 DropoutKey key) {
  for (int64_t r = first_row(); r < rows; r += row_stride()) {
    double sum_squares = 0.0;
    for (int64_t i = lane(); i < n; i += kWarp) {
      const int64_t e = r * n + i;
      const float dropped = h[e] * dropout_factor<float>(key, e);
      const float s = __fadd_rn(x[e], dropped);
      sum[e] = s;
      sum_squares += double(s) * double(s);
    }
    rms_norm_row(r, sum + r * n, warp_sum(sum_squares), w, nullptr, GateColumns{}, y, rstd, n, eps);
  }
}

// A fresh dgate holds 0 outside the gate's columns: the warp of the first
// row of x in each of dgate's rows writes them.
__device__ void zero_outside_gate(int64_t r, int64_t n, const GateColumns& g, float* dgate) {
  if ((r * n) % g.cols != 0) return;
  float* row = dgate + (r * n / g.cols) * g.ld;
  for (int64_t j = lane(); j < g.ld - g.cols; j += kWarp) row[g.outside(j)] = 0.0f;
}

// Row r's dx = ρ (h − x̂ c) with x̂ = ρx, h = dn ⊙ w, c = x̂ᵀh / n, dn what
// reaches the norm (rms_norm_dn), by the 32 lanes of one warp; dx += that
// where `add`. Gated, also dgate = dy ⊙ m ⊙ silu'(gate), m = w ⊙ x̂ the norm,
// at the gate's places (g.index).
__device__ void rms_norm_dx_row(int64_t r, const float* x, const float* w, const float* gate,
                                const GateColumns& g, const float* rstd, const float* dy, float* dx,
                                float* dgate, int64_t n, bool add, bool add_dgate) {
  const float* xr = x + r * n;
  const float rho = rstd[r];
  double xhat_h = 0.0;
  for (int64_t i = lane(); i < n; i += kWarp)
    xhat_h += double(rho * xr[i]) * double(rms_norm_dn(r * n + i, dy, gate, g) * w[i]);
  const float c = float(warp_sum(xhat_h) / double(n));
  for (int64_t i = lane(); i < n; i += kWarp) {
    const int64_t e = r * n + i;
    const float dxe = rho * (rms_norm_dn(e, dy, gate, g) * w[i] - (rho * xr[i]) * c);
    dx[e] = add ? dx[e] + dxe : dxe;
    if (!gate) continue;
    const int64_t ge = g.index(e);
    const float dg = math::Silu::backward(gate[ge], 0.0f, dy[e] * (w[i] * (rho * xr[i])), 0.0f);
    dgate[ge] = add_dgate ? dgate[ge] + dg : dg;
  }
  if (gate && !add_dgate) zero_outside_gate(r, n, g, dgate);
}

// rms_norm's backward in one launch of two kinds of block: blocks [0,
// dx_blocks) take dx, a warp per row; the others take dw pass 1, a thread
// per element of partial [chunks, n]. (The branch is the same for a whole
// block, so each warp's shuffles see all 32 lanes.) The last block to finish
// takes dw pass 2. With dh (residual_rms_norm's backward, x its sum and dx
// the sum's gradient), each dx row also goes on to the branch h:
// dh = dx ⊙ M, by the lanes that wrote it.
__global__ void rms_norm_backward_kernel(const float* x, const float* w, const float* gate, GateColumns g,
                                         const float* rstd, const float* dy, float* dx, float* dw, float* dgate,
                                         float* partial, int64_t rows, int64_t n, bool add_dx, bool add_dw,
                                         bool add_dgate, float* dh, DropoutKey key, unsigned dx_blocks,
                                         unsigned* blocks_done) {
  if (blockIdx.x < dx_blocks) {
    const int64_t stride = int64_t(dx_blocks) * kRowsPerBlock;
    for (int64_t r = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp; r < rows; r += stride) {
      rms_norm_dx_row(r, x, w, gate, g, rstd, dy, dx, dgate, n, add_dx, add_dgate);
      if (!dh) continue;
      for (int64_t i = lane(); i < n; i += kWarp)
        dh[r * n + i] = dx[r * n + i] * dropout_factor<float>(key, r * n + i);
    }
  } else {
    const int64_t count = row_chunks(rows) * n;
    const int64_t stride = int64_t(gridDim.x - dx_blocks) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x - dx_blocks) * blockDim.x + threadIdx.x; i < count; i += stride)
      rms_norm_dw_partial_thread(i, x, gate, g, rstd, dy, partial, rows, n);
  }
  if (!last_block_done(blocks_done)) return;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    sum_partials_thread(i, partial, row_chunks(rows), n, dw, add_dw);
}

// l2_norm: x, y [rows, n], norm [rows]:  y = s · x / max(‖x‖, ε), s = scale; norm = ‖x‖.
__global__ void l2_norm_forward_kernel(const float* x, float* y, float* norm, int64_t rows, int64_t n,
                                       float eps, float scale) {
  for (int64_t r = first_row(); r < rows; r += row_stride()) {
    const float* xr = x + r * n;
    double sum_squares = 0.0;
    for (int64_t i = lane(); i < n; i += kWarp) sum_squares += double(xr[i]) * double(xr[i]);
    const float nrm = float(::sqrt(warp_sum(sum_squares)));
    if (lane() == 0) norm[r] = nrm;
    const float inv = scale / (nrm > eps ? nrm : eps);  // s / max(‖x‖, ε)
    for (int64_t i = lane(); i < n; i += kWarp) y[r * n + i] = xr[i] * inv;
  }
}

// dx = s (dy − ŷ (ŷᵀdy)) / ‖x‖ with ŷ = x / ‖x‖; a row with ‖x‖ ≤ ε was
// divided by the constant ε, so there dx = s dy / ε.
__global__ void l2_norm_backward_kernel(const float* x, const float* norm, const float* dy, float* dx,
                                        int64_t rows, int64_t n, float eps, float scale) {
  for (int64_t r = first_row(); r < rows; r += row_stride()) {
    const float* xr = x + r * n;
    const float* dyr = dy + r * n;
    const float nrm = norm[r];
    const bool linear = !(nrm > eps);  // same test as the CPU: NaN counts as linear
    const float inv = linear ? 0.0f : 1.0f / nrm;  // 1 / ‖x‖
    double yhat_dy = 0.0;
    if (!linear)
      for (int64_t i = lane(); i < n; i += kWarp) yhat_dy += double(xr[i] * inv) * double(dyr[i]);
    const float ydy = float(warp_sum(yhat_dy));
    const float scaled_inv = scale * inv;  // s / ‖x‖
    for (int64_t i = lane(); i < n; i += kWarp)
      dx[r * n + i] = linear ? scale * dyr[i] / eps : (dyr[i] - xr[i] * inv * ydy) * scaled_inv;
  }
}

__global__ void causal_conv1d_forward_kernel(const float* x, const float* w, float* y,
                                             int64_t count, int64_t T_len, int64_t C, int64_t K) {
  for (int64_t i = first_index(); i < count; i += index_stride())
    causal_conv1d_forward_thread(i, x, w, y, T_len, C, K);
}

// The conv's backward of dy in one launch of two kinds of block: blocks [0,
// dx_blocks) take dx [B, T, ld], a thread per element; the others take dw
// pass 1, a thread per element of partial [chunks, K, C]. The last block to
// finish takes dw pass 2. x's and dx's rows are ld ≥ C long; dx += where
// add_dx (its first C columns), dw += where add_dw.
__global__ void causal_conv1d_backward_kernel(const float* x, const float* w, const float* dy, float* dx,
                                              float* dw, float* partial, int64_t B, int64_t T_len,
                                              int64_t C, int64_t ld, int64_t K, bool add_dx, bool add_dw,
                                              unsigned dx_blocks, unsigned* blocks_done) {
  const int64_t rows = B * T_len;
  if (blockIdx.x < dx_blocks) {
    const int64_t stride = int64_t(dx_blocks) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * ld; i += stride)
      causal_conv1d_dx_thread(i, w, dy, dx, T_len, C, ld, K, add_dx);
  } else {
    const int64_t count = row_chunks(rows) * K * C;
    const int64_t stride = int64_t(gridDim.x - dx_blocks) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x - dx_blocks) * blockDim.x + threadIdx.x; i < count; i += stride)
      causal_conv1d_dw_partial_thread(i, x, dy, partial, B, T_len, C, ld, K);
  }
  if (!last_block_done(blocks_done)) return;
  for (int64_t i = threadIdx.x; i < C * K; i += blockDim.x)
    causal_conv1d_dw_sum_thread(i, partial, dw, row_chunks(rows), C, K, add_dw);
}

__global__ void causal_conv1d_silu_forward_kernel(const float* x, const float* w, float* y,
                                                  int64_t count, int64_t T_len, int64_t C,
                                                  int64_t K) {
  for (int64_t i = first_index(); i < count; i += index_stride())
    causal_conv1d_silu_forward_thread(i, x, w, y, T_len, C, K);
}

__global__ void causal_conv1d_silu_dz_kernel(const float* x, const float* w, const float* dy,
                                             float* dz, int64_t count, int64_t T_len, int64_t C,
                                             int64_t K) {
  for (int64_t i = first_index(); i < count; i += index_stride())
    causal_conv1d_silu_dz_thread(i, x, w, dy, dz, T_len, C, K);
}

__global__ void rope_kernel(const float* x, float* y, int64_t count, int64_t T_len, int64_t H,
                            int64_t D, int64_t pos0, double base, bool inverse) {
  for (int64_t i = first_index(); i < count; i += index_stride())
    rope_thread(i, x, y, T_len, H, D, pos0, base, inverse);
}

// ---- launchers ----------------------------------------------------------------------------

void rms_norm_forward(const float* x, const float* w, const float* gate, const GateColumns& g, float* y,
                      float* rstd, int64_t rows, int64_t n, float eps) {
  if (rows == 0) return;
  LINA_LAUNCH(rms_norm_forward_kernel, row_blocks(rows), kThreads, 0, context().stream)(x, w, gate, g, y, rstd,
                                                                                     rows, n, eps);
  LINA_CHECK_LAUNCH("cuda::rms_norm_forward");
}

// The backward of both norms: rms_norm's (dh null) and residual_rms_norm's.
static void launch_rms_norm_backward(const float* x, const float* w, const float* gate, const GateColumns& g,
                                     const float* rstd, const float* dy, float* dx, float* dw, float* dgate,
                                     int64_t rows, int64_t n, bool add_dx, bool add_dw, bool add_dgate, float* dh,
                                     const DropoutKey& key) {
  if (n == 0) return;
  cudaStream_t stream = context().stream;
  if (rows == 0) {  // an empty sum
    if (!add_dw) fill(dw, n, 0.0f);
    return;
  }
  const int64_t chunks = row_chunks(rows);
  Scratch<float> partial(chunks * n);  // [chunks, n]
  const unsigned dx_blocks = row_blocks(rows);
  LINA_LAUNCH(rms_norm_backward_kernel, dx_blocks + blocks_for(chunks * n), kThreads, 0, stream)(
      x, w, gate, g, rstd, dy, dx, dw, dgate, partial.get(), rows, n, add_dx, add_dw, add_dgate, dh, key, dx_blocks,
      context().blocks_done);
  LINA_CHECK_LAUNCH("cuda::rms_norm_backward");
}

void rms_norm_backward(const float* x, const float* w, const float* gate, const GateColumns& g, const float* rstd,
                       const float* dy, float* dx, float* dw, float* dgate, int64_t rows, int64_t n, bool add_dx,
                       bool add_dw, bool add_dgate) {
  launch_rms_norm_backward(x, w, gate, g, rstd, dy, dx, dw, dgate, rows, n, add_dx, add_dw, add_dgate, nullptr,
                           DropoutKey{});
}

void residual_rms_norm_forward(const float* x, const float* h, const float* w, float* sum, float* y, float* rstd,
                               int64_t rows, int64_t n, float eps, const DropoutKey& key) {
  if (rows == 0) return;
  LINA_LAUNCH(residual_rms_norm_forward_kernel, row_blocks(rows), kThreads, 0, context().stream)(
      x, h, w, sum, y, rstd, rows, n, eps, key);
  LINA_CHECK_LAUNCH("cuda::residual_rms_norm_forward");
}

void residual_rms_norm_backward(const float* sum, const float* w, const float* rstd, const float* dy, float* dsum,
                                float* dh, float* dw, int64_t rows, int64_t n, bool add_dsum, bool add_dw,
                                const DropoutKey& key) {
  launch_rms_norm_backward(sum, w, nullptr, GateColumns{}, rstd, dy, dsum, dw, nullptr, rows, n, add_dsum, add_dw,
                           false, dh, key);
}

void l2_norm_forward(const float* x, float* y, float* norm, int64_t rows, int64_t n, float eps,
                     float scale) {
  if (rows == 0) return;
  LINA_LAUNCH(l2_norm_forward_kernel, row_blocks(rows), kThreads, 0, context().stream)(x, y, norm, rows, n, eps,
                                                                                    scale);
  LINA_CHECK_LAUNCH("cuda::l2_norm_forward");
}

void l2_norm_backward(const float* x, const float* norm, const float* dy, float* dx, int64_t rows,
                      int64_t n, float eps, float scale) {
  if (rows == 0 || n == 0) return;
  LINA_LAUNCH(l2_norm_backward_kernel, row_blocks(rows), kThreads, 0, context().stream)(x, norm, dy, dx, rows,
                                                                                     n, eps, scale);
  LINA_CHECK_LAUNCH("cuda::l2_norm_backward");
}

void causal_conv1d_forward(const float* x, const float* w, float* y, int64_t B, int64_t T_len,
                           int64_t C, int64_t K) {
  const int64_t count = B * T_len * C;
  if (count == 0) return;
  LINA_LAUNCH(causal_conv1d_forward_kernel, blocks_for(count), kThreads, 0, context().stream)(
      x, w, y, count, T_len, C, K);
  LINA_CHECK_LAUNCH("cuda::causal_conv1d_forward");
}

// The conv's backward of dy [B, T, C], rows = B·T > 0: dx [B, T, ld] (+=
// where add_dx), and dw in two passes (+= where add_dw), one launch.
static void conv1d_backward_launch(const float* x, const float* w, const float* dy, float* dx,
                                   float* dw, int64_t B, int64_t T_len, int64_t C, int64_t ld, int64_t K,
                                   bool add_dx, bool add_dw, const char* what) {
  const int64_t rows = B * T_len;
  Scratch<float> partial(row_chunks(rows) * K * C);  // [chunks, K, C]
  const unsigned dx_blocks = blocks_for(rows * ld);
  LINA_LAUNCH(causal_conv1d_backward_kernel, dx_blocks + blocks_for(row_chunks(rows) * K * C), kThreads, 0,
              context().stream)(x, w, dy, dx, dw, partial.get(), B, T_len, C, ld, K, add_dx, add_dw,
                                dx_blocks, context().blocks_done);
  LINA_CHECK_LAUNCH(what);
}

void causal_conv1d_backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                            int64_t B, int64_t T_len, int64_t C, int64_t K, bool add_dw) {
  if (C * K == 0) return;
  if (B * T_len == 0) {  // an empty sum
    if (!add_dw) fill(dw, C * K, 0.0f);
    return;
  }
  conv1d_backward_launch(x, w, dy, dx, dw, B, T_len, C, C, K, /*add_dx=*/false, add_dw,
                         "cuda::causal_conv1d_backward");
}

void causal_conv1d_silu_forward(const float* x, const float* w, float* y, int64_t B,
                                int64_t T_len, int64_t C, int64_t K) {
  const int64_t count = B * T_len * C;
  if (count == 0) return;
  LINA_LAUNCH(causal_conv1d_silu_forward_kernel, blocks_for(count), kThreads, 0, context().stream)(
      x, w, y, count, T_len, C, K);
  LINA_CHECK_LAUNCH("cuda::causal_conv1d_silu_forward");
}

void causal_conv1d_silu_backward(const float* x, const float* w, const float* dy, float* dx,
                                 float* dw, int64_t B, int64_t T_len, int64_t C, int64_t K,
                                 bool add_dw) {
  if (C * K == 0) return;
  if (B * T_len == 0) {  // an empty sum
    if (!add_dw) fill(dw, C * K, 0.0f);
    return;
  }
  const int64_t count = B * T_len * C;
  Scratch<float> dz(count);  // [B, T, C], returned to the pool after the launches below
  LINA_LAUNCH(causal_conv1d_silu_dz_kernel, blocks_for(count), kThreads, 0, context().stream)(
      x, w, dy, dz.get(), count, T_len, C, K);
  LINA_CHECK_LAUNCH("cuda::causal_conv1d_silu_backward (dz)");
  conv1d_backward_launch(x, w, dz.get(), dx, dw, B, T_len, C, C, K, /*add_dx=*/false, add_dw,
                         "cuda::causal_conv1d_silu_backward (dx, dw)");
}

// conv + SiLU, then each head's L2 norm, one warp per head of one token
// (the launches below): group g = bt · (C / head) + h of `head` channels.
// planes: where channel c of token bt goes in the output [planes, B·T, C/planes].
__device__ inline int64_t plane_index(int64_t bt, int64_t c, int64_t rows, int64_t width) {
  return (c / width * rows + bt) * width + c % width;
}

// y = s · silu(z) / max(‖silu(z)‖, ε) in the normalised planes, silu(z) in
// the others; ‖silu(z)‖ summed in double by the warp's butterfly. Each lane
// recomputes its channels' z for the write (K taps) instead of keeping them.
__global__ void causal_conv1d_silu_l2_norm_kernel(const float* x, const float* w, float* y, float* norm,
                                                  int64_t rows, int64_t T_len, int64_t C, int64_t ld, int64_t K,
                                                  int64_t head, int64_t width, int64_t normed_heads,
                                                  float eps, float scale) {
  const int64_t heads = C / head, groups = rows * heads;
  for (int64_t g = first_row(); g < groups; g += row_stride()) {
    const int64_t bt = g / heads, h = g % heads, c0 = h * head;
    const bool normed = h < normed_heads;
    double sum_squares = 0.0;
    if (normed)
      for (int64_t i = lane(); i < head; i += kWarp) {
        const float yi = math::Silu::forward(causal_conv1d_value(bt, c0 + i, x, w, T_len, ld, K), 0.0f);
        sum_squares += double(yi) * double(yi);
      }
    const float nrm = float(::sqrt(warp_sum(sum_squares)));  // every lane takes part
    if (normed && lane() == 0) norm[bt * normed_heads + h] = nrm;
    const float inv = normed ? scale / (nrm > eps ? nrm : eps) : 1.0f;  // s / max(‖y‖, ε)
    for (int64_t i = lane(); i < head; i += kWarp) {
      const float yi = math::Silu::forward(causal_conv1d_value(bt, c0 + i, x, w, T_len, ld, K), 0.0f);
      y[plane_index(bt, c0 + i, rows, width)] = normed ? yi * inv : yi;
    }
  }
}

// dz = dy ⊙ silu'(z), z recomputed, dy = the L2 norm's backward of dq in the
// normalised planes (dq itself in the others): dy = s (dq − ŷ (ŷᵀdq)) / ‖y‖,
// or s dq / ε where ‖y‖ ≤ ε. dz is [B, T, C], for the conv's backward.
__global__ void causal_conv1d_silu_l2_norm_dz_kernel(const float* x, const float* w, const float* norm,
                                                     const float* dq, float* dz, int64_t rows,
                                                     int64_t T_len, int64_t C, int64_t ld, int64_t K, int64_t head,
                                                     int64_t width, int64_t normed_heads, float eps,
                                                     float scale) {
  const int64_t heads = C / head, groups = rows * heads;
  for (int64_t g = first_row(); g < groups; g += row_stride()) {
    const int64_t bt = g / heads, h = g % heads, c0 = h * head;
    const bool normed = h < normed_heads;
    const float nrm = normed ? norm[bt * normed_heads + h] : 0.0f;
    const bool linear = !(nrm > eps);  // same test as the CPU: NaN counts as linear
    const float inv = linear ? 0.0f : 1.0f / nrm;  // 1 / ‖y‖
    double yhat_dq = 0.0;
    if (normed && !linear)
      for (int64_t i = lane(); i < head; i += kWarp) {
        const float yi = math::Silu::forward(causal_conv1d_value(bt, c0 + i, x, w, T_len, ld, K), 0.0f);
        yhat_dq += double(yi * inv) * double(dq[plane_index(bt, c0 + i, rows, width)]);
      }
    const float ydq = float(warp_sum(yhat_dq));
    for (int64_t i = lane(); i < head; i += kWarp) {
      const float zi = causal_conv1d_value(bt, c0 + i, x, w, T_len, ld, K);
      const float dqi = dq[plane_index(bt, c0 + i, rows, width)];
      float dyi = dqi;
      if (normed) {
        const float yi = math::Silu::forward(zi, 0.0f);
        dyi = linear ? scale * dqi / eps : (dqi - yi * inv * ydq) * (scale * inv);
      }
      dz[bt * C + c0 + i] = math::Silu::backward(zi, 0.0f, dyi, 0.0f);
    }
  }
}

void causal_conv1d_silu_l2_norm_forward(const float* x, const float* w, float* q, float* norm, int64_t B,
                                   int64_t T_len, int64_t C, int64_t ld, int64_t K, int64_t head, int64_t planes,
                                   int64_t normed, float eps, float scale) {
  const int64_t rows = B * T_len, width = C / planes;
  if (rows * C == 0) return;
  LINA_LAUNCH(causal_conv1d_silu_l2_norm_kernel, row_blocks(rows * (C / head)), kThreads, 0, context().stream)(
      x, w, q, norm, rows, T_len, C, ld, K, head, width, normed * width / head, eps, scale);
  LINA_CHECK_LAUNCH("cuda::causal_conv1d_silu_l2_norm_forward");
}

// dz from the kernel above, then the conv's backward of dz (dx += where
// add_dx: the gated norm's backward, run first, began z's gradient).
void causal_conv1d_silu_l2_norm_backward(const float* x, const float* w, const float* norm,
                                    const float* dq, float* dx, float* dw, int64_t B,
                                    int64_t T_len, int64_t C, int64_t ld, int64_t K, int64_t head, int64_t planes,
                                    int64_t normed, float eps, float scale, bool add_dx, bool add_dw) {
  const int64_t rows = B * T_len, width = C / planes;
  if (rows * C == 0) {
    causal_conv1d_silu_backward(x, w, dq, dx, dw, B, T_len, C, K, add_dw);  // dw = 0, or as it was
    if (rows * ld > 0 && !add_dx) fill(dx, rows * ld, 0.0f);                // no channel: dx = 0
    return;
  }
  Scratch<float> dz(rows * C);  // [B, T, C]
  LINA_LAUNCH(causal_conv1d_silu_l2_norm_dz_kernel, row_blocks(rows * (C / head)), kThreads, 0, context().stream)(
      x, w, norm, dq, dz.get(), rows, T_len, C, ld, K, head, width, normed * width / head, eps, scale);
  LINA_CHECK_LAUNCH("cuda::causal_conv1d_silu_l2_norm_backward (dz)");
  conv1d_backward_launch(x, w, dz.get(), dx, dw, B, T_len, C, ld, K, add_dx, add_dw,
                         "cuda::causal_conv1d_silu_l2_norm_backward (dx, dw)");
}

void rope_apply(const float* x, float* y, int64_t B, int64_t T_len, int64_t H, int64_t D,
                int64_t pos0, double base, bool inverse) {
  const int64_t count = B * T_len * H * (D / 2);  // one thread per rotated pair
  if (count == 0) return;
  LINA_LAUNCH(rope_kernel, blocks_for(count), kThreads, 0, context().stream)(x, y, count, T_len, H, D, pos0,
                                                                    base, inverse);
  LINA_CHECK_LAUNCH("cuda::rope_apply");
}

}  // namespace lina::cuda
