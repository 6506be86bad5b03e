// A test case with a CUDA half: the same checks on the CPU and, where a CUDA
// device is present, on cuda. Where none is, the case says SKIPPED for that
// half, so it is reported skipped in part and listed among what the run
// could not do, never passed as if it had run. Every such case has "cuda" in
// its name: scripts/test.sh's cuda-sim stage selects its tests by that word
// and runs them on lina's CUDA runtime on the CPU (tests/test_cuda_halves.py
// checks both rules over every test file).
#pragma once
#include <doctest/doctest.h>

#include "dispatch/dispatch.h"

namespace lina::test {

// True where a CUDA device is present; otherwise says SKIPPED for the cuda half.
inline bool cuda_half() {
  if (dispatch::cuda_available()) return true;
  MESSAGE("SKIPPED: the cuda half: no CUDA device here (scripts/test.sh's cuda-sim stage runs it)");
  return false;
}

}  // namespace lina::test
