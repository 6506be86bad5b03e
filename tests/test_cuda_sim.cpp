// lina's CUDA runtime on the CPU (cuda_sim/), tested on its own: what it
// must catch (a missing barrier, a host pointer given to a kernel, a read
// before the synchronisation, a deadlock, bad launches) and what it must do
// as CUDA does (barriers, shared memory, warp shuffles, streams, the pool,
// cuBLAS, stream capture and graph launches). Built in the cuda-sim preset
// as cuda_sim_tests.
#define DOCTEST_CONFIG_IMPLEMENT
#define DOCTEST_CONFIG_NO_POSIX_SIGNALS  // the simulator's own SIGSEGV handler must stay in place
#include "tests/skip_exit_code.h"        // main, at the end: a skipped test case exits 77

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cuda_sim/control.h"

namespace {

#define LAUNCH(kernel, grid, block, shared) ::cuda_sim::Launch(#kernel, kernel, grid, block, shared, nullptr)
#define LAUNCH_ON(stream, kernel, grid, block) ::cuda_sim::Launch(#kernel, kernel, grid, block, 0, stream)

constexpr int kN = 256;

// Every test leaves the simulator as it found it.
struct Fresh {
  Fresh() { cudaDeviceReset(); }
  ~Fresh() {
    cuda_sim::set_thread_order(cuda_sim::ThreadOrder::Forward);
    cudaDeviceReset();
  }
};

template <class T> T* device_array(size_t n) {
  T* p = nullptr;
  REQUIRE(cudaMalloc(&p, n * sizeof(T)) == cudaSuccess);
  return p;
}

template <class T> std::vector<T> to_host(const T* device, size_t n) {
  std::vector<T> host(n);
  REQUIRE(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  return host;
}

// ---- kernels ----

// out[i] = in[n − 1 − i] through shared memory, with the barrier it needs
__global__ void reverse_with_barrier(const float* in, float* out) {
  __shared__ float tile[kN];
  const int base = int(blockIdx.x) * kN;
  tile[threadIdx.x] = in[base + threadIdx.x];
  __syncthreads();
  out[base + threadIdx.x] = tile[kN - 1 - threadIdx.x];
}

// the same without it: a thread may read a tile entry before its writer ran
__global__ void reverse_missing_barrier(const float* in, float* out) {
  __shared__ float tile[kN];
  const int base = int(blockIdx.x) * kN;
  tile[threadIdx.x] = in[base + threadIdx.x];
  out[base + threadIdx.x] = tile[kN - 1 - threadIdx.x];
}

__global__ void write_index(float* out, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = float(i);
}

// thread 0 leaves before the barrier: the others wait for ever
__global__ void barrier_after_early_exit(float* out) {
  if (threadIdx.x == 0) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

// Σ of each warp's 32 values by shuffles down, and a butterfly by xor
__global__ void warp_sums(const float* in, float* down, float* butterfly) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  float v = in[i];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) down[i / 32] = v;
  float w = in[i];
  for (int mask = 16; mask > 0; mask /= 2) w += __shfl_xor_sync(0xffffffffu, w, mask);
  butterfly[i] = w;
}

// lanes 16..31 never shuffle, but the mask names them
// Each block writes its index, then counts itself in (atomicInc wraps at
// gridDim.x − 1); the block that brings the count round is the last, and
// adds every block's entry.
__global__ void last_block_sums(float* entries, unsigned* counter, float* total, unsigned* last_seen) {
  __shared__ bool last;
  if (threadIdx.x == 0) entries[blockIdx.x] = float(blockIdx.x);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicInc(counter, gridDim.x - 1) == gridDim.x - 1;
  __syncthreads();
  if (!last || threadIdx.x != 0) return;
  float s = 0.0f;
  for (unsigned b = 0; b < gridDim.x; ++b) s += entries[b];
  *total = s;
  *last_seen += 1;
}

__global__ void shuffle_half_warp(float* out) {
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_sync(0xffffffffu, 1.0f, 0);
}

__global__ void copy_dynamic_shared(float* out) {
  float* shared = ::cuda_sim::dynamic_shared<float>();
  out[blockIdx.x * blockDim.x + threadIdx.x] = shared[threadIdx.x];  // never written: NaN
  __syncthreads();
  shared[threadIdx.x] = 7.0f;  // the next block must not see this
}

__global__ void fill_value(float* out, float value) { out[threadIdx.x] = value; }

// An argument struct that lists its pointers, as lina's argument structs do.
struct CopyArgs {
  const float* src;
  float* dst;
  std::array<const void*, 2> device_pointers() const { return {src, dst}; }
};
__global__ void copy_by_struct(CopyArgs args) { args.dst[threadIdx.x] = args.src[threadIdx.x]; }

__global__ void read_past_end(const float* in, float* out) { out[0] = in[64]; }  // byte 256 of 64

__global__ void add_half(float* acc, const float* in) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  acc[i] += 0.5f * in[i];
}
__global__ void scale_add(float* x, const float* y, float scale) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  x[i] = scale * x[i] + y[i];
}

// Runs `body` in a child process and returns what it wrote on stderr and
// whether it died (by a signal or a non-zero exit).
std::pair<bool, std::string> in_child(void (*body)()) {
  int pipe_fd[2];
  REQUIRE(pipe(pipe_fd) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(pipe_fd[1], 2);
    close(pipe_fd[0]);
    body();
    _exit(0);
  }
  close(pipe_fd[1]);
  std::string err;
  char buf[512];
  ssize_t n;
  while ((n = read(pipe_fd[0], buf, sizeof buf)) > 0) err.append(buf, size_t(n));
  close(pipe_fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  const bool died = WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0);
  return {died, err};
}

}  // namespace

TEST_CASE("a kernel missing a __syncthreads gives a wrong result, and with it every thread order is right") {
  Fresh fresh;
  constexpr int kBlocks = 4;
  float* d_in = device_array<float>(kBlocks * kN);
  float* d_out = device_array<float>(kBlocks * kN);
  int round = 0;
  for (auto order : {cuda_sim::ThreadOrder::Forward, cuda_sim::ThreadOrder::Reverse, cuda_sim::ThreadOrder::Shuffle}) {
    cuda_sim::set_thread_order(order, 7);
    INFO("order ", int(order));
    // Each block reverses its own kN values; every round new values, so a
    // tile left from an earlier block or launch never holds the right ones.
    std::vector<float> in(kBlocks * kN), want(kBlocks * kN);
    for (int b = 0; b < kBlocks; ++b)
      for (int i = 0; i < kN; ++i) {
        in[size_t(b * kN + i)] = float(1000 * round + 300 * b + i);
        want[size_t(b * kN + kN - 1 - i)] = in[size_t(b * kN + i)];
      }
    ++round;
    REQUIRE(cudaMemcpy(d_in, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    LAUNCH(reverse_with_barrier, kBlocks, kN, 0)(d_in, d_out);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(to_host(d_out, in.size()) == want);
    LAUNCH(reverse_missing_barrier, kBlocks, kN, 0)(d_in, d_out);
    CHECK(to_host(d_out, in.size()) != want);  // caught: some thread read before the write
  }
}

TEST_CASE("a host pointer given to a kernel is refused at the launch, naming the kernel and the argument") {
  Fresh fresh;
  std::vector<float> host(64);
  LAUNCH(write_index, 1, 64, 0)(host.data(), 64);
  const cudaError_t err = cudaGetLastError();
  CHECK(err == cudaErrorInvalidValue);
  const std::string message = cudaGetErrorString(err);
  CHECK(message.find("write_index") != std::string::npos);
  CHECK(message.find("argument 1") != std::string::npos);
  CHECK(message.find("not device memory") != std::string::npos);
  CHECK(cudaGetLastError() == cudaSuccess);  // not sticky

  // inside an argument struct
  float* on_device = device_array<float>(64);
  LAUNCH(copy_by_struct, 1, 64, 0)(CopyArgs{on_device, host.data()});
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(std::string(cudaGetErrorString(cudaErrorInvalidValue)).find("'copy_by_struct', argument 1") !=
        std::string::npos);
  LAUNCH(copy_by_struct, 1, 64, 0)(CopyArgs{on_device, on_device});
  CHECK(cudaGetLastError() == cudaSuccess);

  float* d = nullptr;
  REQUIRE(cudaMallocAsync(&d, 64 * sizeof(float), nullptr) == cudaSuccess);
  REQUIRE(cudaFreeAsync(d, nullptr) == cudaSuccess);
  LAUNCH(write_index, 1, 64, 0)(d, 64);  // freed
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(std::string(cudaGetErrorString(cudaErrorInvalidValue)).find("freed") != std::string::npos);
}

TEST_CASE("work runs at the synchronisation: a copy read before it holds NaN, after it the values") {
  Fresh fresh;
  float* d = device_array<float>(8);
  LAUNCH(fill_value, 1, 8, 0)(d, 3.0f);
  std::vector<float> host(8, 0.0f);
  REQUIRE(cudaMemcpyAsync(host.data(), d, 8 * sizeof(float), cudaMemcpyDeviceToHost, nullptr) == cudaSuccess);
  CHECK(std::isnan(host[0]));  // read without a sync: caught, never silently right
  REQUIRE(cudaStreamSynchronize(nullptr) == cudaSuccess);
  CHECK(host == std::vector<float>(8, 3.0f));
}

TEST_CASE("host code that reads device memory directly stops with a message") {
#if defined(__SANITIZE_ADDRESS__)
  MESSAGE("SKIPPED: under AddressSanitizer device memory comes from malloc, unprotected (ASan guards its bounds)");
  return;
#endif
  auto [died, err] = in_child([] {
    float* d = nullptr;
    cudaMalloc(&d, 64 * sizeof(float));
    volatile float x = d[3];  // device memory, read by the host
    (void)x;
  });
  CHECK(died);
  CHECK(err.find("host code read or wrote device memory") != std::string::npos);
}

TEST_CASE("a kernel reading past the end of an allocation faults, naming the kernel") {
  auto [died, err] = in_child([] {
    float *in = nullptr, *out = nullptr;
    cudaMalloc(&in, 16 * sizeof(float));
    cudaMalloc(&out, sizeof(float));
    ::cuda_sim::Launch("read_past_end", read_past_end, 1, 1, 0, nullptr)(in, out);
    cudaDeviceSynchronize();
  });
  CHECK(died);
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(err.find("kernel 'read_past_end' read or wrote outside a 64-byte device allocation") !=
        std::string::npos);
#else
  CHECK(err.find("AddressSanitizer") != std::string::npos);
#endif
}

TEST_CASE("new device memory is NaN bytes, and so is dynamic shared memory in every block") {
  Fresh fresh;
  float* d = device_array<float>(5);
  for (float v : to_host(d, 5)) CHECK(std::isnan(v));
  float* out = device_array<float>(2 * 32);
  LAUNCH(copy_dynamic_shared, 2, 32, 32 * sizeof(float))(out);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  for (float v : to_host(out, 64)) CHECK(std::isnan(v));
}

TEST_CASE("threads that leave before a __syncthreads the others wait at: a deadlock naming the kernel, sticky") {
  Fresh fresh;
  float* d = device_array<float>(64);
  LAUNCH(barrier_after_early_exit, 1, 64, 0)(d);
  CHECK(cudaGetLastError() == cudaSuccess);  // the launch itself is fine
  const cudaError_t err = cudaDeviceSynchronize();
  CHECK(err == cudaErrorLaunchFailure);
  const std::string message = cudaGetErrorString(err);
  CHECK(message.find("deadlock in kernel 'barrier_after_early_exit', block (0, 0, 0)") != std::string::npos);
  CHECK(message.find("63 of 64 threads wait at __syncthreads() and 1 ended") != std::string::npos);
  float* more = nullptr;
  CHECK(cudaMalloc(&more, 4) == cudaErrorLaunchFailure);  // sticky until the reset
}

TEST_CASE("warp shuffles: sums down and by butterfly equal the host's, under every order") {
  Fresh fresh;
  std::vector<float> in(128);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i % 7) - 2.0f;
  float* d_in = device_array<float>(128);
  float* d_down = device_array<float>(4);
  float* d_fly = device_array<float>(128);
  REQUIRE(cudaMemcpy(d_in, in.data(), 128 * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  for (auto order : {cuda_sim::ThreadOrder::Forward, cuda_sim::ThreadOrder::Reverse, cuda_sim::ThreadOrder::Shuffle}) {
    cuda_sim::set_thread_order(order, 3);
    LAUNCH(warp_sums, 2, 64, 0)(d_in, d_down, d_fly);
    std::vector<float> down = to_host(d_down, 4), fly = to_host(d_fly, 128);
    for (int w = 0; w < 4; ++w) {
      float want = 0;
      for (int l = 0; l < 32; ++l) want += in[size_t(w * 32 + l)];
      CHECK(down[size_t(w)] == want);
      for (int l = 0; l < 32; ++l) CHECK(fly[size_t(w * 32 + l)] == want);
    }
  }
}

TEST_CASE("atomicInc and __threadfence: exactly one block is last, sees every block's write, and resets the count") {
  Fresh fresh;
  constexpr unsigned kBlocks = 97;  // shared among the simulator's OS threads
  float* entries = device_array<float>(kBlocks);
  float* total = device_array<float>(1);
  unsigned* counter = device_array<unsigned>(2);  // the count, then how many blocks were last
  REQUIRE(cudaMemset(counter, 0, 2 * sizeof(unsigned)) == cudaSuccess);
  for (int launch = 0; launch < 3; ++launch) {
    LAUNCH(last_block_sums, kBlocks, 64, 0)(entries, counter, total, counter + 1);
    CHECK(to_host(total, 1)[0] == float(kBlocks * (kBlocks - 1) / 2));
    const std::vector<unsigned> count = to_host(counter, 2);
    CHECK(count[0] == 0u);                     // back to 0 for the next launch
    CHECK(count[1] == unsigned(launch + 1));  // one last block per launch
  }
}

TEST_CASE("a warp shuffle whose mask names lanes that never arrive: a deadlock naming the kernel") {
  Fresh fresh;
  float* d = device_array<float>(32);
  LAUNCH(shuffle_half_warp, 1, 32, 0)(d);
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  const std::string message = cudaGetErrorString(cudaErrorLaunchFailure);
  CHECK(message.find("kernel 'shuffle_half_warp'") != std::string::npos);
  CHECK(message.find("wait at a warp operation") != std::string::npos);
}

TEST_CASE("launches CUDA refuses are refused: empty grid, 1025 threads, shared memory over the limit") {
  Fresh fresh;
  float* d = device_array<float>(2048);
  LAUNCH(write_index, 0, 32, 0)(d, 32);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  LAUNCH(write_index, 1, 1025, 0)(d, 1025);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  LAUNCH(write_index, 1, 32, 64 * 1024)(d, 32);  // over 48 KB without the attribute
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(std::string(cudaGetErrorString(cudaErrorInvalidValue)).find("cudaFuncSetAttribute") != std::string::npos);
  REQUIRE(cudaFuncSetAttribute(write_index, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024) == cudaSuccess);
  LAUNCH(write_index, 1, 32, 64 * 1024)(d, 32);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaFuncSetAttribute(write_index, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024) ==
        cudaErrorInvalidValue);  // over the H200's 227 KB
  cudaGetLastError();
  LAUNCH(write_index, 4, 512, 0)(d, 2048);
  std::vector<float> out = to_host(d, 2048);
  CHECK(out[0] == 0.0f);
  CHECK(out[2047] == 2047.0f);
}

TEST_CASE("the device is an H200: 132 SMs, 48 KB / 227 KB shared memory, warps of 32, memory pools") {
  int sms = 0, shared = 0, optin = 0, warp = 0, pools = 0, count = 0;
  CHECK(cudaGetDeviceCount(&count) == cudaSuccess);
  CHECK(count == 1);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlock, 0);
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
  cudaDeviceGetAttribute(&warp, cudaDevAttrWarpSize, 0);
  cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, 0);
  CHECK(sms == 132);
  CHECK(shared == 48 * 1024);
  CHECK(optin == 227 * 1024);
  CHECK(warp == 32);
  CHECK(pools == 1);
}

TEST_CASE("the stream-ordered pool reuses a freed block: reserved bytes stay, new blocks are NaN") {
  Fresh fresh;
  cudaMemPool_t pool;
  REQUIRE(cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess);
  float* a = nullptr;
  REQUIRE(cudaMallocAsync(&a, 1000 * sizeof(float), nullptr) == cudaSuccess);
  LAUNCH(fill_value, 1, 100, 0)(a, 1.0f);
  REQUIRE(cudaFreeAsync(a, nullptr) == cudaSuccess);
  uint64_t reserved_before = 0, reserved_after = 0;
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved_before);
  float* b = nullptr;
  REQUIRE(cudaMallocAsync(&b, 1000 * sizeof(float), nullptr) == cudaSuccess);
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved_after);
  CHECK(b == a);  // the same block again
  CHECK(reserved_after == reserved_before);
  for (float v : to_host(b, 100)) CHECK(std::isnan(v));  // poisoned again after the kernel ran
}

TEST_CASE("cuBLAS: the strided batched product equals the host's, and beta = 0 ignores NaN in C") {
  Fresh fresh;
  const int m = 3, n = 4, k = 5, batch = 2;
  std::vector<float> a(size_t(batch * m * k)), b(size_t(batch * k * n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 5) - 2);
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 3) - 1) * 0.5f;
  float* d_a = device_array<float>(a.size());
  float* d_b = device_array<float>(b.size());
  float* d_c = device_array<float>(size_t(batch * m * n));  // NaN bytes
  cudaMemcpy(d_a, a.data(), a.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(d_b, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
  cublasHandle_t handle;
  REQUIRE(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS);
  const float one = 1.0f, zero = 0.0f;
  // column-major: A m×k (lda m), B k×n (ldb k), C m×n (ldc m)
  REQUIRE(cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, d_a, m, m * k, d_b, k,
                                    k * n, &zero, d_c, m, m * n, batch) == CUBLAS_STATUS_SUCCESS);
  std::vector<float> c = to_host(d_c, size_t(batch * m * n));
  for (int s = 0; s < batch; ++s)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        float want = 0;
        for (int p = 0; p < k; ++p) want += a[size_t(s * m * k + i + p * m)] * b[size_t(s * k * n + p + j * k)];
        CHECK(c[size_t(s * m * n + i + j * m)] == doctest::Approx(want));
      }
  std::vector<float> host(4);
  CHECK(cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 1, &one, host.data(), 2, 0, d_b, 1, 0,
                                  &zero, d_c, 2, 0, 1) == CUBLAS_STATUS_INVALID_VALUE);  // a host operand
  cublasDestroy(handle);
}

// ---- stream capture and graphs ----
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool mentions(cudaError_t err, const std::string& words) {
  return std::string(cudaGetErrorString(err)).find(words) != std::string::npos;
}

// One "update" on kN floats: new input from the host, a zeroed accumulator,
// two kernels and a cuBLAS product, all on `stream`.
struct Update {
  static constexpr int kSide = 16;  // kN = kSide²: x as a kSide × kSide matrix
  float *x = device_array<float>(kN), *input = device_array<float>(kN), *acc = device_array<float>(kN),
        *product = device_array<float>(kN);
  std::vector<float> host_input = std::vector<float>(kN);
  cublasHandle_t handle = nullptr;

  explicit Update(cudaStream_t stream) {
    REQUIRE(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasSetStream(handle, stream) == CUBLAS_STATUS_SUCCESS);
    std::vector<float> start(kN);
    for (int i = 0; i < kN; ++i) start[size_t(i)] = std::sin(float(i)), host_input[size_t(i)] = std::cos(float(i));
    REQUIRE(cudaMemcpy(x, start.data(), kN * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~Update() { cublasDestroy(handle); }

  void enqueue(cudaStream_t stream) {
    REQUIRE(cudaMemcpyAsync(input, host_input.data(), kN * sizeof(float), cudaMemcpyHostToDevice, stream) ==
            cudaSuccess);
    REQUIRE(cudaMemsetAsync(acc, 0, kN * sizeof(float), stream) == cudaSuccess);
    LAUNCH_ON(stream, add_half, 2, kN / 2)(acc, input);
    LAUNCH_ON(stream, scale_add, 4, kN / 4)(x, acc, 1.1f);
    const float one = 1.0f, zero = 0.0f;
    REQUIRE(cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_T, kSide, kSide, kSide, &one, x, kSide, 0, acc,
                                      kSide, 0, &zero, product, kSide, 0, 1) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cudaGetLastError() == cudaSuccess);
  }
};

cudaGraphExec_t capture_and_instantiate(cudaStream_t stream, const std::function<void()>& work) {
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  work();
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  REQUIRE(graph != nullptr);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);  // the executable graph stands alone
  return exec;
}

}  // namespace

TEST_CASE("a captured update replayed 3 times equals 3 eager runs bit for bit: one graph launch each, no allocation") {
  Fresh fresh;
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  std::vector<float> eager_x, eager_product;
  {
    Update eager(stream);
    for (int step = 0; step < 3; ++step) eager.enqueue(stream);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    eager_x = to_host(eager.x, kN), eager_product = to_host(eager.product, kN);
  }
  Update replayed(stream);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  REQUIRE(cudaStreamIsCapturing(stream, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  replayed.enqueue(stream);
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);

  size_t count = 0;
  REQUIRE(cudaGraphGetNodes(graph, nullptr, &count) == cudaSuccess);
  REQUIRE(count == 5);
  std::vector<cudaGraphNode_t> nodes(count);
  REQUIRE(cudaGraphGetNodes(graph, nodes.data(), &count) == cudaSuccess);
  std::vector<cudaGraphNodeType> types;
  for (cudaGraphNode_t node : nodes) REQUIRE(cudaGraphNodeGetType(node, &types.emplace_back()) == cudaSuccess);
  CHECK(types == std::vector<cudaGraphNodeType>{cudaGraphNodeTypeMemcpy, cudaGraphNodeTypeMemset,
                                                 cudaGraphNodeTypeKernel, cudaGraphNodeTypeKernel,
                                                 cudaGraphNodeTypeKernel});
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);

  const cuda_sim::Counters before = cuda_sim::counters();
  for (int step = 0; step < 3; ++step) REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  const cuda_sim::Counters after = cuda_sim::counters();
  CHECK(after.graph_launches - before.graph_launches == 3);
  CHECK(after.kernel_launches - before.kernel_launches == 3 * 3);  // two kernels and cuBLAS per replay
  CHECK(after.allocations == before.allocations);
  CHECK(after.device_to_host_copies == before.device_to_host_copies);

  CHECK(same_bits(to_host(replayed.x, kN), eager_x));
  CHECK(same_bits(to_host(replayed.product, kN), eager_product));
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  CHECK(cudaStreamDestroy(stream) == cudaSuccess);
}

TEST_CASE("a captured copy from the host reads the host buffer at each replay, not at the capture") {
  Fresh fresh;
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  float* input = device_array<float>(kN);
  float* acc = device_array<float>(kN);
  std::vector<float> host(kN, 1.0f);
  cudaGraphExec_t exec = capture_and_instantiate(stream, [&] {
    REQUIRE(cudaMemcpyAsync(input, host.data(), kN * sizeof(float), cudaMemcpyHostToDevice, stream) == cudaSuccess);
    REQUIRE(cudaMemsetAsync(acc, 0, kN * sizeof(float), stream) == cudaSuccess);
    LAUNCH_ON(stream, add_half, 1, kN)(acc, input);
  });
  for (float value : {2.0f, 6.0f, -4.0f}) {  // written after the capture: each replay sees it
    std::fill(host.begin(), host.end(), value);
    REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    CHECK(to_host(acc, kN) == std::vector<float>(kN, 0.5f * value));
  }
  cudaGraphExecDestroy(exec);
  cudaStreamDestroy(stream);
}

TEST_CASE("nothing captured runs at the capture: buffers stay as they were until the graph is launched") {
  Fresh fresh;
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  float* d = device_array<float>(64);
  float* zeroed = device_array<float>(64);
  const std::vector<float> ones(64, 1.0f);
  REQUIRE(cudaMemcpy(d, ones.data(), 64 * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(zeroed, ones.data(), 64 * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  std::vector<float> read_back(64, 42.0f);
  const cuda_sim::Counters before = cuda_sim::counters();
  cudaGraphExec_t exec = capture_and_instantiate(stream, [&] {
    LAUNCH_ON(stream, write_index, 1, 64)(d, 64);
    REQUIRE(cudaMemsetAsync(zeroed, 0, 64 * sizeof(float), stream) == cudaSuccess);
    REQUIRE(cudaMemcpyAsync(read_back.data(), d, 64 * sizeof(float), cudaMemcpyDeviceToHost, stream) == cudaSuccess);
  });
  CHECK(cuda_sim::counters().kernel_launches == before.kernel_launches);  // a capture launches nothing
  CHECK(to_host(d, 64) == ones);
  CHECK(to_host(zeroed, 64) == ones);
  CHECK(read_back == std::vector<float>(64, 42.0f));  // not even poisoned: the copy is not queued

  const cuda_sim::Counters before_launch = cuda_sim::counters();
  REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(cuda_sim::counters().device_to_host_copies - before_launch.device_to_host_copies == 1);  // replayed
  std::vector<float> indices(64);
  for (int i = 0; i < 64; ++i) indices[size_t(i)] = float(i);
  CHECK(read_back == indices);
  CHECK(to_host(zeroed, 64) == std::vector<float>(64, 0.0f));
  cudaGraphExecDestroy(exec);
  cudaStreamDestroy(stream);
}

TEST_CASE("waiting for the device during a capture is refused, naming the call, and invalidates the capture") {
  Fresh fresh;
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  float* d = device_array<float>(64);
  std::vector<float> host(64);
  const std::vector<std::pair<std::string, std::function<cudaError_t()>>> waits = {
      {"cudaStreamSynchronize", [&] { return cudaStreamSynchronize(stream); }},
      {"cudaDeviceSynchronize", [&] { return cudaDeviceSynchronize(); }},
      {"cudaMemcpy (synchronous)",
       [&] { return cudaMemcpy(host.data(), d, 64 * sizeof(float), cudaMemcpyDeviceToHost); }},
      {"cudaFree", [&] { return cudaFree(d); }},
  };
  for (const auto& [call, wait] : waits) {
    INFO(call);
    REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
    LAUNCH_ON(stream, write_index, 1, 64)(d, 64);
    CHECK(wait() == cudaErrorStreamCaptureUnsupported);
    CHECK(mentions(cudaErrorStreamCaptureUnsupported, call + " while stream "));
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    CHECK(cudaStreamIsCapturing(stream, &status) == cudaSuccess);
    CHECK(status == cudaStreamCaptureStatusInvalidated);

    cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(&host);
    CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureInvalidated);
    CHECK(graph == nullptr);
    CHECK(mentions(cudaErrorStreamCaptureInvalidated, "invalidated by " + call));
    CHECK(cudaStreamIsCapturing(stream, &status) == cudaSuccess);
    CHECK(status == cudaStreamCaptureStatusNone);
    CHECK(cudaGetLastError() == cudaErrorStreamCaptureUnsupported);  // reported once, then cleared
    CHECK(cudaGetLastError() == cudaSuccess);
  }
  // The stream works eagerly again, and the refused captures left nothing queued.
  LAUNCH_ON(stream, fill_value, 1, 64)(d, 5.0f);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(to_host(d, 64) == std::vector<float>(64, 5.0f));
  CHECK(cudaStreamDestroy(stream) == cudaSuccess);
}

TEST_CASE("allocating during a capture is refused, naming the call; a relaxed capture allows cudaMalloc") {
  Fresh fresh;
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  float* pooled = nullptr;
  REQUIRE(cudaMallocAsync(&pooled, 256, stream) == cudaSuccess);
  const cuda_sim::Counters before = cuda_sim::counters();
  const std::vector<std::pair<std::string, std::function<cudaError_t()>>> allocations = {
      {"cudaMalloc of 256 bytes", [] { float* p = nullptr; return cudaMalloc(&p, 256); }},
      {"cudaMallocAsync of 256 bytes (graph-owned memory is not simulated)",
       [&] { float* p = nullptr; return cudaMallocAsync(&p, 256, stream); }},
      {"cudaFreeAsync (graph-owned memory is not simulated)", [&] { return cudaFreeAsync(pooled, stream); }},
  };
  for (const auto& [call, allocate] : allocations) {
    INFO(call);
    REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(allocate() == cudaErrorStreamCaptureUnsupported);
    CHECK(mentions(cudaErrorStreamCaptureUnsupported, call + " while stream "));
    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureInvalidated);
    CHECK(graph == nullptr);
    cudaGetLastError();
  }
  CHECK(cuda_sim::counters().allocations == before.allocations);

  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  float* p = nullptr;
  CHECK(cudaMalloc(&p, 256) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  cudaStreamDestroy(stream);
}

TEST_CASE("a graph launch refuses a node whose device memory was freed since the capture, naming the kernel") {
  Fresh fresh;
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  float* d = nullptr;
  REQUIRE(cudaMallocAsync(&d, 64 * sizeof(float), stream) == cudaSuccess);
  cudaGraphExec_t exec = capture_and_instantiate(stream, [&] { LAUNCH_ON(stream, write_index, 1, 64)(d, 64); });
  REQUIRE(cudaFreeAsync(d, stream) == cudaSuccess);
  const cuda_sim::Counters before = cuda_sim::counters();
  CHECK(cudaGraphLaunch(exec, stream) == cudaErrorInvalidValue);
  CHECK(mentions(cudaErrorInvalidValue, "cudaGraphLaunch, node 0 (kernel): kernel 'write_index', argument 1"));
  CHECK(cuda_sim::counters().graph_launches == before.graph_launches);
  cudaGetLastError();
  cudaGraphExecDestroy(exec);
  cudaStreamDestroy(stream);
}

TEST_CASE("capture misuse: the default stream, twice on one stream, an end without a begin") {
  Fresh fresh;
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  CHECK(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal) == cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorIllegalState);
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaErrorIllegalState);
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaSuccess);  // the first capture is untouched: empty
  size_t count = 1;
  CHECK(cudaGraphGetNodes(graph, nullptr, &count) == cudaSuccess);
  CHECK(count == 0);
  cudaGraphDestroy(graph);
  cudaGetLastError();
  cudaStreamDestroy(stream);
}

int main(int argc, char** argv) { return lina::test::run_doctest(argc, argv); }
