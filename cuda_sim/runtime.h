// The simulator's internals shared by its .cpp files: the error state, the
// memory registry, the one queue of stream work, and the block scheduler.
// Nothing outside cuda_sim/ includes this (the tests use cuda_sim/control.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "cuda_sim/include/cuda_runtime.h"

struct CUstream_st {
  int id;  // 1, 2, … in order of creation: names it in messages
};

namespace cuda_sim {

// ---- errors ----
// A launch's bad configuration or argument: reported by the next
// cudaGetLastError and then cleared, as in CUDA.
void set_launch_error(cudaError_t err, const std::string& detail);
// A kernel that failed while running (deadlock, …): sticky, every later
// call returns it until cudaDeviceReset.
void set_sticky_error(cudaError_t err, const std::string& detail);
cudaError_t sticky_error();

// ---- memory ----
// The live device allocation holding [ptr, ptr + bytes), or null.
struct Allocation {
  char* base = nullptr;
  size_t bytes = 0;       // what was asked for
  char* mapping = nullptr;  // the pages holding it: base is as near their end as 256-byte alignment allows
  size_t region = 0;      // mapped bytes (whole pages), a guard page after them
  bool live = false;      // false once freed (a pooled block waiting for reuse)
  bool pooled = false;    // from cudaMallocAsync: returns to the pool
  bool open = false;      // its pages are readable and writable now (see memory.cpp)
};
const Allocation* find_allocation(const void* ptr);
// Around the running of queued work (true before, false after): allocations
// open on their first touch while it runs and are all closed after.
void set_device_access(bool running_work);
size_t pool_reserved_bytes();  // what the stream-ordered pool holds, live or cached
size_t pool_used_bytes();      // of which live
void release_all_memory();     // cudaDeviceReset

// ---- the queue: all streams' work in one FIFO, run at synchronisation ----
void enqueue(std::function<void()> work);
void flush();  // runs everything queued, device memory accessible meanwhile

// One piece of a stream's work. submit() queues it (and counts it), or, on a
// capturing stream, records it as a graph node; each launch of the graph
// checks it again and queues it as submit() would.
struct Work {
  cudaGraphNodeType type = cudaGraphNodeTypeKernel;
  std::function<void()> run;                // in the queue, device memory accessible
  std::function<cudaError_t()> check;       // at a graph launch: its device memory still live (empty: nothing to check)
  std::function<void()> on_queue;           // on the host as it is queued (empty: nothing)
  bool device_to_host = false;              // a read-back, counted
};
void submit(CUstream_st* stream, Work work);

// ---- capture (graph.cpp) ----
bool capturing(CUstream_st* stream);
void record(CUstream_st* stream, Work work);  // appends to the stream's capture
// What CUDA refuses while a capture is active. A refused call invalidates the
// captures it concerns (their cudaStreamEndCapture then fails) and returns
// cudaErrorStreamCaptureUnsupported, its message naming the call; an allowed
// one returns cudaSuccess.
enum class CaptureRule {
  WaitsForDevice,      // refused while any stream captures: cudaDeviceSynchronize, cudaMemcpy, cudaFree, …
  UnsafeInGlobalMode,  // refused while a capture not begun in relaxed mode is active: cudaMalloc
  OnCapturingStream,   // refused when its stream captures: cudaStreamSynchronize, cudaMallocAsync, …
};
cudaError_t refuse_during_capture(CaptureRule rule, CUstream_st* stream, const std::string& call);
void end_all_captures();  // cudaDeviceReset

// ---- counters (control.h) ----
void count_allocation();
void count_graph_launch();

// ---- the scheduler (block.cpp) ----
void run_grid(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes, KernelBody& body);
const char* running_kernel();  // the kernel the scheduler is running now, or null

}  // namespace cuda_sim
