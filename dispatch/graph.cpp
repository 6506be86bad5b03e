// dispatch::CudaGraph and cuda_kernel_times (dispatch/dispatch.h) on
// backend_cuda/graph.cu and kernel_times.cu.
#include <exception>

#include "dispatch/backends.h"
#include "dispatch/dispatch.h"

namespace lina::dispatch {

std::vector<KernelTime> cuda_kernel_times(const std::function<void()>& work) {
  cuda::kernel_times_begin();
  try {
    work();
  } catch (...) {
    (void)cuda::kernel_times_end();
    throw;
  }
  std::vector<KernelTime> out;
  for (const cuda::KernelTime& k : cuda::kernel_times_end()) out.push_back({k.kernel, k.launches, k.ms});
  return out;
}

CudaGraph::~CudaGraph() { cuda::destroy_graph(graph_); }

void CudaGraph::rehearse(const std::function<void()>& work) {
  cuda::begin_graph_rehearsal();
  try {
    work();
  } catch (...) {
    cuda::end_graph_rehearsal();
    throw;
  }
  cuda::end_graph_rehearsal();
}

// A failure inside the work is the one reported; ending the capture after
// it (which then fails too) only makes the stream usable again.
void CudaGraph::capture(const std::function<void()>& work) {
  check(graph_ == nullptr, "CudaGraph::capture: already captured");
  cuda::begin_capture();
  try {
    work();
  } catch (...) {
    try {
      cuda::destroy_graph(cuda::end_capture());
    } catch (...) {
    }
    throw;
  }
  graph_ = cuda::end_capture();
}

void CudaGraph::replay() {
  check(graph_ != nullptr, "CudaGraph::replay: nothing captured");
  cuda::launch_graph(graph_);
}

int64_t CudaGraph::kernels() const { return graph_ ? cuda::graph_kernels(graph_) : 0; }

}  // namespace lina::dispatch
