// The CUDA backend's operands: tensors checked (device, dtype, shape) and turned into the
// kernels' arguments. Each check throws tessera::Error naming the op and the operand.
#pragma once

#include "backend/backend.h"
#include "backend/cuda/kernels.h"
#include "core/quantization.h"

namespace tessera::cuda {

void require_device(const Tensor& t, const char* op, const char* what);
void require_f32(const Tensor& t, const char* op, const char* what);
// f32, bf16 or f16: an activation that may be kept in a 16-bit weight's format (backend.h).
void require_float(const Tensor& t, const char* op, const char* what);
void require_i32(const Tensor& t, const char* op, const char* what);

template <class T = float>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw());
}

// A quantized weight (core/quantization.h) in CUDA memory, as the kernels take it.
QuantizedMatrix quantized_matrix(const Tensor& w);
// Whether quantized weights a and b have the same width, bits, group size and scale dtype.
bool same_quantization(const Tensor& a, const Tensor& b);
// Whether quantized weight w lies right after prev: its codes, scales and biases each right after
// prev's (upload_group's stacking).
bool follows_quantized(const Tensor& w, const Tensor& prev);
// Whether matrix w lies right after prev (upload_group's stacking), of its dtype and width.
bool follows(const Tensor& w, const Tensor& prev);

// rope_store_kv()'s operands but q, k and v, checked.
RopeStoreArgs rope_store_args(int64_t T, int64_t H, int64_t Hkv, int64_t Dh, const Tensor& positions,
                              const RopeParams& p, const Tensor& slots, Tensor& kc, Tensor& vc,
                              const QkNorm* qk_norm);
// attention()'s operands, checked.
AttentionArgs attention_args(const Tensor& q, const Tensor& kc, const Tensor& vc, const AttentionMeta& m,
                             const AttentionParams& p, const Tensor& out);

}  // namespace tessera::cuda
