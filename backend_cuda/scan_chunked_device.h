// The scan on the GPU in chunkwise-parallel form (recurrence.md §3): not yet
// written; the launchers in scan.cu refuse the chunked form until it is.
#pragma once
#include "backend_cuda/scan_device.h"
