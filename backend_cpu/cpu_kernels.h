// CPU kernels: plain functions on raw pointers with named dimensions,
// templated on the float type (float, double) and explicitly instantiated in
// their .cpp files. They know nothing of Tensor or autograd; dispatch/*.cpp
// are their callers (and device_memory.cpp, for the fill that core/ reaches
// through core/device_memory.h), and a test can call one alone.
//
// The declarations come from the one kernel list, core/kernel_list.h, which
// also says what each kernel computes; the CUDA backend declares the same
// list (backend_cuda/cuda_kernels.h).
#pragma once
#include <cstdint>

#include "core/kernel_list.h"

namespace lina::cpu {

#define LINA_DECLARE_CPU_KERNEL(ret, name, params) template <class T> ret name params;
LINA_KERNELS(LINA_DECLARE_CPU_KERNEL, T)
#undef LINA_DECLARE_CPU_KERNEL

}  // namespace lina::cpu
