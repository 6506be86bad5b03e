// One seeded random generator, used everywhere randomness appears (init,
// batches, the recall task, sampling), so a run is reproducible from its seed.
// xoshiro256** seeded through splitmix64; normals by Box–Muller.
#pragma once
#include <array>
#include <cstdint>

namespace lina {

class Rng {
 public:
  explicit Rng(uint64_t seed = 1337) { seed_with(seed); }
  void seed_with(uint64_t seed);
  uint64_t next_u64();
  double uniform();                      // [0, 1)
  double uniform(double lo, double hi);  // [lo, hi)
  double normal();                       // N(0, 1)
  int64_t randint(int64_t n);            // uniform in [0, n)
  // The full state, so a checkpoint can save and restore the generator.
  std::array<uint64_t, 4> state() const { return s_; }
  void set_state(const std::array<uint64_t, 4>& s) { s_ = s; }

 private:
  std::array<uint64_t, 4> s_{};
};

}  // namespace lina
