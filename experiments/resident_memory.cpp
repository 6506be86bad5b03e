#include "experiments/resident_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace lina {

ResidentMemory resident_memory() {
  ResidentMemory m;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {  // "VmRSS:	  123456 kB"
    std::istringstream fields(line);
    std::string key;
    double kb = 0;
    fields >> key >> kb;
    if (key == "VmRSS:") m.current_mb = kb / 1024.0;
    if (key == "VmHWM:") m.peak_mb = kb / 1024.0;
  }
  return m;
}

}  // namespace lina
