// Shapes. Every lina tensor is contiguous and row-major (C order): the last
// dimension varies fastest. Views that would need other strides (transpose,
// permute, slice) make a contiguous copy instead — simpler to read, and the
// copies are cheap next to the matrix products.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lina {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);                 // "[64, 128]"
std::vector<int64_t> contiguous_strides(const Shape& s);  // in elements
// Normalises a possibly negative axis; throws naming `op` when out of range.
int normalize_axis(int axis, int ndim, const char* op);
// NumPy broadcasting of two shapes (aligned at the last dimension); throws
// naming `op` and both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace lina
