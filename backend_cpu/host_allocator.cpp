#include "backend_cpu/host_allocator.h"

#include <malloc.h>  // malloc_trim

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define LINA_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define LINA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define LINA_POISON(p, n) ((void)(p), (void)(n))
#define LINA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace lina::cpu {

namespace {

constexpr size_t kAlign = 64;

struct Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_by_class;  // class size → free buffers
  std::unordered_map<void*, size_t> live;                        // buffer → its class size
  HostMemoryStats stats;

  void note_peak() { stats.peak_bytes = std::max(stats.peak_bytes, stats.live_bytes + stats.cached_bytes); }

  // Gives every cached (free) buffer back to malloc; the caller holds `mutex`.
  void free_cached() {
    for (auto& [cls, buffers] : free_by_class)
      for (void* p : buffers) {
        LINA_UNPOISON(p, cls);
        std::free(p);
      }
    free_by_class.clear();
    stats.cached_bytes = 0;
  }
};

// Never destroyed: tensors with static storage duration may be freed after
// any other static object is gone.
Cache& cache() {
  static Cache* c = new Cache();
  return *c;
}

// LINA_FILL_NEW_BUFFERS=1: every new buffer is filled with NaN bytes, so a
// kernel that reads an output it has not written yet makes results NaN.
bool fill_new_buffers() {
  static const bool on = [] {
    const char* v = std::getenv("LINA_FILL_NEW_BUFFERS");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

}  // namespace

size_t host_size_class(size_t bytes) {
  if (bytes <= kAlign) return kAlign;
  // 2^k < bytes <= 2^(k+1): round up to a multiple of 2^k / 8 (at least 64).
  int k = 63 - __builtin_clzll(uint64_t(bytes - 1));
  size_t step = std::max(kAlign, (size_t(1) << k) / 8);
  return (bytes + step - 1) / step * step;
}

void* host_alloc(size_t bytes) {
  const size_t cls = host_size_class(bytes);
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.stats.requests++;
  c.stats.largest_request = std::max(c.stats.largest_request, int64_t(bytes));
  void* p = nullptr;
  auto it = c.free_by_class.find(cls);
  if (it != c.free_by_class.end() && !it->second.empty()) {  // reuse a cached buffer
    p = it->second.back();
    it->second.pop_back();
    c.stats.cached_bytes -= int64_t(cls);
  } else {
    p = std::aligned_alloc(kAlign, cls);
    if (p == nullptr) {  // give the cache back and try once more before failing
      c.free_cached();
      p = std::aligned_alloc(kAlign, cls);
    }
    if (p == nullptr)
      throw Error("out of host memory allocating " + std::to_string(bytes) +
                  " bytes: use a smaller --batch or --context");
    c.stats.system_allocs++;
  }
  // Under ASan only the bytes asked for may be used: the rest of the class
  // stays poisoned, so an overrun is reported as it would be from malloc.
  LINA_POISON(p, cls);
  LINA_UNPOISON(p, bytes);
  if (fill_new_buffers()) std::memset(p, 0xFF, bytes);  // NaN as float and as double
  c.live.emplace(p, cls);
  c.stats.live_bytes += int64_t(cls);
  c.note_peak();
  return p;
}

void host_free(void* ptr) {
  if (ptr == nullptr) return;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.live.find(ptr);
  if (it == c.live.end()) std::abort();  // not ours, or freed twice: a bug in lina
  size_t cls = it->second;
  c.live.erase(it);
  c.stats.live_bytes -= int64_t(cls);
  c.stats.cached_bytes += int64_t(cls);
  LINA_POISON(ptr, cls);
  c.free_by_class[cls].push_back(ptr);
}

void release_cached() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.free_cached();
  malloc_trim(0);  // hand the freed pages back to the system now
}

HostMemoryStats host_memory_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.stats;
}

void reset_host_memory_counters() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.stats.requests = c.stats.system_allocs = c.stats.largest_request = 0;
  c.stats.peak_bytes = c.stats.live_bytes + c.stats.cached_bytes;
}

}  // namespace lina::cpu
