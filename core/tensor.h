// Tensor: a shape, a dtype, a device and a shared, reference-counted buffer.
//
// Layout: always contiguous, row-major (see core/shape.h). A tensor may be a
// view at an element offset into a larger buffer (the parameters live in one
// buffer with one view per named tensor); reshape shares the buffer.
// Tensor knows nothing of autograd: autograd/var.h wraps it.
#pragma once
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/shape.h"

namespace lina {

struct DeviceMemory;  // core/device_memory.h

// A raw allocation on one device, made by the device's backend
// (core/device_memory.h). Freed when the last Tensor using it goes.
struct Storage {
  Storage(size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* ptr = nullptr;
  size_t bytes = 0;
  Device device = Device::Cpu;
  const DeviceMemory* memory = nullptr;  // the backend that allocated ptr and frees it
};

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor (defined() == false)

  // ---- creation -------------------------------------------------------------
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::Cpu);
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::Cpu);
  static Tensor ones(const Shape& shape, DType dtype = DType::F32, Device device = Device::Cpu);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F32,
                     Device device = Device::Cpu);
  // N(mean, std²) / U[lo, hi) drawn on the host from `rng`, then moved to `device`.
  static Tensor randn(const Shape& shape, Rng& rng, double std = 1.0, double mean = 0.0,
                      DType dtype = DType::F32, Device device = Device::Cpu);
  static Tensor rand(const Shape& shape, Rng& rng, double lo = 0.0, double hi = 1.0,
                     DType dtype = DType::F32, Device device = Device::Cpu);
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape,
                            Device device = Device::Cpu);
  // A view of `shape` at element `offset` into `base`'s buffer (no copy).
  static Tensor view_of(const Tensor& base, int64_t offset, const Shape& shape);

  // ---- description ----------------------------------------------------------
  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return int(shape_.size()); }
  int64_t dim(int axis) const;  // negative axes count from the end
  int64_t numel() const { return lina::numel(shape_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  std::string describe() const;  // "float32[64, 128] on cpu"

  // ---- data access ----------------------------------------------------------
  // Pointer to the first element (a device pointer for CUDA tensors).
  void* raw() const;
  template <class T> T* data() const;  // checks that T matches dtype()
  bool same_storage(const Tensor& o) const { return storage_ == o.storage_; }
  // No other Tensor shares this one's storage (so writing it in place
  // changes nothing anyone else can see).
  bool sole_owner() const { return storage_ && storage_.use_count() == 1; }
  // Lets go of the buffer and keeps the description: shape(), dtype() and
  // device() stay, defined() turns false and the data can no longer be read.
  // What autograd leaves of an op's output that no backward reads.
  void release_buffer() {
    storage_.reset();
    offset_ = 0;
  }

  Tensor to(Device device) const;       // copy to a device (same dtype)
  Tensor to(DType dtype) const;         // cast (copies through the host)
  Tensor clone() const;                 // deep copy, same device
  void copy_from(const Tensor& src);    // same shape & dtype, any devices
  template <class T> std::vector<T> to_vector() const;  // host copy
  double item() const;                  // a one-element tensor's value
  double at(int64_t flat_index) const;  // one element as double (host copy)

  // Shares the buffer. One dimension may be -1 (inferred).
  Tensor reshape(const Shape& shape) const;

  std::string str(int max_per_dim = 6) const;  // human-readable, numpy-like

 private:
  Shape shape_;
  DType dtype_ = DType::F32;
  Device device_ = Device::Cpu;
  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;  // in elements
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Throws "<op>: expected <what>, got float64[2, 3] on cpu" style errors.
void check_same_shape(const Tensor& a, const Tensor& b, const char* op);
void check_same_dtype_device(const Tensor& a, const Tensor& b, const char* op);
void check_float(const Tensor& t, const char* op);
void check_ndim_at_least(const Tensor& t, int ndim, const char* op);

}  // namespace lina
