// Dropout's factors for a run of consecutive elements, the same bits as
// dropout_factor (core/philox.h) element by element, at a fraction of its
// cost: dropout_factor runs the ten Philox rounds for every element and
// keeps one of the four words they give, one element at a time. Here one
// Philox block gives the factors of its four elements, and kBlocks blocks
// go through the rounds together in plain arrays, one lane per block, so
// that the compiler runs the rounds on whole SIMD registers (a 32 × 32 → 64
// bit multiply per lane).
//
//   dropout_factors(key, first, n, out):  out[i] = dropout_factor<T>(key, first + i), i < n
//
// The tests compare it with dropout_factor over runs that start and end
// anywhere inside a block (tests/test_dropout.cpp).
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/philox.h"

namespace lina::cpu {

namespace dropout_detail {

constexpr int kBlocks = 16;  // Philox blocks put through the rounds together

// words[4·i + w] = word w of Philox4x32-10 of block block0 + i (i < kBlocks):
// philox4x32_10 with the counter (block, site, update), lane by lane.
inline void philox_words(uint64_t block0, const DropoutKey& key, uint32_t* words) {
  const uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;  // philox4x32_10's constants
  const uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t c0[kBlocks], c1[kBlocks], c2[kBlocks], c3[kBlocks];  // the counters' words, one lane a block
  for (int i = 0; i < kBlocks; ++i) {
    const uint64_t block = block0 + uint64_t(i);
    c0[i] = uint32_t(block);
    c1[i] = uint32_t(block >> 32);
    c2[i] = key.site;
    c3[i] = key.update_number();
  }
  uint32_t key0 = uint32_t(key.seed), key1 = uint32_t(key.seed >> 32);
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < kBlocks; ++i) {
      const uint64_t p0 = uint64_t(kMul0) * c0[i];  // (hi0, lo0)
      const uint64_t p1 = uint64_t(kMul1) * c2[i];  // (hi1, lo1)
      const uint32_t next0 = uint32_t(p1 >> 32) ^ c1[i] ^ key0;
      const uint32_t next2 = uint32_t(p0 >> 32) ^ c3[i] ^ key1;
      c1[i] = uint32_t(p1);
      c3[i] = uint32_t(p0);
      c0[i] = next0;
      c2[i] = next2;
    }
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  for (int i = 0; i < kBlocks; ++i) {
    words[4 * i + 0] = c0[i];
    words[4 * i + 1] = c1[i];
    words[4 * i + 2] = c2[i];
    words[4 * i + 3] = c3[i];
  }
}

}  // namespace dropout_detail

// out[i] = dropout_factor<T>(key, first + i) for i < n: 0 where the element
// is dropped, else 1 / (1 − p); all 1 without dropout.
template <class T>
void dropout_factors(const DropoutKey& key, int64_t first, int64_t n, T* out) {
  using dropout_detail::kBlocks;
  if (key.p <= 0.0) {
    std::fill(out, out + n, T(1));
    return;
  }
  const float p = float(key.p);
  const T keep = T(1.0 / (1.0 - key.p));
  uint32_t words[4 * kBlocks];
  for (int64_t e = first, end = first + n; e < end;) {
    const uint64_t block0 = uint64_t(e) >> 2;
    dropout_detail::philox_words(block0, key, words);
    const int64_t e0 = int64_t(block0 << 2);  // the element words[0] belongs to
    const int64_t stop = std::min(end, e0 + 4 * kBlocks);
    for (; e < stop; ++e) {
      const float u = float(words[e - e0] >> 8) * (1.0f / 16777216.0f);  // dropout_uniform
      out[e - first] = u < p ? T(0) : keep;
    }
  }
}

}  // namespace lina::cpu
