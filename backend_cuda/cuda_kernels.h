// CUDA kernels, float32 only, on raw device pointers: the kernel list of
// core/op_list.h with T = float, so names and arguments are those of the
// CPU backend. Compiled from the .cu files beside this header when a CUDA
// toolkit is found; otherwise stub.cpp defines every function from the same
// list to throw "lina was built without CUDA support". dispatch/*.cpp
// call them; device_memory.cpp hands the memory functions and the fills to
// core/ (core/device_memory.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/op_list.h"

namespace lina::cuda {

// ---- memory & device (memory.cu) ----
int device_count();  // GPUs present: 0 when none or no driver, -1 when built without CUDA
const char* runtime();  // "cuda", "sim" (cuda_sim/, on the CPU) or "none" (built without CUDA)
void* alloc(size_t bytes);
void free(void* ptr);
enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };
void copy(void* dst, const void* src, size_t bytes, CopyKind kind);
void synchronize();
void set_tf32(bool on);  // cuBLAS products in TF32 (on) or float32 (off, the default)
// Counted since the process started: kernel launches (cuBLAS calls
// included), allocation calls, device→host copies; and the bytes the stream-ordered pool now holds from the driver (a step
// that reuses the pool's blocks leaves it unchanged).
struct Counters {
  int64_t launches = 0, allocations = 0, device_to_host_copies = 0, pool_reserved_bytes = 0;
  int64_t graph_launches = 0;  // replays of a captured graph (launch_graph)
};
Counters counters();
void count_graph_launch();

// ---- per-kernel GPU time of eager launches (kernel_times.cu) ----
struct KernelTime {
  std::string kernel;
  int64_t launches = 0;
  double ms = 0;  // summed over its launches
};
void kernel_times_begin();
void kernel_times_mark(const char* kernel);  // check_launch, after each launch
std::vector<KernelTime> kernel_times_end();  // waits for the stream; by kernel name

// ---- CUDA graphs (graph.cu) ----
// One update recorded once and replayed. Between begin_graph_rehearsal and
// end_graph_rehearsal the work runs as usual but allocates from graph
// memory (which grows); between begin_capture and end_capture it is
// recorded, not run, and allocates from graph memory, which must not grow.
struct Graph;
void begin_graph_rehearsal();
void end_graph_rehearsal();
void begin_capture();
Graph* end_capture();  // throws, naming the refused call, when the capture failed
void launch_graph(Graph* graph);
int64_t graph_kernels(const Graph* graph);  // the kernel nodes one launch runs
void destroy_graph(Graph* graph);
// memory.cu's alloc and free ask graph memory first.
bool graph_memory_serves();
void* graph_memory_alloc(size_t bytes);
bool graph_memory_release(void* ptr);  // false: not graph memory

// ---- the compute kernels: float32 versions of core/op_list.h's list ----
// (elementwise.cu, layout.cu, matmul.cu, ...)
#define LINA_DECLARE_CUDA_KERNEL(ret, name, params) ret name params;
LINA_KERNELS(LINA_DECLARE_CUDA_KERNEL, float)
#undef LINA_DECLARE_CUDA_KERNEL
void fill_i32(int32_t* x, int64_t n, int32_t value);  // token ids

// ---- the simple references beside the fast kernels ----
// attention_reference.cu: attention_forward / attention_backward one thread
// per row, no shared memory; tests/cuda/test_attention.cpp compares the
// tiled kernels of attention.cu against them.
void attention_forward_reference(const AttentionShape& s, const float* q, const float* k, const float* v,
                                 float* lse, float* out);
void attention_backward_reference(const AttentionShape& s, const float* q, const float* k, const float* v,
                                  const float* lse, const float* dout, float* dscores, float* dq,
                                  float* dk, float* dv);
// elementwise.cu: beta_log_alpha_backward one thread per column, down the
// rows in order, no shared memory; tests/test_ops_elementwise.cpp compares
// the shared-memory kernel against it.
void beta_log_alpha_backward_reference(const float* out, const float* dout, float* dz, float* dbias,
                                       int64_t rows, int64_t N, int64_t ld, int64_t n_beta, bool add_dz,
                                       bool add_dbias);

}  // namespace lina::cuda
