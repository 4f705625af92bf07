// Plain scalar implementations of every op, accumulating in f32: the reference that every fast
// path (CPU SIMD, CUDA) is tested against. Clarity over speed; no threads.
#pragma once
#include "backend/backend.h"

namespace tessera::cpu::ref {

// Converts n elements of a row of an f32/f16/bf16 tensor, or of a quantized weight, to f32.
void to_f32(const Tensor& t, int64_t offset, int64_t n, float* dst);
// Writes n f32 values to elements [offset, offset + n) of an f32/f16/bf16 tensor, rounding to
// nearest even (as torch's .to() does).
void from_f32(const float* src, int64_t n, Tensor& t, int64_t offset);

void embedding(const Tensor& table, const Tensor& ids, float scale, Tensor& out);
void rms_norm(const Tensor& x, const Tensor& w, float eps, float offset, Tensor& out);
void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out);
void rope(Tensor& x, const Tensor& positions, const RopeParams& p);
// Caches may be f32, f16 or bf16 (rounded when stored, widened exactly when read).
void store_kv(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_cache, Tensor& v_cache);
void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const AttentionMeta& meta,
               const AttentionParams& p, Tensor& out);
void glu(Glu act, const Tensor& gate, const Tensor& up, Tensor& out);
void softcap(Tensor& x, float cap);
void add(const Tensor& a, const Tensor& b, Tensor& out);
void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out);
void scatter_add_rows(const Tensor& x, const Tensor& rows, const Tensor& weights, Tensor& out);
void moe_route(const Tensor& logits, int top_k, bool renormalize, Tensor& ids, Tensor& weights);
void sample_rows(const Tensor& x, const std::vector<RowSampling>& rows, Tensor& out);
void edit_logits(Tensor& x, const std::vector<LogitEdit>& edits);
void argmax_rows(const Tensor& x, Tensor& out);
void logprobs(const Tensor& x, const Tensor& rows, const Tensor& tokens, int top_n, Tensor& out_lp, Tensor& out_ids);

}  // namespace tessera::cpu::ref
