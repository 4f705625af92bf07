#include "core/quantization.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "core/error.h"

namespace tessera {
namespace {

float value_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::F32:
      return t.data<float>()[i];
    case DType::BF16:
      return bf16_to_f32(t.data<uint16_t>()[i]);
    case DType::F16:
      return f16_to_f32(t.data<uint16_t>()[i]);
    default:
      throw Error("quantized weight: scales and biases must be f32, f16 or bf16");
  }
}

}  // namespace

DType value_dtype(const Tensor& w) {
  return w.quantization() ? w.quantization()->scales.dtype() : w.dtype();
}

void dequantize(const Tensor& w, int64_t begin, int64_t n, float* out) {
  const Quantization* q = w.quantization();
  TESSERA_CHECK(
      q && begin >= 0 && n >= 0 && begin + n <= w.numel(),
      "dequantize: elements [" + std::to_string(begin) + ", " + std::to_string(begin + n) + ") of " +
          (q ? "a quantized weight " + shape_str(w.shape()) : std::string("a tensor that is not quantized")));
  const auto* bytes = w.data<uint8_t>();
  const uint32_t mask = (1u << q->bits) - 1;
  const int64_t end = begin + n;
  for (int64_t i = begin; i < end;) {
    const int64_t g = i / q->group_size, stop = std::min(end, (g + 1) * q->group_size);
    const float s = value_at(q->scales, g), b = value_at(q->biases, g);
    if (8 % q->bits == 0) {  // 2, 4 and 8 bits: a code lies in one byte
      for (; i < stop; ++i) {
        const int64_t bit = i * q->bits;
        out[i - begin] = s * float(uint32_t(bytes[bit / 8]) >> (bit % 8) & mask) + b;
      }
      continue;
    }
    for (; i < stop; ++i) {  // a code spans at most two bytes; the second is read only if it does
      const int64_t bit = i * q->bits, at = bit / 8;
      uint32_t two = bytes[at];
      if (bit % 8 + q->bits > 8) two |= uint32_t(bytes[at + 1]) << 8;
      out[i - begin] = s * float(two >> (bit % 8) & mask) + b;
    }
  }
}

Tensor dequantized(const Tensor& w) {
  TESSERA_CHECK(w.quantization(), "dequantized: the tensor is not quantized");
  const DType dt = value_dtype(w);
  Tensor out = Tensor::empty(dt, w.shape());
  const int64_t in = w.dim(-1), rows = w.numel() / std::max<int64_t>(in, 1);
  auto rows_of = [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(in));
    for (int64_t r = begin; r < end; ++r) {
      dequantize(w, r * in, in, row.data());
      if (dt == DType::F32)
        std::copy(row.begin(), row.end(), out.data<float>() + r * in);
      else if (dt == DType::BF16)
        for (int64_t i = 0; i < in; ++i) out.data<uint16_t>()[r * in + i] = f32_to_bf16(row[size_t(i)]);
      else
        for (int64_t i = 0; i < in; ++i) out.data<uint16_t>()[r * in + i] = f32_to_f16(row[size_t(i)]);
    }
  };
  // A large model's layers take seconds on one core: rows split over the machine's threads.
  const int64_t threads =
      std::clamp<int64_t>(w.numel() >> 20, 1, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t)
    pool.emplace_back(rows_of, rows * t / threads, rows * (t + 1) / threads);
  rows_of(0, rows / threads);
  for (auto& th : pool) th.join();
  return out;
}

}  // namespace tessera
