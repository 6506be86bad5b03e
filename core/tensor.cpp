#include "core/tensor.h"

#include <cstring>
#include <iomanip>
#include <sstream>

#include "core/device_memory.h"
#include "core/profile.h"

namespace lina {

Storage::Storage(size_t nbytes, Device dev) : bytes(nbytes), device(dev), memory(&device_memory(dev)) {
  ptr = memory->alloc(nbytes == 0 ? 1 : nbytes);
}
Storage::~Storage() { memory->free(ptr); }

// ---- creation -------------------------------------------------------------------

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    check(d >= 0, "Tensor::empty: negative dimension in shape " + shape_str(shape));
  require_device(device);
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = std::make_shared<Storage>(size_t(lina::numel(shape)) * dtype_size(dtype), device);
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  profile::timed("fill", [&] { device_memory(device).fill(t, value); });
  return t;
}
Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}

// Fills a host buffer of `dtype` from a generator of doubles, then moves it.
template <class Gen>
static Tensor host_generated(const Shape& shape, DType dtype, Device device, Gen gen) {
  check(is_float(dtype), "Tensor random creation: dtype must be float32 or float64");
  Tensor host = Tensor::empty(shape, dtype, Device::Cpu);
  int64_t n = host.numel();
  if (dtype == DType::F32) {
    float* p = host.data<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = float(gen());
  } else {
    double* p = host.data<double>();
    for (int64_t i = 0; i < n; ++i) p[i] = gen();
  }
  return device == Device::Cpu ? host : host.to(device);
}

Tensor Tensor::randn(const Shape& shape, Rng& rng, double std, double mean, DType dtype,
                     Device device) {
  return host_generated(shape, dtype, device, [&] { return mean + std * rng.normal(); });
}
Tensor Tensor::rand(const Shape& shape, Rng& rng, double lo, double hi, DType dtype,
                    Device device) {
  return host_generated(shape, dtype, device, [&] { return rng.uniform(lo, hi); });
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  check(int64_t(values.size()) == lina::numel(shape),
        "Tensor::from_vector: " + std::to_string(values.size()) + " values do not fill shape " +
            shape_str(shape));
  Tensor t = empty(shape, dtype_of<T>(), device);
  copy_bytes(t.raw(), device, values.data(), Device::Cpu, t.nbytes());
  return t;
}
template Tensor Tensor::from_vector<float>(const std::vector<float>&, const Shape&, Device);
template Tensor Tensor::from_vector<double>(const std::vector<double>&, const Shape&, Device);
template Tensor Tensor::from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, Device);

Tensor Tensor::view_of(const Tensor& base, int64_t offset, const Shape& shape) {
  check(base.defined(), "Tensor::view_of: base tensor is undefined");
  int64_t capacity = int64_t(base.storage_->bytes / dtype_size(base.dtype_));
  check(offset >= 0 && base.offset_ + offset + lina::numel(shape) <= capacity,
        "Tensor::view_of: view " + shape_str(shape) + " at offset " + std::to_string(offset) +
            " does not fit in " + base.describe());
  Tensor t = base;
  t.offset_ = base.offset_ + offset;
  t.shape_ = shape;
  return t;
}

// ---- description ------------------------------------------------------------------

int64_t Tensor::dim(int axis) const { return shape_[normalize_axis(axis, ndim(), "Tensor::dim")]; }

std::string Tensor::describe() const {
  if (!defined()) return "undefined tensor";
  return std::string(dtype_name(dtype_)) + shape_str(shape_) + " on " + device_name(device_);
}

void* Tensor::raw() const {
  if (!defined()) throw Error("Tensor::raw: tensor is undefined");
  return static_cast<char*>(storage_->ptr) + offset_ * int64_t(dtype_size(dtype_));
}

template <class T>
T* Tensor::data() const {
  if (dtype_of<T>() != dtype_)  // (not check(): no message is built on the fast path)
    throw Error(std::string("Tensor::data: asked for ") + dtype_name(dtype_of<T>()) + " from " +
                describe());
  return static_cast<T*>(raw());
}
template float* Tensor::data<float>() const;
template double* Tensor::data<double>() const;
template int32_t* Tensor::data<int32_t>() const;

// ---- copies -------------------------------------------------------------------------

Tensor Tensor::to(Device device) const {
  if (device == device_) return *this;
  Tensor out = empty(shape_, dtype_, device);
  copy_bytes(out.raw(), device, raw(), device_, nbytes());
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor host = to(Device::Cpu);
  Tensor out = empty(shape_, dtype, Device::Cpu);
  int64_t n = numel();
  auto cast_from = [&](auto* src) {
    for (int64_t i = 0; i < n; ++i) {
      if (dtype == DType::F32) out.data<float>()[i] = float(src[i]);
      else if (dtype == DType::F64) out.data<double>()[i] = double(src[i]);
      else out.data<int32_t>()[i] = int32_t(src[i]);
    }
  };
  if (dtype_ == DType::F32) cast_from(host.data<float>());
  else if (dtype_ == DType::F64) cast_from(host.data<double>());
  else cast_from(host.data<int32_t>());
  return out.to(device_);
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape_, dtype_, device_);
  copy_bytes(out.raw(), device_, raw(), device_, nbytes());
  return out;
}

void Tensor::copy_from(const Tensor& src) {
  check(src.shape_ == shape_ && src.dtype_ == dtype_,
        "Tensor::copy_from: cannot copy " + src.describe() + " into " + describe());
  copy_bytes(raw(), device_, src.raw(), src.device_, nbytes());
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  check(dtype_of<T>() == dtype_, std::string("Tensor::to_vector: asked for ") +
                                     dtype_name(dtype_of<T>()) + " from " + describe());
  std::vector<T> out(static_cast<size_t>(numel()));
  copy_bytes(out.data(), Device::Cpu, raw(), device_, nbytes());
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;

double Tensor::at(int64_t i) const {
  if (i < 0 || i >= numel())
    throw Error("Tensor::at: index " + std::to_string(i) + " out of range for " + describe());
  char buf[8];
  size_t es = dtype_size(dtype_);
  copy_bytes(buf, Device::Cpu, static_cast<char*>(raw()) + i * int64_t(es), device_, es);
  if (dtype_ == DType::F32) { float v; std::memcpy(&v, buf, 4); return v; }
  if (dtype_ == DType::F64) { double v; std::memcpy(&v, buf, 8); return v; }
  int32_t v; std::memcpy(&v, buf, 4); return v;
}

double Tensor::item() const {
  check(numel() == 1, "Tensor::item: expected one element, got " + describe());
  return at(0);
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape s = shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      check(infer < 0, "reshape: more than one -1 in " + shape_str(shape));
      infer = int(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    check(known > 0 && numel() % known == 0,
          "reshape: cannot reshape " + describe() + " to " + shape_str(shape));
    s[infer] = numel() / known;
  }
  check(lina::numel(s) == numel(), "reshape: cannot reshape " + describe() + " to " + shape_str(shape));
  Tensor t = *this;
  t.shape_ = s;
  return t;
}

// ---- printing -----------------------------------------------------------------------

static void print_rec(std::ostream& os, const std::vector<double>& v, const Shape& shape,
                      size_t dim, int64_t base, int max_per_dim, int indent) {
  if (shape.empty()) { os << v[0]; return; }
  int64_t n = shape[dim];
  int64_t stride = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d) stride *= shape[d];
  os << "[";
  for (int64_t i = 0; i < n; ++i) {
    if (n > max_per_dim && i == max_per_dim / 2) {
      os << "...";
      i = n - max_per_dim / 2 - 1;
      if (i + 1 < n) os << (dim + 1 == shape.size() ? ", " : ",\n" + std::string(indent + 1, ' '));
      continue;
    }
    if (dim + 1 == shape.size()) os << std::setw(10) << v[size_t(base + i)];
    else print_rec(os, v, shape, dim + 1, base + i * stride, max_per_dim, indent + 1);
    if (i + 1 < n) os << (dim + 1 == shape.size() ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  os << "]";
}

std::string Tensor::str(int max_per_dim) const {
  if (!defined()) return "tensor(undefined)";
  std::vector<double> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[size_t(i)] = at(i);
  std::ostringstream os;
  os << std::setprecision(5) << "tensor(";
  print_rec(os, v, shape_, 0, 0, max_per_dim, 7);
  os << ", " << describe() << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

// ---- argument checks ------------------------------------------------------------------

void check_same_shape(const Tensor& a, const Tensor& b, const char* op) {
  check(a.shape() == b.shape(), std::string(op) + ": shape mismatch " + shape_str(a.shape()) +
                                    " vs " + shape_str(b.shape()));
}
void check_same_dtype_device(const Tensor& a, const Tensor& b, const char* op) {
  check(a.dtype() == b.dtype(), std::string(op) + ": dtype mismatch " + a.describe() + " vs " +
                                    b.describe());
  check(a.device() == b.device(), std::string(op) + ": device mismatch " + a.describe() +
                                      " vs " + b.describe());
}
void check_float(const Tensor& t, const char* op) {
  check(is_float(t.dtype()), std::string(op) + ": expected a float tensor, got " + t.describe());
}
void check_ndim_at_least(const Tensor& t, int ndim, const char* op) {
  check(t.ndim() >= ndim, std::string(op) + ": expected at least " + std::to_string(ndim) +
                              " dims, got " + t.describe());
}

}  // namespace lina
