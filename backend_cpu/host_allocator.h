// The host memory behind every CPU tensor: a caching allocator.
//
// Why: a training step frees and reallocates the same few hundred buffers,
// of many large sizes, every step. Handed straight to malloc, that pattern
// fragments glibc's heap (and its mmap threshold adapts upward after each
// large free), so resident memory grows a little with every step until a
// long run no longer fits. Here a freed buffer is kept in a free list for its
// size class and handed out again for the next request of that class: after
// the first step, a step allocates nothing from the system and resident
// memory stays flat. release_cached() gives the kept buffers back; a request
// the system cannot serve does that first and tries again.
//
// Size classes: a request is rounded up to one of 8 evenly spaced sizes per
// power of two (so at most 12.5 % is wasted), and at least 64 bytes. Every
// buffer is 64-byte aligned.
//
// Under AddressSanitizer a cached buffer is poisoned, and so is the part of
// a class beyond the bytes asked for: a use after free or an overrun is
// still reported although the memory never went back to malloc.
//
// LINA_FILL_NEW_BUFFERS=1 fills every new buffer with NaN bytes, so a kernel
// that reads an output before writing it turns the results into NaN.
#pragma once
#include <cstddef>
#include <cstdint>

namespace lina::cpu {

void* host_alloc(size_t bytes);  // never returns null: throws lina::Error when out of memory
void host_free(void* ptr);       // ptr from host_alloc (or null)

// Returns every cached (free) buffer to the system.
void release_cached();

struct HostMemoryStats {
  int64_t requests = 0;         // host_alloc calls so far
  int64_t system_allocs = 0;    // of those, served by a new system allocation (cache misses)
  int64_t live_bytes = 0;       // in buffers handed out and not yet freed (class sizes)
  int64_t cached_bytes = 0;     // in free buffers kept for reuse
  int64_t peak_bytes = 0;       // the most live + cached at any time
  int64_t largest_request = 0;  // the largest size passed to host_alloc
};
HostMemoryStats host_memory_stats();
// Zeroes the counters `requests`, `system_allocs` and `largest_request`, and
// sets `peak_bytes` to the current live + cached (so a test or a benchmark
// can measure one phase).
void reset_host_memory_counters();

// The size class a request of `bytes` is served from (exposed for tests).
size_t host_size_class(size_t bytes);

}  // namespace lina::cpu
