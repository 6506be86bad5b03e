// What a test (or lina) may ask of the simulator beyond the CUDA API.
#pragma once
#include <cstdint>

namespace cuda_sim {

// The order in which a block's threads take turns between barriers (and
// the order of the blocks): forward (0, 1, …), reverse, or a seeded
// shuffle. A kernel whose result depends on it is missing a barrier. Set
// at start from LINA_CUDA_SIM_ORDER=forward|reverse|shuffle[:seed].
enum class ThreadOrder { Forward, Reverse, Shuffle };
void set_thread_order(ThreadOrder order, uint64_t seed = 1);
ThreadOrder thread_order();

}  // namespace cuda_sim
