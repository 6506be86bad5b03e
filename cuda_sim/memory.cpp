// Device memory of the simulator.
//
// Each allocation is its own mapping: whole pages, then one guard page that
// stays inaccessible. The buffer ends as near the guard page as CUDA's
// 256-byte alignment allows, so a kernel reading past its end faults.
// Between synchronisations every device page is inaccessible too: device
// memory is read by the host only through cudaMemcpy, as on a GPU, and a
// host read of it stops the process with a message naming the allocation
// (the SIGSEGV handler below). While queued work runs, an allocation is
// opened when work first touches it: the fault is caught, the pages are made
// readable and writable, and the access is retried; when the work is done
// the opened allocations are closed again. So a synchronisation costs a
// page-table change only for what its work used. (A block freed to the pool
// may still be used by work queued before its free; a kernel given a freed
// pointer is refused at its launch instead.)
//
// New memory is NaN bytes (0xFF: a NaN as float and as double, -1 as int),
// so a kernel that reads what nobody wrote produces NaN.
//
// Under AddressSanitizer the allocations come from malloc instead (ASan's
// redzones then catch out-of-bounds accesses to the byte) and pages are not
// protected.
//
// cudaMallocAsync takes from a pool: a freed block of the same size is
// reused (its pages are kept, as CUDA's pool keeps them with an unlimited
// release threshold); the pool's reserved bytes are what it holds.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "cuda_sim/runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#define CUDA_SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDA_SIM_ASAN 1
#endif
#endif
#ifndef CUDA_SIM_ASAN
#define CUDA_SIM_ASAN 0
#endif

namespace cuda_sim {

namespace {

constexpr unsigned char kPoison = 0xFF;

size_t page_size() {
  static const size_t size = size_t(sysconf(_SC_PAGESIZE));
  return size;
}

std::map<uintptr_t, Allocation>& registry() {  // every mapping, by base address
  static auto* r = new std::map<uintptr_t, Allocation>();
  return *r;
}
std::multimap<size_t, char*>& pool_free() {  // freed pool blocks by size
  static auto* p = new std::multimap<size_t, char*>();
  return *p;
}
size_t g_pool_reserved = 0, g_pool_used = 0;
bool g_running_work = false;  // queued work is running: a touch of a closed allocation opens it

bool protect_pages() {
  static const bool on = [] {
    const char* env = std::getenv("LINA_CUDA_SIM_PROTECT");
    return !CUDA_SIM_ASAN && !(env && std::strcmp(env, "0") == 0);
  }();
  return on;
}

void set_open(Allocation& a, bool open) {
  if (protect_pages() && a.open != open) mprotect(a.mapping, a.region, open ? PROT_READ | PROT_WRITE : PROT_NONE);
  a.open = open;
}

// ---- the fault handler: a touch of device memory that is not allowed ----
struct sigaction g_previous_segv;

void on_fault(int sig, siginfo_t* info, void* context) {
  const char* address = static_cast<const char*>(info->si_addr);
  auto& r = registry();
  auto it = r.upper_bound(uintptr_t(address) + page_size());  // bases lie at most a page above their mapping
  while (it != r.begin()) {
    --it;
    Allocation& a = it->second;
    if (address >= a.mapping + a.region + page_size()) break;  // past this one's guard page: nobody's
    if (address < a.mapping) continue;
    const long long offset = (long long)(address - a.base);
    const bool inside = offset >= 0 && offset < (long long)a.bytes;
    if (g_running_work && inside) {  // queued work touches it first: open it, retry
      // (another OS thread may be opening it at the same moment: mprotect twice is harmless)
      mprotect(a.mapping, a.region, PROT_READ | PROT_WRITE);
      a.open = true;
      return;
    }
    char line[512];
    const char* kernel = running_kernel();
    int n;
    if (!inside)
      n = std::snprintf(line, sizeof line,
                        "cuda-sim: %s%s%s read or wrote outside a %zu-byte device allocation (byte %lld)\n",
                        kernel ? "kernel '" : "the host", kernel ? kernel : "", kernel ? "'" : "", a.bytes,
                        offset);
    else
      n = std::snprintf(line, sizeof line,
                        "cuda-sim: host code read or wrote device memory directly (byte %lld of a %zu-byte "
                        "allocation): device memory reaches the host only through cudaMemcpy, after the "
                        "stream is synchronised\n",
                        offset, a.bytes);
    if (n > 0) (void)!write(2, line, size_t(n));
    signal(SIGABRT, SIG_DFL);
    abort();
  }
  // Not ours: whatever handled it before us (or the default: a core dump).
  if (g_previous_segv.sa_flags & SA_SIGINFO) g_previous_segv.sa_sigaction(sig, info, context);
  else if (g_previous_segv.sa_handler != SIG_IGN && g_previous_segv.sa_handler != SIG_DFL)
    g_previous_segv.sa_handler(sig);
  else {
    signal(sig, SIG_DFL);
    raise(sig);
  }
}

// Installed on the first allocation, and again at each synchronisation if
// someone (a test framework's crash handler, say) has put another in its
// place meanwhile: opening allocations on their first touch depends on it.
void install_fault_handler() {
  if (!protect_pages()) return;
  struct sigaction current {};
  sigaction(SIGSEGV, nullptr, &current);
  if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_fault) return;
  static bool have_alt_stack = false;
  if (!have_alt_stack) {  // the handler may run on a fiber's small stack (a kernel's fault): give it its own
    have_alt_stack = true;
    static char alt_stack[64 * 1024];
    stack_t ss{};
    ss.ss_sp = alt_stack;
    ss.ss_size = sizeof alt_stack;
    sigaltstack(&ss, nullptr);
  }
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &g_previous_segv);
}

// A new block of `bytes`: its address, and the pages around it in `a`.
char* map_block(size_t bytes, Allocation& a) {
  install_fault_handler();
  const size_t page = page_size();
  if (!protect_pages()) {
    void* p = nullptr;
    if (posix_memalign(&p, 256, bytes ? bytes : 1) != 0) return nullptr;
    a.mapping = static_cast<char*>(p);
    a.region = bytes ? bytes : 1;
    return a.mapping;
  }
  a.region = ((bytes ? bytes : 1) + page - 1) / page * page;
  void* p = mmap(nullptr, a.region + page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  a.mapping = static_cast<char*>(p);
  const size_t aligned = (bytes + 255) / 256 * 256;
  return a.mapping + (a.region - (aligned ? aligned : 256));
}

void unmap_block(const Allocation& a) {
  if (!protect_pages()) std::free(a.mapping);
  else munmap(a.mapping, a.region + page_size());
}

// Poisons the block now (the caller makes sure no queued work still uses it).
void poison(Allocation& a) {
  const bool was_open = a.open;
  set_open(a, true);
  std::memset(a.base, kPoison, a.bytes);
  set_open(a, was_open);
}

}  // namespace

const Allocation* find_allocation(const void* ptr) {
  const auto& r = registry();
  auto it = r.upper_bound(uintptr_t(ptr));
  if (it == r.begin()) return nullptr;
  --it;
  const Allocation& a = it->second;
  const char* p = static_cast<const char*>(ptr);
  if (p >= a.base && p < a.base + (a.bytes ? a.bytes : 1)) return &a;
  return nullptr;
}

// Around the running of queued work: while it runs, allocations open when
// first touched; after it, every open one is closed.
void set_device_access(bool running_work) {
  if (running_work) install_fault_handler();
  g_running_work = running_work;
  if (!running_work)
    for (auto& [base, a] : registry()) set_open(a, false);
}

size_t pool_reserved_bytes() { return g_pool_reserved; }
size_t pool_used_bytes() { return g_pool_used; }

// Frees every allocation (cudaDeviceReset).
void release_all_memory() {
  for (auto& [base, a] : registry()) unmap_block(a);
  registry().clear();
  pool_free().clear();
  g_pool_reserved = g_pool_used = 0;
}

}  // namespace cuda_sim

using namespace cuda_sim;

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t err = sticky_error()) return err;
  if (cudaError_t err = refuse_during_capture(CaptureRule::UnsafeInGlobalMode, nullptr,
                                              "cudaMalloc of " + std::to_string(bytes) + " bytes"))
    return err;
  Allocation block;
  char* base = map_block(bytes, block);
  if (base == nullptr) return cudaErrorMemoryAllocation;
  Allocation& a = registry()[uintptr_t(base)];
  a = Allocation{base, bytes, block.mapping, block.region, true, false, !protect_pages()};
  poison(a);
  count_allocation();
  *ptr = base;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  if (cudaError_t err = sticky_error()) return err;
  if (cudaError_t err = refuse_during_capture(CaptureRule::WaitsForDevice, nullptr, "cudaFree")) return err;
  flush();  // cudaFree waits for the device
  auto it = registry().find(uintptr_t(ptr));
  if (it == registry().end() || !it->second.live || it->second.pooled) return cudaErrorInvalidValue;
  unmap_block(it->second);
  registry().erase(it);
  return cudaSuccess;
}

// Graph-owned memory (an allocation node in a captured graph) is not
// simulated: on a capturing stream this is refused; allocate before the capture.
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t err = sticky_error()) return err;
  if (cudaError_t err = refuse_during_capture(
          CaptureRule::OnCapturingStream, stream,
          "cudaMallocAsync of " + std::to_string(bytes) + " bytes (graph-owned memory is not simulated)"))
    return err;
  Allocation* a = nullptr;
  auto cached = pool_free().find(bytes);
  if (cached != pool_free().end()) {
    a = &registry()[uintptr_t(cached->second)];
    pool_free().erase(cached);
    a->live = true;
    // Poisoned in stream order: work queued before the free may still read it.
    const Allocation* block = a;
    enqueue([block] { std::memset(block->base, kPoison, block->bytes); });  // opens it when run
  } else {
    Allocation block;
    char* base = map_block(bytes, block);
    if (base == nullptr) return cudaErrorMemoryAllocation;
    a = &registry()[uintptr_t(base)];
    *a = Allocation{base, bytes, block.mapping, block.region, true, true, !protect_pages()};
    poison(*a);
    g_pool_reserved += bytes;
  }
  g_pool_used += bytes;
  count_allocation();
  *ptr = a->base;
  return cudaSuccess;
}

// The block goes back to the pool at once: every later use of it is queued
// after the work queued so far (one FIFO for all streams).
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  if (ptr == nullptr) return cudaSuccess;
  if (cudaError_t err = sticky_error()) return err;
  if (cudaError_t err = refuse_during_capture(CaptureRule::OnCapturingStream, stream,
                                              "cudaFreeAsync (graph-owned memory is not simulated)"))
    return err;
  auto it = registry().find(uintptr_t(ptr));
  if (it == registry().end() || !it->second.live || !it->second.pooled) return cudaErrorInvalidValue;
  Allocation& a = it->second;
  a.live = false;
  g_pool_used -= a.bytes;
  pool_free().emplace(a.bytes, a.base);
  return cudaSuccess;
}
