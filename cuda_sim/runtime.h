// The simulator's internals shared by its .cpp files: the error state, the
// memory registry, the one queue of stream work, and the block scheduler.
// Nothing outside cuda_sim/ includes this (the tests use cuda_sim/control.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "cuda_sim/include/cuda_runtime.h"

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

// ---- the scheduler (block.cpp) ----
void run_grid(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes, KernelBody& body);
const char* running_kernel();  // the kernel the scheduler is running now, or null

}  // namespace cuda_sim
