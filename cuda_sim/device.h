// The device side of lina's CUDA runtime on the CPU: CUDA's keywords as
// plain C++, the built-in index variables, __syncthreads and the warp
// shuffles, and the kernel launch (LINA_LAUNCH in backend_cuda/cuda_context.h
// expands to cuda_sim::Launch under g++ and to <<<…>>> under nvcc).
//
// A CUDA thread is a fiber (cuda_sim/block.cpp); threadIdx reads the running
// fiber's index. __shared__ is `thread_local` (at block scope that is a
// static per OS thread, and a block runs on one OS thread from start to
// end, so every thread of the block sees the same variable). Dynamic shared
// memory is cuda_sim::dynamic_shared<T>(), NaN bytes when each block starts.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- the keywords ----
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ thread_local
#define __restrict__ __restrict

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

struct CUstream_st;

namespace cuda_sim {

// What the running CUDA thread sees: its own index, and its block's.
struct ThreadView {
  uint3 thread_idx;
  unsigned linear;  // x + y·bx + z·bx·by: lane = linear % 32
};
struct BlockView {
  uint3 block_idx;
  dim3 block_dim, grid_dim;
};
extern thread_local ThreadView* g_thread;  // set by the scheduler before each switch to a fiber
extern thread_local BlockView g_block;

void syncthreads();
void syncwarp(unsigned mask);
// Lane rendezvous: every lane of `mask` offers 8 bytes and reads lane
// `source(lane)`'s offer once all have arrived.
uint64_t warp_exchange(unsigned mask, uint64_t mine, int source_lane);
void* dynamic_shared_bytes();
template <class T> T* dynamic_shared() { return static_cast<T*>(dynamic_shared_bytes()); }

template <class T> T shfl_from(unsigned mask, T value, int source_lane) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a type over 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = warp_exchange(mask, bits, source_lane);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
inline int lane_id() { return int(g_thread->linear % 32); }

}  // namespace cuda_sim

#define threadIdx (::cuda_sim::g_thread->thread_idx)
#define blockIdx (::cuda_sim::g_block.block_idx)
#define blockDim (::cuda_sim::g_block.block_dim)
#define gridDim (::cuda_sim::g_block.grid_dim)
constexpr int warpSize = 32;

inline void __syncthreads() { ::cuda_sim::syncthreads(); }
// The rounded-add intrinsic, which nvcc never fuses with a multiply: on the
// CPU a plain add (the host compiler is not asked to contract).
inline float __fadd_rn(float a, float b) { return a + b; }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::cuda_sim::syncwarp(mask); }
// Blocks run at once on several OS threads, so the memory fence and the
// integer atomic are the host's own (sequentially consistent).
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
// old = *address; *address = old >= limit ? 0 : old + 1; returns old (CUDA's atomicInc).
inline unsigned atomicInc(unsigned* address, unsigned limit) {
  unsigned old = __atomic_load_n(address, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(address, &old, old >= limit ? 0u : old + 1u, false, __ATOMIC_SEQ_CST,
                                      __ATOMIC_SEQ_CST)) {
  }
  return old;
}

// width: lanes form groups of `width` (a power of two ≤ 32), as in CUDA.
template <class T> T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  const int lane = ::cuda_sim::lane_id();
  return ::cuda_sim::shfl_from(mask, v, (lane & ~(width - 1)) + (src & (width - 1)));
}
template <class T> T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int lane = ::cuda_sim::lane_id(), in_group = lane & (width - 1);
  return ::cuda_sim::shfl_from(mask, v, in_group + int(delta) < width ? lane + int(delta) : lane);
}
template <class T> T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int lane = ::cuda_sim::lane_id(), in_group = lane & (width - 1);
  return ::cuda_sim::shfl_from(mask, v, in_group >= int(delta) ? lane - int(delta) : lane);
}
template <class T> T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  const int lane = ::cuda_sim::lane_id();
  const int src = lane ^ lane_mask;
  return ::cuda_sim::shfl_from(mask, v, (src & ~(width - 1)) == (lane & ~(width - 1)) ? src : lane);
}

// ---- the launch ----
namespace cuda_sim {

// The body of one launch: run() is called once per CUDA thread, on that
// thread's fiber. The arguments were copied at the launch, as CUDA does.
struct KernelBody {
  virtual ~KernelBody() = default;
  virtual void run() = 0;
  // The pointer arguments still point into live allocations (checked again
  // when a graph replays the launch).
  virtual bool check_arguments(const char* kernel) const = 0;
};

// Checks an argument the kernel receives: a pointer must be null or point
// into a live device allocation. Returns false (and records the launch
// error, naming the kernel and the argument) when it does not.
bool check_pointer_argument(const char* kernel, int index, const void* ptr);

// Queues the launch on `stream`; a bad configuration (empty grid, over 1024
// threads, too much shared memory) becomes the error cudaGetLastError reports.
void enqueue_launch(const char* kernel, const void* func, dim3 grid, dim3 block, size_t shared_bytes,
                    CUstream_st* stream, KernelBody* body);

template <class... P>
struct Launch {
  Launch(const char* name, void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes = 0,
         CUstream_st* stream = nullptr)
      : name_(name), kernel_(kernel), grid_(grid), block_(block), shared_(shared_bytes), stream_(stream) {}

  template <class... A> void operator()(A&&... args) const {
    static_assert(sizeof...(A) == sizeof...(P), "a kernel launched with the wrong number of arguments");
    using Params = std::tuple<std::decay_t<P>...>;
    struct Body final : KernelBody {
      Body(void (*k)(P...), Params p) : kernel(k), params(std::move(p)) {}
      void run() override { std::apply(kernel, params); }
      bool check_arguments(const char* name) const override {
        return check_pointers(name, params, std::index_sequence_for<P...>{});
      }
      void (*kernel)(P...);
      Params params;
    };
    auto* body = new Body(kernel_, Params(std::forward<A>(args)...));
    if (!body->check_arguments(name_)) {
      delete body;
      return;
    }
    enqueue_launch(name_, reinterpret_cast<const void*>(kernel_), grid_, block_, shared_, stream_, body);
  }

 private:
  // A pointer argument is checked; so is every pointer of an argument struct
  // that lists them with `device_pointers()` (BinaryArgs, …).
  template <class T, class = void> struct lists_pointers : std::false_type {};
  template <class T>
  struct lists_pointers<T, std::void_t<decltype(std::declval<const T&>().device_pointers())>> : std::true_type {};
  template <class T> static bool check_one(const char* name, int index, const T& value) {
    if constexpr (std::is_pointer<T>::value) {
      return check_pointer_argument(name, index, value);
    } else if constexpr (lists_pointers<T>::value) {
      for (const void* p : value.device_pointers())
        if (!check_pointer_argument(name, index, p)) return false;
      return true;
    } else {
      return true;
    }
  }
  template <class Tuple, size_t... I>
  static bool check_pointers(const char* name, const Tuple& params, std::index_sequence<I...>) {
    return (check_one(name, int(I) + 1, std::get<I>(params)) && ...);
  }

  const char* name_;
  void (*kernel_)(P...);
  dim3 grid_, block_;
  size_t shared_;
  CUstream_st* stream_;
};

template <class... P>
Launch(const char*, void (*)(P...), dim3, dim3, size_t, CUstream_st*) -> Launch<P...>;

}  // namespace cuda_sim
