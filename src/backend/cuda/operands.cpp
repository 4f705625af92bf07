// The CUDA backend's operands: tensors checked (device, dtype, shape) and turned into the
// kernels' arguments.
#include "backend/cuda/operands.h"

#include <string>

namespace tessera::cuda {

void require_device(const Tensor& t, const char* op, const char* what) {
  TESSERA_CHECK(t.device() == Device::CUDA, std::string(op) + ": " + what + " is not in CUDA memory");
}
void require_f32(const Tensor& t, const char* op, const char* what) {
  require_device(t, op, what);
  TESSERA_CHECK(t.dtype() == DType::F32,
                std::string(op) + ": " + what + " must be f32, got " + std::string(dtype_name(t.dtype())));
}
void require_float(const Tensor& t, const char* op, const char* what) {
  require_device(t, op, what);
  TESSERA_CHECK(
      t.dtype() == DType::F32 || t.dtype() == DType::BF16 || t.dtype() == DType::F16,
      std::string(op) + ": " + what + " must be f32, bf16 or f16, got " + std::string(dtype_name(t.dtype())));
}
void require_i32(const Tensor& t, const char* op, const char* what) {
  require_device(t, op, what);
  TESSERA_CHECK(t.dtype() == DType::I32, std::string(op) + ": " + what + " must be i32");
}
QuantizedMatrix quantized_matrix(const Tensor& w) {
  const Quantization& q = *w.quantization();
  require_device(w, "quantized weight", "codes");
  require_device(q.scales, "quantized weight", "scales");
  require_device(q.biases, "quantized weight", "biases");
  TESSERA_CHECK(q.biases.dtype() == q.scales.dtype(), "quantized weight: scales and biases differ in dtype");
  return {static_cast<const uint32_t*>(w.raw()),
          q.scales.raw(),
          q.biases.raw(),
          q.scales.dtype(),
          q.bits,
          q.group_size};
}
bool same_quantization(const Tensor& a, const Tensor& b) {
  const Quantization *qa = a.quantization(), *qb = b.quantization();
  return qa && qb && a.ndim() == 2 && b.ndim() == 2 && a.dim(1) == b.dim(1) && qa->bits == qb->bits &&
         qa->group_size == qb->group_size && qa->scales.dtype() == qb->scales.dtype() &&
         qa->biases.dtype() == qb->biases.dtype();
}
bool follows_quantized(const Tensor& w, const Tensor& prev) {
  auto after = [](const Tensor& t, const Tensor& p) {
    return t.raw() == static_cast<const char*>(p.raw()) + p.nbytes();
  };
  const Quantization *q = w.quantization(), *qp = prev.quantization();
  return same_quantization(w, prev) && after(w, prev) && after(q->scales, qp->scales) &&
         after(q->biases, qp->biases);
}

bool follows(const Tensor& w, const Tensor& prev) {
  return w.raw() == static_cast<const char*>(prev.raw()) + prev.nbytes() && w.dtype() == prev.dtype() &&
         w.ndim() == 2 && prev.ndim() == 2 && w.dim(1) == prev.dim(1);
}

RopeStoreArgs rope_store_args(int64_t T, int64_t H, int64_t Hkv, int64_t Dh, const Tensor& positions,
                              const RopeParams& p, const Tensor& slots, Tensor& kc, Tensor& vc,
                              const QkNorm* qk_norm) {
  require_i32(positions, "rope_store_kv", "positions");
  require_i32(slots, "rope_store_kv", "slots");
  require_f32(p.inv_freq, "rope_store_kv", "inv_freq");
  require_device(kc, "rope_store_kv", "k cache");
  require_device(vc, "rope_store_kv", "v cache");
  TESSERA_CHECK(kc.dtype() == vc.dtype(), "rope_store_kv: k and v caches differ in dtype");
  TESSERA_CHECK(kc.shape() == vc.shape() && kc.numel() / kc.dim(0) == Hkv * Dh,
                "rope_store_kv: " + std::to_string(Hkv) + " kv heads of " + std::to_string(Dh) +
                    " for caches " + shape_str(kc.shape()));
  TESSERA_CHECK(positions.numel() >= T && slots.numel() >= T,
                "rope_store_kv: positions or slots for fewer tokens");
  TESSERA_CHECK(p.rotary_dim <= Dh && p.inv_freq.numel() >= p.rotary_dim / 2, "rope: rotary_dim too large");
  RopeStoreArgs a{};
  a.positions = ptr<int32_t>(positions), a.inv_freq = ptr(p.inv_freq), a.scaling = p.attention_scaling;
  a.T = T, a.H = H, a.Hkv = Hkv, a.Dh = Dh, a.rotary_dim = p.rotary_dim;
  a.slots = ptr<int32_t>(slots), a.num_slots = kc.dim(0);
  a.k_cache = kc.raw(), a.v_cache = vc.raw(), a.cache_dtype = kc.dtype();
  if (qk_norm) {
    const Tensor &qw = qk_norm->q_weight, &kw = qk_norm->k_weight;
    require_float(qw, "rope_store_kv", "q norm");
    require_float(kw, "rope_store_kv", "k norm");
    TESSERA_CHECK(qw.numel() == Dh && kw.numel() == Dh && qw.dtype() == kw.dtype(),
                  "rope_store_kv: q and k norms of " + shape_str(qw.shape()) + " and " +
                      shape_str(kw.shape()) + " for heads of " + std::to_string(Dh));
    a.q_norm = qw.raw(), a.k_norm = kw.raw(), a.norm_dtype = qw.dtype();
    a.norm_eps = qk_norm->eps, a.norm_offset = qk_norm->offset;
  }
  return a;
}

AttentionArgs attention_args(const Tensor& q, const Tensor& kc, const Tensor& vc, const AttentionMeta& m,
                             const AttentionParams& p, const Tensor& out) {
  require_f32(q, "attention", "q");
  require_float(out, "attention", "out");
  require_device(kc, "attention", "k cache");
  require_device(vc, "attention", "v cache");
  require_i32(m.seq_starts, "attention", "seq_starts");
  require_i32(m.context_lens, "attention", "context_lens");
  require_i32(m.block_tables, "attention", "block_tables");
  require_i32(m.positions, "attention", "positions");
  cuda::AttentionArgs a{};
  a.q = ptr(q);
  a.k_cache = kc.raw();
  a.v_cache = vc.raw();
  a.cache_dtype = kc.dtype();
  a.seq_starts = ptr<int32_t>(m.seq_starts);
  a.context_lens = ptr<int32_t>(m.context_lens);
  a.block_tables = ptr<int32_t>(m.block_tables);
  a.positions = ptr<int32_t>(m.positions);
  a.out = out.raw();
  a.out_dtype = out.dtype();
  a.T = q.dim(0), a.H = q.dim(1), a.Dh = q.dim(2), a.Hkv = kc.dim(1);
  a.num_seqs = m.num_seqs, a.max_blocks = m.max_blocks, a.block_size = m.block_size;
  a.max_context_len = m.max_context_len;
  a.scale = p.scale, a.softcap = p.softcap, a.sliding_window = p.sliding_window;
  TESSERA_CHECK(kc.dim(2) == a.Dh, "attention: cache head_dim differs from q's");
  return a;
}

}  // namespace tessera::cuda
