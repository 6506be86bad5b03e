// Messages that quote bytes from files stay one printable line, and CUDA
// failures say what to do.
#include <doctest/doctest.h>

#include <string>

#include "core/cuda_status.h"
#include "core/printable.h"

using namespace lina;

TEST_CASE("printable: escapes control characters and bytes that are not UTF-8") {
  CHECK(printable("plain text") == "plain text");
  CHECK(printable("two\nlines\tand\r") == "two\\nlines\\tand\\r");
  CHECK(printable(std::string("nul\0byte", 8)) == "nul\\x00byte");
  CHECK(printable("\x1b[31mred") == "\\x1B[31mred");                 // no terminal escapes
  CHECK(printable("caf\xc3\xa9 \xc3\x97 \xe2\x86\x92") == "caf\xc3\xa9 \xc3\x97 \xe2\x86\x92");  // é × →
  CHECK(printable("\xff\xfe") == "\\xFF\\xFE");                      // not UTF-8
  CHECK(printable("\xc3") == "\\xC3");                                // cut sequence
  CHECK(printable("\xc0\xaf") == "\\xC0\\xAF");                      // overlong
  CHECK(printable("\xed\xa0\x80") == "\\xED\\xA0\\x80");             // surrogate
  CHECK(printable("\xc2\x9b" "2J") == "\\xC2\\x9B2J");               // C1 control (CSI)
  CHECK(printable("\x7f") == "\\x7F");
}

TEST_CASE("printable: long input is cut, saying how much was left out") {
  std::string cut = printable(std::string(1000, 'a'), 50);
  CHECK(cut.size() < 80);
  CHECK(cut.rfind(std::string(50, 'a'), 0) == 0);
  CHECK(cut.find("(950 more bytes)") != std::string::npos);
  // never cut inside a UTF-8 sequence or an escape
  std::string multi = printable("\xc3\xa9\xc3\xa9\xc3\xa9", 5);
  CHECK(multi.rfind("\xc3\xa9\xc3\xa9...", 0) == 0);
}

TEST_CASE("CUDA failures: out of memory and a lost device say what to do") {
  std::string oom = cuda_error_message(cuda_status::kMemoryAllocation, "cudaErrorMemoryAllocation",
                                       "cuda::alloc of 4096 bytes");
  CHECK(classify_cuda_status(cuda_status::kMemoryAllocation) == CudaFailure::OutOfMemory);
  CHECK(oom.find("cuda::alloc of 4096 bytes") != std::string::npos);
  CHECK(oom.find("smaller --batch") != std::string::npos);
  CHECK(oom.find("--device cpu") != std::string::npos);
  for (int lost : {cuda_status::kLaunchFailure, cuda_status::kIllegalAddress, cuda_status::kNoDevice,
                   cuda_status::kDevicesUnavailable, cuda_status::kEccUncorrectable, cuda_status::kUnknown}) {
    INFO(lost);
    CHECK(classify_cuda_status(lost) == CudaFailure::DeviceLost);
    std::string m = cuda_error_message(lost, "status", "a kernel");
    CHECK(m.find("--resume") != std::string::npos);
    CHECK(m.find("--device cpu") != std::string::npos);
  }
  CHECK(classify_cuda_status(1) == CudaFailure::Other);  // cudaErrorInvalidValue: a bug, said as it is
  CHECK_THROWS_AS(throw_cuda_error(cuda_status::kMemoryAllocation, "x", "y"), CudaError);
  CHECK_THROWS_AS(throw_cuda_error(cuda_status::kMemoryAllocation, "x", "y"), Error);
  for (const std::string& m : {oom, cuda_error_message(719, "s", "w")}) CHECK(m.find('\n') == std::string::npos);
}
