// How much memory this process holds, as the kernel counts it.
#pragma once

namespace lina {

struct ResidentMemory {
  double current_mb = 0;  // VmRSS: resident now
  double peak_mb = 0;     // VmHWM: the most resident at any time so far
};

// Read from /proc/self/status; zeros where that file does not exist.
ResidentMemory resident_memory();

}  // namespace lina
