#include "core/cuda_status.h"

namespace lina {

CudaFailure classify_cuda_status(int status) {
  using namespace cuda_status;
  switch (status) {
    case kMemoryAllocation:
      return CudaFailure::OutOfMemory;
    // The device, or this process's context on it, cannot be used any more:
    // every later CUDA call fails too ("sticky" errors), so the run must stop.
    case kInitializationError:
    case kDevicesUnavailable:
    case kNoDevice:
    case kEccUncorrectable:
    case kIllegalAddress:
    case kLaunchTimeout:
    case kContextIsDestroyed:
    case kHardwareStackError:
    case kIllegalInstruction:
    case kMisalignedAddress:
    case kLaunchFailure:
    case kUnknown:
      return CudaFailure::DeviceLost;
    default:
      return CudaFailure::Other;
  }
}

std::string cuda_error_message(int status, const std::string& status_name, const std::string& what) {
  std::string head = what + ": " + status_name;
  switch (classify_cuda_status(status)) {
    case CudaFailure::OutOfMemory:
      return head + ": out of GPU memory; use a smaller --batch (or --context), or --device cpu";
    case CudaFailure::DeviceLost:
      return head + ": the GPU can no longer be used by this process; the last checkpoint is "
                    "intact: resume it with lina train --resume CKPT (add --device cpu to go on "
                    "without the GPU)";
    case CudaFailure::Other:
      break;
  }
  return head;
}

void throw_cuda_error(int status, const std::string& status_name, const std::string& what) {
  throw CudaError(status, classify_cuda_status(status), cuda_error_message(status, status_name, what));
}

}  // namespace lina
