// CPU kernels: plain functions on raw pointers with named dimensions,
// templated on the float type (float, double) and explicitly instantiated in
// their .cpp files. They know nothing of Tensor or autograd; dispatch/*.cpp
// are their callers (and device_memory.cpp, for the fill that core/ reaches
// through core/device_memory.h), and a test can call one alone.
//
// The declarations come from the op list, core/op_list.h, which also says
// what each kernel computes; the CUDA backend declares the same list
// (backend_cuda/cuda_kernels.h). Each family's .cpp file instantiates its
// kernels for float and double with one LINA_INSTANTIATE_CPU_KERNELS line.
#pragma once
#include <cstdint>

#include "core/op_list.h"

namespace lina::cpu {

#define LINA_DECLARE_CPU_KERNEL(ret, name, params) template <class T> ret name params;
LINA_KERNELS(LINA_DECLARE_CPU_KERNEL, T)
#undef LINA_DECLARE_CPU_KERNEL

// In backend_cpu/<family>.cpp, after the kernels' definitions:
//   template void name(params with T = float);  and with T = double
// for every kernel of LINA_<FAMILY>_LIST.
#define LINA_INSTANTIATE_CPU_KERNEL(ret, name, params) template ret name params;
#define LINA_INSTANTIATE_CPU_KERNELS(FAMILY)                         \
  LINA_FAMILY_KERNELS(FAMILY, LINA_INSTANTIATE_CPU_KERNEL, float)    \
  LINA_FAMILY_KERNELS(FAMILY, LINA_INSTANTIATE_CPU_KERNEL, double)

}  // namespace lina::cpu
