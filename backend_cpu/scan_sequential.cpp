// The recurrence token by token (docs/recurrence.md §1–2): the readable reference
// the chunked form is checked against. One (batch, head) pair per OpenMP
// iteration (threads only once B·H·T·d² reaches kParallelMin); inside, d×d
// matrix-vector work on Eigen maps, no allocation per token.
//
// Layouts: q, k, v, o [B, T, H, d] (token t of head h at ((b·T + t)·H + h)·d),
// beta, g [B, T, H], states [B, H, d, d] value × key, saved states
// [B, H, T, d, d]. Every output is written (=), never accumulated.
#include <Eigen/Core>
#include <cmath>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/eigen_maps.h"
#include "backend_cpu/parallel.h"

namespace lina::cpu {

namespace {


}  // namespace

template <class T>
void scan_sequential_forward(const ScanShape& s, const ScanInputs<T>& in, const T* s0, T* o,
                             T* s_final, T* states) {
  const int64_t d = s.d, dd = d * d, pairs = s.B * s.H;
#pragma omp parallel if (pairs > 1 && pairs * s.T * dd >= kParallelMin)
  {
    Vector<T> p(d), u(d);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < pairs; ++bh) {
      const int64_t b = bh / s.H, h = bh % s.H;
      // The running state lives in the output S_T.
      MatrixMap<T> S(s_final + bh * dd, d, d);
      if (s0) S = ConstMatrixMap<T>(s0 + bh * dd, d, d);
      else S.setZero();
      for (int64_t t = 0; t < s.T; ++t) {
        const int64_t token = (b * s.T + t) * s.H + h;  // index into [B, T, H]
        ConstVectorMap<T> q_t(in.q + token * d, d), k_t(in.k + token * d, d),
            v_t(in.v + token * d, d);
        if (states) MatrixMap<T>(states + (bh * s.T + t) * dd, d, d) = S;  // S_{t−1}
        const T alpha = uses_gate(s.rule) ? std::exp(in.g[token]) : T(1);
        if (uses_beta(s.rule)) {
          p.noalias() = S * k_t;                           // p = S_{t−1} k_t
          u = in.beta[token] * (v_t - alpha * p);          // u = β (v − α p)
        } else {
          u = v_t;
        }
        if (uses_gate(s.rule)) S *= alpha;
        S.noalias() += u * k_t.transpose();                // S_t = α S_{t−1} + u kᵀ
        VectorMap<T>(o + token * d, d).noalias() = S * q_t;  // o_t = S_t q_t
      }
    }
  }
}

// Reverse-time recurrence of §2.1. G is the gradient of L with respect to
// the current state; it starts at dS_T and ends as dS_0.
template <class T>
void scan_sequential_backward(const ScanShape& s, const ScanInputs<T>& in, const T* states,
                              const T* dout, const T* ds_final, const ScanInputGrads<T>& grads) {
  const int64_t d = s.d, dd = d * d, pairs = s.B * s.H;
#pragma omp parallel if (pairs > 1 && pairs * s.T * dd >= kParallelMin)
  {
    RowMatrix<T> G(d, d);
    Vector<T> p(d), r(d), u(d), e(d);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < pairs; ++bh) {
      const int64_t b = bh / s.H, h = bh % s.H;
      if (ds_final) G = ConstMatrixMap<T>(ds_final + bh * dd, d, d);
      else G.setZero();
      for (int64_t t = s.T - 1; t >= 0; --t) {
        const int64_t token = (b * s.T + t) * s.H + h;
        ConstVectorMap<T> q_t(in.q + token * d, d), k_t(in.k + token * d, d),
            v_t(in.v + token * d, d), do_t(dout + token * d, d);
        VectorMap<T> dq_t(grads.dq + token * d, d), dk_t(grads.dk + token * d, d),
            dv_t(grads.dv + token * d, d);
        ConstMatrixMap<T> S_prev(states + (bh * s.T + t) * dd, d, d);  // S_{t−1}
        const T alpha = uses_gate(s.rule) ? std::exp(in.g[token]) : T(1);
        const T beta = uses_beta(s.rule) ? in.beta[token] : T(1);

        // Recompute this step's write u_t (and r_t, p = S_{t−1} k_t).
        if (uses_beta(s.rule)) {
          p.noalias() = S_prev * k_t;
          r = v_t - alpha * p;
          u = beta * r;
        } else {
          u = v_t;
        }

        G.noalias() += do_t * q_t.transpose();  // read-out o_t = S_t q_t: now G = G_t
        e.noalias() = G * k_t;                  // e = dL/du_t
        // dq_t = S_tᵀ dO_t with S_t = α S_{t−1} + u kᵀ, so no S_t needs storing.
        dq_t.noalias() = alpha * S_prev.transpose() * do_t;
        dq_t += u.dot(do_t) * k_t;
        dk_t.noalias() = G.transpose() * u;  // from the write u kᵀ
        if (!uses_beta(s.rule)) {                      // linear: G passes through unchanged
          dv_t = e;
          continue;
        }
        dv_t = beta * e;
        grads.dbeta[token] = e.dot(r);
        dk_t.noalias() -= (alpha * beta) * (S_prev.transpose() * e);  // from u = β(v − α S k)
        if (uses_gate(s.rule)) {
          // dα = ⟨G, S_{t−1}⟩ − β eᵀ(S_{t−1} k);  dg = α dα
          const T dalpha = G.cwiseProduct(S_prev).sum() - beta * e.dot(p);
          grads.dg[token] = alpha * dalpha;
        }
        G.noalias() -= beta * e * k_t.transpose();  // G ← α (G − β e kᵀ)
        if (uses_gate(s.rule)) G *= alpha;
      }
      MatrixMap<T>(grads.ds0 + bh * dd, d, d) = G;
    }
  }
}

template void scan_sequential_forward<float>(const ScanShape&, const ScanInputs<float>&,
                                             const float*, float*, float*, float*);
template void scan_sequential_forward<double>(const ScanShape&, const ScanInputs<double>&,
                                              const double*, double*, double*, double*);
template void scan_sequential_backward<float>(const ScanShape&, const ScanInputs<float>&,
                                              const float*, const float*, const float*,
                                              const ScanInputGrads<float>&);
template void scan_sequential_backward<double>(const ScanShape&, const ScanInputs<double>&,
                                               const double*, const double*, const double*,
                                               const ScanInputGrads<double>&);

}  // namespace lina::cpu
