// A kernel's dynamic shared memory, carved into the buffers of a layout
// struct: the tiled kernels (scan_chunked.cu, attention.cu) describe what
// each block keeps in shared memory as one struct of pointers, built once in
// the kernel over the memory and once on the host over nothing, to size the
// launch.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/elementwise_math.h"  // LINA_HD

namespace lina::cuda {

// A kernel's dynamic shared memory handed out piece by piece, in the order
// of the kernel's layout struct (wider types first, so each piece is
// aligned). The host sizes a launch by running the same layout on a carve
// without memory.
struct SharedCarve {
  char* base = nullptr;  // the kernel's dynamic shared memory; null on the host, which only counts
  size_t used = 0;       // bytes handed out so far
  template <class T> LINA_HD T* take(int64_t n) {
    T* piece = base ? reinterpret_cast<T*>(base + used) : nullptr;
    used += size_t(n) * sizeof(T);
    return piece;
  }
};

// Bytes of dynamic shared memory of layout struct Layout at these sizes.
template <class Layout, class... Sizes> size_t shared_bytes(Sizes... sizes) {
  SharedCarve count;
  Layout(count, sizes...);
  return count.used;
}

}  // namespace lina::cuda
