// Tensor: a typed, contiguous, row-major n-d array on one device. It either owns its memory or
// views memory kept alive by `owner` (an mmapped safetensors file, a KV pool, a larger tensor).
// A weight may instead be quantized (core/quantization.h): its shape is that of the weight, its
// memory the packed codes, and quantization() holds the rest.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace tessera {

enum class Device : uint8_t { CPU, CUDA };

using Shape = std::vector<int64_t>;
struct Quantization;
std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-initialised host memory.
  static Tensor empty(DType dtype, Shape shape);
  // A view of memory someone else owns; `owner` keeps it alive.
  static Tensor view(void* data, DType dtype, Shape shape, std::shared_ptr<void> owner,
                     Device device = Device::CPU);

  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return int(shape_.size()); }
  int64_t dim(int i) const { return shape_[i < 0 ? shape_.size() + i : i]; }
  int64_t numel() const;
  size_t nbytes() const;  // a quantized tensor's: its codes'
  bool defined() const { return data_ != nullptr; }
  // Set where the tensor is a quantized weight (dtype U32: the codes); else nullptr.
  const Quantization* quantization() const { return quant_.get(); }
  // The weight of `shape` whose packed codes are `codes` (U32, any shape of the same bytes).
  static Tensor quantized(const Tensor& codes, Shape shape, Quantization q);

  void* raw() const { return data_; }
  template <class T>
  T* data() const { return static_cast<T*>(data_); }

  // Same memory, another shape with the same number of elements (a quantized tensor's last
  // dimension stays).
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) of the first dimension (of a quantized tensor's scales and biases too).
  Tensor slice_rows(int64_t begin, int64_t end) const;
  const std::shared_ptr<void>& owner() const { return owner_; }

 private:
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;
  Shape shape_;
  void* data_ = nullptr;
  std::shared_ptr<void> owner_;
  std::shared_ptr<const Quantization> quant_;
};

}  // namespace tessera
