// The recurrence token by token (docs/recurrence.md §1–2): the readable reference
// the chunked form is checked against. One (batch, head) pair per OpenMP
// iteration (threads only once B·H·T·d² reaches kParallelMin); inside, d×d
// matrix-vector work on Eigen maps, no allocation per token.
//
// Layouts: q, k, v, o [B, T, H, d] (token t of head h at ((b·T + t)·H + h)·d),
// beta [B, T, H], log_alpha [B, T, H] (or [B, T, H, d] for a decay per key channel),
// states [B, H, d, d] value × key, saved states [B, H, T, d, d]. Every output
// is written (=), never accumulated. The decay is read per key channel
// through scan_log_alpha (core/kernel_args.h), so one loop serves every rule.
#include <Eigen/Core>
#include <cmath>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/eigen_maps.h"
#include "backend_cpu/parallel.h"

namespace lina::cpu {

namespace {

// α_j = exp(log α_j), the decay of key channel j at `token`: all ones
// without decay, one value repeated for a per-head decay, d values for a
// per-channel decay.
template <class T>
void decay_of(const ScanShape& s, const ScanInputs<T>& in, int64_t token, Vector<T>& alpha) {
  for (int64_t j = 0; j < s.d; ++j) alpha[j] = std::exp(scan_log_alpha(s, in.log_alpha, token, j));
}

}  // namespace

template <class T>
void scan_sequential_forward(const ScanShape& s, const ScanInputs<T>& in, const T* initial_state, T* o,
                             T* final_state, T* states) {
  const int64_t d = s.d, dd = d * d, pairs = s.B * s.H;
#pragma omp parallel if (pairs > 1 && pairs * s.T * dd >= kParallelMin)
  {
    Vector<T> alpha = Vector<T>::Ones(d), p(d), u(d);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < pairs; ++bh) {
      const int64_t b = bh / s.H, h = bh % s.H;
      // The running state lives in the output S_T.
      MatrixMap<T> S(final_state + bh * dd, d, d);
      if (initial_state) S = ConstMatrixMap<T>(initial_state + bh * dd, d, d);
      else S.setZero();
      for (int64_t t = 0; t < s.T; ++t) {
        const int64_t token = (b * s.T + t) * s.H + h;  // index into [B, T, H]
        ConstVectorMap<T> q_t(in.q + token * d, d), k_t(in.k + token * d, d),
            v_t(in.v + token * d, d);
        if (states) MatrixMap<T>(states + (bh * s.T + t) * dd, d, d) = S;  // S_{t−1}
        if (decays(s.rule)) decay_of(s, in, token, alpha);
        if (decays(s.rule)) S.array().rowwise() *= alpha.transpose().array();  // S_{t−1} diag(α_t)
        if (uses_beta(s.rule)) {
          p.noalias() = S * k_t;                           // p = S_{t−1} diag(α) k_t
          u = in.beta[token] * (v_t - p);                  // u = β (v − p)
        } else {
          u = v_t;
        }
        S.noalias() += u * k_t.transpose();                // S_t = S_{t−1} diag(α) + u kᵀ
        VectorMap<T>(o + token * d, d).noalias() = S * q_t;  // o_t = S_t q_t
      }
    }
  }
}

// Reverse-time recurrence of §2.1, with the decay per key channel (a rule
// that decays per head has all α_j equal; then dlog_alpha is the sum over j). G is
// the gradient of L with respect to the current state; it starts at dS_T and
// ends as dS_0. With Sa = S_{t−1} diag(α):
//   G += dO qᵀ;  e = G k;  dv = β e;  dβ = eᵀ(v − Sa k)
//   dq = Saᵀ dO + (uᵀ dO) k;  dk = Gᵀ u − β Saᵀ e
//   d log α_j = α_j (Σ_i G_ij S_{t−1,ij} − β k_j (S_{t−1}ᵀ e)_j)
//   G ← (G − β e kᵀ) diag(α)
template <class T>
void scan_sequential_backward(const ScanShape& s, const ScanInputs<T>& in, const T* states,
                              const T* dout, const T* dfinal_state, const ScanInputGrads<T>& grads) {
  const int64_t d = s.d, dd = d * d, pairs = s.B * s.H;
#pragma omp parallel if (pairs > 1 && pairs * s.T * dd >= kParallelMin)
  {
    RowMatrix<T> G(d, d), Sa(d, d);
    Vector<T> alpha = Vector<T>::Ones(d), p(d), r(d), u(d), e(d), Se(d), dlog_alpha(d);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < pairs; ++bh) {
      const int64_t b = bh / s.H, h = bh % s.H;
      if (dfinal_state) G = ConstMatrixMap<T>(dfinal_state + bh * dd, d, d);
      else G.setZero();
      for (int64_t t = s.T - 1; t >= 0; --t) {
        const int64_t token = (b * s.T + t) * s.H + h;
        ConstVectorMap<T> q_t(in.q + token * d, d), k_t(in.k + token * d, d),
            v_t(in.v + token * d, d), do_t(dout + token * d, d);
        VectorMap<T> dq_t(grads.dq + token * d, d), dk_t(grads.dk + token * d, d),
            dv_t(grads.dv + token * d, d);
        ConstMatrixMap<T> S_prev(states + (bh * s.T + t) * dd, d, d);  // S_{t−1}
        if (decays(s.rule)) decay_of(s, in, token, alpha);
        Sa = S_prev * alpha.asDiagonal();
        const T beta = uses_beta(s.rule) ? in.beta[token] : T(1);

        // Recompute this step's write u_t (and r_t, p = Sa k_t).
        if (uses_beta(s.rule)) {
          p.noalias() = Sa * k_t;
          r = v_t - p;
          u = beta * r;
        } else {
          u = v_t;
        }

        G.noalias() += do_t * q_t.transpose();  // read-out o_t = S_t q_t: now G = G_t
        e.noalias() = G * k_t;                  // e = dL/du_t
        // dq_t = S_tᵀ dO_t with S_t = Sa + u kᵀ, so no S_t needs storing.
        dq_t.noalias() = Sa.transpose() * do_t;
        dq_t += u.dot(do_t) * k_t;
        dk_t.noalias() = G.transpose() * u;  // from the write u kᵀ
        dv_t = beta * e;
        if (uses_beta(s.rule)) {
          grads.dbeta[token] = e.dot(r);
          Se.noalias() = S_prev.transpose() * e;
          dk_t -= beta * alpha.cwiseProduct(Se);  // from u = β(v − Sa k)
        }
        if (learns_decay(s.rule)) {
          // dL/dα_j = Σ_i G_ij S_{t−1,ij} − β k_j (S_{t−1}ᵀ e)_j;  d log α_j = α_j dL/dα_j
          dlog_alpha = G.cwiseProduct(S_prev).colwise().sum().transpose();
          if (uses_beta(s.rule)) dlog_alpha -= beta * k_t.cwiseProduct(Se);
          dlog_alpha = dlog_alpha.cwiseProduct(alpha);
          if (decays_per_channel(s.rule)) VectorMap<T>(grads.dlog_alpha + token * d, d) = dlog_alpha;
          else grads.dlog_alpha[token] = dlog_alpha.sum();
        }
        if (uses_beta(s.rule)) G.noalias() -= beta * e * k_t.transpose();
        if (decays(s.rule)) G.array().rowwise() *= alpha.transpose().array();  // G ← (G − β e kᵀ) diag(α)
      }
      MatrixMap<T>(grads.dinitial_state + bh * dd, d, d) = G;
    }
  }
}


LINA_INSTANTIATE_CPU_KERNELS(SCAN_SEQUENTIAL)  // float and double, from core/op_list.h

}  // namespace lina::cpu
