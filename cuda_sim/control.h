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

// Counted since the process started. A kernel (or cuBLAS call) counts when
// it is queued to run: at its launch, or at each launch of a graph that
// holds it (a captured launch counts only when replayed). A graph launch is
// one graph_launches. Allocations are successful cudaMalloc and
// cudaMallocAsync calls; read-backs are device→host copies, eager or replayed.
struct Counters {
  int64_t kernel_launches = 0, graph_launches = 0, allocations = 0, device_to_host_copies = 0;
};
Counters counters();

}  // namespace cuda_sim
