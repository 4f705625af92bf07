// The CPU backend's fast paths (threads + AVX2/FMA/F16C). Same contracts as reference_ops.h;
// tests/backend compares each with its reference on every dtype and several shapes.
#pragma once
#include "backend/backend.h"
#include "core/threadpool.h"

namespace tessera::cpu::fast {

// Instruction sets of the fast paths. AVX2/FMA/F16C is the baseline; where the CPU has AVX-512F
// the compute-bound kernels (GEMM, multi-token GEMV) use it. Process-wide; the environment
// variable TESSERA_CPU_ISA=avx2 starts with the baseline. set_isa() lets tests run both.
enum class Isa { Avx2, Avx512 };
Isa best_isa();         // what this CPU supports
Isa isa();              // in use
void set_isa(Isa isa);  // clamped to best_isa()
const char* isa_name(Isa isa);

void embedding(ThreadPool& pool, const Tensor& table, const Tensor& ids, float scale, Tensor& out);
void linear(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out);
// Caches may be f32, f16 or bf16.
void store_kv(ThreadPool& pool, const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_cache,
              Tensor& v_cache);
void attention(ThreadPool& pool, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const AttentionMeta& meta, const AttentionParams& p, Tensor& out);
void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& w, float eps, float offset, Tensor& out);
void glu(ThreadPool& pool, Glu act, const Tensor& gate, const Tensor& up, Tensor& out);
void softcap(ThreadPool& pool, Tensor& x, float cap);
void add(ThreadPool& pool, const Tensor& a, const Tensor& b, Tensor& out);
void rope(ThreadPool& pool, Tensor& x, const Tensor& positions, const RopeParams& p);

}  // namespace tessera::cpu::fast
