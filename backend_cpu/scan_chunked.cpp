// The chunked (chunkwise-parallel) scan of every write rule: F1–F5 and
// B1–B10 of docs/recurrence.md §3 for the delta rules, and for the rules
// without the delta correction the same steps with the write vectors u = v
// and no β (docs/recurrence-gated.md). Per chunk of C tokens a handful of
// C×D, C×C and D×D products (and, for the delta rules, two unit lower
// triangular solves) replace C sequential steps. The chunks of one
// (batch, head) pair run in order, carrying the state; one pair per OpenMP
// iteration (threads only once B·H·T·D² reaches kParallelMin).
//
// One template serves every rule and shape, chunked_forward /
// chunked_backward<T, Rule, Size>:
//   Rule  how the state decays (not at all, per head, per key channel) and
//         whether the delta correction is written, as compile-time facts;
//   Size  C and D fixed at compile time for the model's shapes (D = 32,
//         C = 16 or 64), else run-time values (scan_chunk_parts.h).
// The token-by-token scan_sequential.cpp is the reference it is tested
// against (tests/test_scan.cpp).
//
// Layouts: q, k, v, o [B, T, H, D], beta [B, T, H], log_alpha [B, T, H] (or
// [B, T, H, D] for a decay per key channel); states [B, H, D, D] value ×
// key; chunk_states [B, H, N, D, D] (N = ⌈T/C⌉) the state entering each
// chunk, and for the delta rules (scan_keeps_solve) the solve's Y, W and
// the write vectors U [B, T, H, D], kept by the forward for the backward
// (ScanChunkedSaved). Outputs are written (=), never accumulated. Inside,
// each chunk's rows are copied into contiguous C×D blocks, a last chunk
// shorter than C padded with zero rows: q = k = v = 0, β = 0, log α = 0
// neither write nor decay, so the padding is exact (§3.3) and every product
// has the same sizes. The state is carried transposed, Sᵀ [key × value],
// which makes each product with Sᵀ a row-times-matrix product.
//
// Decays. The scan reads each token's decay as its log, log α_r; α_r is one
// number per head (1 without decay), or one per key channel (w = D columns
// instead of 1). Within a chunk every decay is the exponential of the
// cumulative logs λ_r = log α_0 + … + log α_r or of a difference of them
// (§3.1, recurrence-gated.md §2):
//   from_start_r     = e^{λ_r}          from the chunk start through row r
//   to_end_i         = e^{λ_end − λ_i}  from row i to the chunk end (λ_end = λ_{C−1})
//   head_between_ri  = e^{λ_r − λ_i}    Λ_ri: from row i to row r, for i ≤ r (0 above the diagonal)
// The CPU takes one exp per token, α_r = e^{log α_r}, and forms each of
// these as the product of the α whose logs the exponent sums (e^{λ_r} =
// α_0 ⋯ α_r, e^{λ_end − λ_i} = α_{i+1} ⋯ α_{C−1}, e^{λ_r − λ_i} = α_{i+1} ⋯ α_r):
// running products of at most C factors ≤ 1, never the exp of a difference
// of two large sums, never a division, so nothing overflows and an
// underflow to 0 is harmless (§5.3). A decay per key channel has one Λ per
// channel (channel_between), walked pair by pair inside the read-out
// weights P.
#include <algorithm>
#include <tuple>
#include <utility>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/parallel.h"
#include "backend_cpu/scan_chunk_parts.h"

namespace lina::cpu {

namespace {

using namespace scan_chunk;

// The write rule S_t = S_{t−1} diag(α_t) + u_t k_tᵀ as compile-time facts.
template <DecayKind kDecay, bool kDelta> struct WriteRule {
  static constexpr bool delta = kDelta;  // u = β(v − S_{t−1} diag(α) k), else u = v
  static constexpr bool per_channel = kDecay == DecayKind::LearnedPerChannel;
  static constexpr bool learned = kDecay == DecayKind::LearnedPerHead || per_channel;  // writes dlog_alpha
  static_assert(!(kDelta && per_channel), "no chunked form of a delta rule decaying per channel");
};
template <ScanRule R> using WriteRuleOf = WriteRule<decay_kind(R), uses_beta(R)>;

// Columns of the decay blocks: D for a decay per key channel, else 1.
template <class Rule, class Size> auto decay_width(const Size& z) {
  if constexpr (Rule::per_channel) return z.D;
  else return Constant<1>{};
}
// Entry (row r, key channel j) of a C×w decay block.
template <class Rule, class Size, class T> T& decay_at(const Size& z, T* block, int r, int j) {
  if constexpr (Rule::per_channel) return block[r * z.D + j];
  else return block[r];
}

// One chunk's inputs and everything computed from them before the
// read-out; the backward recomputes these from the saved entering state
// (but for Y, W, U where the forward kept them).
template <class T, class Rule, class Size> struct ChunkTerms {
  int c = 0;          // real rows; rows c … C−1 are zero padding
  T* St;              // D×D   Sᵀ, the state entering the chunk (forward: carried)
  T *Q, *K, *V;       // C×D   the chunk's rows of q, k, v
  T* Kt;              // D×C   Kᵀ
  T* beta;            // C     β (delta rules)
  T* alpha;           // C×w   α_r = e^{log α_r}, each token's decay
  T* from_start;      // C×w   e^{λ_r}
  T* to_end;          // C×w   e^{λ_end − λ_i}
  T* head_between;    // C×C   Λ_ri = e^{λ_r − λ_i} (decay per head, or none: the lower triangle of ones)
  T* Qstart;          // C×D   Q ⊙ e^λ: how each row reads the entering state
  T* Kend;            // C×D   K ⊙ e^{λ_end − λ}: how the chunk end sees each key
  T* P;               // C×C   the read-out weights of the chunk's own writes, 0 above the diagonal
  T* E;               // C×C   K Kᵀ ⊙ Λ (delta rules)
  T* A;               // C×C   strictly_lower(diag(β) E): I + A is the system of F2 (delta rules)
  T* YW;              // C×2D  [Y | W], (I + A)[Y | W] = [diag(β) V | diag(β ⊙ e^λ) K] (delta rules)
  T* U;               // C×D   the write vectors as rows: Y − W Sᵀ (delta rules), else V
  T* O;               // C×D   the chunk's read-out (forward)
  T* channel_between; // D     e^{λ_rj − λ_ij} of one pair (r, i), per key channel j (decay per channel)

  ChunkTerms(Carver<T>& carve, const Size& z) {
    const int C = z.C, D = z.D, w = decay_width<Rule>(z), with_delta = Rule::delta;
    St = carve.take(D * D);
    Q = carve.take(C * D), K = carve.take(C * D), V = carve.take(C * D), Kt = carve.take(D * C);
    beta = carve.take(C), alpha = carve.take(C * w), from_start = carve.take(C * w), to_end = carve.take(C * w);
    head_between = carve.take(Rule::per_channel ? 0 : C * C);
    Qstart = carve.take(C * D), Kend = carve.take(C * D), P = carve.take(C * C);
    E = carve.take(with_delta * C * C), A = carve.take(with_delta * C * C);
    YW = carve.take(with_delta * C * 2 * D);
    U = Rule::delta ? carve.take(C * D) : V;
    O = carve.take(C * D), channel_between = carve.take(D);
  }
};

// Rows r < c of a [B, T, H, D] tensor into a C×D block, zero rows below.
template <class Size, class T> void load_rows(const Size& z, const T* x, const ChunkPlace& at, T* block) {
  for (int r = 0; r < at.c; ++r) copy_row(z.D, x + at.row(r) * z.D, block + r * z.D);
  std::fill(block + at.c * z.D, block + z.C * z.D, T(0));
}
// Rows r < c of a C×D block into a [B, T, H, D] tensor.
template <class Size, class T> void store_rows(const Size& z, const T* block, const ChunkPlace& at, T* x) {
  for (int r = 0; r < at.c; ++r) copy_row(z.D, block + r * z.D, x + at.row(r) * z.D);
}

// The chunk's rows, β, and its decays α, e^{λ_r}, e^{λ_end − λ_i}, Λ (§3.1).
template <class T, class Rule, class Size>
void load_chunk(const ScanShape& s, const ScanInputs<T>& in, const ChunkPlace& at, const Size& z,
                ChunkTerms<T, Rule, Size>& m) {
  const int C = z.C, w = decay_width<Rule>(z);
  m.c = at.c;
  load_rows(z, in.q, at, m.Q);
  load_rows(z, in.k, at, m.K);
  load_rows(z, in.v, at, m.V);
  for (int r = 0; r < C; ++r) m.beta[r] = Rule::delta && r < at.c ? in.beta[at.row(r)] : T(0);
  // α_r = exp(log α_r), read through scan_log_alpha (0, so α = 1, without decay and when padding)
  for (int r = 0; r < C; ++r)
    for (int j = 0; j < w; ++j)
      m.alpha[r * w + j] = r < at.c ? scan_log_alpha(s, in.log_alpha, at.row(r), j) : T(0);
  exp_in_place(times(z.C, decay_width<Rule>(z)), m.alpha);
  // e^{λ_0} = α_0, e^{λ_r} = e^{λ_{r−1}} ⊙ α_r;
  // e^{λ_end − λ_{C−1}} = 1, e^{λ_end − λ_i} = e^{λ_end − λ_{i+1}} ⊙ α_{i+1}
  std::copy(m.alpha, m.alpha + w, m.from_start);
  std::fill(m.to_end + (C - 1) * w, m.to_end + C * w, T(1));
  for (int r = 1; r < C; ++r) multiply_row(w, m.from_start + (r - 1) * w, m.alpha + r * w, m.from_start + r * w);
  for (int i = C - 2; i >= 0; --i) multiply_row(w, m.to_end + (i + 1) * w, m.alpha + (i + 1) * w, m.to_end + i * w);
  if constexpr (!Rule::per_channel) {
    // Λ: row r is row r − 1 times α_r left of the diagonal, 1 on it, 0 above
    std::fill(m.head_between, m.head_between + C * C, T(0));
    m.head_between[0] = T(1);
    for (int r = 1; r < C; ++r) {
      scale_row(r, m.alpha[r], m.head_between + (r - 1) * C, m.head_between + r * C);
      m.head_between[r * C + r] = T(1);
    }
  }
}

// Calls visit(r, i, Λ_ri) for every pair i ≤ r of real rows, Λ_ri =
// e^{λ_r − λ_i} the D decays per key channel from token i to token r: walked
// from i = r (Λ_rr = 1) down, Λ_{r,i−1} = Λ_ri ⊙ α_i, one multiply per
// channel and no exp.
template <class T, class Rule, class Size, class Visit>
void walk_channel_decays(const Size& z, const ChunkTerms<T, Rule, Size>& m, Visit visit) {
  for (int r = 0; r < m.c; ++r) {
    std::fill(m.channel_between, m.channel_between + z.D, T(1));
    for (int i = r; i >= 0; --i) {
      visit(r, i, m.channel_between);
      for (int j = 0; j < z.D; ++j) m.channel_between[j] *= m.alpha[i * z.D + j];
    }
  }
}

// out = x ⊙ decay for a C×D block x and a C×w decay block (w = 1: row r
// scaled by one number).
template <class Rule, class Size, class T>
void scale_by_decay(const Size& z, const T* __restrict x, const T* __restrict decay,
                    T* __restrict out) {
  for (int r = 0; r < z.C; ++r)
    for (int j = 0; j < z.D; ++j) out[r * z.D + j] = x[r * z.D + j] * decay_at<Rule>(z, decay, r, j);
}

// Qstart = Q ⊙ e^λ, Kend = K ⊙ e^{λ_end − λ}, Kᵀ, and the read-out weights
// of the chunk's own writes,
//   per head:    P = (Q Kᵀ) ⊙ Λ
//   per channel: P_ri = Σ_j q_rj k_ij e^{λ_rj − λ_ij}  for i ≤ r
template <class T, class Rule, class Size>
void read_out_terms(const Size& z, ChunkTerms<T, Rule, Size>& m) {
  const int C = z.C, D = z.D;
  scale_by_decay<Rule>(z, m.Q, m.from_start, m.Qstart);
  scale_by_decay<Rule>(z, m.K, m.to_end, m.Kend);
  transpose(z.C, z.D, m.K, D, m.Kt);
  if constexpr (!Rule::per_channel) {
    product(z.C, z.C, z.D, m.Q, D, m.Kt, C, m.P, C);
    for (int r = 0; r < C; ++r)
      for (int i = 0; i < C; ++i) m.P[r * C + i] *= m.head_between[r * C + i];
  } else {
    std::fill(m.P, m.P + C * C, T(0));
    walk_channel_decays(z, m, [&](int r, int i, const T* decay_ri) {
      m.P[r * C + i] = dot3(z.D, m.Q + r * D, m.K + i * D, decay_ri);
    });
  }
}

// F1 of the delta rules: A = strictly_lower(diag(β) E),  E = K Kᵀ ⊙ Λ.
template <class T, class Rule, class Size> void delta_system(const Size& z, ChunkTerms<T, Rule, Size>& m) {
  const int C = z.C, D = z.D;
  product(z.C, z.C, z.D, m.K, D, m.Kt, C, m.E, C);
  for (int r = 0; r < C; ++r) {
    const T beta_r = m.beta[r];
    for (int i = 0; i < C; ++i) {
      m.E[r * C + i] *= m.head_between[r * C + i];
      m.A[r * C + i] = i < r ? beta_r * m.E[r * C + i] : T(0);
    }
  }
}

// F2–F3 of the delta rules, for the chunk entering with state Sᵀ = m.St.
template <class T, class Rule, class Size> void delta_solve(const Size& z, ChunkTerms<T, Rule, Size>& m) {
  const int C = z.C, D = z.D, D2 = z.D2;
  // F2  (I + A) [Y | W] = [diag(β) V | diag(β ⊙ e^λ) K], by forward substitution
  for (int r = 0; r < C; ++r) {
    scale_row(z.D, m.beta[r], m.V + r * D, m.YW + r * D2);
    scale_row(z.D, m.beta[r] * m.from_start[r], m.K + r * D, m.YW + r * D2 + D);
  }
  solve_unit_lower<false>(z.C, z.D2, m.A, m.YW);
  // F3  U = Y − W Sᵀ
  for (int r = 0; r < C; ++r) copy_row(z.D, m.YW + r * D2, m.U + r * D);
  product<false, Store::Sub>(z.C, z.D, z.D, m.YW + D, D2, m.St, D, m.U, D);
}

// The chunk's Y, W and U into what the forward keeps, Y, W, U [B, T, H, D].
template <class T, class Rule, class Size>
void store_solve(const Size& z, const ChunkTerms<T, Rule, Size>& m, const ChunkPlace& at,
                 const ScanChunkedSaved<T>& kept) {
  for (int r = 0; r < at.c; ++r) {
    copy_row(z.D, m.YW + r * z.D2, kept.Y + at.row(r) * z.D);
    copy_row(z.D, m.YW + r * z.D2 + z.D, kept.W + at.row(r) * z.D);
  }
  store_rows(z, m.U, at, kept.U);
}

// F2–F3 as the forward kept them: the chunk's rows of Y, W, U [B, T, H, D]
// into [Y | W] and U, zero rows below (what the solve gives the padding).
template <class T, class Rule, class Size>
void load_solve(const Size& z, const ScanChunkedSaved<const T>& kept, const ChunkPlace& at,
                ChunkTerms<T, Rule, Size>& m) {
  std::fill(m.YW, m.YW + z.C * z.D2, T(0));
  for (int r = 0; r < at.c; ++r) {
    copy_row(z.D, kept.Y + at.row(r) * z.D, m.YW + r * z.D2);
    copy_row(z.D, kept.W + at.row(r) * z.D, m.YW + r * z.D2 + z.D);
  }
  load_rows(z, kept.U, at, m.U);
}

// Everything before the read-out, for the chunk entering with Sᵀ = m.St;
// the delta rules' F2–F3 read from `kept` where the forward kept them
// (kept.U not null), else solved.
template <class T, class Rule, class Size>
void chunk_terms(const ScanShape& s, const ScanInputs<T>& in, const ChunkPlace& at, const Size& z,
                 ChunkTerms<T, Rule, Size>& m, const ScanChunkedSaved<const T>& kept = {}) {
  load_chunk(s, in, at, z, m);
  read_out_terms(z, m);
  if constexpr (Rule::delta) {
    delta_system(z, m);
    if (kept.U) load_solve(z, kept, at, m);
    else delta_solve(z, m);
  }
}

// Sᵀ ← diag(e^{λ_end}) Sᵀ: S's key channels (rows of Sᵀ) decayed over the
// whole chunk, λ_end = λ_{C−1}; out = diag(e^{λ_end}) x in general.
template <class Rule, class Size, class T>
void decay_over_chunk(const Size& z, const T* x, const T* from_start, T* out) {
  for (int i = 0; i < z.D; ++i) {
    const T decay = decay_at<Rule>(z, from_start, z.C - 1, i);
    for (int j = 0; j < z.D; ++j) out[i * z.D + j] = decay * x[i * z.D + j];
  }
}

// F4–F5: the chunk's read-out, and the state leaving it (in m.St).
template <class T, class Rule, class Size> void read_out(const Size& z, ChunkTerms<T, Rule, Size>& m) {
  const int C = z.C, D = z.D;
  // F4  O = Qstart Sᵀ + P U
  product(z.C, z.D, z.D, m.Qstart, D, m.St, D, m.O, D);
  product<false, Store::Add>(z.C, z.D, z.C, m.P, C, m.U, D, m.O, D);
  // F5  S'ᵀ = diag(e^{λ_end}) Sᵀ + Kendᵀ U
  decay_over_chunk<Rule>(z, m.St, m.from_start, m.St);
  product<true, Store::Add>(z.D, z.D, z.C, m.Kend, D, m.U, D, m.St, D);
}

// Where chunk n of the pair (b, h) sits in [B, T, H].
ChunkPlace chunk_place(const ScanShape& s, int64_t C, int64_t b, int64_t h, int64_t n) {
  const int64_t t0 = n * C;
  return ChunkPlace{int(std::min(C, s.T - t0)), (b * s.T + t0) * s.H + h, s.H};
}

// F1–F5 chunk by chunk, the state carried (transposed) in m.St from S_0 to
// S_T; kept for the backward where `saved` asks: each chunk's entering
// state, and Y, W, U (delta rules).
template <class T, class Rule, class Size>
void chunked_forward(const ScanShape& s, const Size& z, const ScanInputs<T>& in, const T* initial_state,
                     T* o, T* final_state, const ScanChunkedSaved<T>& saved) {
  const int64_t dd = z.D * z.D, pairs = s.B * s.H, chunks = (s.T + z.C - 1) / z.C;
#pragma omp parallel if (pairs > 1 && pairs * s.T * dd >= kParallelMin)
  {
    Workspace<T, Size, ChunkTerms<T, Rule, Size>> work(z);
    ChunkTerms<T, Rule, Size>& m = std::get<0>(work.parts);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < pairs; ++bh) {
      const int64_t b = bh / s.H, h = bh % s.H;
      if (initial_state) transpose(z.D, z.D, initial_state + bh * dd, z.D, m.St);
      else std::fill(m.St, m.St + dd, T(0));
      for (int64_t n = 0; n < chunks; ++n) {
        const ChunkPlace at = chunk_place(s, z.C, b, h, n);
        if (saved.chunk_states) transpose(z.D, z.D, m.St, z.D, saved.chunk_states + (bh * chunks + n) * dd);
        chunk_terms(s, in, at, z, m);
        if (Rule::delta && saved.U) store_solve(z, m, at, saved);
        read_out(z, m);
        store_rows(z, m.O, at, o);
      }
      transpose(z.D, z.D, m.St, z.D, final_state + bh * dd);  // S_T = (Sᵀ)ᵀ
    }
  }
}

// The backward's blocks beyond ChunkTerms.
template <class T, class Rule, class Size> struct ChunkGrads {
  T *G, *Gt;     // D×D   dS', the gradient of the state leaving the chunk, and dS'ᵀ
  T* dSt;        // D×D   dSᵀ, the entering state's (B2): the chunk before's dS'ᵀ
  T* dO;         // C×D   the chunk's rows of dout
  T* dU;         // C×D   the gradient of the write vectors (= dV without delta)
  T* Ut;         // D×C   Uᵀ
  T* dP;         // C×C   dO Uᵀ, then ⊙ Λ (decay per head)
  T *dOS, *UG;   // C×D   dO S and U dS'
  T *dQ, *dK;    // C×D   dq and dk through the read-out and the state (B3)
  T* dKw;        // C×D   dk through the write vectors (B7, delta rules)
  T* dB;         // C×2D  [dBV | dBK] of B6 (delta rules)
  T* YWt;        // 2D×C  [Y | W]ᵀ (delta rules)
  T *dA, *dE_decayed;  // C×C   dA and dE ⊙ Λ of B7 (delta rules)
  T* dEsym;      // C×C   dE ⊙ Λ + (dE ⊙ Λ)ᵀ (delta rules)
  T* dbeta;      // C     dβ (delta rules)
  T* dlambda;    // C×w   dλ, then d log α (B9–B10)
  T* keys_end;   // D     per key channel: the terms of dλ that come through the chunk end

  ChunkGrads(Carver<T>& carve, const Size& z) {
    const int C = z.C, D = z.D, w = decay_width<Rule>(z), with_delta = Rule::delta;
    G = carve.take(D * D), Gt = carve.take(D * D), dSt = carve.take(D * D);
    dO = carve.take(C * D), dU = carve.take(C * D), Ut = carve.take(D * C), dP = carve.take(C * C);
    dOS = carve.take(C * D), UG = carve.take(C * D), dQ = carve.take(C * D), dK = carve.take(C * D);
    dKw = carve.take(with_delta * C * D), dB = carve.take(with_delta * C * 2 * D);
    YWt = carve.take(with_delta * 2 * D * C), dA = carve.take(with_delta * C * C);
    dE_decayed = carve.take(with_delta * C * C), dEsym = carve.take(with_delta * C * C);
    dbeta = carve.take(C), dlambda = carve.take(C * w), keys_end = carve.take(D);
  }
};

// B1–B2: the gradients of the write vectors and of the entering state.
template <class T, class Rule, class Size>
void state_gradient(const Size& z, const ChunkTerms<T, Rule, Size>& m, ChunkGrads<T, Rule, Size>& g) {
  const int C = z.C, D = z.D;
  // B1  dU = Kend dS'ᵀ + Pᵀ dO
  product(z.C, z.D, z.D, m.Kend, D, g.Gt, D, g.dU, D);
  product<true, Store::Add>(z.C, z.D, z.C, m.P, C, g.dO, D, g.dU, D);
  // B2  dSᵀ = diag(e^{λ_end}) dS'ᵀ + Qstartᵀ dO − Wᵀ dU   (the W term with delta only)
  decay_over_chunk<Rule>(z, g.Gt, m.from_start, g.dSt);
  product<true, Store::Add>(z.D, z.D, z.C, m.Qstart, D, g.dO, D, g.dSt, D);
  if constexpr (Rule::delta)  // W is the right half of [Y | W], row stride 2D
    product<true, Store::Sub>(z.D, z.D, z.C, m.YW + D, z.D2, g.dU, D, g.dSt, D);
}

// B3: dq and dk through the read-out and the state (S: the entering state).
//   dP = dO Uᵀ (rows r, columns i ≤ r)
//   dQ = (dO S) ⊙ e^λ + Σ_{i ≤ r} dP_ri k_i ⊙ Λ_ri
//   dK = (U dS') ⊙ e^{λ_end − λ} + Σ_{r ≥ i} dP_ri q_r ⊙ Λ_ri
// per head the sums are (dP ⊙ Λ) K and (dP ⊙ Λ)ᵀ Q.
template <class T, class Rule, class Size>
void query_key_gradients(const Size& z, const ChunkTerms<T, Rule, Size>& m, const T* S,
                         ChunkGrads<T, Rule, Size>& g) {
  const int C = z.C, D = z.D;
  transpose(z.C, z.D, m.U, D, g.Ut);
  product(z.C, z.C, z.D, g.dO, D, g.Ut, C, g.dP, C);
  product(z.C, z.D, z.D, g.dO, D, S, D, g.dOS, D);
  scale_by_decay<Rule>(z, g.dOS, m.from_start, g.dQ);
  product(z.C, z.D, z.D, m.U, D, g.G, D, g.UG, D);
  scale_by_decay<Rule>(z, g.UG, m.to_end, g.dK);
  if constexpr (!Rule::per_channel) {
    for (int r = 0; r < C; ++r)
      for (int i = 0; i < C; ++i) g.dP[r * C + i] *= m.head_between[r * C + i];
    product<false, Store::Add>(z.C, z.D, z.C, g.dP, C, m.K, D, g.dQ, D);
    product<true, Store::Add>(z.C, z.D, z.C, g.dP, C, m.Q, D, g.dK, D);
  } else {
    walk_channel_decays(z, m, [&](int r, int i, const T* decay_ri) {
      const T dP_ri = g.dP[r * C + i];
      for (int j = 0; j < D; ++j) {
        g.dQ[r * D + j] += dP_ri * m.K[i * D + j] * decay_ri[j];
        g.dK[i * D + j] += dP_ri * m.Q[r * D + j] * decay_ri[j];
      }
    });
  }
}

// B5–B8 of the delta rules, through the system of F2 (S: the entering
// state): [dBV | dBK], dA, dE ⊙ Λ, dβ, and dk through the write vectors.
template <class T, class Rule, class Size>
void write_gradients(const Size& z, const ChunkTerms<T, Rule, Size>& m, const T* S,
                     ChunkGrads<T, Rule, Size>& g) {
  const int C = z.C, D = z.D, D2 = z.D2;
  // B5–B6  (I + A)ᵀ [dBV | dBK] = [dU | dW],  dW = −dU S   (back substitution)
  for (int r = 0; r < C; ++r) copy_row(z.D, g.dU + r * D, g.dB + r * D2);
  product(z.C, z.D, z.D, g.dU, D, S, D, g.dB + D, D2);
  for (int r = 0; r < C; ++r)
    for (int j = D; j < D2; ++j) g.dB[r * D2 + j] = -g.dB[r * D2 + j];
  solve_unit_lower<true>(z.C, z.D2, m.A, g.dB);
  // B7  dA = −strictly_lower(dB [Y | W]ᵀ);  dE ⊙ Λ = diag(β) dA ⊙ Λ
  transpose(z.C, z.D2, m.YW, D2, g.YWt);
  product(z.C, z.C, z.D2, g.dB, D2, g.YWt, C, g.dA, C);
  for (int r = 0; r < C; ++r) {
    const T beta_r = m.beta[r];
    for (int i = 0; i < C; ++i) {
      g.dA[r * C + i] = i < r ? -g.dA[r * C + i] : T(0);
      g.dE_decayed[r * C + i] = beta_r * g.dA[r * C + i] * m.head_between[r * C + i];
    }
  }
  //     dKw = diag(β ⊙ e^λ) dBK + (dE ⊙ Λ + (dE ⊙ Λ)ᵀ) K     (dV = diag(β) dBV is stored directly)
  for (int r = 0; r < C; ++r) scale_row(z.D, m.beta[r] * m.from_start[r], g.dB + r * D2 + D, g.dKw + r * D);
  for (int r = 0; r < C; ++r)
    for (int i = 0; i < C; ++i) g.dEsym[r * C + i] = g.dE_decayed[r * C + i] + g.dE_decayed[i * C + r];
  product<false, Store::Add>(z.C, z.D, z.C, g.dEsym, C, m.K, D, g.dKw, D);
  // B8  dβ_r = dBV_r·v_r + e^{λ_r} dBK_r·k_r + Σ_i dA_ri E_ri
  RowSums dbeta(z.C, g.dbeta);
  for (int r = 0; r < C; ++r) {
    dbeta.add_dot(r, z.D, g.dB + r * D2, m.V + r * D);
    dbeta.add_dot(r, z.D, g.dB + r * D2 + D, m.K + r * D, m.from_start[r]);
    dbeta.add_dot(r, z.C, g.dA + r * C, m.E + r * C);
  }
  dbeta.finish();
}

// The chunk's dq, dk, dv (and dβ) into the [B, T, H, ..] gradients.
template <class T, class Rule, class Size>
void store_gradients(const Size& z, const ChunkTerms<T, Rule, Size>& m,
                     const ChunkGrads<T, Rule, Size>& g, const ChunkPlace& at,
                     const ScanInputGrads<T>& grads) {
  const int D = z.D, D2 = z.D2;
  store_rows(z, g.dQ, at, grads.dq);
  if constexpr (!Rule::delta) {
    store_rows(z, g.dK, at, grads.dk);
    store_rows(z, g.dU, at, grads.dv);  // u = v
    return;
  }
  for (int r = 0; r < at.c; ++r) {
    add_row(z.D, g.dK + r * D, g.dKw + r * D, grads.dk + at.row(r) * D);
    scale_row(z.D, m.beta[r], g.dB + r * D2, grads.dv + at.row(r) * D);  // B7  dV = diag(β) dBV
    grads.dbeta[at.row(r)] = g.dbeta[r];
  }
}

// B9–B10: the gradient of the log-decays (S: the entering state). Every
// place λ enters the read-out and the state update is a product with q
// (as e^{+λ}) or with k (as e^{−λ}), so those terms give
// (recurrence-gated.md §3, B4)
//   dλ_r    = q_r ⊙ dq_r − k_r ⊙ dk_r                       (dq, dk of B3)
//   dλ_end += e^{λ_end} ⊙ Σ_v (dS' ⊙ S)_v + Σ_i k_i ⊙ e^{λ_end − λ_i} ⊙ (U dS')_i
// and the delta rules add what enters through F2 (recurrence.md §3.4, B9):
//   dλ_r   += β_r (e^{λ_r} dBK_r·k_r + Σ_i dA_ri E_ri) − Σ_i β_i dA_ir E_ir
// For a decay per head each dλ_r is summed over the key channels. Then
// B10: d log α_j = Σ_{r ≥ j} dλ_r, a reverse running sum within the chunk.
template <class T, class Rule, class Size>
void decay_gradient(const Size& z, const ChunkTerms<T, Rule, Size>& m, const T* S,
                    ChunkGrads<T, Rule, Size>& g) {
  const int C = z.C, D = z.D, D2 = z.D2, w = decay_width<Rule>(z);
  if constexpr (Rule::per_channel) {
    for (int r = 0; r < C; ++r)
      for (int j = 0; j < D; ++j)
        g.dlambda[r * D + j] = m.Q[r * D + j] * g.dQ[r * D + j] - m.K[r * D + j] * g.dK[r * D + j];
  } else {
    RowSums dlambda(z.C, g.dlambda);
    for (int r = 0; r < C; ++r) {
      dlambda.add_dot(r, z.D, m.Q + r * D, g.dQ + r * D);
      dlambda.add_dot(r, z.D, m.K + r * D, g.dK + r * D, T(-1));
      if constexpr (Rule::delta) {
        dlambda.add_dot(r, z.D, g.dB + r * D2 + D, m.K + r * D, m.beta[r] * m.from_start[r]);
        dlambda.add_dot(r, z.C, g.dA + r * C, m.E + r * C, m.beta[r]);
      }
    }
    dlambda.finish();
    if constexpr (Rule::delta)  // − Σ_i β_i dA_ir E_ir, a sum down each column
      for (int r = 0; r < C; ++r) {
        const T beta_r = m.beta[r];
        for (int i = 0; i < C; ++i) g.dlambda[i] -= beta_r * g.dA[r * C + i] * m.E[r * C + i];
      }
  }
  // The chunk end, per key channel j: e^{λ_end,j} Σ_v dS'_vj S_vj + Σ_i (Kend ⊙ U dS')_ij
  std::fill(g.keys_end, g.keys_end + D, T(0));
  add_column_sums_of_products(z.D, z.D, g.G, S, g.keys_end);
  for (int j = 0; j < D; ++j) g.keys_end[j] *= decay_at<Rule>(z, m.from_start, C - 1, j);
  add_column_sums_of_products(z.C, z.D, m.Kend, g.UG, g.keys_end);
  if constexpr (Rule::per_channel) {
    for (int j = 0; j < D; ++j) g.dlambda[(C - 1) * D + j] += g.keys_end[j];
  } else {
    T end = 0;
    for (int j = 0; j < D; ++j) end += g.keys_end[j];
    g.dlambda[C - 1] += end;
  }
  // B10  d log α_j = Σ_{r ≥ j} dλ_r
  for (int r = C - 2; r >= 0; --r)
    for (int j = 0; j < w; ++j) g.dlambda[r * w + j] += g.dlambda[(r + 1) * w + j];
}

// The chunk's d log α into dlog_alpha ([B, T, H], or [B, T, H, D] per key channel).
template <class T, class Rule, class Size>
void store_decay_gradient(const Size& z, const ChunkGrads<T, Rule, Size>& g, const ChunkPlace& at,
                          T* dlog_alpha) {
  if constexpr (Rule::per_channel) store_rows(z, g.dlambda, at, dlog_alpha);
  else
    for (int r = 0; r < at.c; ++r) dlog_alpha[at.row(r)] = g.dlambda[r];
}

// §3.4, one pass over the chunks in reverse: each chunk's terms are
// recomputed from its saved entering state S (Y, W, U read from what the
// forward kept, where it kept them), then B1–B2 (the state's gradient,
// carried to the chunk before) and B3–B10 (the chunk's inputs'). dS' is
// carried both ways round, G and Gᵀ, since products need each.
template <class T, class Rule, class Size>
void chunked_backward(const ScanShape& s, const Size& z, const ScanInputs<T>& in,
                      const ScanChunkedSaved<const T>& saved, const T* dout, const T* dfinal_state,
                      const ScanInputGrads<T>& grads) {
  const int64_t dd = z.D * z.D, pairs = s.B * s.H, chunks = (s.T + z.C - 1) / z.C;
#pragma omp parallel if (pairs > 1 && pairs * s.T * dd >= kParallelMin)
  {
    Workspace<T, Size, ChunkTerms<T, Rule, Size>, ChunkGrads<T, Rule, Size>> work(z);
    ChunkTerms<T, Rule, Size>& m = std::get<0>(work.parts);
    ChunkGrads<T, Rule, Size>& g = std::get<1>(work.parts);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < pairs; ++bh) {
      const int64_t b = bh / s.H, h = bh % s.H;
      if (dfinal_state) std::copy(dfinal_state + bh * dd, dfinal_state + (bh + 1) * dd, g.G);
      else std::fill(g.G, g.G + dd, T(0));
      transpose(z.D, z.D, g.G, z.D, g.Gt);
      for (int64_t n = chunks - 1; n >= 0; --n) {
        const ChunkPlace at = chunk_place(s, z.C, b, h, n);
        const T* S = saved.chunk_states + (bh * chunks + n) * dd;  // the state entering the chunk
        transpose(z.D, z.D, S, z.D, m.St);
        chunk_terms(s, in, at, z, m, saved);
        load_rows(z, dout, at, g.dO);
        state_gradient(z, m, g);
        query_key_gradients(z, m, S, g);
        if constexpr (Rule::delta) write_gradients(z, m, S, g);
        // stored before the decay's terms are formed, so the stores drain meanwhile
        store_gradients(z, m, g, at, grads);
        if constexpr (Rule::learned) {
          decay_gradient(z, m, S, g);
          store_decay_gradient(z, g, at, grads.dlog_alpha);
        }
        std::swap(g.Gt, g.dSt);  // dS of this chunk is dS' of the one before
        transpose(z.D, z.D, g.Gt, z.D, g.G);
      }
      std::copy(g.G, g.G + dd, grads.dinitial_state + bh * dd);
    }
  }
}

// Calls f(rule) with the WriteRule of `rule`.
template <class F> void with_write_rule(ScanRule rule, F&& f) {
  switch (rule) {
    case ScanRule::Linear: return f(WriteRuleOf<ScanRule::Linear>{});
    case ScanRule::Delta: return f(WriteRuleOf<ScanRule::Delta>{});
    case ScanRule::Gdn: return f(WriteRuleOf<ScanRule::Gdn>{});
    case ScanRule::Retnet: return f(WriteRuleOf<ScanRule::Retnet>{});
    case ScanRule::Mamba2: return f(WriteRuleOf<ScanRule::Mamba2>{});
    case ScanRule::Gla: return f(WriteRuleOf<ScanRule::Gla>{});
  }
}

// Calls f(size): C and D fixed at compile time for the model's head size
// and the chunk lengths lina trains with, run-time values otherwise (a
// chunk longer than the sequence shrinks to it).
template <class F> void with_size(const ScanShape& s, int64_t C, F&& f) {
  if (s.d == 32 && C == 16) return f(FixedSize<16, 32>{});
  if (s.d == 32 && C == 64) return f(FixedSize<64, 32>{});
  const int d = int(s.d);
  f(RuntimeSize{int(std::min(C, s.T)), d, 2 * d});
}

}  // namespace

template <class T>
void scan_chunked_forward(const ScanShape& s, int64_t C, const ScanInputs<T>& in, const T* initial_state,
                          T* o, T* final_state, const ScanChunkedSaved<T>& saved) {
  with_write_rule(s.rule, [&](auto rule) {
    with_size(s, C, [&](auto size) {
      chunked_forward<T, decltype(rule)>(s, size, in, initial_state, o, final_state, saved);
    });
  });
}

template <class T>
void scan_chunked_backward(const ScanShape& s, int64_t C, const ScanInputs<T>& in,
                           const ScanChunkedSaved<const T>& saved, const T* dout, const T* dfinal_state,
                           const ScanInputGrads<T>& grads) {
  with_write_rule(s.rule, [&](auto rule) {
    with_size(s, C, [&](auto size) {
      chunked_backward<T, decltype(rule)>(s, size, in, saved, dout, dfinal_state, grads);
    });
  });
}


LINA_INSTANTIATE_CPU_KERNELS(SCAN_CHUNKED)  // float and double, from core/op_list.h

}  // namespace lina::cpu
