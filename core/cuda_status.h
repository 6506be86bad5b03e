// What a failed CUDA call means for the user, in one line.
//
// backend_cuda/ hands every failing status to cuda_error(), which sorts it
// into one of three kinds and says what to do:
//   out of memory  → a smaller --batch or --context, or --device cpu;
//   device lost    → the GPU (or its context) is gone for this process: the
//                    last checkpoint is intact, resume it (on --device cpu, or
//                    once the GPU is back);
//   anything else  → the call and the CUDA error, as they are.
// It is plain C++ (no CUDA header), so the messages are tested without a GPU;
// backend_cuda/memory.cu checks the numbers below against the toolkit's
// cudaError_t at compile time.
#pragma once
#include <string>

#include "core/error.h"

namespace lina {

// cudaError_t values that lina tells apart.
namespace cuda_status {
constexpr int kSuccess = 0;
constexpr int kMemoryAllocation = 2;
constexpr int kInitializationError = 3;
constexpr int kDevicesUnavailable = 46;
constexpr int kNoDevice = 100;
constexpr int kEccUncorrectable = 214;
constexpr int kIllegalAddress = 700;
constexpr int kLaunchTimeout = 702;
constexpr int kContextIsDestroyed = 709;
constexpr int kHardwareStackError = 714;
constexpr int kIllegalInstruction = 715;
constexpr int kMisalignedAddress = 716;
constexpr int kLaunchFailure = 719;
constexpr int kUnknown = 999;
}  // namespace cuda_status

enum class CudaFailure { OutOfMemory, DeviceLost, Other };

CudaFailure classify_cuda_status(int status);

// "<what>: <status name>: <what to do>", one line.
std::string cuda_error_message(int status, const std::string& status_name, const std::string& what);

// Thrown for a failed CUDA (or cuBLAS) call; a lina::Error, so every caller
// that reports errors reports these too.
struct CudaError : Error {
  CudaError(int status, CudaFailure kind, const std::string& message)
      : Error(message), status(status), kind(kind) {}
  int status;
  CudaFailure kind;
};

[[noreturn]] void throw_cuda_error(int status, const std::string& status_name, const std::string& what);

}  // namespace lina
