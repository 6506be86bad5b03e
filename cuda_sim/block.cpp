// The simulator's scheduler: a kernel's blocks, taken in turn by a few OS
// threads (one per core), and in each block every CUDA thread a fiber (Boost.Context's fcontext: a stack of
// its own and a switch of a few instructions).
//
// A block runs in passes. Each pass resumes, in the chosen thread order,
// every thread that can go on; a thread runs until it reaches
// __syncthreads(), a warp operation or its end, and then hands the OS
// thread back. When the last thread of the block arrives at the barrier all
// of them may go on; when the last lane named in a warp operation's mask
// arrives, those lanes may. So a thread never sees another's writes from
// after the barrier, and a kernel that forgot one reads values that depend
// on the order (forward, reverse, shuffled: LINA_CUDA_SIM_ORDER).
//
// A pass in which no thread can go on while some have not ended is a
// deadlock (threads at a barrier that others exited before reaching, lanes
// waiting for a lane that never comes): the kernel fails with a message
// naming it, its block and the waiting threads; the error is sticky.
#include <sys/mman.h>
#include <unistd.h>

#include <boost/context/detail/fcontext.hpp>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_sim/control.h"
#include "cuda_sim/runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#define CUDA_SIM_ASAN 1
extern "C" void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old,
                                                size_t* size_old);
#else
#define CUDA_SIM_ASAN 0
#endif

namespace fc = boost::context::detail;

namespace cuda_sim {

thread_local ThreadView* g_thread = nullptr;
thread_local BlockView g_block;

namespace {

enum class State : unsigned char { NotStarted, Ready, Running, AtBarrier, AtWarp, Done, Failed };

struct Fiber {
  ThreadView view{};
  State state = State::NotStarted;
  fc::fcontext_t context = nullptr;    // where this fiber resumes
  fc::fcontext_t scheduler = nullptr;  // where it returns to
  char* stack_top = nullptr;
  void* asan_fake_stack = nullptr;
};

struct Warp {
  unsigned arrived = 0;   // lanes at the current operation
  unsigned mask = 0;      // the lanes the current operation waits for
  unsigned generation = 0;
  unsigned masks[2] = {};           // the mask of generation g at [g & 1]
  uint64_t values[2][32] = {};      // what each lane offered, by generation
};

struct BlockRun {
  const char* kernel = nullptr;
  KernelBody* body = nullptr;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  std::vector<unsigned> order;
  std::vector<uint64_t> shared;  // dynamic shared memory
  unsigned n = 0, at_barrier = 0, done = 0;
  Fiber* current = nullptr;
  std::string failure;  // set by a thread that cannot go on
  const void* scheduler_stack_bottom = nullptr;
  size_t scheduler_stack_size = 0;
  void* scheduler_fake_stack = nullptr;
};

thread_local BlockRun* g_run = nullptr;
const char* g_running_kernel = nullptr;
ThreadOrder g_order = ThreadOrder::Forward;
uint64_t g_seed = 1;
uint64_t g_launch_index = 0;

size_t stack_bytes() {
  static const size_t bytes = [] {
    const char* env = std::getenv("LINA_CUDA_SIM_STACK_KB");
    size_t kb = env ? size_t(std::atol(env)) : (CUDA_SIM_ASAN ? 1024 : 256);
    return (kb < 16 ? 16 : kb) * 1024;
  }();
  return bytes;
}

// Stacks, one per thread slot, made once and reused by every block; a
// guard page below each catches an overflow.
std::vector<char*>& stacks() {
  static thread_local std::vector<char*> s;
  return s;
}
char* stack_top(unsigned slot) {
  auto& s = stacks();
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  while (s.size() <= slot) {
    void* p = mmap(nullptr, stack_bytes() + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "cuda-sim: out of memory for thread stacks\n");
      std::abort();
    }
    mprotect(p, page, PROT_NONE);
    s.push_back(static_cast<char*>(p) + page);
  }
  // Stacks are a power of two apart, so their tops would all fall in the
  // same cache sets: start each one a different number of cache lines down.
  return s[slot] + stack_bytes() - (slot % 61) * 64 - 64;
}

// What a fiber may use below its (staggered) top: less than the mapping by
// at most a page.
size_t usable_stack() { return stack_bytes() - 4096; }

uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// 0 … n−1 in the chosen order; `salt` makes each block's shuffle its own.
void make_order(std::vector<unsigned>& order, unsigned n, uint64_t salt) {
  order.resize(n);
  for (unsigned i = 0; i < n; ++i) order[i] = g_order == ThreadOrder::Reverse ? n - 1 - i : i;
  if (g_order == ThreadOrder::Shuffle) {
    uint64_t state = g_seed * 0x2545f4914f6cdd1dull + salt;
    for (unsigned i = n; i > 1; --i) std::swap(order[i - 1], order[splitmix(state) % i]);
  }
}

// ---- switching ----

void fiber_main(fc::transfer_t from);

void resume(BlockRun& run, Fiber& f) {
  if (f.state == State::NotStarted) f.context = fc::make_fcontext(f.stack_top, usable_stack(), fiber_main);
  f.state = State::Running;
  run.current = &f;
  g_thread = &f.view;
#if CUDA_SIM_ASAN
  __sanitizer_start_switch_fiber(&run.scheduler_fake_stack, f.stack_top - usable_stack(), usable_stack());
#endif
  fc::transfer_t back = fc::jump_fcontext(f.context, &f);
#if CUDA_SIM_ASAN
  __sanitizer_finish_switch_fiber(run.scheduler_fake_stack, nullptr, nullptr);
#endif
  f.context = back.fctx;
  run.current = nullptr;
  g_thread = nullptr;
}

// From a fiber: back to the scheduler until it resumes this fiber.
void yield(Fiber& f) {
#if CUDA_SIM_ASAN
  BlockRun& run = *g_run;
  const bool ending = f.state == State::Done || f.state == State::Failed;
  __sanitizer_start_switch_fiber(ending ? nullptr : &f.asan_fake_stack,
                                 run.scheduler_stack_bottom, run.scheduler_stack_size);
#endif
  fc::transfer_t back = fc::jump_fcontext(f.scheduler, nullptr);
  f.scheduler = back.fctx;
#if CUDA_SIM_ASAN
  __sanitizer_finish_switch_fiber(f.asan_fake_stack, &run.scheduler_stack_bottom, &run.scheduler_stack_size);
#endif
}

void fiber_main(fc::transfer_t from) {
  Fiber& f = *static_cast<Fiber*>(from.data);
  f.scheduler = from.fctx;
  BlockRun& run = *g_run;
#if CUDA_SIM_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &run.scheduler_stack_bottom, &run.scheduler_stack_size);
#endif
  run.body->run();
  f.state = State::Done;
  ++run.done;
  yield(f);  // never resumed
}

Fiber& running_fiber(const char* what) {
  if (g_run == nullptr || g_run->current == nullptr) {
    std::fprintf(stderr, "cuda-sim: %s called outside a kernel\n", what);
    std::abort();
  }
  return *g_run->current;
}

// The running thread cannot go on: the block fails with `why`.
void fail(Fiber& f, const std::string& why) {
  g_run->failure = why;
  f.state = State::Failed;
  yield(f);  // never resumed
}

std::string block_name(const BlockRun& run) {
  return "kernel '" + std::string(run.kernel) + "', block (" + std::to_string(g_block.block_idx.x) + ", " +
         std::to_string(g_block.block_idx.y) + ", " + std::to_string(g_block.block_idx.z) + ")";
}

std::string deadlock_message(const BlockRun& run) {
  unsigned barrier = 0, warp = 0;
  std::string lanes;
  for (unsigned t = 0; t < run.n; ++t) {
    const Fiber& f = run.fibers[t];
    if (f.state == State::AtBarrier) ++barrier;
    if (f.state == State::AtWarp) {
      if (++warp <= 8) lanes += (lanes.empty() ? "" : ", ") + std::to_string(f.view.linear);
    }
  }
  std::string msg = "deadlock in " + block_name(run) + ": ";
  if (barrier)
    msg += std::to_string(barrier) + " of " + std::to_string(run.n) + " threads wait at __syncthreads() and " +
           std::to_string(run.done) + " ended without reaching it";
  if (warp) {
    if (barrier) msg += "; ";
    msg += std::to_string(warp) + " threads (" + lanes + (warp > 8 ? ", …" : "") +
           ") wait at a warp operation for lanes of its mask that never arrive";
  }
  return msg;
}

// One block, every thread to its end.
bool run_block(BlockRun& run, uint64_t salt) {
  run.at_barrier = run.done = 0;
  for (unsigned t = 0; t < run.n; ++t) {  // slots past n are left alone
    Fiber& f = run.fibers[t];
    const dim3& d = g_block.block_dim;
    f.view.linear = t;
    f.view.thread_idx = uint3{t % d.x, (t / d.x) % d.y, t / (d.x * d.y)};
    f.state = State::NotStarted;
  }
  for (Warp& w : run.warps) w = Warp{};
  std::memset(run.shared.data(), 0xFF, run.shared.size() * sizeof(uint64_t));
  make_order(run.order, run.n, salt);
  for (;;) {
    bool ran = false;
    for (unsigned t : run.order) {
      Fiber& f = run.fibers[t];
      if (f.state != State::NotStarted && f.state != State::Ready) continue;
      resume(run, f);
      ran = true;
      if (!run.failure.empty()) return false;
    }
    if (run.done == run.n) return true;
    if (!ran) {
      run.failure = deadlock_message(run);
      return false;
    }
  }
}

}  // namespace

// ---- what a kernel calls ----

void syncthreads() {
  Fiber& f = running_fiber("__syncthreads()");
  BlockRun& run = *g_run;
  f.state = State::AtBarrier;
  if (++run.at_barrier == run.n) {
    for (unsigned t = 0; t < run.n; ++t)
      if (run.fibers[t].state == State::AtBarrier) run.fibers[t].state = State::Ready;
    run.at_barrier = 0;
  }
  yield(f);
}

uint64_t warp_exchange(unsigned mask, uint64_t mine, int source_lane) {
  Fiber& f = running_fiber("a warp operation");
  BlockRun& run = *g_run;
  const unsigned lane = f.view.linear % 32, first = f.view.linear - lane;
  const unsigned lanes_here = run.n - first >= 32 ? 32 : run.n - first;
  const unsigned existing = lanes_here == 32 ? 0xffffffffu : (1u << lanes_here) - 1;
  const unsigned need = mask & existing;
  Warp& w = run.warps[f.view.linear / 32];
  if (!(need >> lane & 1u))
    fail(f, block_name(run) + ": thread " + std::to_string(f.view.linear) +
                " calls a warp operation whose mask leaves out its own lane");
  if (w.arrived == 0) w.mask = need;
  else if (w.mask != need)
    fail(f, block_name(run) + ": the lanes of warp " + std::to_string(f.view.linear / 32) +
                " call a warp operation with different masks");
  const unsigned generation = w.generation;
  w.values[generation & 1][lane] = mine;
  w.masks[generation & 1] = need;
  w.arrived |= 1u << lane;
  f.state = State::AtWarp;
  if (w.arrived == w.mask) {
    for (unsigned l = 0; l < lanes_here; ++l) {
      Fiber& other = run.fibers[first + l];
      if ((w.mask >> l & 1u) && other.state == State::AtWarp) other.state = State::Ready;
    }
    w.arrived = 0;
    ++w.generation;
  }
  yield(f);
  if (source_lane < 0) return 0;  // __syncwarp
  if (source_lane >= 32 || !(w.masks[generation & 1] >> source_lane & 1u))
    fail(f, block_name(run) + ": thread " + std::to_string(f.view.linear) + " reads lane " +
                std::to_string(source_lane) + ", which is not in the operation's mask");
  return w.values[generation & 1][source_lane];
}

void syncwarp(unsigned mask) { warp_exchange(mask, 0, -1); }

void* dynamic_shared_bytes() {
  running_fiber("dynamic shared memory");
  return g_run->shared.data();
}

const char* running_kernel() { return g_running_kernel; }

namespace {

// One launch's blocks, taken one at a time by the OS threads that run them.
struct GridRun {
  const char* kernel = nullptr;
  KernelBody* body = nullptr;
  dim3 grid, block;
  size_t shared_bytes = 0;
  uint64_t launch = 0, blocks = 0;
  std::vector<uint64_t> order;  // empty: 0, 1, …
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex failure_mutex;
  std::string failure;
};

// Takes blocks of the launch until none is left, on the calling OS thread
// (its own fibers and stacks; __shared__ is per OS thread, so per block).
void run_blocks(GridRun& g) {
  static thread_local BlockRun run;
  run.kernel = g.kernel;
  run.body = g.body;
  run.failure.clear();
  run.n = g.block.x * g.block.y * g.block.z;
  if (run.fibers.size() < run.n) {  // grows, never shrinks: slot t keeps its stack
    run.fibers.resize(run.n);
    for (unsigned t = 0; t < run.n; ++t) run.fibers[t].stack_top = stack_top(t);
  }
  run.warps.resize((run.n + 31) / 32);
  run.shared.assign((g.shared_bytes + 7) / 8 + 1, 0);
  g_run = &run;
  g_block.grid_dim = g.grid;
  g_block.block_dim = g.block;
  for (;;) {
    const uint64_t i = g.next.fetch_add(1);
    if (i >= g.blocks || g.failed.load()) break;
    const uint64_t b = g.order.empty() ? i : g.order[i];
    g_block.block_idx = uint3{unsigned(b % g.grid.x), unsigned((b / g.grid.x) % g.grid.y),
                              unsigned(b / (uint64_t(g.grid.x) * g.grid.y))};
    if (!run_block(run, g.launch * 0x100000001b3ull + b)) {
      std::lock_guard<std::mutex> lock(g.failure_mutex);
      if (!g.failed.exchange(true)) g.failure = run.failure;
      break;
    }
  }
  g_run = nullptr;
}

// OS threads that help run a launch's blocks (LINA_CUDA_SIM_THREADS, default
// one per core). Blocks of a launch are independent, as on a GPU, so who
// runs which does not change a result. Made once per process (a forked
// child, such as a test's, makes its own) and never destroyed.
class Workers {
 public:
  explicit Workers(unsigned helpers) {
    for (unsigned i = 0; i < helpers; ++i) std::thread([this] { loop(); }).detach();
    helpers_ = helpers;
  }
  void run(GridRun& g) {
    {
      std::lock_guard<std::mutex> lock(m_);
      job_ = &g;
      pending_ = helpers_;
      ++generation_;
    }
    wake_.notify_all();
    run_blocks(g);
    std::unique_lock<std::mutex> lock(m_);
    done_.wait(lock, [&] { return pending_ == 0; });  // every helper has left g
    job_ = nullptr;
  }

 private:
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      std::unique_lock<std::mutex> lock(m_);
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      GridRun* g = job_;
      lock.unlock();
      run_blocks(*g);
      lock.lock();
      if (--pending_ == 0) done_.notify_all();
    }
  }
  std::mutex m_;
  std::condition_variable wake_, done_;
  GridRun* job_ = nullptr;
  uint64_t generation_ = 0;
  unsigned helpers_ = 0, pending_ = 0;
};

Workers* workers() {
  static Workers* pool = nullptr;
  static pid_t pool_pid = 0;
  if (pool == nullptr || pool_pid != getpid()) {
    const char* env = std::getenv("LINA_CUDA_SIM_THREADS");
    unsigned n = env ? unsigned(std::atoi(env)) : std::thread::hardware_concurrency();
    n = n < 1 ? 1 : n > 16 ? 16 : n;
    pool = new Workers(n - 1);  // the calling thread is the n-th
    pool_pid = getpid();
  }
  return pool;
}

}  // namespace

void run_grid(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes, KernelBody& body) {
  GridRun g;
  g.kernel = kernel;
  g.body = &body;
  g.grid = grid;
  g.block = block;
  g.shared_bytes = shared_bytes;
  g.launch = ++g_launch_index;
  g.blocks = uint64_t(grid.x) * grid.y * grid.z;
  if (g_order != ThreadOrder::Forward) {
    g.order.resize(g.blocks);
    for (uint64_t i = 0; i < g.blocks; ++i) g.order[i] = g_order == ThreadOrder::Reverse ? g.blocks - 1 - i : i;
    if (g_order == ThreadOrder::Shuffle) {
      uint64_t state = g_seed ^ (g.launch * 0x9e3779b97f4a7c15ull);
      for (uint64_t i = g.blocks; i > 1; --i) std::swap(g.order[i - 1], g.order[splitmix(state) % i]);
    }
  }
  g_running_kernel = kernel;
  if (g.blocks < 2) run_blocks(g);
  else workers()->run(g);
  g_running_kernel = nullptr;
  if (g.failed) set_sticky_error(cudaErrorLaunchFailure, g.failure);
}

// ---- control.h ----
void set_thread_order(ThreadOrder order, uint64_t seed) {
  g_order = order;
  g_seed = seed;
}
ThreadOrder thread_order() { return g_order; }

// LINA_CUDA_SIM_ORDER=forward|reverse|shuffle[:seed], read once at start.
static const bool g_order_from_environment = [] {
  const char* env = std::getenv("LINA_CUDA_SIM_ORDER");
  if (env == nullptr) return false;
  std::string value = env;
  if (value == "reverse") g_order = ThreadOrder::Reverse;
  else if (value.rfind("shuffle", 0) == 0) {
    g_order = ThreadOrder::Shuffle;
    if (value.size() > 8 && value[7] == ':') g_seed = std::strtoull(value.c_str() + 8, nullptr, 10);
  } else if (value != "forward") {
    std::fprintf(stderr, "cuda-sim: LINA_CUDA_SIM_ORDER=%s: expected forward, reverse or shuffle[:seed]\n", env);
    std::exit(2);
  }
  return true;
}();

}  // namespace cuda_sim
