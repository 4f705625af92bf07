// Quantized weights as MLX stores them (affine quantization; io/mlx_quant.h reads them from a
// checkpoint), kept so in memory by backends that compute with them (Backend::holds_quantized).
// Each row of the weight is one little-endian bit stream of `bits`-wide codes (each byte's lowest
// bit first) packed in uint32 words, and each group of `group_size` consecutive elements of a row
// has a scale and a bias:
//   w[..., i] = scales[..., i / group_size] * q[..., i] + biases[..., i / group_size].
// Rows are whole groups and whole words, so element i of the flattened weight is the code at bit
// i * bits of the flattened codes, with scale and bias i / group_size.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace tessera {

struct Quantization {
  int bits = 0, group_size = 0;  // MLX writes 2 to 6 and 8 bits, groups of 32, 64 or 128
  Tensor scales, biases;         // [..., in / group_size], f32, f16 or bf16
};

// The dtype a weight's values come in: a quantized weight's scales', else its own.
DType value_dtype(const Tensor& w);

// Elements [begin, begin + n) of the flattened quantized weight w, in f32.
void dequantize(const Tensor& w, int64_t begin, int64_t n, float* out);
// The whole weight, computed in f32 and rounded to its scales' dtype (a copy, in host memory).
Tensor dequantized(const Tensor& w);

}  // namespace tessera
