// LINA_INJECT_CUDA_STATUS=<status>@<update> makes that update of `lina train`
// fail as if a CUDA call had returned <status> (a cudaError_t number): how
// the tests check what a run does when the GPU runs out of memory or is lost.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/cuda_status.h"

namespace lina {

class InjectedFault {
 public:
  static InjectedFault from_environment() {
    InjectedFault f;
    if (const char* spec = std::getenv("LINA_INJECT_CUDA_STATUS"))
      if (std::sscanf(spec, "%d@%d", &f.status_, &f.update_) != 2) f = {};
    return f;
  }
  // Throws the CUDA error when `update` (1-based) is the one named.
  void fail_if_due(int update) const {
    if (update == update_)
      throw_cuda_error(status_, "injected status " + std::to_string(status_),
                       "training step " + std::to_string(update_));
  }

 private:
  int status_ = 0, update_ = -1;
};

}  // namespace lina
