// The CPU backend's fast paths (threads + AVX2/FMA/F16C). Same contracts as reference_ops.h;
// tests/backend compares each with its reference on every dtype and several shapes.
#pragma once
#include "backend/backend.h"
#include "core/threadpool.h"

namespace tessera::cpu::fast {

void linear(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out);
void attention(ThreadPool& pool, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const AttentionMeta& meta, const AttentionParams& p, Tensor& out);
void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& w, float eps, float offset, Tensor& out);
void silu_mul(ThreadPool& pool, const Tensor& gate, const Tensor& up, Tensor& out);

}  // namespace tessera::cpu::fast
