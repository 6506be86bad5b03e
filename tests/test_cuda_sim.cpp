// lina's CUDA runtime on the CPU (cuda_sim/), tested on its own: what it
// must catch (a missing barrier, a host pointer given to a kernel, a read
// before the synchronisation, a deadlock, bad launches) and what it must do
// as CUDA does (barriers, shared memory, warp shuffles, streams, the pool,
// cuBLAS). Built in the cuda-sim preset as cuda_sim_tests.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#define DOCTEST_CONFIG_NO_POSIX_SIGNALS  // the simulator's own SIGSEGV handler must stay in place
#include <doctest/doctest.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_sim/control.h"

namespace {

#define LAUNCH(kernel, grid, block, shared) ::cuda_sim::Launch(#kernel, kernel, grid, block, shared, nullptr)

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
