// The argument structs of the backend kernels, shared by both backends
// (backend_cpu/ and backend_cuda/ include this header, never each other's).
#pragma once
#include <cstdint>

namespace lina {

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

}  // namespace lina
