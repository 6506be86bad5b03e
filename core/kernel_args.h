// The argument structs of the backend kernels, shared by both backends
// (backend_cpu/ and backend_cuda/ include this header, never each other's).
#pragma once
#include <cstdint>

#include "core/elementwise_math.h"  // LINA_HD

namespace lina {

// ---- causal attention: one fused kernel per (batch, head) ----
// q, out [B, Tq, H, d]; k, v [B, Tk, Hkv, d]; query head h reads KV head
// h / (H / Hkv) (grouped-query attention) by index, nothing is copied.
// Query i sees keys j <= i + (Tk − Tq) (the cached tokens, then itself).
//   scores = scale · q kᵀ,  probs = softmax over the visible keys (the others
//   get probs = 0),  out = probs · v.
// probs [B, H, Tq, Tk] is kept for the backward; dscores (same shape) is the
// backward's scratch: dscores = scale · probs ⊙ (dprobs − Σ_j probs dprobs).
struct AttentionShape {
  int64_t B = 0, Tq = 0, Tk = 0, H = 0, Hkv = 0, d = 0;
  double scale = 1.0;
};

// ---- scan: the linear / delta / gated-delta recurrence ----
// The write rule, one type from the model down to the kernels:
//   Linear      S_t = S_{t−1} + v_t k_tᵀ
//   Delta       S_t = S_{t−1}(I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ
//   GatedDelta  S_t = α_t S_{t−1}(I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ
// A rule is described to the kernels by two properties, never by its name:
// whether it corrects its write (β and the delta term) and how its state
// decays between tokens. A new rule adds a value here and answers these two.
enum class ScanRule { Linear, Delta, GatedDelta };

// How the state decays: not at all, or by α_t = exp(g_t) with one learned
// log-gate per head and token, g [B, T, H]. (The kernels that read the gate
// go through scan_log_decay below, so a decay per key channel, g [B, T, H, d],
// or a fixed one per head, is one more case there.)
enum class DecayKind { None, PerHeadGate };

constexpr bool uses_beta(ScanRule r) { return r != ScanRule::Linear; }  // β_t [B, T, H]
constexpr DecayKind decay_kind(ScanRule r) {
  return r == ScanRule::GatedDelta ? DecayKind::PerHeadGate : DecayKind::None;
}
constexpr bool uses_gate(ScanRule r) { return decay_kind(r) != DecayKind::None; }  // g [B, T, H]
constexpr const char* scan_rule_name(ScanRule r) {
  return r == ScanRule::Linear ? "linear rule" : r == ScanRule::Delta ? "delta rule" : "gated delta rule";
}

// Per (b, h) of q, k, v [B, T, H, d] and beta, g [B, T, H]:
//   S_t = α_t S_{t−1} + u_t k_tᵀ,  o_t = S_t q_t,  states [.., d, d] value × key,
//   α_t = exp(g_t) when gated (else 1), u_t = β_t (v_t − α_t S_{t−1} k_t) when
//   delta (else v_t). beta / g are null when unused, s0 null means S_0 = 0.
struct ScanShape {
  int64_t B = 0, T = 0, H = 0, d = 0;
  ScanRule rule = ScanRule::Linear;
};
template <class T> struct ScanInputs {
  const T *q, *k, *v, *beta, *g;
};
// dbeta / dg null when the rule has no β / α; ds0 [B, H, d, d] always written.
template <class T> struct ScanInputGrads {
  T *dq, *dk, *dv, *dbeta, *dg, *ds0;
};

// log α of `token` (an index into [B, T, H]) for key channel j: the one place
// a kernel reads the decay, so kernels written with it take any DecayKind.
template <class T>
LINA_HD T scan_log_decay(ScanRule rule, const T* g, int64_t token, int64_t /*j*/) {
  return decay_kind(rule) == DecayKind::PerHeadGate ? g[token] : T(0);
}

}  // namespace lina
