// Compiled instead of the .cu files when no CUDA toolkit was found: every
// CUDA entry point exists, and asking for the device gives one clear error.
// (No CUDA tensor is made for any of these to run on: device_memory.cpp says
// the device is not available, and Tensor::empty refuses it.)
#include <string>

#include "backend_cuda/cuda_kernels.h"
#include "core/error.h"

namespace lina::cuda {

[[noreturn]] static void no_cuda(const char* what) {
  throw Error(std::string(what) + ": lina was built without CUDA support (no nvcc found at configure time)");
}

int device_count() { return -1; }
const char* runtime() { return "none"; }
void* alloc(size_t) { no_cuda("cuda::alloc"); }
void free(void* ptr) { if (ptr) no_cuda("cuda::free"); }
void copy(void*, const void*, size_t, CopyKind) { no_cuda("cuda::copy"); }
void synchronize() {}
void set_tf32(bool on) { if (on) no_cuda("cuda::set_tf32"); }
Counters counters() { return {}; }
void fill_i32(int32_t*, int64_t, int32_t) { no_cuda("cuda::fill_i32"); }
void count_graph_launch() {}
void kernel_times_begin() { no_cuda("cuda::kernel_times_begin"); }
void kernel_times_mark(const char*) {}
std::vector<KernelTime> kernel_times_end() { return {}; }
void begin_graph_rehearsal() { no_cuda("cuda::begin_graph_rehearsal"); }
void end_graph_rehearsal() {}
void begin_capture() { no_cuda("cuda::begin_capture"); }
Graph* end_capture() { no_cuda("cuda::end_capture"); }
void launch_graph(Graph*) { no_cuda("cuda::launch_graph"); }
int64_t graph_kernels(const Graph*) { return 0; }
void destroy_graph(Graph*) {}
bool graph_memory_serves() { return false; }
void* graph_memory_alloc(size_t) { no_cuda("cuda::graph_memory_alloc"); }
bool graph_memory_release(void*) { return false; }
void attention_forward_reference(const AttentionShape&, const float*, const float*, const float*, float*,
                                 float*) {
  no_cuda("cuda::attention_forward_reference");
}
void attention_backward_reference(const AttentionShape&, const float*, const float*, const float*,
                                  const float*, const float*, float*, float*, float*, float*) {
  no_cuda("cuda::attention_backward_reference");
}
void beta_log_alpha_backward_reference(const float*, const float*, float*, float*, int64_t, int64_t, int64_t,
                                       int64_t, bool, bool) {
  no_cuda("cuda::beta_log_alpha_backward_reference");
}

// Every kernel of the list, each one the same clear error.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define LINA_DEFINE_CUDA_STUB(ret, name, params) \
  ret name params { no_cuda("cuda::" #name); }
LINA_KERNELS(LINA_DEFINE_CUDA_STUB, float)
#undef LINA_DEFINE_CUDA_STUB
#pragma GCC diagnostic pop

}  // namespace lina::cuda
