// The argument structs of the backend kernels, shared by both backends
// (backend_cpu/ and backend_cuda/ include this header, never each other's).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/elementwise_math.h"  // LINA_HD
#include "core/philox.h"            // DropoutKey

namespace lina {

// ---- causal attention: one fused kernel per (batch, head) ----
// q, out [B, Tq, H, d]; k, v [B, Tk, Hkv, d]; query head h reads KV head
// h / (H / Hkv) (grouped-query attention) by index, nothing is copied.
// Query i sees keys j <= i + (Tk − Tq) (the cached tokens, then itself).
//   scores = scale · q kᵀ,  probs = softmax over the visible keys (the others
//   get probs = 0),  out = probs · v.
// probs [B, H, Tq, Tk] is kept for the backward; dscores (same shape) is the
// backward's scratch: dscores = scale · probs ⊙ (dprobs − Σ_j probs dprobs).
// With dropout (p > 0), out = (probs ⊙ M) · v, where M's entry for probs
// element e = (b·H + h)·Tq·Tk + i·Tk + j is dropout_factor(dropout, e)
// (core/philox.h): probs stays the undropped softmax, and the backward
// regenerates M instead of storing it.
struct AttentionShape {
  int64_t B = 0, Tq = 0, Tk = 0, H = 0, Hkv = 0, d = 0;
  double scale = 1.0;
  DropoutKey dropout;
};

// ---- rms_norm_gated: where its gate lies ----
// Element e = r·n + i of x [rows, n] (counted flat) has its gate at
// gate[(e / cols)·ld + offset + e % cols]: the gate takes `cols` columns,
// from column `offset`, of a matrix whose rows are ld long. A gate of x's
// shape: cols = ld = n, offset 0. The recurrent mixers' gate inside their
// one product z [B, T, ld] (x [B, T, H, n]): cols = C = H·n, offset 3C.
// cols is a multiple of n, so each row of x finds its gate in one row.
struct GateColumns {
  int64_t cols = 1, ld = 1, offset = 0;
  LINA_HD int64_t index(int64_t e) const { return (e / cols) * ld + offset + e % cols; }
  // Where row r of x [rows, n] finds its n gates, one after another.
  LINA_HD int64_t row_start(int64_t r, int64_t n) const { return index(r * n); }
  // The j-th column outside the gate's (0 ≤ j < ld − cols): what a fresh
  // gradient of the matrix holds 0 in.
  LINA_HD int64_t outside(int64_t j) const { return j < offset ? j : j + cols; }
};

// ---- scan: the recurrences of the recurrent mixers ----
// The write rule, one type from the model down to the kernels:
//   Linear              S_t = S_{t−1} + v_t k_tᵀ
//   Delta               S_t = S_{t−1}(I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ
//   Gdn                 S_t = α_t S_{t−1}(I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ  (gated delta)
//   Retnet              S_t = α_h S_{t−1} + v_t k_tᵀ       (retention: a fixed α per head, RetNet's γ)
//   Mamba2              S_t = α_t S_{t−1} + v_t k_tᵀ       (a learned α per head)
//   Gla                 S_t = S_{t−1} diag(α_t) + v_t k_tᵀ (gated linear: a learned α per key channel)
// Each value is named for the preset that uses it (lina train --preset gdn, ...).
// A rule is described to the kernels by two properties, never by its name:
// whether it corrects its write (β and the delta term) and how its state
// decays between tokens. A new rule adds a value here and answers these two.
enum class ScanRule { Linear, Delta, Gdn, Retnet, Mamba2, Gla };

// How the state decays: not at all; by a fixed α_h = 1 − 2^(−5−h) per head h;
// by α_t = exp(log_alpha_t), one learned log α per head and token, log_alpha
// [B, T, H]; or by α_t = exp(log_alpha_t) per key channel, log_alpha
// [B, T, H, d]. Kernels read the decay only through scan_log_alpha below,
// so every kind goes through the same code.
enum class DecayKind { None, FixedPerHead, LearnedPerHead, LearnedPerChannel };

// The recurrence's form: token by token (recurrence.md §1–2), or
// chunkwise-parallel (§3), both computing the same S_t.
enum class ScanForm { Sequential, Chunked };
// Tokens per chunk of the chunked form: its C×C work per chunk grows with C,
// its sequential steps fall with T/C; 16 was fastest at the spec's shapes.
constexpr int kDefaultScanChunk = 16;
// How one scan runs, from the model (ModelConfig) down to the kernels.
struct ScanOptions {
  ScanRule rule = ScanRule::Gdn;
  ScanForm form = ScanForm::Chunked;
  int chunk = kDefaultScanChunk;  // chunk length C of the chunked form
};

constexpr bool uses_beta(ScanRule r) {  // β_t [B, T, H] and the delta correction
  return r == ScanRule::Delta || r == ScanRule::Gdn;
}
constexpr DecayKind decay_kind(ScanRule r) {
  return r == ScanRule::Gdn || r == ScanRule::Mamba2 ? DecayKind::LearnedPerHead
         : r == ScanRule::Retnet                              ? DecayKind::FixedPerHead
         : r == ScanRule::Gla                     ? DecayKind::LearnedPerChannel
                                                                 : DecayKind::None;
}
constexpr bool decays(ScanRule r) { return decay_kind(r) != DecayKind::None; }
// The rule reads a learned log α, log_alpha (and the backward returns dlog_alpha).
constexpr bool learns_decay(ScanRule r) {
  return decay_kind(r) == DecayKind::LearnedPerHead || decay_kind(r) == DecayKind::LearnedPerChannel;
}
constexpr bool decays_per_channel(ScanRule r) { return decay_kind(r) == DecayKind::LearnedPerChannel; }
constexpr const char* scan_rule_name(ScanRule r) {
  return r == ScanRule::Linear   ? "linear"
         : r == ScanRule::Delta  ? "delta"
         : r == ScanRule::Gdn    ? "gdn"
         : r == ScanRule::Retnet ? "retnet"
         : r == ScanRule::Mamba2 ? "mamba2"
                                 : "gla";
}

// Per (b, h) of q, k, v [B, T, H, d], beta [B, T, H] and log_alpha [B, T, H] (or
// [B, T, H, d] when the decay is per channel):
//   S_t = S_{t−1} diag(a_t) + u_t k_tᵀ,  o_t = S_t q_t,  states [.., d, d] value × key,
//   a_tj = exp(scan_log_alpha(.., j)) (all 1 without decay, all α_t for a
//   per-head decay), u_t = β_t (v_t − S_{t−1} diag(a_t) k_t) when delta (else
//   v_t). beta / log_alpha are null when unused, initial_state null means S_0 = 0.
struct ScanShape {
  int64_t B = 0, T = 0, H = 0, d = 0;
  ScanRule rule = ScanRule::Linear;
};
template <class T> struct ScanInputs {
  const T *q, *k, *v, *beta, *log_alpha;
};
// dbeta / dlog_alpha null when the rule has no β / learned decay;
// dinitial_state [B, H, d, d] always written.
template <class T> struct ScanInputGrads {
  T *dq, *dk, *dv, *dbeta, *dlog_alpha, *dinitial_state;
};

// The most tokens the chunked form's solve (F2 of docs/recurrence.md §3.3)
// covers at once on the CUDA backend, which cuts a longer chunk into tiles
// of at most this many (backend_cuda/scan_tiles.cuh); the CPU solves whole
// chunks.
constexpr int64_t kScanTileTokens = 64;
// Whether the chunked forward keeps its solve's results for the backward:
// for a delta rule whose chunks are at most one tile long, so that Y and W
// are the chunk's on every backend. (With longer chunks the CUDA backward
// solves again, tile by tile.)
constexpr bool scan_keeps_solve(ScanRule rule, int64_t T, int64_t C) {
  return uses_beta(rule) && (C < T ? C : T) <= kScanTileTokens;
}
// What the chunked forward keeps for its backward: written by
// scan_chunked_forward (T = float or double), read by scan_chunked_backward
// (T = const float or const double). chunk_states [B, H, ⌈T/C⌉, d, d], the
// state entering each chunk (null: no backward will run); where
// scan_keeps_solve, F2's solution Y, W and F3's write vectors U (row t is
// u_t), [B, T, H, d] each; otherwise these three are null.
template <class T> struct ScanChunkedSaved {
  T* chunk_states;
  T *Y, *W, *U;
};

// log α_h = log(1 − 2^(−5−h)) of the retention rule (RetNet's per-head decay:
// 0.96875, 0.984375, 0.9921875, 0.99609375 for h = 0..3).
LINA_HD double retention_log_alpha(int64_t h) {
  return log1p(-ldexp(1.0, -5 - int(h)));
}

// log α of `token` (an index into [B, T, H]) for key channel j: the one place
// a kernel reads the decay, so kernels written with it take any DecayKind.
template <class T>
LINA_HD T scan_log_alpha(const ScanShape& s, const T* log_alpha, int64_t token, int64_t j) {
  switch (decay_kind(s.rule)) {
    case DecayKind::FixedPerHead: return T(retention_log_alpha(token % s.H));
    case DecayKind::LearnedPerHead: return log_alpha[token];
    case DecayKind::LearnedPerChannel: return log_alpha[token * s.d + j];
    default: return T(0);
  }
}

}  // namespace lina
