// Eigen views over lina's raw row-major buffers, shared by the CPU kernels
// that use Eigen (matrix products, the scan). No copies: a Map reads and
// writes the buffer in place.
#pragma once
#include <Eigen/Core>

namespace lina::cpu {

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T> using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T> using MatrixMap = Eigen::Map<RowMatrix<T>>;
template <class T> using ConstMatrixMap = Eigen::Map<const RowMatrix<T>>;
template <class T> using VectorMap = Eigen::Map<Vector<T>>;
template <class T> using ConstVectorMap = Eigen::Map<const Vector<T>>;
// Rows of a matrix that are `stride` elements apart (one head's rows in a
// [B, T, H, d] tensor: stride H·d).
template <class T> using RowsMap = Eigen::Map<RowMatrix<T>, 0, Eigen::OuterStride<>>;
template <class T> using ConstRowsMap = Eigen::Map<const RowMatrix<T>, 0, Eigen::OuterStride<>>;

}  // namespace lina::cpu
