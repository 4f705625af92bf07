// Launchers of the backend's own kernels (elementwise.cu, attention.cu). Plain pointers and
// sizes; all on the given stream; each checks its launch.
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/dtype.h"

namespace tessera {
struct LogitEdit;  // backend.h
enum class Glu;    // backend.h
}

namespace tessera::cuda {

// Whether the environment variable `name` is "0": a fast path turned off, for side-by-side
// measurements (TESSERA_CUDA_NARROW_GEMM, TESSERA_CUDA_DECODE_DEEP).
inline bool switched_off(const char* name) {
  const char* env = std::getenv(name);
  return env && std::string(env) == "0";
}

// Out-of-range ids give rows of NaN (the engine validates ids before they get here).
void embedding(const void* table, DType dtype, const int32_t* ids, int64_t T, int64_t D, int64_t V, float scale,
               float* out, cudaStream_t s);
// out (f32, bf16 or f16) may alias x.
void rms_norm(const float* x, const void* w, DType w_dtype, float eps, float offset, int64_t rows, int64_t D,
              void* out, DType out_dtype, cudaStream_t s);
// x += the sum of `parts` deltas [rows, D] part_stride elements apart (one: a plain residual
// add; more: a product's partial sums over k ranges), then out = rms_norm(x); out (f32, bf16 or
// f16) may alias delta.
void add_rms_norm(float* x, const float* delta, int parts, int64_t part_stride, const void* w, DType w_dtype,
                  float eps, float offset, int64_t rows, int64_t D, void* out, DType out_dtype, cudaStream_t s);
void rope(float* x, const int32_t* positions, const float* inv_freq, float scaling, int64_t T, int64_t H,
          int64_t Dh, int rotary_dim, cudaStream_t s);
// Rows with a slot outside [0, num_slots) are skipped.
void store_kv(const float* k, const float* v, const int32_t* slots, int64_t T, int64_t row, int64_t num_slots,
              void* k_cache, void* v_cache, DType cache_dtype, cudaStream_t s);
// gate and up of one dtype, out of any (each f32, bf16 or f16); out may alias either.
// rope() of q [T, H, Dh] and k [T, Hkv, Dh], then store_kv() of k and v, in one launch. Token t's
// q, k and v are read at q + t ld_q, k + t ld_kv, v + t ld_kv (packed tensors, or the column
// ranges of one stacked product's rows); the rotated q goes to q_out [T, H, Dh] (may be q when
// packed), the rotated k to k_out [T, Hkv, Dh] when given (may be k). With parts > 1, q, k and v
// are each the sum of that many arrays part_stride elements apart (a product's partial sums over
// k ranges; q_out and k_out then separate). With q_norm and k_norm ([Dh] of norm_dtype), each
// head of q and k is RMS-normalised before the rotation (Backend's QkNorm).
struct RopeStoreArgs {
  const float *q, *k, *v;
  int64_t ld_q, ld_kv;
  int parts = 1;
  int64_t part_stride = 0;
  float *q_out, *k_out;
  const int32_t* positions;
  const float* inv_freq;
  float scaling;
  int64_t T, H, Hkv, Dh;
  int rotary_dim;
  const int32_t* slots;
  int64_t num_slots;
  void *k_cache, *v_cache;
  DType cache_dtype;
  const void *q_norm = nullptr, *k_norm = nullptr;
  DType norm_dtype = DType::F32;
  float norm_eps = 0.0f, norm_offset = 0.0f;
};
void rope_store_kv(const RopeStoreArgs& a, cudaStream_t s);
void glu(Glu act, const void* gate, const void* up, DType in_dtype, void* out, DType out_dtype, int64_t n,
         cudaStream_t s);
// glu over rows of gate and up that lie ld elements apart (the halves of one product over the
// stacked gate and up rows), out [rows, width]. Returns false (nothing launched) unless width and
// ld are multiples of 8 and the pointers 16-byte aligned.
bool glu_rows(Glu act, const void* gate, const void* up, DType in_dtype, int64_t rows, int64_t width, int64_t ld,
              void* out, DType out_dtype, cudaStream_t s);
// x[n] (f32) = cap * tanh(x / cap)
void softcap(float* x, int64_t n, float cap, cudaStream_t s);
void add(const float* a, const float* b, float* out, int64_t n, cudaStream_t s);
// out[r] = the first column of row r's maximum, x [R, N], each row's columns in `splits` ranges
// (argmax_splits: so that a few rows still fill the GPU); scratch holds 2 R splits floats.
int argmax_splits(int64_t R, int64_t N, int sm_count);
void argmax_rows(const float* x, int64_t R, int64_t N, int splits, float* scratch, int32_t* out, cudaStream_t s);
// backend.h's edit_logits() of x [R, V] with n edits (device memory), one thread each.
void edit_logits(float* x, int64_t V, const LogitEdit* edits, int64_t n, cudaStream_t s);
// backend.h's logprobs() for the n rows listed in rows (device memory) of x [R, V]; a row or
// token out of range gives NaN values (and ids -1). workspace: logprobs_workspace() bytes.
size_t logprobs_workspace(int64_t V, int64_t n, int top_n);
void logprobs(const float* x, int64_t R, int64_t V, const int32_t* rows, int64_t n, const int32_t* tokens, int top_n,
              float* out_lp, int32_t* out_ids, void* workspace, cudaStream_t s);
// Out-of-range rows give rows of NaN.
void gather_rows(const float* x, const int32_t* rows, int64_t R, int64_t D, int64_t num_rows, float* out,
                 cudaStream_t s);
// out[rows[r]] += weights[r] * x[r] (rows distinct; those out of range are skipped).
void scatter_add_rows(const float* x, const int32_t* rows, const float* weights, int64_t R, int64_t D,
                      int64_t num_rows, float* out, cudaStream_t s);
// A mixture of experts (moe.cu). moe_route: backend.h's, for top k up to kMaxExpertsPerToken and E
// logits a token (E bytes of shared memory and 4 E more for the block).
constexpr int kMaxExpertsPerToken = 64;
void moe_route(const float* logits, int64_t T, int64_t E, int k, bool renormalize, int32_t* ids, float* weights,
               cudaStream_t s);
// moe_experts: x[T, H] += backend.h's moe_experts() of h [T, H] with the experts stacked: gate_up
// [E, 2I, H] (each expert's gate rows, then its up rows), down [E, H, I], in the weights' dtype; H
// and I multiples of 8, the pointers 16-byte aligned, E at most kMaxExperts. Scratch (16-byte
// aligned): slots 4 min(E, T k), place and pair_at T k (i32), mid [T k, I] and out [T k, H] (f32).
// With tiles (where expert_tiles_apply(), T at least kExpertTilesMinTokens): the products run on
// the tensor cores (moe_tiles.cu), with tiles 4 expert_tiles_max(T k, E) (i32), x16 [T k, H] and
// mid [T k, I] in the weights' dtype.
constexpr int64_t kMaxExperts = 4096;
struct ExpertsArgs {
  const float* h;
  int64_t T, H, I, E, k;
  const int32_t* ids;
  const float* weights;
  const void *gate_up, *down;
  int32_t *slots, *place, *pair_at;
  void* mid;
  float *out, *x;
  int32_t* tiles = nullptr;
  void* x16 = nullptr;
};
void moe_experts(Glu act, DType dt, const ExpertsArgs& a, cudaStream_t s);
// The experts' products on Hopper's tensor cores (moe_tiles.cu): each chosen expert's pairs in
// tiles of kExpertTileTokens, each tile's rows a 16-bit copy of its tokens' h.
constexpr int kExpertTileTokens = 64;
constexpr int64_t kExpertTilesMinTokens = 8;
bool expert_tiles_apply(DType dt, int64_t T, int64_t H, int64_t I);
// Tiles the grouping may list for P pairs over E experts: one a kExpertTileTokens pairs, and one
// more for each chosen expert's last, partly filled tile.
inline int64_t expert_tiles_max(int64_t P, int64_t E) {
  return (P + kExpertTileTokens - 1) / kExpertTileTokens + std::min(E, P);
}
// After the grouping: x16[place] = h[token of the pair at place], mid = act(gate) * up and
// out = mid · downᵀ, per tile.
void expert_tiles(Glu act, DType dt, const ExpertsArgs& a, cudaStream_t s);

// Products of one input with several matrices (q/k/v, gate/up), numbered by rows one after
// another: part p has rows_end[p] - rows_end[p - 1] rows of weights at w[p] and its output
// [T, its rows] at out[p] (f32 for gemv(); the dtype of split_columns' x for it).
struct StackedParts {
  static constexpr int kMaxParts = 4;
  const void* w[kMaxParts];
  void* out[kMaxParts];
  int64_t rows_end[kMaxParts];
  int count = 0;
};
// out[T, N] = x[T, K] · w[N, K]ᵀ per part, for 16-bit weights and at most kGemvMaxTokens tokens
// (decode), at memory speed (each further token re-reads the activations from L1, so beyond 2
// tokens cuBLASLt is faster). Returns false (nothing launched) where it does not apply: other
// dtypes, more tokens, K not a multiple of 8, or pointers not 16-byte aligned.
constexpr int kGemvMaxTokens = 2;
// How gemv() takes x and writes out: Normed, x's rows RMS-normalised first (eps) with a unit
// weight (the norm's weight folded into the product's: fold_norm_weight); Add, out += the
// product (a residual add; out may not be x).
struct GemvForm {
  enum Kind { Plain, Normed, Add } kind = Plain;
  float eps = 0.0f;  // Normed's
};
bool gemv(const float* x, const StackedParts& g, DType dtype, int64_t T, int64_t K, cudaStream_t s,
          GemvForm form = {});
// The same products for 3..16 tokens, x in the weights' 16-bit dtype and out f32 or that dtype,
// on Hopper (skinny_gemm.cu: warpgroup tensor cores, k split over clusters): the narrow decode
// products, where cuBLASLt leaves bandwidth unused. Returns false (nothing launched) where it
// does not apply: another GPU, token count or dtype, more than 8192 rows or k, K not a
// multiple of 64, or pointers not 16-byte aligned.
constexpr int kSkinnyMinTokens = kGemvMaxTokens + 1, kSkinnyMaxTokens = 16;
bool skinny_gemm(const void* x, const StackedParts& g, DType dtype, DType out_dtype, int64_t T, int64_t K,
                 cudaStream_t s);
// The products of 17-64 tokens on Hopper (narrow_gemm.cu: warpgroup tensor cores, k split
// into ranges whose sums the next kernel adds), x [T, K] and w [N, K] of one 16-bit dtype, both
// 16-byte aligned, K a multiple of 64. narrow_gemm_splits() gives the k ranges that fill the GPU
// for the shape; narrow_gemm() writes range q's sums to out + q T N (f32 [T, N] each).
constexpr int kNarrowMinTokens = kSkinnyMaxTokens + 1, kNarrowMaxTokens = 64;
bool narrow_gemm_applies(const void* x, const void* w, DType dtype, int64_t T, int64_t K);
int narrow_gemm_splits(int64_t T, int64_t N, int64_t K, DType dtype);
void narrow_gemm(const void* x, const void* w, DType dtype, int64_t T, int64_t N, int64_t K, int splits, float* out,
                 cudaStream_t s);
// out[T, F] (f32 or the weights' dtype) = act(x · gateᵀ) * (x · upᵀ), gate [F, K] with up [F, K]
// right after it (the decoder's stacked upload), in one launch with no glu kernel after.
void narrow_gemm_glu(Glu act, const void* x, const void* gate_up, DType dtype, int64_t T, int64_t F, int64_t K,
                     void* out, DType out_dtype, cudaStream_t s);
// The MLP's gate and up projections, each [N, K] of one 16-bit dtype, and their biases ([N] of
// that dtype) or null.
struct GatedPair {
  const void* gate = nullptr;
  const void* up = nullptr;
  const void* gate_bias = nullptr;
  const void* up_bias = nullptr;
  int64_t N = 0;
};
// out[T, N] (f32) = act(x · gateᵀ + gate_bias) * (x · upᵀ + up_bias) as one gemv() whose warps
// each read row n of both matrices: no gate/up intermediates, no glu launch. Returns false
// (nothing launched) where gemv() would, and for the Add form. x normalised where the form is Normed.
bool gemv_glu(Glu act, const float* x, const GatedPair& g, DType dtype, int64_t T, int64_t K, float* out,
              cudaStream_t s, GemvForm form = {});
// w[N, K] (f32, bf16 or f16) *= norm[k] + offset, column by column, rounded once to w's dtype:
// a norm's weight folded into the products it feeds.
void fold_norm_weight(void* w, DType dtype, int64_t N, int64_t K, const void* norm, DType norm_dtype,
                      float offset, cudaStream_t s);
// Scatters the columns of x [T, rows_end[count - 1]] (one product of the stacked matrices; f32,
// bf16 or f16) to each part's out, of the same dtype.
void split_columns(const void* x, DType dtype, int64_t T, const StackedParts& parts, cudaStream_t s);
// A quantized weight on the GPU (core/quantization.h): codes, and a scale and a bias of
// scale_dtype (f32, bf16 or f16) for each group of group_size elements of the flattened weight.
struct QuantizedMatrix {
  const uint32_t* codes = nullptr;
  const void* scales = nullptr;
  const void* biases = nullptr;
  DType scale_dtype = DType::F32;
  int bits = 0, group_size = 0;
};
// out[T, N] = x[T, K] · w[N, K]ᵀ per part of g for a quantized w (quantized.cu) of 4 or 8 bits,
// groups a multiple of a word's codes (8 or 4) wide, and at most kQgemvMaxTokens tokens, reading
// the codes once. g's parts are rows of one stacked weight (codes, scales and biases of each
// part right after the previous part's), w its first part; g.w is unused. Returns false
// (nothing launched) where it does not apply. Where qmma applies it is faster, even for one
// token: measured on an H100 (8B shape, bench_engine decode tok/s, this product / qmma): 4 bits,
// batch 1 198.8 / 288.6, 2 319.5 / 530.5; 8 bits, batch 1 143.5 / 242.4, 2 230.7 / 472.7.
constexpr int kQgemvMaxTokens = 2;
bool qgemv(const float* x, const QuantizedMatrix& w, const StackedParts& g, int64_t T, int64_t K,
           cudaStream_t s);
// The products of 1 .. kQmmaMaxTokens tokens for 4- or 8-bit codes with bf16 or f16 scales
// (quantized_mma.cu): groups of 32, 64 or 128, K a multiple of 256 (4 bits) or 128 (8 bits) and
// of 8 groups, on the tensor cores (qmma_applies). x [T, K] f32 is packed into x16 (scratch of T K
// values of the scales' dtype) past kQmmaSelfPackTokens; up to that the product packs it as it
// reads it, and x16 is unused. k is split into `splits` ranges (qmma_splits: enough blocks for the
// GPU) whose sums go to part [splits, T, N] (scratch), then are added in order into each part of g
// (f32 outputs; g.w unused); one range writes g's parts itself, and part is unused. w is the
// first part's, the parts stacked as for qgemv.
constexpr int kQmmaMaxTokens = 64, kQmmaSelfPackTokens = 16;
bool qmma_applies(const QuantizedMatrix& w, int64_t T, int64_t K);
int qmma_splits(const QuantizedMatrix& w, int64_t T, int64_t N, int64_t K);
void qmma(const float* x, void* x16, const QuantizedMatrix& w, const StackedParts& g, int64_t T, int64_t K,
          float* part, int splits, cudaStream_t s);
// out[r, :] = w's row (ids ? ids[r] : r0 + r) widened, times mul, for r < R, rows L wide; out [R, L]
// f32, bf16 or f16. Any width and group size: the products of more tokens, and embeddings.
void widen(const QuantizedMatrix& w, const int32_t* ids, int64_t r0, int64_t R, int64_t L, float mul,
           void* out, DType out_dtype, cudaStream_t s);
// f32 → bf16 / f16 (round to nearest even), for the activation side of 16-bit matrix products.
void convert_f32(const float* x, int64_t n, void* out, DType dtype, cudaStream_t s);
// out[T, N] += bias[N] (out f32, bf16 or f16)
void add_bias(void* out, DType out_dtype, const void* bias, DType dtype, int64_t T, int64_t N, cudaStream_t s);

// One row's draw (the layout of backend.h's RowSampling, copied to the device).
struct SampleParams {
  float temperature;
  int top_k;
  float top_p;
  float min_p;
  double u;
};
// Bytes of device workspace sample_rows() needs for these rows.
size_t sample_rows_workspace(const SampleParams* host_params, int64_t R, int64_t V);
// out[r] = backend.h's sample_rows() draw from x [R, V] with params[r] (device memory; host_params
// is the same on the host).
void sample_rows(const float* x, const SampleParams* params, const SampleParams* host_params, int64_t R, int64_t V,
                 void* workspace, size_t workspace_bytes, int32_t* out, cudaStream_t s);

struct AttentionArgs {
  const float* q;  // [T, H, Dh]
  const void* k_cache;
  const void* v_cache;  // [slots, Hkv, Dh]
  DType cache_dtype;
  const int32_t* seq_starts;
  const int32_t* context_lens;
  const int32_t* block_tables;
  const int32_t* positions;
  void* out;  // [T, H, Dh]
  DType out_dtype;  // f32, bf16 or f16
  int64_t T, H, Hkv, Dh;
  int num_seqs, max_blocks, block_size, max_context_len;
  float scale, softcap;
  int sliding_window;
};
// Splits each query's keys into `splits` ranges (flash-decoding) when splits > 1; `partial` then
// holds T * H * splits * (Dh + 2) floats.
void attention(const AttentionArgs& a, int splits, float* partial, cudaStream_t s);
// Sums the `splits` partial results of each of `rows` (token, head) pairs into out [rows, Dh]
// (f32, bf16 or f16).
void combine_partials(const float* partial, int64_t rows, int splits, int64_t Dh, void* out, DType out_dtype,
                      cudaStream_t s);

// The decode kernel (attention_decode.cu): one new token per sequence, f32 or bf16 caches,
// head_dim 32/64/128/256, at most 8 query heads per kv head. sm_count: the device's
// multiprocessors (the kernel's layout depends on how many blocks fill them).
bool decode_attention_applies(const AttentionArgs& a, int max_query_len);
// The splits it runs for `splits` wanted (fewer where they then merge in a cluster).
int decode_attention_splits(const AttentionArgs& a, int splits, int sm_count);
void decode_attention(const AttentionArgs& a, int splits, float* partial, int sm_count, cudaStream_t s);

// The tensor-core kernel (attention_tc.cu): bf16 caches, head_dim 64/128/256, heads per kv
// head dividing 64. Returns the number of query tiles per sequence, or 0 where it does not
// apply (then use attention()). smem_limit: the device's opt-in shared memory per block.
int flash_attention_tiles(const AttentionArgs& a, int max_query_len, size_t smem_limit);
void flash_attention(const AttentionArgs& a, int q_tiles, int splits, float* partial, cudaStream_t s);
// Its decode form (one new token per sequence, bf16 caches, up to 16 query heads per kv head):
// one block per (sequence, kv head, split), the warps sharing out each tile's keys.
bool flash_decode_applies(const AttentionArgs& a, int max_query_len, size_t smem_limit);
// Key splits for it: the count whose whole waves of blocks (at the kernel's occupancy) finish
// soonest, counting a block's start and the splits' merge; 1 where the register form's dense
// form (4 blocks an SM) takes every block in one wave. flash_decode picks that form from the
// same shapes and sm_count.
int flash_decode_splits(const AttentionArgs& a, int sm_count);
// Key splits for the form that merges them in a thread-block cluster (the register form's shapes,
// compute capability 9+): up to 8, one per 64-key tile; 0 where it does not apply.
// flash_decode(clustered = true) with more than one of them needs no partial results.
int flash_decode_cluster_splits(const AttentionArgs& a);
void flash_decode(const AttentionArgs& a, int splits, bool clustered, float* partial, int sm_count, cudaStream_t s);

}  // namespace tessera::cuda
