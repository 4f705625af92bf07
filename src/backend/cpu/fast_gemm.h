// The packed GEMM behind linear for many tokens (prefill): out[T, N] = x[T, K] · w[N, K]ᵀ.
#pragma once
#include <cstdint>

#include "core/threadpool.h"

namespace tessera::cpu::fast {

// W is one of the weight traits of fast_simd.h (F32W, F16W, BF16W).
template <class W>
void gemm(ThreadPool& pool, const float* x, const typename W::T* w, int64_t T, int64_t K, int64_t N, float* out);

}  // namespace tessera::cpu::fast
