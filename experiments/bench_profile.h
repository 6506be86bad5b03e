// `lina bench --profile`: what each kernel entry point of a training step
// costs against what it must cost on this machine.
//
// Every entry point states the bytes it must move (its tensors read and
// written, each once) and the FLOPs it must do (core/profile.h add_work).
// Its limit is the larger of bytes / the machine's memory rate and FLOPs /
// its GEMM rate, both measured in the same run; an op far above its limit
// is one to fix, and the table names the furthest.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace lina {

// The memory rate lina's own threads reach: dst += α·src (dispatch::add_inplace)
// over two float32 arrays far larger than any cache (2 × 64 MiB), which
// reads 2 and writes 1 array's bytes; the median of `repeats`.
struct MemoryRate {
  int64_t bytes = 0;  // moved per pass (3 × 64 MiB)
  double ms = 0, gbps = 0;
};
MemoryRate measure_memory_rate(int repeats);

// The profile of one training row of the bench json (its "profile"
// entries, summed over `steps` steps), as printed lines: per entry its
// calls, ms, share of the step, MB and MFLOP per call, the rates it reached
// as shares of `memory_gbps` and `gemm_gflops`, its limit and its time over
// that limit; then the entries furthest above their limits.
std::string profile_table(const nlohmann::json& row, int steps, double gemm_gflops, double memory_gbps);

}  // namespace lina
