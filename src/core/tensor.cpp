#include "core/tensor.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/quantization.h"

namespace tessera {

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

int64_t Tensor::numel() const { return shape_numel(shape_); }

size_t Tensor::nbytes() const {
  return quant_ ? size_t(numel()) * size_t(quant_->bits) / 8 : size_t(numel()) * dtype_size(dtype_);
}

Tensor Tensor::quantized(const Tensor& codes, Shape shape, Quantization q) {
  Tensor t = codes;
  t.shape_ = std::move(shape);
  t.quant_ = std::make_shared<const Quantization>(std::move(q));
  TESSERA_CHECK(codes.dtype() == DType::U32 && t.nbytes() == codes.nbytes() && t.ndim() >= 1,
                "quantized: codes of " + std::to_string(codes.nbytes()) + " bytes for a weight " +
                    shape_str(t.shape_) + " of " + std::to_string(t.quant_->bits) + "-bit codes");
  return t;
}

Tensor Tensor::empty(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  size_t bytes = std::max<size_t>(t.nbytes(), 1);
  // 64-byte alignment for vector loads; rounded up as aligned_alloc requires.
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  TESSERA_CHECK(p, "out of memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, bytes);
  t.owner_ = std::shared_ptr<void>(p, std::free);
  t.data_ = p;
  return t;
}

Tensor Tensor::view(void* data, DType dtype, Shape shape, std::shared_ptr<void> owner, Device device) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  t.owner_ = std::move(owner);
  t.device_ = device;
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  TESSERA_CHECK(t.numel() == numel() && (!quant_ || (t.ndim() >= 1 && t.shape_.back() == shape_.back())),
                "reshape " + shape_str(shape_) + " -> " + shape_str(t.shape_));
  if (quant_) {
    Quantization q = *quant_;
    Shape groups = t.shape_;
    groups.back() = q.scales.shape().back();
    q.scales = q.scales.reshape(groups);
    q.biases = q.biases.reshape(groups);
    t.quant_ = std::make_shared<const Quantization>(std::move(q));
  }
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  TESSERA_CHECK(ndim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0],
                "slice_rows out of range");
  Tensor t = *this;
  t.shape_[0] = end - begin;
  size_t row_bytes = shape_[0] ? nbytes() / size_t(shape_[0]) : 0;
  t.data_ = static_cast<char*>(data_) + size_t(begin) * row_bytes;
  if (quant_) {
    Quantization q = *quant_;
    q.scales = q.scales.slice_rows(begin, end);
    q.biases = q.biases.slice_rows(begin, end);
    t.quant_ = std::make_shared<const Quantization>(std::move(q));
  }
  return t;
}

}  // namespace tessera
