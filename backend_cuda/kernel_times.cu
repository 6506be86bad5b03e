// Per-kernel GPU time of eager launches: between kernel_times_begin and
// kernel_times_end an event is recorded on the stream after every launch
// (check_launch calls kernel_times_mark), so the time of launch i is the time
// between the events before and after it: the stream runs one kernel at a
// time, in order. A graph's kernels run without these events (a captured
// event cannot be timed): time an update with --cuda-graph off.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"

namespace lina::cuda {

namespace {

struct KernelTimer {
  bool on = false;
  std::vector<std::pair<std::string, cudaEvent_t>> marks;  // ("", start), then one per launch;
  // the name is copied: a launch may name its kernel with a string it builds
};

KernelTimer& timer() {
  static auto* t = new KernelTimer();
  return *t;
}

cudaEvent_t record_event() {
  cudaEvent_t event = nullptr;
  LINA_CUDA_CHECK(cudaEventCreate(&event), "kernel times: event");
  LINA_CUDA_CHECK(cudaEventRecord(event, context().stream), "kernel times: event record");
  return event;
}

}  // namespace

void kernel_times_begin() {
  KernelTimer& t = timer();
  t.marks.clear();
  t.marks.emplace_back("", record_event());
  t.on = true;
}

void kernel_times_mark(const char* kernel) {
  KernelTimer& t = timer();
  if (t.on) t.marks.emplace_back(kernel, record_event());
}

std::vector<KernelTime> kernel_times_end() {
  KernelTimer& t = timer();
  t.on = false;
  if (t.marks.empty()) return {};
  LINA_CUDA_CHECK(cudaEventSynchronize(t.marks.back().second), "kernel times: waiting for the last kernel");
  std::map<std::string, KernelTime> by_name;
  for (size_t i = 1; i < t.marks.size(); ++i) {
    float ms = 0;
    LINA_CUDA_CHECK(cudaEventElapsedTime(&ms, t.marks[i - 1].second, t.marks[i].second), "kernel times: elapsed");
    KernelTime& k = by_name[t.marks[i].first];
    k.kernel = t.marks[i].first;
    k.launches += 1;
    k.ms += ms;
  }
  for (auto& mark : t.marks) cudaEventDestroy(mark.second);
  t.marks.clear();
  std::vector<KernelTime> out;
  for (auto& entry : by_name) out.push_back(entry.second);
  return out;
}

}  // namespace lina::cuda
