// The scan's CUDA entry points (float32): each fills ScanArgs and launches
// one block program, one block per (batch, head). The programs themselves
// are in scan_device.h (token by token), scan_chunked_device.h (chunked, a
// decay per head) and scan_chunked_gated_device.h (chunked, a decay per key
// channel), which the op × device table runs on every rule and form.

#include "backend_cuda/block_program.cuh"
#include "backend_cuda/cuda_kernels.h"
#include "backend_cuda/scan_chunked_device.h"
#include "backend_cuda/scan_chunked_gated_device.h"
#include "backend_cuda/scan_device.h"

namespace lina::cuda {

void scan_sequential_forward(const ScanShape& s, const ScanInputs<float>& in, const float* s0,
                             float* o, float* s_final, float* states) {
  ScanArgs args;
  args.s = s, args.in = in, args.s0 = s0, args.o = o, args.s_final = s_final;
  args.saved_out = states;
  launch_block_program<ScanSequentialForward>(args, "cuda::scan_sequential_forward");
}

void scan_sequential_backward(const ScanShape& s, const ScanInputs<float>& in, const float* states,
                              const float* dout, const float* ds_final,
                              const ScanInputGrads<float>& grads) {
  ScanArgs args;
  args.s = s, args.in = in, args.saved = states, args.dout = dout, args.ds_final = ds_final;
  args.grads = grads;
  launch_block_program<ScanSequentialBackward>(args, "cuda::scan_sequential_backward");
}

void scan_chunked_forward(const ScanShape& s, int64_t C, const ScanInputs<float>& in,
                          const float* s0, float* o, float* s_final, float* chunk_states) {
  ScanArgs args;
  args.s = s, args.chunk = C, args.in = in, args.s0 = s0, args.o = o, args.s_final = s_final;
  args.saved_out = chunk_states;
  with_chunked_programs(s.rule, [&](auto programs) {
    launch_block_program<typename decltype(programs)::Forward>(args, "cuda::scan_chunked_forward");
  });
}

void scan_chunked_backward(const ScanShape& s, int64_t C, const ScanInputs<float>& in,
                           const float* chunk_states, const float* dout, const float* ds_final,
                           const ScanInputGrads<float>& grads) {
  ScanArgs args;
  args.s = s, args.chunk = C, args.in = in, args.saved = chunk_states, args.dout = dout;
  args.ds_final = ds_final, args.grads = grads;
  with_chunked_programs(s.rule, [&](auto programs) {
    launch_block_program<typename decltype(programs)::Backward>(args, "cuda::scan_chunked_backward");
  });
}

}  // namespace lina::cuda
