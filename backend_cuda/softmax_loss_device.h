// The per-thread and per-phase work of the softmax, log-softmax,
// cross-entropy, embedding and argmax CUDA kernels (softmax_loss.cu), as
// LINA_HD functions: the .cu launches them, and
// tests/test_cuda_emulation_softmax_loss.cpp runs the same functions on the
// host. No CUDA headers: the file must compile under g++ alone.
//
// Row kernels are block kernels (block_kernel.h): one block per row, thread t
// owning the row's entries j = t, t + kThreads, …  The threads' partial
// results are combined by halving in shared memory, always in the same order,
// so a given input gives the same bits on every run. No atomics.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "backend_cuda/block_kernel.h"

namespace lina::cuda {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

// True when phase p is one of the kReducePhases halving steps starting at `first`.
LINA_HD bool is_reduce_phase(int p, int first) { return p >= first && p < first + kReducePhases; }

// ---- a thread's share of a row: entries j = thread, thread + kThreads, … < n ----

LINA_HD float strided_max(const float* row, int64_t n, int thread) {
  float m = kMinusInfinity;
  for (int64_t j = thread; j < n; j += kThreads) m = row[j] > m ? row[j] : m;
  return m;
}

// Σ exp(row[j] − shift); when exps is not null, also exps[j] = exp(row[j] − shift).
LINA_HD float strided_exp_sum(const float* row, float* exps, int64_t n, float shift, int thread) {
  float s = 0.0f;
  for (int64_t j = thread; j < n; j += kThreads) {
    float e = expf(row[j] - shift);
    if (exps) exps[j] = e;
    s += e;
  }
  return s;
}

LINA_HD float strided_sum(const float* row, int64_t n, int thread) {
  float s = 0.0f;
  for (int64_t j = thread; j < n; j += kThreads) s += row[j];
  return s;
}

LINA_HD float strided_dot(const float* a, const float* b, int64_t n, int thread) {
  float s = 0.0f;
  for (int64_t j = thread; j < n; j += kThreads) s += a[j] * b[j];
  return s;
}

// ---- the log-sum-exp of a row, shared by softmax, log-softmax, cross-entropy ----

// The block's partial maxima and sums; after the log-sum-exp phases
// max_partial[0] = m = max_j x[j] and sum_partial[0] = s = Σ_j exp(x[j] − m).
struct RowStats {
  float max_partial[kThreads];
  float sum_partial[kThreads];
};

// Phase 0: each thread's maximum; then halving to the row maximum m;
// then each thread's Σ exp(x − m) (subtracting m keeps exp from overflowing);
// then halving to the row sum s.
constexpr int kMaxPhase = 0;
constexpr int kExpSumPhase = kMaxPhase + 1 + kReducePhases;
constexpr int kLogSumExpPhases = kExpSumPhase + 1 + kReducePhases;

// Phase p (< kLogSumExpPhases) of the log-sum-exp of x [n]. When exps is not
// null it receives exp(x[j] − m) [n] (the unnormalised softmax).
LINA_HD void row_log_sum_exp_phase(int p, const float* x, float* exps, int64_t n, RowStats& stats,
                                   int thread) {
  if (p == kMaxPhase) {
    stats.max_partial[thread] = strided_max(x, n, thread);
  } else if (is_reduce_phase(p, kMaxPhase + 1)) {
    reduce_step(p - (kMaxPhase + 1), stats.max_partial, thread, MaxOp{});
  } else if (p == kExpSumPhase) {
    stats.sum_partial[thread] = strided_exp_sum(x, exps, n, stats.max_partial[0], thread);
  } else if (is_reduce_phase(p, kExpSumPhase + 1)) {
    reduce_step(p - (kExpSumPhase + 1), stats.sum_partial, thread, AddOp{});
  }
}

// log Σ_j exp(x[j]) = m + log s, once the log-sum-exp phases have run.
LINA_HD float log_normaliser(const RowStats& stats) {
  return stats.max_partial[0] + logf(stats.sum_partial[0]);
}

// ---- softmax ------------------------------------------------------------------------

// The keys row r may see: all N, or with causal (rows form [Tq, N] matrices)
// query i = r mod Tq sees keys j ≤ i + (N − Tq).
LINA_HD int64_t visible_keys(int64_t r, int64_t N, int64_t Tq, bool causal) {
  if (!causal) return N;
  int64_t last = r % Tq + (N - Tq);
  return last + 1 < N ? last + 1 : N;
}

// y = exp(x − m) / s over the visible keys, 0 for the rest (never
// exponentiated, so −inf or NaN there cannot leak in).
struct SoftmaxForwardKernel {
  struct Args {
    const float* x;  // [R, N]
    float* y;        // [R, N]
    int64_t R, N, Tq;
    bool causal;
  };
  using Shared = RowStats;
  static constexpr int kNormalisePhase = kLogSumExpPhases;
  static constexpr int kPhases = kNormalisePhase + 1;

  LINA_HD static int64_t blocks(const Args& a) { return a.R; }
  LINA_HD static void phase(int p, const Args& a, Shared& stats, int64_t row, int thread) {
    const float* x = a.x + row * a.N;
    float* y = a.y + row * a.N;
    int64_t visible = visible_keys(row, a.N, a.Tq, a.causal);
    if (p < kLogSumExpPhases) {
      row_log_sum_exp_phase(p, x, y, visible, stats, thread);  // y = exp(x − m) for now
    } else if (p == kNormalisePhase) {
      float inv = 1.0f / stats.sum_partial[0];
      for (int64_t j = thread; j < a.N; j += kThreads) y[j] = j < visible ? y[j] * inv : 0.0f;
    }
  }
};

// dx = y ⊙ (dy − Σ_j y_j dy_j): the Jacobian of softmax is diag(y) − y yᵀ.
struct SoftmaxBackwardKernel {
  struct Args {
    const float* y;   // [R, N]
    const float* dy;  // [R, N]
    float* dx;        // [R, N]
    int64_t R, N;
  };
  struct Shared {
    float partial[kThreads];  // Σ y dy, partial[0] the row's after the halving
  };
  static constexpr int kPhases = 1 + kReducePhases + 1;

  LINA_HD static int64_t blocks(const Args& a) { return a.R; }
  LINA_HD static void phase(int p, const Args& a, Shared& sh, int64_t row, int thread) {
    const float* y = a.y + row * a.N;
    const float* dy = a.dy + row * a.N;
    float* dx = a.dx + row * a.N;
    if (p == 0) {
      sh.partial[thread] = strided_dot(y, dy, a.N, thread);
    } else if (is_reduce_phase(p, 1)) {
      reduce_step(p - 1, sh.partial, thread, AddOp{});
    } else {
      float dot = sh.partial[0];
      for (int64_t j = thread; j < a.N; j += kThreads) dx[j] = y[j] * (dy[j] - dot);
    }
  }
};

// ---- log-softmax ----------------------------------------------------------------------

// y = x − (m + log s)
struct LogSoftmaxForwardKernel {
  struct Args {
    const float* x;  // [R, N]
    float* y;        // [R, N]
    int64_t R, N;
  };
  using Shared = RowStats;
  static constexpr int kPhases = kLogSumExpPhases + 1;

  LINA_HD static int64_t blocks(const Args& a) { return a.R; }
  LINA_HD static void phase(int p, const Args& a, Shared& stats, int64_t row, int thread) {
    const float* x = a.x + row * a.N;
    float* y = a.y + row * a.N;
    if (p < kLogSumExpPhases) {
      row_log_sum_exp_phase(p, x, nullptr, a.N, stats, thread);
    } else {
      float shift = log_normaliser(stats);
      for (int64_t j = thread; j < a.N; j += kThreads) y[j] = x[j] - shift;
    }
  }
};

// dx = dy − softmax(x) · Σ_j dy_j, with softmax(x) = exp(y).
struct LogSoftmaxBackwardKernel {
  struct Args {
    const float* y;   // [R, N]
    const float* dy;  // [R, N]
    float* dx;        // [R, N]
    int64_t R, N;
  };
  struct Shared {
    float partial[kThreads];  // Σ dy, partial[0] the row's after the halving
  };
  static constexpr int kPhases = 1 + kReducePhases + 1;

  LINA_HD static int64_t blocks(const Args& a) { return a.R; }
  LINA_HD static void phase(int p, const Args& a, Shared& sh, int64_t row, int thread) {
    const float* y = a.y + row * a.N;
    const float* dy = a.dy + row * a.N;
    float* dx = a.dx + row * a.N;
    if (p == 0) {
      sh.partial[thread] = strided_sum(dy, a.N, thread);
    } else if (is_reduce_phase(p, 1)) {
      reduce_step(p - 1, sh.partial, thread, AddOp{});
    } else {
      float total = sh.partial[0];
      for (int64_t j = thread; j < a.N; j += kThreads) dx[j] = dy[j] - expf(y[j]) * total;
    }
  }
};

// ---- cross-entropy ----------------------------------------------------------------------
// loss = Σ_r mask_r · nll_r / count, nll_r = −log softmax(logits_r)[t_r],
// count = max(Σ_r mask_r, 1) (R when there is no mask). Forward: a block per
// row writes probs and its masked nll to a scratch buffer, then one block
// adds the buffer in a fixed order. Backward: one block computes
// dloss / count, then one thread per element of dlogits.

// Thread `thread`'s share of Σ_r mask_r (in double, like the CPU backend);
// R itself when there is no mask (counted once, by thread 0).
LINA_HD double strided_mask_count(const float* mask, int64_t R, int thread) {
  if (!mask) return thread == 0 ? double(R) : 0.0;
  double s = 0.0;
  for (int64_t r = thread; r < R; r += kThreads) s += double(mask[r]);
  return s;
}

LINA_HD double strided_sum_double(const double* v, int64_t n, int thread) {
  double s = 0.0;
  for (int64_t j = thread; j < n; j += kThreads) s += v[j];
  return s;
}

// The count the loss divides by: max(Σ mask, 1).
LINA_HD double loss_count(double mask_total) { return mask_total > 1.0 ? mask_total : 1.0; }

// Per row: probs = softmax(logits) and row_nll = mask · (log Σ exp(logits) − logits[t]).
struct CrossEntropyRowsKernel {
  struct Args {
    const float* logits;    // [R, V]
    const int32_t* targets; // [R]
    const float* mask;      // [R] or null
    float* probs;           // [R, V]
    double* row_nll;        // [R] scratch
    int64_t R, V;
  };
  using Shared = RowStats;
  static constexpr int kNormalisePhase = kLogSumExpPhases;
  static constexpr int kPhases = kNormalisePhase + 1;

  LINA_HD static int64_t blocks(const Args& a) { return a.R; }
  LINA_HD static void phase(int p, const Args& a, Shared& stats, int64_t row, int thread) {
    const float* x = a.logits + row * a.V;
    float* probs = a.probs + row * a.V;
    if (p < kLogSumExpPhases) {
      row_log_sum_exp_phase(p, x, probs, a.V, stats, thread);  // probs = exp(x − m) for now
    } else if (p == kNormalisePhase) {
      float inv = 1.0f / stats.sum_partial[0];
      for (int64_t j = thread; j < a.V; j += kThreads) probs[j] *= inv;
      if (thread == 0) {
        // −log softmax(x)[t] = log Σ exp(x) − x[t]
        double nll = double(log_normaliser(stats)) - double(x[a.targets[row]]);
        a.row_nll[row] = a.mask ? double(a.mask[row]) * nll : nll;
      }
    }
  }
};

// One block: loss = Σ row_nll / max(Σ mask, 1).
struct CrossEntropyTotalKernel {
  struct Args {
    const double* row_nll;  // [R]
    const float* mask;      // [R] or null
    float* loss;            // [1]
    int64_t R;
  };
  struct Shared {
    double nll_partial[kThreads];
    double count_partial[kThreads];
  };
  static constexpr int kPhases = 1 + kReducePhases + 1;

  LINA_HD static int64_t blocks(const Args&) { return 1; }
  LINA_HD static void phase(int p, const Args& a, Shared& sh, int64_t, int thread) {
    if (p == 0) {
      sh.nll_partial[thread] = strided_sum_double(a.row_nll, a.R, thread);
      sh.count_partial[thread] = strided_mask_count(a.mask, a.R, thread);
    } else if (is_reduce_phase(p, 1)) {
      reduce_step(p - 1, sh.nll_partial, thread, AddOp{});
      reduce_step(p - 1, sh.count_partial, thread, AddOp{});
    } else if (thread == 0) {
      *a.loss = float(sh.nll_partial[0] / loss_count(sh.count_partial[0]));
    }
  }
};

// One block: scale = dloss / max(Σ mask, 1), the factor every dlogits row shares.
struct CrossEntropyScaleKernel {
  struct Args {
    const float* mask;   // [R] or null
    const float* dloss;  // [1]
    float* scale;        // [1] scratch
    int64_t R;
  };
  struct Shared {
    double count_partial[kThreads];
  };
  static constexpr int kPhases = 1 + kReducePhases + 1;

  LINA_HD static int64_t blocks(const Args&) { return 1; }
  LINA_HD static void phase(int p, const Args& a, Shared& sh, int64_t, int thread) {
    if (p == 0) {
      sh.count_partial[thread] = strided_mask_count(a.mask, a.R, thread);
    } else if (is_reduce_phase(p, 1)) {
      reduce_step(p - 1, sh.count_partial, thread, AddOp{});
    } else if (thread == 0) {
      *a.scale = float(double(*a.dloss) / loss_count(sh.count_partial[0]));
    }
  }
};

// Element i = (r, j) of dlogits [R, V]: w · (p − onehot(t_r))[j], w = scale · mask_r.
LINA_HD void cross_entropy_backward_thread(int64_t i, const float* probs, const int32_t* targets,
                                           const float* mask, const float* scale, float* dlogits,
                                           int64_t V) {
  int64_t r = i / V, j = i % V;
  float w = mask ? *scale * mask[r] : *scale;
  float d = w * probs[i];
  if (j == targets[r]) d -= w;
  dlogits[i] = d;
}

// ---- embedding --------------------------------------------------------------------------

// Element i = (n, c) of out [N, C]: weight[ids[n], c].
LINA_HD void embedding_forward_thread(int64_t i, const float* weight, const int32_t* ids,
                                      float* out, int64_t C) {
  int64_t n = i / C, c = i % C;
  out[i] = weight[int64_t(ids[n]) * C + c];
}

// Element i = (v, c) of dweight [V, C]: Σ dy[n, c] over the n with ids[n] = v,
// added in order of n. Each output has one owner thread, so repeated ids
// need no atomics and the sum is the same on every run (0 where no id is v).
LINA_HD void embedding_backward_thread(int64_t i, const float* dy, const int32_t* ids,
                                       float* dweight, int64_t N, int64_t C) {
  int64_t v = i / C, c = i % C;
  float s = 0.0f;
  for (int64_t n = 0; n < N; ++n)
    if (ids[n] == v) s += dy[n * C + c];
  dweight[i] = s;
}

// ---- argmax -----------------------------------------------------------------------------

// A candidate maximum of a row and where it is.
struct ValueIndex {
  float value;
  int64_t index;
};

// The larger value wins; on a tie the smaller index (the first maximum).
struct FirstMaxOp {
  LINA_HD ValueIndex operator()(ValueIndex a, ValueIndex b) const {
    bool b_wins = b.value > a.value || (b.value == a.value && b.index < a.index);
    return b_wins ? b : a;
  }
};

// Thread `thread`'s first maximum of x [n]; index n when it owns no entry.
// Like std::max_element, x[0] is always a candidate and a later entry must
// be strictly greater to replace the current best (so NaN after x[0] never
// wins, and a row of −inf gives 0).
LINA_HD ValueIndex strided_first_max(const float* x, int64_t n, int thread) {
  ValueIndex best{kMinusInfinity, n};
  for (int64_t j = thread; j < n; j += kThreads)
    if (j == 0 || x[j] > best.value) best = ValueIndex{x[j], j};
  return best;
}

// out[r] = the first j with x[r, j] = max_j x[r, j]
struct ArgmaxRowsKernel {
  struct Args {
    const float* x;  // [R, N]
    int32_t* out;    // [R]
    int64_t R, N;
  };
  struct Shared {
    ValueIndex partial[kThreads];
  };
  static constexpr int kPhases = 1 + kReducePhases + 1;

  LINA_HD static int64_t blocks(const Args& a) { return a.R; }
  LINA_HD static void phase(int p, const Args& a, Shared& sh, int64_t row, int thread) {
    if (p == 0) {
      sh.partial[thread] = strided_first_max(a.x + row * a.N, a.N, thread);
    } else if (is_reduce_phase(p, 1)) {
      reduce_step(p - 1, sh.partial, thread, FirstMaxOp{});
    } else if (thread == 0) {
      // a row with no entries (N = 0) gives 0, like the CPU backend
      int64_t best = sh.partial[0].index;
      a.out[row] = int32_t(best < a.N ? best : 0);
    }
  }
};

}  // namespace lina::cuda
