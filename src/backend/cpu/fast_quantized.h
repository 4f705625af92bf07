// The product behind linear for a quantized weight (core/quantization.h).
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "core/threadpool.h"

namespace tessera::cpu::fast {

// out[T, N] = x[T, K] · w[N, K]ᵀ, w quantized (of any width and group size its format allows).
void quantized_linear(ThreadPool& pool, const float* x, const Tensor& w, int64_t T, float* out);

}  // namespace tessera::cpu::fast
