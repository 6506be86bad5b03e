// Dropout's random numbers: Philox4x32-10, a counter-based generator
// (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011).
// A counter-based generator has no state to carry: the random number of an
// element is a pure function of (key, counter), so the CPU, a CUDA thread
// and a resumed run all draw the same mask for the same element, in any
// order, without storing it.
//
//   key     = the run's seed (64 bits)
//   counter = (element / 4, dropout site, update)  — 4 words of 32 bits
//   output  = 4 words of 32 bits; element e reads word e % 4
//
// Written with LINA_HD so that backend_cpu/ and backend_cuda/ compile the
// same function (docs/spec.md §4, "dropout").
#pragma once
#include <cstdint>

#include "core/elementwise_math.h"  // LINA_HD

namespace lina {

struct Philox4x32 {
  uint32_t v[4];
};

// The high and low 32 bits of a · b.
LINA_HD void mul_hi_lo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t product = uint64_t(a) * uint64_t(b);
  hi = uint32_t(product >> 32);
  lo = uint32_t(product);
}

// Ten rounds of Philox4x32: each multiplies two words by fixed odd constants
// and mixes the products' halves with the other words and the key; the key
// is bumped by two Weyl constants between rounds.
LINA_HD Philox4x32 philox4x32_10(Philox4x32 counter, uint32_t key0, uint32_t key1) {
  const uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  const uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t* c = counter.v;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mul_hi_lo(kMul0, c[0], hi0, lo0);
    mul_hi_lo(kMul1, c[2], hi1, lo1);
    const uint32_t next[4] = {hi1 ^ c[1] ^ key0, lo1, hi0 ^ c[3] ^ key1, lo0};
    for (int i = 0; i < 4; ++i) c[i] = next[i];
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return counter;
}

// Which dropout mask: probability p of dropping, the run's seed, the update
// (0-based) and the dropout site within the model (models/model.h
// dropout_site). p = 0 is "no dropout". A training run keeps the update
// number in the backend's memory (update_on_device, the update counter of
// experiments/update_plan.h), so that a captured CUDA graph's kernels read
// each replay's own update there; null: `update`.
struct DropoutKey {
  double p = 0.0;
  uint64_t seed = 0;
  uint32_t update = 0;
  uint32_t site = 0;
  const int32_t* update_on_device = nullptr;

  LINA_HD uint32_t update_number() const {
    return update_on_device != nullptr ? uint32_t(*update_on_device) : update;
  }
};

// A uniform number in [0, 1) for `element` (24 random bits, exact in float).
LINA_HD float dropout_uniform(const DropoutKey& key, int64_t element) {
  const uint64_t block = uint64_t(element) >> 2;
  const Philox4x32 counter = {{uint32_t(block), uint32_t(block >> 32), key.site, key.update_number()}};
  const Philox4x32 bits = philox4x32_10(counter, uint32_t(key.seed), uint32_t(key.seed >> 32));
  return float(bits.v[element & 3] >> 8) * (1.0f / 16777216.0f);
}

// The factor dropout multiplies `element` by: 0 where dropped (probability
// p), else the inverted-dropout scale 1 / (1 − p), so the expectation is kept.
template <class T>
LINA_HD T dropout_factor(const DropoutKey& key, int64_t element) {
  if (key.p <= 0.0) return T(1);
  return dropout_uniform(key, element) < float(key.p) ? T(0) : T(1.0 / (1.0 - key.p));
}

}  // namespace lina
